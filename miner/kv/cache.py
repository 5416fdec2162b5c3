"""The KV tensors of one stage: for each of its layers, keys and values in pages of `page_size` tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Tokens per KV page unless a caller chooses otherwise: small enough that a sequence wastes little of its
# last page, a size FlashInfer's paged kernels take.
PAGE_SIZE = 16


@dataclass(frozen=True)
class KVShape:
    """What a stage keeps per cached token: keys and values for each of its layers and KV heads, of
    `head_dim` elements of `dtype`, on `device` (StageShard.kv_shape gives a stage's)."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device


class PagedKVCache:
    def __init__(self, kv: KVShape, num_pages: int, page_size: int) -> None:
        shape = (kv.num_layers, num_pages, page_size, kv.num_kv_heads, kv.head_dim)
        self.page_size = page_size
        self.keys = torch.zeros(shape, dtype=kv.dtype, device=kv.device)
        self.values = torch.zeros(shape, dtype=kv.dtype, device=kv.device)
