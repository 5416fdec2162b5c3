"""Schedules (a cycle of stages with contiguous layer ranges), their TPOT, and the layer split of a cycle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.scheduling.latency.problem import InfeasibleError, LatencyProblem


@dataclass(frozen=True)
class LatencyStage:
    """Machine `machine` (its id) holds layers [start, end), zero-based and half-open."""

    machine: str
    start: int
    end: int


@dataclass(frozen=True)
class LatencySchedule:
    """Stages in pipeline order (the first holds layer 0; the last sends the token back to the first).

    `optimal` is True only when the method proved that no schedule has a lower TPOT.
    """

    stages: tuple[LatencyStage, ...]
    tpot_ms: float
    compute_ms: float
    link_ms: float
    method: str
    optimal: bool = False


def cycle_cost(problem: LatencyProblem, order: Sequence[int], layers: Sequence[int]) -> tuple[float, float]:
    """(compute ms, link ms) of the cycle visiting machine indices `order` holding `layers` layers each."""
    t = problem.layer_ms
    compute = float(sum(t[i] * n for i, n in zip(order, layers, strict=True)))
    if len(order) == 1:
        return compute, 0.0
    link = problem.link_ms
    hops = float(sum(link[order[k], order[(k + 1) % len(order)]] for k in range(len(order))))
    return compute, hops


def fastest_first_split(problem: LatencyProblem, order: Sequence[int]) -> list[int]:
    """The compute-optimal split over a fixed set of machines: one layer each, the rest to the fastest first.

    TPOT depends on the set and the cycle order only through the links, so for a given cycle this split is
    optimal: any other moves a layer from a faster machine with spare memory to a slower one.
    """
    n_layers = problem.num_layers
    if len(order) > n_layers:
        raise InfeasibleError(f"{len(order)} stages cannot each hold one of {n_layers} layers")
    cap = problem.capacity
    layers = dict.fromkeys(order, 1)
    left = n_layers - len(order)
    for i in sorted(order, key=lambda i: (problem.machines[i].layer_ms, i)):
        take = min(left, int(cap[i]) - 1)
        layers[i] += take
        left -= take
    if left > 0 or any(cap[i] < 1 for i in order):
        raise InfeasibleError("the machines of this cycle cannot hold the model")
    return [layers[i] for i in order]


def in_order_split(problem: LatencyProblem, order: Sequence[int]) -> tuple[list[int], list[int]]:
    """Each machine in turn takes as many of the remaining layers as fit; returns (used prefix, layers)."""
    left = problem.num_layers
    used: list[int] = []
    layers: list[int] = []
    for i in order:
        if left == 0:
            break
        take = min(left, problem.machines[i].capacity)
        if take > 0:
            used.append(i)
            layers.append(take)
            left -= take
    if left > 0:
        raise InfeasibleError("these machines cannot hold the model")
    return used, layers


def make_schedule(
    problem: LatencyProblem,
    order: Sequence[int],
    layers: Sequence[int],
    method: str,
    optimal: bool = False,
) -> LatencySchedule:
    """The schedule of a cycle; checks every stage holds at least one layer within its memory."""
    if len(set(order)) != len(order) or not order:
        raise ValueError("a cycle visits at least one machine, each at most once")
    if sum(layers) != problem.num_layers:
        raise ValueError(f"the stages hold {sum(layers)} layers, the model has {problem.num_layers}")
    stages = []
    start = 0
    for i, n in zip(order, layers, strict=True):
        machine = problem.machines[i]
        if not 1 <= n <= machine.capacity:
            raise ValueError(f"machine {machine.id} cannot hold {n} layers (capacity {machine.capacity})")
        stages.append(LatencyStage(machine.id, start, start + n))
        start += n
    compute, link = cycle_cost(problem, order, layers)
    return LatencySchedule(tuple(stages), compute + link, compute, link, method, optimal)
