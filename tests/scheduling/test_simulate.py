"""The simulator: deterministic per seed, every request served, sensible figures for every strategy."""

from __future__ import annotations

import pytest

from bench._clusters import QWEN3_32B, heterogeneous, parallax_testbed
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.strategies import STRATEGIES, make_plan
from coordinator.simulate.engine import simulate
from coordinator.simulate.workload import Workload

MODEL = ModelSpec.from_hf_config(QWEN3_32B)
SMALL = Workload(requests=150, output_tokens=(1, 48), prompt_tokens=(1, 256))


def test_same_seed_same_numbers_other_seed_other_numbers() -> None:
    cluster = Cluster.from_dict(heterogeneous(16, 4))
    plan = make_plan("parallax", cluster, MODEL)
    first = simulate(plan, cluster, MODEL, SMALL)
    assert simulate(plan, cluster, MODEL, SMALL) == first
    other = simulate(plan, cluster, MODEL, Workload(150, (1, 256), (1, 48), seed=1))
    assert other != first
    assert first.completed == first.requests == 150
    assert first.output_tokens == int(SMALL.lengths()[1].sum())


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "ren"])
def test_every_strategy_serves_the_whole_batch(strategy: str) -> None:
    cluster = Cluster.from_dict(parallax_testbed())
    result = simulate(make_plan(strategy, cluster, MODEL), cluster, MODEL, SMALL)
    assert result.completed == 150
    assert result.throughput_tokens_s > 0
    assert 0 < result.gpu_utilization <= result.serving_gpu_utilization <= 1
    assert 0 < result.latency_p50_s <= result.latency_p99_s <= result.makespan_s


def test_slower_links_slow_the_batch_down() -> None:
    cluster = Cluster.from_dict(parallax_testbed())
    plan = make_plan("parallax", cluster, MODEL)
    fast = simulate(plan, cluster, MODEL, SMALL)
    slow = simulate(plan, cluster, MODEL, Workload(150, (1, 256), (1, 48), link_mb_s=1.0))
    assert slow.makespan_s > fast.makespan_s


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "workload: expected a JSON object"),
        ({"requests": 0}, "workload.requests: must be at least 1, got 0"),
        ({"prompt_tokens": [10, 5]}, "workload.prompt_tokens: high 5 is below low 10"),
        ({"output_tokens": 5}, "workload.output_tokens: expected [low, high]"),
        ({"link_mb_s": -1}, "workload.link_mb_s: must be positive"),
        ({"users": 3}, "workload: unknown field 'users'"),
    ],
)
def test_bad_workloads(raw: object, message: str) -> None:
    with pytest.raises(SchedulingError) as err:
        Workload.from_dict(raw)
    assert str(err.value).startswith(message)
