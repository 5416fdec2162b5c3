"""The PyTorch reference attention backend: runs on any device, one sequence at a time.

It is the path CPU tests use and the yardstick the FlashInfer backend is checked against.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from miner.attention.layout import BatchLayout


class ReferenceAttention:
    name = "reference"

    def __call__(
        self,
        q: torch.Tensor,  # [tokens, heads, head_dim]
        k: torch.Tensor,  # [tokens, kv_heads, head_dim]
        v: torch.Tensor,
        key_cache: torch.Tensor,  # [pages, page_size, kv_heads, head_dim] of this layer
        value_cache: torch.Tensor,
        layout: BatchLayout,
        scale: float,
    ) -> torch.Tensor:
        kv_heads, head_dim = k.shape[1], k.shape[2]
        slots = layout.slots(q.device)
        key_cache.view(-1, kv_heads, head_dim)[slots] = k
        value_cache.view(-1, kv_heads, head_dim)[slots] = v
        group = q.shape[1] // kv_heads
        outputs = []
        start = 0
        for context, query, table in zip(
            layout.context_lens, layout.query_lens, layout.block_tables, strict=True
        ):
            total = context + query
            pages = torch.tensor(table[: -(-total // layout.page_size)], device=q.device)
            keys = key_cache[pages].reshape(-1, kv_heads, head_dim)[:total]
            values = value_cache[pages].reshape(-1, kv_heads, head_dim)[:total]
            # query i (at position context + i) may see keys 0 .. context + i
            mask = (
                torch.arange(total, device=q.device)[None, :]
                <= (context + torch.arange(query, device=q.device))[:, None]
            )
            out = F.scaled_dot_product_attention(
                q[start : start + query].transpose(0, 1),
                keys.repeat_interleave(group, dim=1).transpose(0, 1),
                values.repeat_interleave(group, dim=1).transpose(0, 1),
                attn_mask=mask,
                scale=scale,
            )
            outputs.append(out.transpose(0, 1))
            start += query
        return torch.cat(outputs)
