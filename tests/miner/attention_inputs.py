"""Random paged attention inputs and a plain dense attention to check the backends against."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from miner.attention.layout import BatchLayout


@dataclass
class PagedInputs:
    layout: BatchLayout
    q: torch.Tensor  # [tokens, heads, head_dim]
    k: torch.Tensor  # [tokens, kv_heads, head_dim]
    v: torch.Tensor
    key_cache: torch.Tensor  # [pages, page_size, kv_heads, head_dim], context keys already in place
    value_cache: torch.Tensor


def random_paged_inputs(
    context_lens: list[int],
    query_lens: list[int],
    page_size: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    seed: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> PagedInputs:
    """Sequences with random cached contexts in randomly scattered pages (a few spare pages unused)."""
    generator = torch.Generator().manual_seed(seed)
    needed = [-(-(c + q) // page_size) for c, q in zip(context_lens, query_lens, strict=True)]
    pages = torch.randperm(sum(needed) + 3, generator=generator).tolist()
    tables, start = [], 0
    for count in needed:
        tables.append(tuple(pages[start : start + count]))
        start += count
    layout = BatchLayout(tuple(context_lens), tuple(query_lens), tuple(tables), page_size)
    tokens = sum(query_lens)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    cache_shape = (len(pages), page_size, kv_heads, head_dim)
    return PagedInputs(
        layout,
        randn(tokens, heads, head_dim),
        randn(tokens, kv_heads, head_dim),
        randn(tokens, kv_heads, head_dim),
        randn(*cache_shape),
        randn(*cache_shape),
    )


def dense_attention(inputs: PagedInputs) -> torch.Tensor:
    """Causal grouped-query attention in float64, one sequence at a time, from contiguous copies of each
    sequence's keys (cached context read slot by slot, then the new keys)."""
    layout = inputs.layout
    kv_heads, head_dim = inputs.k.shape[1], inputs.k.shape[2]
    group = inputs.q.shape[1] // kv_heads
    keys_flat = inputs.key_cache.reshape(-1, kv_heads, head_dim)
    values_flat = inputs.value_cache.reshape(-1, kv_heads, head_dim)
    outputs, row = [], 0
    for context, query, table in zip(
        layout.context_lens, layout.query_lens, layout.block_tables, strict=True
    ):
        slots = [
            table[p // layout.page_size] * layout.page_size + p % layout.page_size for p in range(context)
        ]
        keys = torch.cat((keys_flat[slots], inputs.k[row : row + query])).double()
        values = torch.cat((values_flat[slots], inputs.v[row : row + query])).double()
        q = inputs.q[row : row + query].double()
        scores = torch.einsum("qhd,khd->hqk", q, keys.repeat_interleave(group, dim=1)) * head_dim**-0.5
        visible = torch.arange(context + query)[None, :] <= context + torch.arange(query)[:, None]
        weights = scores.masked_fill(~visible.to(scores.device), float("-inf")).softmax(-1)
        outputs.append(torch.einsum("hqk,khd->qhd", weights, values.repeat_interleave(group, dim=1)))
        row += query
    return torch.cat(outputs)
