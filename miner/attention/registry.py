"""The choice of attention backend for a device: a registry of the backends by name, each imported only when
chosen (FlashInfer's module imports flashinfer, which only CUDA machines with the `gpu` extra have), so this
module imports neither implementation and neither imports it back at load time.
"""

from __future__ import annotations

import importlib
import importlib.util

import torch

from client_sdk.errors import UserError
from miner.attention.interface import AttentionBackend

BACKENDS = ("auto", "reference", "flashinfer")
FLASHINFER_DTYPES = (torch.float16, torch.bfloat16)  # its paged kernels have no float32 variant
FLASHINFER_HEAD_DIMS = (64, 128, 256)  # the head sizes its kernels are built for
# each backend's module and class, imported when chosen
IMPLEMENTATIONS = {
    "reference": ("miner.attention.reference", "ReferenceAttention"),
    "flashinfer": ("miner.attention.flashinfer_backend", "FlashInferAttention"),
}


def flashinfer_installed() -> bool:
    return importlib.util.find_spec("flashinfer") is not None


def select_attention(
    choice: str,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
) -> AttentionBackend:
    """The backend named by `choice`; "auto" takes FlashInfer where it can run (CUDA, the `gpu` extra
    installed, half precision) and the reference otherwise. Forcing FlashInfer where it cannot run is an
    error."""
    if choice not in BACKENDS:
        raise UserError(f"attention backend {choice!r} is unknown (choose from {', '.join(BACKENDS)})")
    reason = _flashinfer_unusable(head_dim, dtype, device)
    if choice == "flashinfer" and reason:
        raise UserError(f"the flashinfer attention backend cannot run here: {reason}")
    name = "flashinfer" if choice == "flashinfer" or (choice == "auto" and not reason) else "reference"
    module, cls = IMPLEMENTATIONS[name]
    backend: type[AttentionBackend] = getattr(importlib.import_module(module), cls)
    return backend(num_heads, num_kv_heads, head_dim, dtype, device)


def _flashinfer_unusable(head_dim: int, dtype: torch.dtype, device: torch.device) -> str:
    """Why FlashInfer cannot serve this stage, or "" when it can."""
    if device.type != "cuda":
        return f"it needs a CUDA device, the stage is on {device.type}"
    if dtype not in FLASHINFER_DTYPES:
        return f"it supports float16 and bfloat16, the stage runs in {dtype}"
    if head_dim not in FLASHINFER_HEAD_DIMS:
        return f"it supports head_dim {', '.join(map(str, FLASHINFER_HEAD_DIMS))}, the model has {head_dim}"
    if not flashinfer_installed():
        return "the flashinfer package is not installed (pip install '.[gpu]')"
    return ""
