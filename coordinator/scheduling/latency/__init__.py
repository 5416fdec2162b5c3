"""Latency scheduling (Ren 2024): one pipeline for one request, minimising time per output token.

Usage::

    from coordinator.scheduling.latency import LatencyMachine, LatencyProblem, solve

    machines = [LatencyMachine("gpu-0", "us-east-1", layer_ms=1.211, capacity=45), ...]
    problem = LatencyProblem.from_regions(machines, rtt_ms, num_layers=80)  # rtt_ms[a][b], round trip
    schedule = solve(problem)  # method="ours" by default
    for stage in schedule.stages:  # pipeline order; stage.machine is the id, layers [start, end)
        ...

Methods (all return a feasible `LatencySchedule` or raise; none reads files or the network):

- "ours": width-bounded branch and bound over cycles with an optimal layer split (see `search`); exact, and
  marked `optimal`, whenever it finishes within `width`.
- "greedy": the report's shortest-cycle heuristic with memory constraints, one search per start machine.
- "greedy-augmented": the report's one-pass variant (a virtual source joined to every machine).
- "ilp": the integer program on scipy's HiGHS, stopped after `time_limit_s`; `optimal` if HiGHS proved it.
- "random": best of `permutations` random machine orders, seeded by `seed`.
"""

from __future__ import annotations

from typing import Literal

from coordinator.scheduling.latency.greedy import greedy, greedy_augmented
from coordinator.scheduling.latency.ilp import SolverTimeout, ilp
from coordinator.scheduling.latency.problem import InfeasibleError, LatencyMachine, LatencyProblem
from coordinator.scheduling.latency.random_search import random_search
from coordinator.scheduling.latency.schedule import LatencySchedule, LatencyStage
from coordinator.scheduling.latency.search import ours

Method = Literal["ours", "greedy", "greedy-augmented", "ilp", "random"]
METHODS: tuple[Method, ...] = ("ours", "greedy", "greedy-augmented", "ilp", "random")

__all__ = [
    "METHODS",
    "InfeasibleError",
    "LatencyMachine",
    "LatencyProblem",
    "LatencySchedule",
    "LatencyStage",
    "Method",
    "SolverTimeout",
    "solve",
]


def solve(
    problem: LatencyProblem,
    method: Method = "ours",
    *,
    width: int | None = None,
    time_limit_s: float = 16.0,
    permutations: int = 64,
    seed: int = 0,
) -> LatencySchedule:
    """The schedule of `problem` by `method`.

    Keywords apply to one method each: `width` to "ours" (partial cycles kept per search level; larger is
    slower and closer to exact; by default 2048, less past 44 machines), `time_limit_s` to "ilp",
    `permutations` and `seed` to "random".

    Raises InfeasibleError when the machines cannot hold the model, SolverTimeout when "ilp" finds no schedule
    in time, ValueError for an unknown method or a bad keyword value.
    """
    if method == "ours":
        return ours(problem, width)
    if method == "greedy":
        return greedy(problem)
    if method == "greedy-augmented":
        return greedy_augmented(problem)
    if method == "ilp":
        return ilp(problem, time_limit_s)
    if method == "random":
        return random_search(problem, permutations, seed)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
