"""The continuous-batching scheduler, driven without a model: budgets hold, pages are never oversubscribed,
chunks are contiguous, and every sequence finishes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.scheduler import Scheduler
from miner.engine.sequence import Sequence
from miner.kv.blocks import BlockManager

REQUESTS = st.lists(st.tuples(st.integers(1, 30), st.integers(1, 12)), min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    requests=REQUESTS,
    pages=st.integers(11, 40),
    max_seqs=st.integers(1, 6),
    budget=st.integers(1, 48),
)
def test_every_sequence_finishes_within_budgets(
    requests: list[tuple[int, int]], pages: int, max_seqs: int, budget: int
) -> None:
    blocks = BlockManager(pages, page_size=4)  # 11 pages hold the longest request (30 + 12 tokens)
    scheduler = Scheduler(blocks, max_seqs=max_seqs, token_budget=budget)
    sequences = [Sequence(i, [1] * p, SamplingParams(max_tokens=n)) for i, (p, n) in enumerate(requests)]
    for seq in sequences:
        scheduler.add(seq)
    for _step in range(10_000):
        if scheduler.idle:
            break
        chunks = scheduler.schedule()
        assert chunks, "no progress"
        assert sum(len(c.tokens) for c in chunks) <= budget
        assert len(scheduler.running) <= max_seqs
        assert len({c.seq.seq_id for c in chunks}) == len(chunks)
        owned = [page for s in scheduler.running for page in blocks.block_table(s.seq_id)]
        assert len(owned) == len(set(owned)) <= pages
        for chunk in chunks:
            assert chunk.tokens == chunk.seq.tokens[chunk.context_len : chunk.context_len + len(chunk.tokens)]
            if chunk.completes_sequence_input:
                chunk.seq.append(7)
                if chunk.seq.finished:
                    scheduler.finish(chunk.seq)
    assert scheduler.idle
    assert all(len(s.output) == s.params.max_tokens for s in sequences)
    assert blocks.free_pages == pages


def test_a_sequence_larger_than_the_pool_is_refused() -> None:
    scheduler = Scheduler(BlockManager(2, page_size=4))
    with pytest.raises(ValueError, match="needs more KV space than the whole pool holds"):
        scheduler.add(Sequence(0, [1] * 6, SamplingParams(max_tokens=3)))
