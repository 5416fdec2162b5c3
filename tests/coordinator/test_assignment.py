"""Who the coordinator assigns on-chain: the planned pipelines' miners and live spares, within the contract's
limit and the stake locks the task's value cap leaves room for, so a re-plan after a failure has miners that
can sign and be paid, and the assignment never breaks the cap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.db.models import PipelineRecord
from coordinator.services.lifecycle import MAX_MINERS_PER_TASK, assigned_miners, stake_lock_room

ADDRESSES = [f"0x{i:040x}" for i in range(48)]


def pipeline(*miners: str) -> PipelineRecord:
    return PipelineRecord(stages=[{"miner": m, "start": 0, "end": 1} for m in miners])


def test_spares_join_the_planned_miners() -> None:
    a, b, c, d = ADDRESSES[:4]
    assert assigned_miners([pipeline(b, a)], [a, b, c, d]) == sorted([a, b, c, d])
    assert assigned_miners([pipeline(a), pipeline(b)], [a, b]) == [a, b]


@given(
    planned=st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=MAX_MINERS_PER_TASK, unique=True),
    live=st.lists(st.sampled_from(ADDRESSES), max_size=48, unique=True),
)
def test_every_planned_miner_and_as_many_spares_as_fit(planned: list[str], live: list[str]) -> None:
    chosen = assigned_miners([pipeline(*planned)], planned + [m for m in live if m not in planned])
    assert chosen is not None
    spares = [m for m in live if m not in planned]
    assert set(planned) <= set(chosen) and chosen == sorted(set(chosen))
    assert len(chosen) == min(MAX_MINERS_PER_TASK, len(planned) + len(spares))
    assert set(chosen) - set(planned) == set(spares[: len(chosen) - len(planned)])


@given(
    max_price=st.integers(0, 2_000),
    stake_lock=st.integers(0, 200),
    cap=st.integers(0, 2_000),
    planned=st.integers(1, 8),
    spares=st.integers(0, 8),
)
def test_assignments_stay_under_the_value_cap(
    max_price: int, stake_lock: int, cap: int, planned: int, spares: int
) -> None:
    room = stake_lock_room(max_price, stake_lock, cap)
    miners = ADDRESSES[: planned + spares]
    chosen = assigned_miners([pipeline(*miners[:planned])], miners, room)
    if planned > room:
        assert chosen is None
        return
    assert chosen is not None and set(miners[:planned]) <= set(chosen)
    assert len(chosen) == min(room, planned + spares)
    assert max_price + stake_lock * len(chosen) <= cap
