"""Page bookkeeping: no page is ever owned twice, tables cover their tokens, released pages come back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miner.kv.blocks import BlockManager, OutOfPages

OPS = st.lists(
    st.tuples(st.sampled_from(["grow", "release"]), st.integers(0, 5), st.integers(1, 40)), max_size=60
)


@given(OPS)
def test_pages_are_owned_once_and_cover_tokens(ops: list[tuple[str, int, int]]) -> None:
    blocks = BlockManager(num_pages=20, page_size=4)
    tokens: dict[int, int] = {}
    for op, seq, amount in ops:
        if op == "release":
            blocks.release(seq)
            tokens.pop(seq, None)
            continue
        wanted = tokens.get(seq, 0) + amount
        if blocks.can_hold(seq, wanted):
            blocks.reserve(seq, wanted)
            tokens[seq] = wanted
        else:
            with pytest.raises(OutOfPages):
                blocks.reserve(seq, wanted)
        owned = [page for s in tokens for page in blocks.block_table(s)]
        assert len(owned) == len(set(owned))
        assert len(owned) + blocks.free_pages == 20
        for s, count in tokens.items():
            assert len(blocks.block_table(s)) == -(-count // 4)
    for seq in list(tokens):
        blocks.release(seq)
    assert blocks.free_pages == 20


def test_invalid_pool() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        BlockManager(0, 16)
