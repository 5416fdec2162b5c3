"""Latency scheduler (Ren 2024): problem construction, validation and the public `solve` entry point."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.scheduling.latency import (
    InfeasibleError,
    LatencyMachine,
    LatencyProblem,
    LatencyStage,
    solve,
)

RTT = {"a": {"a": 2.0, "b": 40.0}, "b": {"a": 44.0, "b": 4.0}}


def test_from_regions_halves_the_round_trip() -> None:
    machines = [
        LatencyMachine("x", "a", 1.0, 4),
        LatencyMachine("y", "b", 2.0, 4),
        LatencyMachine("z", "a", 1, 4),
    ]
    problem = LatencyProblem.from_regions(machines, RTT, num_layers=8)
    assert problem.link_ms.tolist() == [[1.0, 20.0, 1.0], [22.0, 2.0, 22.0], [1.0, 20.0, 1.0]]
    assert not problem.link_ms.flags.writeable


@pytest.mark.parametrize(
    ("machines", "rtt", "layers", "message"),
    [
        ([LatencyMachine("x", "c", 1.0, 4)], RTT, 4, "no row for region c"),
        ([LatencyMachine("x", "a", 1.0, -1)], RTT, 4, "capacity must not be negative"),
        ([LatencyMachine("x", "a", 0.0, 4)], RTT, 4, "layer_ms must be positive"),
        ([LatencyMachine("x", "a", 1.0, 4)], RTT, 0, "num_layers must be at least 1"),
        ([LatencyMachine("x", "a", 1.0, 4)] * 2, RTT, 4, "ids must be unique"),
        ([], RTT, 4, "at least one machine"),
        ([LatencyMachine("x", "a", 1.0, 4)], {"a": {"b": 1.0}}, 4, "no entry for region a"),
    ],
)
def test_bad_problems_name_the_field(
    machines: list[LatencyMachine], rtt: dict[str, dict[str, float]], layers: int, message: str
) -> None:
    with pytest.raises(InfeasibleError, match=message):
        LatencyProblem.from_regions(machines, rtt, layers)


def test_link_matrix_must_be_square_and_non_negative() -> None:
    machines = (LatencyMachine("x", "a", 1.0, 4), LatencyMachine("y", "a", 1.0, 4))
    with pytest.raises(InfeasibleError, match="2x2"):
        LatencyProblem(machines, np.zeros((2, 3)), 4)
    with pytest.raises(InfeasibleError, match="non-negative"):
        LatencyProblem(machines, np.array([[0.0, -1.0], [1.0, 0.0]]), 4)


def test_one_machine_that_holds_everything_has_no_links() -> None:
    machines = [LatencyMachine("big", "a", 1.5, 80), LatencyMachine("small", "a", 1.0, 10)]
    problem = LatencyProblem.from_regions(machines, RTT, num_layers=80)
    schedule = solve(problem)
    # Ten layers on the faster card in the same region save 5 ms for two 1 ms hops: 105 + 10 + 2 < 120.
    assert {s.machine: s.end - s.start for s in schedule.stages} == {"big": 70, "small": 10}
    assert schedule.tpot_ms == pytest.approx(70 * 1.5 + 10 * 1.0 + 2.0)
    far = LatencyProblem.from_regions([machines[0], LatencyMachine("small", "b", 1.0, 10)], RTT, 80)
    assert solve(far).stages == (LatencyStage("big", 0, 80),)
    assert solve(far).link_ms == 0.0


def test_ours_beats_the_greedy_split() -> None:
    """The greedy gives each machine, in visiting order, all the remaining layers it can hold, so the slow
    machine in the middle of its best cycle is filled; ours splits the same cycle fastest first."""
    machines = (
        LatencyMachine("m0", "a", 2.0, 4),
        LatencyMachine("m1", "a", 1.0, 4),
        LatencyMachine("m2", "a", 4.0, 2),
    )
    link = np.array([[0.0, 8.0, 1.0], [8.0, 0.0, 2.0], [1.0, 2.0, 0.0]])
    problem = LatencyProblem(machines, link, 7)
    greedy, ours = solve(problem, "greedy"), solve(problem)
    assert {s.machine: s.end - s.start for s in greedy.stages} == {"m1": 4, "m2": 2, "m0": 1}
    assert greedy.tpot_ms == pytest.approx(4 + 8 + 2 + 11)
    assert {s.machine: s.end - s.start for s in ours.stages} == {"m1": 4, "m2": 1, "m0": 2}
    assert ours.tpot_ms == pytest.approx(4 + 4 + 4 + 11)
    assert ours.optimal


def test_unknown_method_and_bad_keywords() -> None:
    problem = LatencyProblem.from_regions([LatencyMachine("x", "a", 1.0, 4)], RTT, 4)
    with pytest.raises(ValueError, match="unknown method 'fastest'"):
        solve(problem, "fastest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="width"):
        solve(problem, width=0)
    with pytest.raises(ValueError, match="permutations"):
        solve(problem, "random", permutations=0)
