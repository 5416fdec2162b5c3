"""A stage's decode time measured here, which DeServe's microbatch rule (client_sdk.protocol.pipeline, the one
the coordinator's planner applies) turns into how many microbatches to keep in flight when the caller does not
say."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from miner.attention.layout import BatchLayout
from miner.kv.cache import PAGE_SIZE, PagedKVCache
from miner.model.shard import StageShard


@torch.inference_mode()
def decode_step_ms(
    model_dir: Path, start: int, end: int, batch: int, context: int, dtype: torch.dtype, device: str = "cpu"
) -> float:
    """Median time of one decode step of layers [start, end) for `batch` sequences of `context` tokens."""
    shard = StageShard.load(model_dir, start, end, dtype, device)
    page_size = PAGE_SIZE
    pages = -(-(context + 1) // page_size)
    config = shard.config
    cache = PagedKVCache(shard.kv_shape, batch * pages, page_size)
    layout = BatchLayout(
        context_lens=(context,) * batch,
        query_lens=(1,) * batch,
        block_tables=tuple(tuple(range(s * pages, (s + 1) * pages)) for s in range(batch)),
        page_size=page_size,
    )
    inputs = (
        torch.zeros(batch, dtype=torch.long, device=shard.device)
        if shard.is_first
        else torch.zeros(batch, config.hidden_size, dtype=dtype, device=shard.device)
    )
    times = []
    for _ in range(4):
        started = time.perf_counter()
        shard.forward(inputs, layout, cache)
        times.append(time.perf_counter() - started)
    return 1_000 * sorted(times[1:])[1]  # the first run warms up
