"""All stages of a pipeline in one process, run one after another (the same pipeline over one process per
stage, talking over ZeroMQ, is miner.pipeline.processes).

The exactness reference for the distributed engine (same shards, same cache layout, no transport). Verifiers
re-score with miner/verify/rescore.py, which needs logits at every output position, not only the last.
"""

from __future__ import annotations

import itertools

import torch

from miner.attention.layout import BatchLayout
from miner.engine.scheduler import ScheduledChunk
from miner.kv.offload import MicrobatchKVCache
from miner.model.shard import StageShard


class InProcessPipeline:
    def __init__(
        self,
        shards: list[StageShard],
        page_size: int,
        num_microbatches: int = 1,
        local_pages: int = 256,
        global_pages: int = 0,
    ) -> None:
        if not shards or not shards[0].is_first or not shards[-1].is_last:
            raise ValueError("the shards must run from the first layer to the last")
        for before, after in itertools.pairwise(shards):
            if before.end != after.start:
                raise ValueError(f"gap or overlap between layers {before.end} and {after.start}")
        self.shards = shards
        self.page_size = page_size
        self.caches = [
            MicrobatchKVCache(shard.kv_shape, num_microbatches, local_pages, global_pages, page_size)
            for shard in shards
        ]

    @property
    def pages_per_microbatch(self) -> int:
        return self.caches[0].pages_per_microbatch

    @property
    def bytes_swapped(self) -> int:
        return sum(cache.bytes_swapped for cache in self.caches)

    @torch.inference_mode()
    def forward(
        self,
        microbatch: int,
        next_microbatch: int,
        chunks: list[ScheduledChunk],
        block_tables: list[list[int]],
    ) -> torch.Tensor:
        """Runs one microbatch's chunks through every stage (block tables in the microbatch's logical pages);
        returns last-token logits [chunks, vocab]."""
        device = self.shards[0].device
        hidden = torch.tensor([t for c in chunks for t in c.tokens], dtype=torch.long, device=device)
        for shard, cache in zip(self.shards, self.caches, strict=True):
            cache.begin_step(microbatch, next_microbatch)
            layout = BatchLayout(
                context_lens=tuple(c.context_len for c in chunks),
                query_lens=tuple(len(c.tokens) for c in chunks),
                block_tables=tuple(tuple(cache.physical(microbatch, t)) for t in block_tables),
                page_size=self.page_size,
            )
            hidden = shard.forward(hidden, layout, cache.device_cache)
        return hidden
