"""The one interface every attention backend implements, and the choice of backend for a device.

A forward step calls `plan(layout)` once, then the backend once per layer. Planning once per step is what
FlashInfer's wrappers need (their plan() builds the work split for a batch shape), and it lets the reference
backend build its gather indices and masks once instead of once per layer.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod

import torch

from client_sdk.errors import UserError
from miner.attention.layout import BatchLayout

BACKENDS = ("auto", "reference", "flashinfer")
FLASHINFER_DTYPES = (torch.float16, torch.bfloat16)  # its paged kernels have no float32 variant
FLASHINFER_HEAD_DIMS = (64, 128, 256)  # the head sizes its kernels are built for


class AttentionBackend(ABC):
    """Grouped-query attention of a batch's new tokens over the paged KV cache of one layer.

    Caches are [pages, page_size, kv_heads, head_dim] per layer (FlashInfer's "NHD" layout), keys and values
    in separate tensors; a new token's keys go to its slot (page * page_size + offset) before attending, so
    a token sees itself and every earlier token of its sequence.
    """

    name: str

    def __init__(
        self, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = head_dim**-0.5
        self.dtype = dtype
        self.device = device
        self._slots: torch.Tensor | None = None

    def plan(self, layout: BatchLayout) -> None:
        """Prepares the step whose tokens `layout` describes; every layer of the step reuses it."""
        self._slots = layout.slots(self.device)

    def __call__(
        self,
        q: torch.Tensor,  # [tokens, heads, head_dim], rotated
        k: torch.Tensor,  # [tokens, kv_heads, head_dim], rotated
        v: torch.Tensor,
        key_cache: torch.Tensor,  # [pages, page_size, kv_heads, head_dim] of this layer
        value_cache: torch.Tensor,
    ) -> torch.Tensor:
        """Writes the new keys and values into the cache, then attends; returns [tokens, heads, head_dim]."""
        if self._slots is None:
            raise RuntimeError("plan() the step before running a layer")
        key_cache.view(-1, self.num_kv_heads, self.head_dim)[self._slots] = k
        value_cache.view(-1, self.num_kv_heads, self.head_dim)[self._slots] = v
        return self._attend(q, key_cache, value_cache)

    @abstractmethod
    def _attend(self, q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> torch.Tensor:
        """Attention of q over the cache, the new keys already written."""


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
    if choice == "flashinfer" or (choice == "auto" and not reason):
        # imported here: the module imports flashinfer, which only CUDA machines with the extra have
        from miner.attention.flashinfer_backend import FlashInferAttention

        return FlashInferAttention(num_heads, num_kv_heads, head_dim, dtype, device)
    from miner.attention.reference import ReferenceAttention

    return ReferenceAttention(num_heads, num_kv_heads, head_dim, dtype, device)


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
