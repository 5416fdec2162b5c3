"""The one interface every attention backend implements.

A forward step calls `plan(layout)` once, then the backend once per layer. Planning once per step is what
FlashInfer's wrappers need (their plan() builds the work split for a batch shape), and it lets the reference
backend build its gather indices and masks once instead of once per layer. The backends live in their own
modules; `miner.attention.registry` chooses one for a device.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from miner.attention.layout import BatchLayout


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
