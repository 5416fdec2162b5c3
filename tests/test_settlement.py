"""The payment split every miner recomputes before signing: exact, proportional to work within one base unit,
and refusing what cannot be a weight."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.settlement import fee, split

AMOUNT = st.integers(min_value=0, max_value=2**128 - 1)
WEIGHTS = st.lists(st.integers(min_value=0, max_value=2**96), min_size=1, max_size=32)


@given(AMOUNT, WEIGHTS)
def test_a_split_adds_up_exactly_and_is_proportional_within_one_unit(amount: int, weights: list[int]) -> None:
    shares = split(amount, weights)
    assert sum(shares) == amount
    total = sum(weights) or len(weights)  # no work at all: an even split
    for share, weight in zip(shares, weights, strict=True):
        weight = weight if sum(weights) else 1
        assert abs(share * total - amount * weight) < total  # within one unit of the exact share


def test_ties_go_to_the_earlier_miner_and_no_work_splits_evenly() -> None:
    assert split(10, [1, 1, 1]) == [4, 3, 3]
    assert split(7, [0, 0]) == [4, 3]
    assert split(1000, [3, 0, 1]) == [750, 0, 250]


def test_what_cannot_be_a_split_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one weight"):
        split(5, [])
    with pytest.raises(ValueError, match="cannot be negative"):
        split(5, [2, -1])


@given(AMOUNT, st.integers(min_value=0, max_value=2_000))
def test_the_fee_rounds_down_like_the_contract(amount: int, fee_bps: int) -> None:
    assert fee(amount, fee_bps) == amount * fee_bps // 10_000 <= amount
