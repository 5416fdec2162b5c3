"""Reads only the tensors of an assigned layer range from a safetensors checkpoint (sharded or not).

safetensors memory-maps the files and never executes code, so a checkpoint from a peer cannot run anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open

from client_sdk.errors import UserError


def tensor_files(checkpoint_dir: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it."""
    index = checkpoint_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        return {name: checkpoint_dir / file for name, file in weight_map.items()}
    single = checkpoint_dir / "model.safetensors"
    if not single.is_file():
        raise UserError(f"no model.safetensors or model.safetensors.index.json in {checkpoint_dir}")
    with safe_open(str(single), framework="pt") as handle:
        return {name: single for name in handle.keys()}  # noqa: SIM118 (safe_open is not a mapping)


def load_tensors(
    checkpoint_dir: Path, wanted: Callable[[str], bool], dtype: torch.dtype, device: torch.device
) -> dict[str, torch.Tensor]:
    """Every tensor whose name `wanted` accepts, converted to `dtype` on `device`."""
    by_file: dict[Path, list[str]] = {}
    for name, file in tensor_files(checkpoint_dir).items():
        if wanted(name):
            by_file.setdefault(file, []).append(name)
    tensors: dict[str, torch.Tensor] = {}
    for file, names in by_file.items():
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for name in names:
                tensors[name] = handle.get_tensor(name).to(device=device, dtype=dtype)
    return tensors
