"""Phase 2: the shard-DAG DP equals exhaustive enumeration and, on larger clusters, the edge-by-edge DP it
replaced; round-robin; Petals-style span routing."""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import REFERENCE_BATCH
from coordinator.scheduling.plan import Pipeline, Stage
from coordinator.scheduling.routing import LOAD_WEIGHT, Chain, RoundRobin, ShardGraph, SpanGraph, chain_cost

LAYERS = 8
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


@st.composite
def placements(draw: st.DrawFn) -> tuple[Cluster, list[Stage], dict[str, float], dict[str, float], set[str]]:
    """A few pipelines cut at random points plus extra shards between their boundaries, one GPU each."""
    shards: list[Stage] = []
    for _ in range(draw(st.integers(1, 3))):
        cuts = sorted(draw(st.sets(st.integers(1, LAYERS - 1), max_size=3)))
        bounds = [0, *cuts, LAYERS]
        shards += [Stage("", a, b) for a, b in pairwise(bounds)]
    known = sorted({0, LAYERS} | {s.start for s in shards} | {s.end for s in shards})
    for _ in range(draw(st.integers(0, 3))):
        a, b = sorted(draw(st.lists(st.sampled_from(known), min_size=2, max_size=2, unique=True)))
        shards.append(Stage("", a, b))
    shards = [Stage(f"g{i}", s.start, s.end) for i, s in enumerate(shards)]
    gpus = [{"id": s.gpu, "type": "RTX4090", "region": draw(st.sampled_from(REGIONS))} for s in shards]
    step = {s.gpu: draw(st.floats(0.5, 5.0)) for s in shards}
    load = {s.gpu: float(draw(st.integers(0, 40))) for s in shards}
    blocked = {s.gpu for s in shards if draw(st.booleans()) and draw(st.booleans())}
    return Cluster.from_dict({"gpus": gpus}), shards, step, load, blocked


def exhaustive(
    cluster: Cluster, shards: list[Stage], step: dict[str, float], load: dict[str, float], blocked: set[str]
) -> float:
    """The cheapest chain by enumerating every gap-free sequence of shards."""

    def own(s: Stage) -> float:
        return s.layers * step[s.gpu] * (1 + LOAD_WEIGHT * load[s.gpu] / REFERENCE_BATCH)

    def extend(last: Stage, cost: float) -> float:
        best = cost if last.end == LAYERS else math.inf
        for nxt in shards:
            if nxt.start == last.end and nxt.gpu not in blocked:
                best = min(best, extend(nxt, cost + cluster.one_way_ms(last.gpu, nxt.gpu) + own(nxt)))
        return best

    return min((extend(s, own(s)) for s in shards if s.start == 0 and s.gpu not in blocked), default=math.inf)


def assert_serves_every_layer(chain: Chain, layers: int, blocked: set[str]) -> None:
    """The chain runs layers 0 to `layers` without a gap, on no blocked GPU."""
    assert chain.stages[0].start == 0 and chain.stages[-1].end == layers
    assert all(a.end == b.start for a, b in pairwise(chain.stages))
    assert not blocked & {s.gpu for s in chain.stages}


@settings(max_examples=150, deadline=None)
@given(placements())
def test_phase_two_equals_exhaustive_enumeration(placement: tuple) -> None:
    cluster, shards, step, load, blocked = placement
    chain = ShardGraph(shards, cluster, step, LAYERS).cheapest_chain(load, blocked=blocked)
    expected = exhaustive(cluster, shards, step, load, blocked)
    if math.isinf(expected):
        assert chain is None
        return
    assert chain is not None
    assert math.isclose(chain.cost_ms, expected, rel_tol=1e-9)
    assert_serves_every_layer(chain, LAYERS, blocked)


def edge_by_edge(
    cluster: Cluster, shards: list[Stage], step: dict[str, float], load: dict[str, float], blocked: set[str]
) -> float:
    """The reference: Parallax's DP over every edge of the shard DAG (quadratic in the shards at a boundary),
    as ShardGraph ran before it kept one arrival per region."""
    ordered = sorted(shards, key=lambda s: (s.start, s.end, s.gpu))
    ending: dict[int, list[int]] = defaultdict(list)
    best = [math.inf] * len(ordered)
    finish = math.inf
    for v, shard in enumerate(ordered):
        if shard.gpu not in blocked:
            own = shard.layers * step[shard.gpu] * (1.0 + LOAD_WEIGHT * load[shard.gpu] / REFERENCE_BATCH)
            if shard.start == 0:
                best[v] = own
            for u in ending[shard.start]:
                best[v] = min(best[v], best[u] + cluster.one_way_ms(ordered[u].gpu, shard.gpu) + own)
            if shard.end == LARGE_LAYERS:
                finish = min(finish, best[v])
        ending[shard.end].append(v)
    return finish


LARGE_LAYERS = 24


@st.composite
def large_placements(
    draw: st.DrawFn,
) -> tuple[Cluster, list[Stage], dict[str, float], dict[str, float], set[str]]:
    """Up to 80 shards cut at random boundaries over 24 layers, on a pool of GPUs in all regions: some GPUs
    hold several shards, including consecutive ones (a step that costs no link)."""
    gpu_count = draw(st.integers(1, 30))
    regions = st.sampled_from((*REGIONS, "ap-northeast-1", "sa-east-1"))
    gpus = [{"id": f"g{i}", "type": "RTX4090", "region": draw(regions)} for i in range(gpu_count)]
    cuts = sorted(draw(st.sets(st.integers(1, LARGE_LAYERS - 1), min_size=1, max_size=8)))
    bounds = [0, *cuts, LARGE_LAYERS]
    shards = set()
    for _ in range(draw(st.integers(1, 80))):
        a, b = sorted(draw(st.lists(st.sampled_from(bounds), min_size=2, max_size=2, unique=True)))
        shards.add(Stage(f"g{draw(st.integers(0, gpu_count - 1))}", a, b))
    step = {g["id"]: draw(st.floats(0.5, 5.0)) for g in gpus}
    load = {g["id"]: float(draw(st.integers(0, 200))) for g in gpus}
    blocked = {g["id"] for g in gpus if draw(st.integers(0, 4)) == 0}
    return Cluster.from_dict({"gpus": gpus}), sorted(shards, key=str), step, load, blocked


@settings(max_examples=300, deadline=None)
@given(large_placements())
def test_phase_two_equals_the_edge_by_edge_dp_on_larger_clusters(placement: tuple) -> None:
    """The same cost as the quadratic DP, on a chain that is gap-free, avoids blocked GPUs and costs what it
    says."""
    cluster, shards, step, load, blocked = placement
    chain = ShardGraph(shards, cluster, step, LARGE_LAYERS).cheapest_chain(load, blocked=blocked)
    expected = edge_by_edge(cluster, shards, step, load, blocked)
    if math.isinf(expected):
        assert chain is None
        return
    assert chain is not None
    assert chain.cost_ms == expected
    assert_serves_every_layer(chain, LARGE_LAYERS, blocked)
    assert math.isclose(chain_cost(chain.stages, cluster, step, load), expected, rel_tol=1e-12)


def test_queue_depth_steers_work_to_the_idle_replica() -> None:
    cluster = Cluster.from_dict(
        {"gpus": [{"id": g, "type": "RTX4090", "region": "us-east-1"} for g in "abcd"]}
    )
    shards = [Stage("a", 0, 4), Stage("b", 4, 8), Stage("c", 0, 4), Stage("d", 4, 8)]
    graph = ShardGraph(shards, cluster, dict.fromkeys("abcd", 1.0), LAYERS)
    idle = graph.cheapest_chain()
    busy = graph.cheapest_chain({"a": 32.0, "b": 32.0})
    assert idle is not None and busy is not None
    assert {s.gpu for s in busy.stages} == {"c", "d"}
    assert busy.cost_ms > idle.cost_ms - 1e-9


def test_round_robin_cycles_the_fixed_pipelines() -> None:
    pipelines = [Pipeline((Stage(g, 0, LAYERS),)) for g in "xyz"]
    rotation = RoundRobin(pipelines)
    assert [rotation.next_chain().stages[0].gpu for _ in range(5)] == ["x", "y", "z", "x", "y"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, LAYERS - 1), st.integers(1, LAYERS)), min_size=1, max_size=5))
def test_span_routing_uses_parts_of_spans(raw: list[tuple[int, int]]) -> None:
    spans = [Stage(f"s{i}", a, min(LAYERS, a + n)) for i, (a, n) in enumerate(raw)]
    cluster = Cluster.from_dict(
        {"gpus": [{"id": s.gpu, "type": "RTX4090", "region": "us-east-1"} for s in spans]}
    )
    chain = SpanGraph(spans, cluster, {s.gpu: 1.0 for s in spans}, LAYERS).cheapest_chain()
    covered = set()
    for s in spans:
        covered |= set(range(s.start, s.end))
    if covered != set(range(LAYERS)):
        assert chain is None
        return
    assert chain is not None
    position = 0
    holder = {s.gpu: s for s in spans}
    for stage in chain.stages:
        assert (
            stage.start == position
            and holder[stage.gpu].start <= stage.start < stage.end <= holder[stage.gpu].end
        )
        position = stage.end
    assert position == LAYERS
    # same speeds and one region: the cost is the model once plus one in-region hop per switch
    hop = cluster.one_way_ms(spans[0].gpu, spans[-1].gpu) if len(spans) > 1 else 0.0
    assert math.isclose(chain.cost_ms, LAYERS + hop * (len(chain.stages) - 1))
