"""A model's identity: the hash of its checkpoint's weights manifest, which a task binds on-chain (its
`modelId`), a miner registers and checks before serving, and a verifier checks before judging.

The manifest holds the model's config (as JSON, without the key that only records which transformers
version wrote it) and the SHA-256 of every tensor (name, dtype, shape and bytes), so the same weights give the
same hash whatever file layout, sharding or safetensors version stored them, and changing one weight, one
config value or the precision gives another.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from client_sdk.errors import UserError
from client_sdk.inputs import canonical_json

VOLATILE_CONFIG_KEYS = ("transformers_version",)  # which writer, not which model
# Models whose hashes are known, so that a name shown to people and a hash agreed on-chain can be matched; a
# client refuses a coordinator that names one of these models but serves other weights under that name.
KNOWN_MODELS = {
    "HuggingFaceTB/SmolLM2-135M-Instruct": (
        "0x91be5c3bf288d3ad49faa0b6714a9a0e2cf37a6f9caef1eeaa81362f06231caa"
    ),  # made by miner.model.packaged
}


def checkpoint_config(checkpoint: Path) -> Path:
    """The config.json of the checkpoint directory `checkpoint`; a UserError if it has none."""
    config_file = checkpoint / "config.json"
    if not config_file.is_file():
        raise UserError(f"{checkpoint} is not a checkpoint directory (it has no config.json)")
    return config_file


def manifest(checkpoint: Path) -> dict[str, Any]:
    """{"config": the config without volatile keys, "tensors": {name: sha256 hex of dtype, shape, bytes}}."""
    config = json.loads(checkpoint_config(checkpoint).read_text())
    for key in VOLATILE_CONFIG_KEYS:
        config.pop(key, None)
    from safetensors import safe_open  # here: a client that only names models needs no tensor library

    files = sorted(checkpoint.glob("*.safetensors"))
    if not files:
        raise UserError(f"{checkpoint} has no .safetensors weights")
    tensors: dict[str, str] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - a safetensors handle is not a mapping
                if name in tensors:
                    raise UserError(f"{checkpoint}: tensor {name} is stored twice")
                tensors[name] = _tensor_digest(handle.get_tensor(name))
    return {"config": config, "tensors": dict(sorted(tensors.items()))}


def model_hash(checkpoint: Path) -> bytes:
    """SHA-256 of the canonical JSON of the checkpoint's manifest: 32 bytes, a task's on-chain model id."""
    return hashlib.sha256(canonical_json(manifest(checkpoint))).digest()


@lru_cache(maxsize=8)
def served_model_hash(checkpoint: Path) -> bytes:
    """`model_hash`, computed once per process for a checkpoint that is being served (reading every weight
    takes a second or more); a process must not change the files it serves."""
    return model_hash(checkpoint)


def known_hash(name: str) -> bytes | None:
    """The hash of a model known by `name`, or None."""
    known = KNOWN_MODELS.get(name)
    return parse_model_hash(known) if known else None


def parse_model_hash(text: str) -> bytes | None:
    """A model hash from its hex form (with or without 0x): 32 bytes, or None when `text` is not one."""
    try:
        raw = bytes.fromhex(text.removeprefix("0x"))
    except ValueError:
        return None
    return raw if len(raw) == 32 else None


def describe(model_id: bytes) -> str:
    """A model id for people: the known model's name beside its hash, or the hash alone."""
    hexed = "0x" + bytes(model_id).hex()
    names = [name for name, known in KNOWN_MODELS.items() if known == hexed]
    return f"{names[0]} ({hexed})" if names else hexed


def _tensor_digest(tensor: Any) -> str:
    import torch

    digest = hashlib.sha256(f"{tensor.dtype}:{tuple(tensor.shape)}:".encode())
    digest.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


def model_id_of(value: str) -> bytes:
    """The model id a person means by `value` (a `--model` option): a 0x-prefixed hash, or the name of a known
    model. A checkpoint directory is `--model-dir`'s, hashed by `model_hash`."""
    if Path(value).is_dir():
        raise UserError(f"{value!r} is a checkpoint directory: pass it with --model-dir")
    if value.startswith("0x"):
        raw = parse_model_hash(value)
        if raw is None:
            raise UserError(f"{value} is not a 32-byte model hash")
        return raw
    known = known_hash(value)
    if known is None:
        raise UserError(
            f"{value!r} is neither a 0x model hash nor a known model ({', '.join(KNOWN_MODELS)}); a "
            "checkpoint directory goes with --model-dir"
        )
    return known
