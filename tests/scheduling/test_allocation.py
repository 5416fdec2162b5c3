"""Phase 1: pipelines cover [0, L) once, contiguously, within capacity, with no GPU twice; regions first;
water-filling and Hamilton rounding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench._clusters import QWEN3_32B, parallax_testbed
from coordinator.scheduling.allocation import AllocationOptions, allocate, capacities
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import shard_units
from coordinator.scheduling.waterfill import hamilton_round, water_fill

MODEL = ModelSpec.from_hf_config(QWEN3_32B)
TYPES = ("A100-80GB", "A100-40GB", "RTX5090", "RTX4090", "A10G", "L4")
REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    n = draw(st.integers(1, 10))
    gpus = [
        {
            "id": f"g{i}",
            "type": draw(st.sampled_from(TYPES)),
            "region": draw(st.sampled_from(REGIONS)),
            "memory_fraction": draw(st.sampled_from([1.0, 1.0, 0.75, 0.5])),
        }
        for i in range(n)
    ]
    return Cluster.from_dict({"gpus": gpus})


def check_plan(cluster: Cluster, plan: Any) -> None:
    caps = capacities(cluster, MODEL, AllocationOptions().kv_reserve)
    seen: set[str] = set()
    for pipeline in plan.pipelines:
        position = 0
        for stage in pipeline.stages:
            assert stage.start == position < stage.end  # contiguous, no gap, no overlap, not empty
            assert (
                shard_units(stage, MODEL) <= caps[stage.gpu]
            )  # within capacity, embedding and head included
            position = stage.end
        assert position == MODEL.num_layers  # covers [0, L) exactly once
    for stage in plan.shards():
        assert stage.gpu not in seen  # no GPU in two pipelines (nor in a pipeline and an extra shard)
        seen.add(stage.gpu)
        assert shard_units(stage, MODEL) <= caps[stage.gpu]
    plan.validate(cluster, MODEL)


@settings(max_examples=80, deadline=None)
@given(clusters())
def test_every_plan_is_valid(cluster: Cluster) -> None:
    try:
        plan = allocate(cluster, MODEL)
    except SchedulingError as err:
        assert "too small to hold one replica" in str(err)
        assert sum(capacities(cluster, MODEL, 0.3).values()) < 2 * MODEL.units_needed  # plausibly too small
        return
    check_plan(cluster, plan)
    assert plan.notes["s_star_exact"]


def test_region_bounded_first_and_cross_region_only_for_what_is_left() -> None:
    gpus = [{"id": f"e{i}", "type": "A100-80GB", "region": "us-east-1"} for i in range(4)]
    gpus += [
        {"id": "w0", "type": "RTX5090", "region": "eu-west-1"},
        {"id": "w1", "type": "RTX5090", "region": "eu-west-1"},
    ]
    gpus += [{"id": "t0", "type": "A100-40GB", "region": "ap-northeast-1"}]
    cluster = Cluster.from_dict({"gpus": gpus})
    plan = allocate(cluster, MODEL)
    check_plan(cluster, plan)
    regions = [{cluster.gpu(g).region for g in p.gpus} for p in plan.pipelines]
    assert regions.count({"us-east-1"}) == 2  # two in-region pipelines of two A100-80GB each
    assert plan.notes["pipelines_per_region"]["eu-west-1"] == 0  # two 5090s hold 48 of 68 units
    assert plan.notes["cross_region_pipelines"] == 1  # ... so they join the A100-40GB across regions
    assert {"eu-west-1", "ap-northeast-1"} in regions


def test_alpha_trades_replicas_for_stages() -> None:
    cluster = Cluster.from_dict(parallax_testbed())
    many = allocate(cluster, MODEL, AllocationOptions(alpha=2.0))
    few = allocate(cluster, MODEL, AllocationOptions(alpha=0.0))
    assert len(many.pipelines) == 2 and len(few.pipelines) == 1
    assert len(few.pipelines[0].stages) == 3  # alone, the fewest stages: three 5090s
    check_plan(cluster, many)


def test_water_filling_balances_memory_by_default_or_speed() -> None:
    gpus = [
        {"id": "big", "type": "A100-80GB", "region": "us-east-1"},
        {"id": "slow", "type": "A100-80GB", "region": "us-east-1", "layer_latency_ms": 9.0},
        {"id": "small", "type": "A100-80GB", "region": "us-east-1", "memory_fraction": 0.5},
    ]
    cluster = Cluster.from_dict({"gpus": gpus[:2]})
    (same,) = allocate(cluster, MODEL).pipelines  # equal memory: equal layers
    assert abs(same.stages[0].layers + MODEL.embedding_units - same.stages[1].layers - MODEL.head_units) <= 1
    (by_speed,) = allocate(cluster, MODEL, AllocationOptions(balance="speed")).pipelines
    layers = {s.gpu: s.layers for s in by_speed.stages}
    assert layers["big"] > layers["slow"]
    mixed = Cluster.from_dict({"gpus": [gpus[0], gpus[2]]})
    (by_memory,) = allocate(mixed, MODEL).pipelines
    layers = {s.gpu: s.layers for s in by_memory.stages}
    assert layers["big"] > layers["small"]


def test_leftover_gpus_join_the_weakest_layers() -> None:
    gpus = [{"id": f"g{i}", "type": "A100-80GB", "region": "us-east-1"} for i in range(3)]
    cluster = Cluster.from_dict({"gpus": gpus})
    plan = allocate(cluster, MODEL)
    assert len(plan.pipelines) == 1 and len(plan.extra) == 1  # 3 GPUs: one 2-stage pipeline + one extra
    check_plan(cluster, plan)
    assert not allocate(cluster, MODEL, AllocationOptions(place_leftovers=False)).extra


def test_too_small_cluster() -> None:
    cluster = Cluster.from_dict({"gpus": [{"id": "a", "type": "RTX4090", "region": "us-east-1"}]})
    with pytest.raises(SchedulingError, match=r"^cluster: too small to hold one replica \(18 layer units"):
        allocate(cluster, MODEL)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_water_filling_respects_bounds_and_follows_speed(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    caps = data.draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    lows = [data.draw(st.integers(0, c)) for c in caps]
    speeds = data.draw(st.lists(st.floats(0.1, 10), min_size=n, max_size=n))
    total = data.draw(st.integers(sum(lows), sum(caps)))
    shares = water_fill(caps, speeds, total, lows)
    assert sum(shares) == total
    assert all(lo <= x <= c for lo, x, c in zip(lows, shares, caps, strict=True))
    for i in range(n):  # an unconstrained faster stage never gets more than one unit less than a slower one
        for j in range(n):
            free_i = lows[i] < shares[i] < caps[i]
            free_j = lows[j] < shares[j] < caps[j]
            if free_i and free_j and speeds[i] > speeds[j]:
                assert shares[i] >= shares[j] - 1


def test_hamilton_rounding_gives_remainders_to_the_largest_fractions() -> None:
    assert hamilton_round([2.6, 3.3, 4.1], 10, [10, 10, 10]) == [3, 3, 4]
    assert hamilton_round([2.6, 3.3, 4.1], 10, [2, 10, 10]) == [2, 4, 4]  # a full stage passes its turn
