"""Latency scheduler (Ren 2024): every method against brute-force enumeration on small random instances.

The brute force shares no code with the package: it tries every cycle of distinct machines (each rotation
once) and every split of the layers over it, each stage holding between one layer and its capacity.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.scheduling.latency import (
    METHODS,
    InfeasibleError,
    LatencyMachine,
    LatencyProblem,
    LatencySchedule,
    solve,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw: st.DrawFn, feasible: bool = True) -> LatencyProblem:
    """Up to 5 machines, up to 9 layers, arbitrary (asymmetric, non-metric) latencies."""
    n = draw(st.integers(1, 5))
    n_layers = draw(st.integers(1, 9))
    caps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    if feasible and sum(caps) < n_layers:
        caps[0] += n_layers - sum(caps)
    if not feasible:
        n_layers = sum(caps) + draw(st.integers(1, 3))
    speeds = draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 3.0, 7.25]), min_size=n, max_size=n))
    link = draw(st.lists(st.floats(0.0, 40.0, allow_nan=False), min_size=n * n, max_size=n * n))
    machines = tuple(LatencyMachine(f"m{i}", f"r{i % 2}", speeds[i], caps[i]) for i in range(n))
    return LatencyProblem(machines, np.array(link).reshape(n, n), n_layers)


def splits(n_layers: int, caps: list[int]) -> Iterator[tuple[int, ...]]:
    """Every way to give each stage 1..cap layers, summing to n_layers."""
    if not caps:
        if n_layers == 0:
            yield ()
        return
    for first in range(1, min(caps[0], n_layers) + 1):
        for rest in splits(n_layers - first, caps[1:]):
            yield (first, *rest)


def brute_force(problem: LatencyProblem) -> float:
    n = len(problem.machines)
    best = math.inf
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            for tail in itertools.permutations(subset[1:]):
                order = (subset[0], *tail)
                hops = (
                    0.0
                    if size == 1
                    else sum(problem.link_ms[a, b] for a, b in zip(order, order[1:] + order[:1], strict=True))
                )
                caps = [problem.machines[i].capacity for i in order]
                for layers in splits(problem.num_layers, caps):
                    compute = sum(
                        problem.machines[i].layer_ms * k for i, k in zip(order, layers, strict=True)
                    )
                    best = min(best, compute + hops)
    return best


def check_valid(problem: LatencyProblem, schedule: LatencySchedule) -> None:
    """Stages cover [0, L) contiguously in order, on distinct machines, within memory; the TPOT adds up."""
    by_id = {m.id: (i, m) for i, m in enumerate(problem.machines)}
    assert len({s.machine for s in schedule.stages}) == len(schedule.stages)
    assert schedule.stages[0].start == 0
    assert schedule.stages[-1].end == problem.num_layers
    for before, after in itertools.pairwise(schedule.stages):
        assert before.end == after.start
    compute = 0.0
    for stage in schedule.stages:
        machine = by_id[stage.machine][1]
        assert 1 <= stage.end - stage.start <= machine.capacity
        compute += (stage.end - stage.start) * machine.layer_ms
    order = [by_id[s.machine][0] for s in schedule.stages]
    hops = (
        sum(problem.link_ms[a, b] for a, b in zip(order, order[1:] + order[:1], strict=True))
        if len(order) > 1
        else 0.0
    )
    assert schedule.compute_ms == pytest.approx(compute)
    assert schedule.link_ms == pytest.approx(hops)
    assert schedule.tpot_ms == pytest.approx(compute + hops)


@SETTINGS
@given(problems())
def test_ours_and_ilp_match_brute_force(problem: LatencyProblem) -> None:
    optimum = brute_force(problem)
    for method in ("ours", "ilp"):
        schedule = solve(problem, method, time_limit_s=30.0)
        check_valid(problem, schedule)
        assert schedule.tpot_ms == pytest.approx(optimum, abs=1e-6)
        assert schedule.optimal


@SETTINGS
@given(problems(), st.integers(1, 3))
def test_narrow_ours_never_loses_to_its_start_nor_proves_a_wrong_optimum(
    problem: LatencyProblem, width: int
) -> None:
    schedule = solve(problem, "ours", width=width)
    check_valid(problem, schedule)
    assert schedule.tpot_ms <= solve(problem, "greedy-augmented").tpot_ms + 1e-9
    if schedule.optimal:
        assert schedule.tpot_ms == pytest.approx(brute_force(problem), abs=1e-6)


@SETTINGS
@given(problems())
def test_heuristics_return_feasible_schedules(problem: LatencyProblem) -> None:
    optimum = brute_force(problem)
    for method in ("greedy", "greedy-augmented", "random"):
        schedule = solve(problem, method)
        check_valid(problem, schedule)
        assert schedule.tpot_ms >= optimum - 1e-6
        assert not schedule.optimal


@settings(max_examples=25, deadline=None)
@given(problems(feasible=False))
def test_not_enough_memory_is_a_clear_error(problem: LatencyProblem) -> None:
    for method in METHODS:
        with pytest.raises(InfeasibleError, match="not enough memory"):
            solve(problem, method)


@SETTINGS
@given(problems(), st.integers(0, 2**32 - 1))
def test_random_search_is_seeded(problem: LatencyProblem, seed: int) -> None:
    first = solve(problem, "random", permutations=16, seed=seed)
    assert solve(problem, "random", permutations=16, seed=seed) == first
    assert first.method == "random16"


def test_random_search_improves_with_more_permutations() -> None:
    """On 12 machines, more random orders never do worse: the draws of a smaller search come first."""
    rng = np.random.default_rng(7)
    machines = tuple(LatencyMachine(f"m{i}", "r", float(rng.uniform(1, 4)), 3) for i in range(12))
    problem = LatencyProblem(machines, rng.uniform(1, 50, (12, 12)), 20)
    tpot = [solve(problem, "random", permutations=p, seed=3).tpot_ms for p in (1, 64, 4096)]
    assert tpot[0] >= tpot[1] >= tpot[2]
