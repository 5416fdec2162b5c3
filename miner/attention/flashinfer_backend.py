"""FlashInfer's batch paged attention on CUDA (the `gpu` extra). Imported only when this backend is chosen.

Each step plans one wrapper: the decode wrapper when every sequence brings exactly one new token, the prefill
(append) wrapper otherwise, with a causal mask aligned to the end of each sequence's keys, so a chunk of new
tokens after a cached prefix sees the prefix and its own earlier tokens. Our caches are already in the layout
the wrappers read: one [pages, page_size, kv_heads, head_dim] tensor each for keys and values ("NHD"), passed
as a (keys, values) pair, so nothing is copied or transposed.
"""

from __future__ import annotations

from typing import Any

import flashinfer
import torch

from miner.attention.interface import AttentionBackend
from miner.attention.layout import BatchLayout
from miner.attention.page_table import page_table
from miner.attention.registry import FLASHINFER_DTYPES, FLASHINFER_HEAD_DIMS

WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's suggested scratch size for split-KV partial results
KV_LAYOUT = "NHD"


class FlashInferAttention(AttentionBackend):
    name = "flashinfer"

    def __init__(
        self, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        if device.type != "cuda" or dtype not in FLASHINFER_DTYPES or head_dim not in FLASHINFER_HEAD_DIMS:
            raise ValueError(f"FlashInfer cannot run head_dim {head_dim} in {dtype} on {device}")
        super().__init__(num_heads, num_kv_heads, head_dim, dtype, device)
        # Only one wrapper runs at a time, so the two can share the float workspace.
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self._prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, KV_LAYOUT)
        # Tensor-core decode kernels handle every query/KV head ratio, not only the few the CUDA-core ones do.
        self._decode = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, KV_LAYOUT, use_tensor_cores=True
        )
        self._wrapper: Any = None  # the wrapper planned for this step

    def plan(self, layout: BatchLayout) -> None:
        super().plan(layout)
        table = page_table(layout)
        # Host-side int32 arrays: plan() reads them on the host to split the work, then copies them over.
        kv_indptr = torch.tensor(table.kv_indptr, dtype=torch.int32)
        kv_indices = torch.tensor(table.kv_indices, dtype=torch.int32)
        last_page_len = torch.tensor(table.kv_last_page_len, dtype=torch.int32)
        shape = (self.num_heads, self.num_kv_heads, self.head_dim, layout.page_size)
        if all(q == 1 for q in layout.query_lens):
            self._decode.plan(
                kv_indptr,
                kv_indices,
                last_page_len,
                *shape,
                q_data_type=self.dtype,
                kv_data_type=self.dtype,
                sm_scale=self.scale,
            )
            self._wrapper = self._decode
        else:
            self._prefill.plan(
                torch.tensor(table.qo_indptr, dtype=torch.int32),
                kv_indptr,
                kv_indices,
                last_page_len,
                *shape,
                causal=True,
                q_data_type=self.dtype,
                kv_data_type=self.dtype,
                sm_scale=self.scale,
            )
            self._wrapper = self._prefill

    def _attend(self, q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> torch.Tensor:
        assert self._wrapper is not None  # set by plan(), which __call__ checked
        # flashinfer is untyped: what its wrapper returns is declared here
        out: torch.Tensor = self._wrapper.run(q.contiguous(), (key_cache, value_cache))
        return out
