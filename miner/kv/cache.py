"""The KV tensors of one stage: for each of its layers, keys and values in pages of `page_size` tokens."""

from __future__ import annotations

import torch

# Tokens per KV page unless a caller chooses otherwise: small enough that a sequence wastes little of its
# last page, a size FlashInfer's paged kernels take.
PAGE_SIZE = 16


class PagedKVCache:
    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        shape = (num_layers, num_pages, page_size, num_kv_heads, head_dim)
        self.page_size = page_size
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
