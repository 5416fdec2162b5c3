"""Joins fill the bottleneck, leaves free their slice, rebalances come from lost coverage or imbalance; every
event counts the GPUs that reload weights, and rebuilds keep interchangeable GPUs in place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench._clusters import QWEN3_32B, heterogeneous
from coordinator.scheduling.cluster import Cluster, Gpu
from coordinator.scheduling.costs import step_times
from coordinator.scheduling.coverage import Coverage
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.membership import Membership
from coordinator.scheduling.model import ModelSpec

MODEL = ModelSpec.from_hf_config(QWEN3_32B)


def a100(gpu_id: str, region: str = "us-east-1") -> Gpu:
    return Gpu(gpu_id, "A100-80GB", region, 80, 312, 2039)


def test_join_fills_the_weakest_layers_with_one_reload() -> None:
    members = Membership(Cluster.from_dict(heterogeneous(16, 2)), MODEL)
    before = members.coverage()
    weakest = before.rates.index(min(before.rates))
    event = members.join(a100("newcomer"))
    assert (event.kind, event.reloads, event.rebalanced) == ("join", 1, False)
    (shard,) = [s for s in members.plan.extra if s.gpu == "newcomer"]
    assert shard.start <= weakest < shard.end
    assert min(members.coverage().rates) > min(before.rates)
    members.plan.validate(members.cluster, MODEL)


def test_leave_dissolves_the_pipeline_into_extra_shards_without_reloads() -> None:
    members = Membership(Cluster.from_dict(heterogeneous(16, 2)), MODEL)
    pipeline = members.plan.pipelines[0]
    event = members.leave(pipeline.stages[0].gpu)
    assert (event.reloads, event.rebalanced) == (0, False)
    assert pipeline not in members.plan.pipelines
    assert set(pipeline.gpus[1:]) <= {s.gpu for s in members.plan.extra}
    members.plan.validate(members.cluster, MODEL)


def test_lost_coverage_is_repaired_by_moving_one_spare() -> None:
    members = Membership(Cluster.from_dict({"gpus": [a100(f"g{i}").to_dict() for i in range(3)]}), MODEL)
    (pipeline,) = members.plan.pipelines
    (spare,) = members.plan.extra
    (alone,) = [s for s in pipeline.stages if (s.start, s.end) != (spare.start, spare.end)]
    event = members.leave(alone.gpu)  # the only holder of its layers
    assert event.reloads == 1 and not event.rebalanced
    assert min(members.coverage().rates) > 0
    assert any(
        s.gpu == spare.gpu and (s.start, s.end) != (spare.start, spare.end) for s in members.plan.extra
    )


def test_imbalance_past_the_threshold_triggers_a_global_rebalance() -> None:
    members = Membership(Cluster.from_dict(heterogeneous(16, 2)), MODEL, cv_threshold=1e-6)
    event = members.join(a100("newcomer"))
    assert event.rebalanced and event.reloads >= 1
    members.plan.validate(members.cluster, MODEL)


def test_rebuilds_keep_shards_in_place() -> None:
    members = Membership(Cluster.from_dict(heterogeneous(16, 2)), MODEL)
    assert members.rebalance().reloads == 0  # nothing changed: nobody reloads
    gone = members.plan.pipelines[1].stages[0].gpu
    members.leave(gone)
    members.join(a100("twin", members.cluster.gpu(members.plan.extra[0].gpu).region))
    event = members.rebalance()
    assert 0 < event.reloads < len(members.cluster.gpus) // 2  # a few GPUs reload, not the whole cluster
    assert members.rebalance().reloads == 0


def test_membership_errors() -> None:
    members = Membership(Cluster.from_dict(heterogeneous(16, 2)), MODEL)
    with pytest.raises(SchedulingError, match="already a member"):
        members.join(a100(members.cluster.gpus[0].id))
    with pytest.raises(SchedulingError, match="not a member"):
        members.leave("nobody")
    with pytest.raises(SchedulingError, match="is not in rtt_ms"):
        members.join(a100("lost", "mars-1"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=25))
def test_the_coverage_kept_event_by_event_is_the_coverage_of_the_plan(events: list[tuple[bool, int]]) -> None:
    """Joins and leaves update the layer rates and bounds in place; they must stay those of the plan counted
    from scratch (equal bounds, rates equal but for rounding), through repairs and rebalances too."""
    members = Membership(Cluster.from_dict(heterogeneous(24, 3)), MODEL, cv_threshold=0.8)
    for n, (joins, pick) in enumerate(events):
        gpus = members.cluster.gpus
        if joins or len(gpus) < 4:
            members.join(a100(f"new{n}", gpus[pick % len(gpus)].region))
        else:
            members.leave(gpus[pick % len(gpus)].id)
        kept = members.coverage()
        counted = Coverage(members.plan.shards(), step_times(members.cluster.gpus, MODEL), MODEL)
        assert kept.bounds == counted.bounds
        assert kept.rates == pytest.approx(counted.rates, abs=1e-12)
        assert (min(kept.rates) == 0) == (min(counted.rates) == 0)
