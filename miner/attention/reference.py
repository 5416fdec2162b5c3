"""The PyTorch reference attention backend: runs on any device; CPU tests use it, and the FlashInfer backend
is checked against it.

Sequences are padded into batches: decoding sequences (one new token each) form one batch, sequences with
longer chunks another, so a long prefill chunk does not pad every decoding sequence to its length. Gather
indices and masks are built once per step in plan(); each layer then gathers the batch's keys and values into
[batch, kv_heads, keys, head_dim] (one row per cached token and head, so no copy is needed to bring heads
forward) and attends: a decoding batch by two batched matrix products and a softmax (its queries are a
handful of rows, where that runs at about twice the speed of the CPU's fused kernel), a chunked one by
scaled_dot_product_attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from miner.attention.interface import AttentionBackend
from miner.attention.layout import BatchLayout


@dataclass(frozen=True)
class _Padded:
    """Sequences padded to [batch, longest chunk] queries and [batch, longest table] pages of keys."""

    rows: torch.Tensor  # [batch * queries]: row of each padded query in the flattened batch (0 for padding)
    real: torch.Tensor  # [real queries]: where the real queries sit among the padded ones
    kv_rows: torch.Tensor  # [batch * kv_heads * keys]: row of each key in the cache viewed as [-1, head_dim]
    # 0 where a query sees a key, else -inf: [batch * kv_heads, group, keys] for a decoding batch (the
    # shape of its scores), [batch, 1, group * queries, keys] for a chunked one
    mask: torch.Tensor
    shape: tuple[int, int, int]  # batch, queries, keys (= pages * page_size)
    whole: bool  # the batch is every token of the step, in order, unpadded (a step of decoding only)


class ReferenceAttention(AttentionBackend):
    name = "reference"

    def __init__(
        self, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        super().__init__(num_heads, num_kv_heads, head_dim, dtype, device)
        self.group = num_heads // num_kv_heads
        self._batches: list[_Padded] = []

    def plan(self, layout: BatchLayout) -> None:
        super().plan(layout)
        decoding = [i for i, q in enumerate(layout.query_lens) if q == 1]
        chunked = [i for i, q in enumerate(layout.query_lens) if q != 1]
        self._batches = [self._pad(layout, group) for group in (decoding, chunked) if group]

    def _attend(self, q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(q)
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        for batch in self._batches:
            size, queries, keys = batch.shape
            # The query heads sharing a KV head are stacked along the query axis (head h reads KV head
            # h // group), so keys and values are used as they are, never repeated per query head.
            picked = q if batch.whole else q.index_select(0, batch.rows)
            grouped = picked.view(size, queries, heads, dim).transpose(1, 2)
            grouped = grouped.reshape(size, kv_heads, self.group * queries, dim)
            # each sequence's whole pages are gathered; the mask hides their unused slots
            kv_shape = (size, kv_heads, keys, dim)
            k = key_cache.view(-1, dim).index_select(0, batch.kv_rows).view(kv_shape)
            v = value_cache.view(-1, dim).index_select(0, batch.kv_rows).view(kv_shape)
            if queries == 1:
                scores = torch.baddbmm(
                    batch.mask,
                    grouped.reshape(size * kv_heads, self.group, dim),
                    k.view(size * kv_heads, keys, dim).transpose(1, 2),
                    alpha=self.scale,
                )
                attended = torch.bmm(scores.softmax(-1), v.view(size * kv_heads, keys, dim))
            else:
                attended = F.scaled_dot_product_attention(
                    grouped, k, v, attn_mask=batch.mask, scale=self.scale
                )
            per_token = attended.reshape(size, heads, queries, dim).transpose(1, 2).reshape(-1, heads, dim)
            if batch.whole:
                return per_token
            out.index_copy_(0, batch.rows.index_select(0, batch.real), per_token.index_select(0, batch.real))
        return out

    def _pad(self, layout: BatchLayout, group: list[int]) -> _Padded:
        """Gather indices and the causal mask of the sequences `group` of `layout`."""
        query = torch.tensor([layout.query_lens[i] for i in group])
        context = torch.tensor([layout.context_lens[i] for i in group])
        first_row = torch.tensor([0, *layout.query_lens]).cumsum(0)[group]
        offsets = torch.arange(int(query.max()))
        real = offsets[None, :] < query[:, None]
        rows = torch.where(real, first_row[:, None] + offsets[None, :], 0)
        size = layout.page_size
        pages = -(-(context + query) // size)
        tables = layout.padded_block_tables()[group][:, : int(pages.max())]
        keys = torch.arange(tables.shape[1] * size)
        # cache row of (sequence, kv head, key): its slot (page * page_size + offset) times kv_heads + head
        slots = tables.repeat_interleave(size, dim=1) * size + keys % size
        heads = torch.arange(self.num_kv_heads)
        kv_rows = slots[:, None, :] * self.num_kv_heads + heads[None, :, None]
        # query j of a sequence (at position context + j) sees keys 0 .. context + j; a padding query sees
        # key 0 only, so its softmax stays finite (its output is dropped).
        visible = keys[None, None, :] <= (context[:, None] + offsets[None, :])[:, :, None]
        visible = torch.where(real[:, :, None], visible, keys[None, None, :] == 0)
        # an additive mask (faster than a boolean one in the CPU kernels), tiled for the stacked query heads
        mask = torch.zeros(visible.shape, dtype=self.dtype).masked_fill(~visible, float("-inf"))
        if len(offsets) == 1:
            mask = mask.expand(-1, self.num_kv_heads * self.group, -1).reshape(-1, self.group, len(keys))
        else:
            mask = mask[:, None].repeat(1, 1, self.group, 1)
        return _Padded(
            rows.flatten().to(self.device),
            real.flatten().nonzero()[:, 0].to(self.device),
            kv_rows.flatten().to(self.device),
            mask.to(self.device),
            (len(group), len(offsets), len(keys)),
            whole=len(offsets) == 1 and len(group) == len(layout.query_lens),
        )
