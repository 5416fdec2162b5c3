"""Ren 2024's greedy shortest-cycle heuristic with memory constraints, and its edge-augmented one-pass form.

Our reading of the report: a shortest-path search over states (machine v, layers covered c), meaning "v is
the latest stage and layers [0, c) are placed". Entering machine v from u costs the link u -> v plus v's
compute for the layers it takes, and v takes as many of the remaining layers as its memory holds. A state
reached with c = L is closed by the link back to the first stage. The search is label-setting: each state
keeps the one path that reached it first, and a path may not revisit a machine, so it is greedy (a state's
path can block a better continuation, and the split is fixed by the visiting order), not exact in general.

- `greedy`: one search per start machine, keeping the best cycle (N searches).
- `greedy_augmented`: one search from a virtual source with an edge to every machine, and closing edges into
  a virtual sink; every state keeps a single path whatever its start, so it is about N times cheaper and can
  lose a little TPOT (the closing edge is not known when a state is settled).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from coordinator.scheduling.latency.problem import LatencyProblem
from coordinator.scheduling.latency.schedule import LatencySchedule, make_schedule

Cycle = tuple[tuple[int, ...], tuple[int, ...]]


def _shortest_cycle(
    problem: LatencyProblem, starts: Sequence[int], bound: float
) -> tuple[float, Cycle | None]:
    """Label-setting search from `starts` at once; returns (TPOT, (order, layers)) of the first cycle closed,
    or (bound, None) when no cycle beats `bound`."""
    n_layers = problem.num_layers
    cap = [m.capacity for m in problem.machines]
    t = [m.layer_ms for m in problem.machines]
    link = problem.link_ms.tolist()
    n = len(cap)
    tie = 0
    # Entries: (cost, tie, machine, covered, order, layers); machine -1 marks a closed cycle in the sink.
    heap: list[tuple[float, int, int, int, tuple[int, ...], tuple[int, ...]]] = []
    tentative: dict[tuple[int, int], float] = {}
    for s in starts:
        take = min(cap[s], n_layers)
        if take > 0:
            heapq.heappush(heap, (take * t[s], tie, s, take, (s,), (take,)))
            tie += 1
    settled: set[tuple[int, int]] = set()
    while heap:
        cost, _, u, covered, order, layers = heapq.heappop(heap)
        if cost >= bound:
            break
        if u < 0:
            return cost, (order, layers)
        if (u, covered) in settled:
            continue
        settled.add((u, covered))
        if covered == n_layers:
            closing = 0.0 if len(order) == 1 else link[u][order[0]]
            heapq.heappush(heap, (cost + closing, tie, -1, covered, order, layers))
            tie += 1
            continue
        row = link[u]
        for v in range(n):
            if cap[v] == 0 or v in order:
                continue
            take = min(cap[v], n_layers - covered)
            state = (v, covered + take)
            new_cost = cost + row[v] + take * t[v]
            if state in settled or new_cost >= tentative.get(state, math.inf):
                continue
            tentative[state] = new_cost
            heapq.heappush(heap, (new_cost, tie, v, covered + take, (*order, v), (*layers, take)))
            tie += 1
    return bound, None


def greedy(problem: LatencyProblem) -> LatencySchedule:
    """The heuristic as published: one shortest-cycle search per start machine, best cycle kept."""
    problem.check_feasible()
    best, found = math.inf, None
    for s in range(len(problem.machines)):
        cost, cycle = _shortest_cycle(problem, [s], best)
        if cycle is not None:
            best, found = cost, cycle
    # A path can go on while layers remain (the machines off it hold them): the first search from a machine
    # with room closes a cycle.
    assert found is not None
    return make_schedule(problem, found[0], found[1], "greedy")


def one_pass_cycle(problem: LatencyProblem) -> Cycle:
    """(order, layers) of the one-pass search: a virtual source joined to every machine."""
    _, found = _shortest_cycle(problem, range(len(problem.machines)), math.inf)
    assert found is not None  # every machine with room is a start (see `greedy`)
    return found


def greedy_augmented(problem: LatencyProblem) -> LatencySchedule:
    """The report's one-pass variant."""
    problem.check_feasible()
    order, layers = one_pass_cycle(problem)
    return make_schedule(problem, order, layers, "greedy-augmented")
