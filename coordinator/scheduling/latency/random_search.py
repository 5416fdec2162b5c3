"""The report's random-search baseline: random machine orders, each filled in order, best cycle kept.

Each permutation is turned into a cycle the way the greedy heuristic builds one: machines in turn take as many
of the remaining layers as fit, and the cycle is the prefix that covers the model. Seeded, so the same seed
gives the same schedule.
"""

from __future__ import annotations

import numpy as np

from coordinator.scheduling.latency.problem import LatencyProblem
from coordinator.scheduling.latency.schedule import LatencySchedule, in_order_split, make_schedule


def random_search(problem: LatencyProblem, permutations: int = 64, seed: int = 0) -> LatencySchedule:
    """Best of `permutations` random orders (vectorised over all of them at once)."""
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    problem.check_feasible()
    n_layers = problem.num_layers
    holders = np.flatnonzero(problem.capacity > 0)  # machines with no room never take a layer
    rng = np.random.default_rng(seed)
    perms = holders[np.argsort(rng.random((permutations, len(holders))), axis=1)]
    caps = problem.capacity[perms]
    before = np.cumsum(caps, axis=1) - caps
    takes = np.clip(n_layers - before, 0, caps)
    compute = (takes * problem.layer_ms[perms]).sum(axis=1)
    stages = (takes > 0).sum(axis=1)  # the cycle is this prefix of the permutation
    rows = np.arange(permutations)
    inner = problem.link_ms[perms[:, :-1], perms[:, 1:]] * (np.arange(len(holders) - 1) < stages[:, None] - 1)
    closing = np.where(stages > 1, problem.link_ms[perms[rows, stages - 1], perms[:, 0]], 0.0)
    tpot = compute + inner.sum(axis=1) + closing
    best = int(np.argmin(tpot))
    order, layers = in_order_split(problem, perms[best].tolist())
    return make_schedule(problem, order, layers, f"random{permutations}")
