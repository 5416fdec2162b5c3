"""Offloaded KV pages survive any number of swaps byte for byte, whatever order microbatches run in."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from miner.kv.cache import KVShape
from miner.kv.offload import MicrobatchKVCache

LAYERS, PAGE, HEADS, DIM = 2, 4, 2, 3


def make(microbatches: int, local: int = 2, global_: int = 3) -> MicrobatchKVCache:
    kv = KVShape(LAYERS, HEADS, DIM, torch.float32, torch.device("cpu"))
    return MicrobatchKVCache(kv, microbatches, local, global_, PAGE)


@settings(max_examples=60, deadline=None)
@given(
    microbatches=st.integers(2, 5),
    order=st.lists(st.integers(0, 4), min_size=1, max_size=30),
    data=st.data(),
)
def test_pages_round_trip_exactly(microbatches: int, order: list[int], data: st.DataObject) -> None:
    cache = make(microbatches)
    order = [m % microbatches for m in order]
    truth = {m: torch.zeros(LAYERS, 5, PAGE, HEADS, DIM) for m in range(microbatches)}
    for step, microbatch in enumerate(order):
        following = order[step + 1] if step + 1 < len(order) else microbatch
        cache.begin_step(microbatch, following)
        pages = cache.physical(microbatch, list(range(5)))
        # what the microbatch wrote on earlier turns is exactly what it reads now
        assert torch.equal(cache.device_cache.keys[:, pages], truth[microbatch])
        written = torch.randn(LAYERS, 5, PAGE, HEADS, DIM)
        cache.device_cache.keys[:, pages] = written
        truth[microbatch] = written
        # a microbatch's pages never alias another's during a step
        other = [m for m in range(microbatches) if m != microbatch]
        for m in other:
            local = cache.physical(m, [0, 1])
            assert not set(local) & set(pages)


def test_swaps_are_counted_and_plain_paging_swaps_nothing() -> None:
    cache = make(3)
    cache.begin_step(0, 1)
    cache.begin_step(1, 2)
    per_pool = 2 * LAYERS * 3 * PAGE * HEADS * DIM * 4  # keys and values of 3 global pages, float32
    assert cache.bytes_swapped == 4 * per_pool  # loads of 0, 1 and 2, write-back of 0
    plain = make(3, local=4, global_=0)
    plain.begin_step(0, 1)
    assert plain.bytes_swapped == 0
    assert plain.physical(2, [0, 3]) == [8, 11]


def test_offloading_needs_two_microbatches() -> None:
    with pytest.raises(ValueError, match="needs at least 2 microbatches"):
        make(1)
