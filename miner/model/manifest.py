"""A checkpoint's identity: the hash of its weights manifest, the name a task binds on-chain.

The manifest holds the model's config (as JSON, without the key that only records which transformers
version wrote it) and the SHA-256 of every tensor (name, dtype, shape and bytes), so the same weights give the
same hash whatever file layout, sharding or safetensors version stored them, and changing one weight, one
config value or the precision gives another.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from client_sdk.errors import UserError

VOLATILE_CONFIG_KEYS = ("transformers_version",)  # which writer, not which model


def manifest(checkpoint: Path) -> dict[str, Any]:
    """{"config": the config without volatile keys, "tensors": {name: sha256 hex of dtype, shape, bytes}}."""
    config_file = checkpoint / "config.json"
    if not config_file.is_file():
        raise UserError(f"{checkpoint} has no config.json")
    config = json.loads(config_file.read_text())
    for key in VOLATILE_CONFIG_KEYS:
        config.pop(key, None)
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
    return hashlib.sha256(canonical(manifest(checkpoint))).digest()


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _tensor_digest(tensor: torch.Tensor) -> str:
    digest = hashlib.sha256(f"{tensor.dtype}:{tuple(tensor.shape)}:".encode())
    digest.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()
