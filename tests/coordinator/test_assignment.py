"""Who the coordinator assigns on-chain: the planned pipelines' miners and live spares, within the contract's
limit, so a re-plan after a failure has miners that can sign and be paid."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.db.models import PipelineRecord
from coordinator.services.lifecycle import MAX_MINERS_PER_TASK, assigned_miners

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
    spares = [m for m in live if m not in planned]
    assert set(planned) <= set(chosen) and chosen == sorted(set(chosen))
    assert len(chosen) == min(MAX_MINERS_PER_TASK, len(planned) + len(spares))
    assert set(chosen) - set(planned) == set(spares[: len(chosen) - len(planned)])
