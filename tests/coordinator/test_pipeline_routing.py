"""Routing work units over the planned pipelines by Phase 2's costs: speed, distance between stages, queue
depth and dead miners decide how many units each pipeline gets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.plan import Stage
from coordinator.services.routing import MeasuredLinks, Router

LAYERS = 8
UNIT = 16  # lines per unit
NEAR, FAR = "us-east-1", "ap-southeast-2"


def cluster(regions: Mapping[str, str]) -> Cluster:
    return Cluster.from_dict(
        {"gpus": [{"id": m, "type": "RTX4090", "region": r} for m, r in regions.items()]}
    )


def two_stages(head: str, tail: str) -> list[Stage]:
    return [Stage(head, 0, LAYERS // 2), Stage(tail, LAYERS // 2, LAYERS)]


def router(
    regions: Mapping[str, str] | None = None,
    step_ms: Mapping[str, float] | None = None,
    queue_depth: Mapping[str, float] | None = None,
    dead: set[str] | None = None,
    links: Cluster | None = None,
) -> Router:
    """Pipeline 1 is miners a->b, pipeline 2 is c->d; by default all in one region, equally fast, idle."""
    regions = regions or dict.fromkeys("abcd", NEAR)
    return Router(
        {1: two_stages("a", "b"), 2: two_stages("c", "d")},
        links or cluster(regions),
        step_ms or dict.fromkeys("abcd", 1.0),
        queued_lines={},
        queue_depth=queue_depth or {},
        dead=dead or set(),
    )


def route(r: Router, units: int) -> Counter[int]:
    """Units given out one by one, as `create_units` does; how many each pipeline got."""
    got: Counter[int] = Counter()
    for _ in range(units):
        target = r.cheapest()
        assert target is not None
        r.move(UNIT, to=target)
        got[target] += 1
    return got


def test_equal_pipelines_split_the_units_evenly() -> None:
    assert route(router(), 100) == {1: 50, 2: 50}


def test_a_pipeline_twice_as_fast_gets_about_twice_the_units() -> None:
    got = route(router(step_ms={"a": 1.0, "b": 1.0, "c": 2.0, "d": 2.0}), 600)
    assert 1.8 < got[1] / got[2] < 2.2


def test_a_pipeline_whose_stages_are_far_apart_gets_fewer_units() -> None:
    got = route(router(regions={"a": NEAR, "b": NEAR, "c": NEAR, "d": FAR}), 100)
    assert got[2] < got[1]


def test_a_measured_round_trip_replaces_the_regions_figure() -> None:
    same_region = cluster(dict.fromkeys("abcd", NEAR))
    slow_link = MeasuredLinks(same_region.gpus, same_region.rtt_ms, {"c": {"d": 400.0}})
    assert slow_link.one_way_ms("c", "d") == 200.0
    assert slow_link.one_way_ms("a", "b") == same_region.one_way_ms("a", "b")
    got = route(router(links=slow_link), 100)
    assert got[2] < got[1]


def test_queue_depth_shifts_units_away() -> None:
    got = route(router(queue_depth={"a": 4 * UNIT}), 100)
    assert got[1] < got[2]


def test_units_already_queued_count_as_load() -> None:
    r = Router(
        {1: two_stages("a", "b"), 2: two_stages("c", "d")},
        cluster(dict.fromkeys("abcd", NEAR)),
        dict.fromkeys("abcd", 1.0),
        queued_lines={1: 10 * UNIT},
        queue_depth={},
    )
    assert route(r, 10) == {2: 10}


def test_a_pipeline_with_a_dead_miner_gets_none() -> None:
    assert route(router(dead={"d"}), 20) == {1: 20}
    assert router(dead={"a", "c"}).cheapest() is None


def test_a_moved_unit_leaves_its_old_pipeline() -> None:
    r = router()
    r.move(UNIT, to=1)
    r.move(UNIT, to=2, source=1)
    r.move(UNIT, to=1, source=99)  # from a pipeline no longer planned
    assert r.lines == {1: UNIT, 2: UNIT}


@st.composite
def plans(draw: st.DrawFn) -> tuple[Router, dict[int, int], set[int]]:
    """One to four pipelines cut at random points over their own miners, in random regions, with random
    speeds, queue depths, queued lines and dead miners; also the queued lines and the pipelines with a dead
    miner."""
    pipelines: dict[int, list[Stage]] = {}
    for pipeline_id in range(1, draw(st.integers(1, 4)) + 1):
        cuts = sorted(draw(st.sets(st.integers(1, LAYERS - 1), max_size=3)))
        bounds = [0, *cuts, LAYERS]
        pipelines[pipeline_id] = [
            Stage(f"m{pipeline_id}.{i}", a, b) for i, (a, b) in enumerate(pairwise(bounds))
        ]
    miners = [s.gpu for stages in pipelines.values() for s in stages]
    regions = {m: draw(st.sampled_from([NEAR, FAR, "eu-west-1"])) for m in miners}
    dead = {m for m in miners if draw(st.integers(0, 3)) == 0}
    queued = {p: draw(st.integers(0, 200)) for p in pipelines}
    r = Router(
        pipelines,
        cluster(regions),
        {m: draw(st.floats(0.1, 10.0)) for m in miners},
        queued_lines=queued,
        queue_depth={m: draw(st.integers(0, 64)) for m in miners},
        dead=dead,
    )
    blocked = {p for p, stages in pipelines.items() if dead & {s.gpu for s in stages}}
    return r, queued, blocked


@given(plans(), st.lists(st.integers(1, 64), max_size=40))
def test_every_unit_goes_to_a_live_pipeline_and_no_line_is_lost(
    plan: tuple[Router, dict[int, int], set[int]], units: list[int]
) -> None:
    r, queued, blocked = plan
    live = set(queued) - blocked
    given_out: Counter[int] = Counter()
    for lines in units:
        target = r.cheapest()
        if not live:
            assert target is None
            continue
        assert target in live
        r.move(lines, to=target)
        given_out[target] += lines
    assert r.lines == Counter(queued) + given_out
    assert sum(r.lines.values()) == sum(queued.values()) + (sum(units) if live else 0)


@st.composite
def shared_plans(draw: st.DrawFn) -> Callable[[], Router]:
    """Up to eight pipelines over a pool of six miners, so that some share miners (a unit given to one makes
    the others dearer too), with random speeds, regions, queue depths, queued lines and dead miners: a
    function making a fresh router of them."""
    pool = [f"m{i}" for i in range(6)]
    pipelines: dict[int, list[Stage]] = {}
    for pipeline_id in range(1, draw(st.integers(1, 8)) + 1):
        cuts = sorted(draw(st.sets(st.integers(1, LAYERS - 1), max_size=3)))
        miners = draw(st.permutations(pool))
        pipelines[pipeline_id] = [
            Stage(miners[i], a, b) for i, (a, b) in enumerate(pairwise([0, *cuts, LAYERS]))
        ]
    links = cluster({m: draw(st.sampled_from([NEAR, FAR, "eu-west-1"])) for m in pool})
    step_ms = {m: draw(st.floats(0.1, 10.0)) for m in pool}
    queued = {p: draw(st.integers(0, 200)) for p in pipelines}
    depth = {m: draw(st.floats(0, 64)) for m in pool}
    dead = {m for m in pool if draw(st.integers(0, 5)) == 0}
    return lambda: Router(pipelines, links, step_ms, queued_lines=queued, queue_depth=depth, dead=dead)


@given(shared_plans(), st.lists(st.integers(1, 64), max_size=60))
def test_routing_a_wave_at_once_chooses_what_one_unit_at_a_time_chooses(
    plan: Callable[[], Router], units: list[int]
) -> None:
    one_by_one, at_once = plan(), plan()
    expected = []
    for lines in units:
        target = one_by_one.cheapest()
        expected.append(target)
        if target is not None:
            one_by_one.move(lines, to=target)
    assert at_once.assign(units) == expected
    assert at_once.lines == one_by_one.lines
