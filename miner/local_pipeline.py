"""All stages of a pipeline in one process, run one after another.

The exactness reference for the distributed engine (same shards, same cache layout, no transport), and the
model runner a verifier uses to re-score results.
"""

from __future__ import annotations

import itertools

import torch

from miner.attention.layout import BatchLayout
from miner.engine.scheduler import ScheduledChunk
from miner.model.shard import StageShard


class LocalPipeline:
    def __init__(self, shards: list[StageShard], num_pages: int, page_size: int) -> None:
        if not shards or not shards[0].is_first or not shards[-1].is_last:
            raise ValueError("the shards must run from the first layer to the last")
        for before, after in itertools.pairwise(shards):
            if before.end != after.start:
                raise ValueError(f"gap or overlap between layers {before.end} and {after.start}")
        self.shards = shards
        self.page_size = page_size
        self.caches = [shard.new_cache(num_pages, page_size) for shard in shards]

    @torch.inference_mode()
    def forward(self, chunks: list[ScheduledChunk], block_tables: list[list[int]]) -> torch.Tensor:
        """Runs the scheduled chunks through every stage; returns last-token logits [chunks, vocab]."""
        layout = BatchLayout(
            context_lens=tuple(c.context_len for c in chunks),
            query_lens=tuple(len(c.tokens) for c in chunks),
            block_tables=tuple(tuple(t) for t in block_tables),
            page_size=self.page_size,
        )
        device = self.shards[0].device
        hidden = torch.tensor([t for c in chunks for t in c.tokens], dtype=torch.long, device=device)
        for shard, cache in zip(self.shards, self.caches, strict=True):
            hidden = shard.forward(hidden, layout, cache)
        return hidden
