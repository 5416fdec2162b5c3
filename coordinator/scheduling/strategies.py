"""Every planning strategy behind one name, for the CLI, the simulator and the benchmarks.

"ren" is the Ren 2024 latency scheduler (`coordinator.scheduling.latency`, imported only when asked for):
one pipeline minimizing the time per output token of a single request.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.scheduling.allocation import AllocationOptions, allocate, capacities, stage_capable
from coordinator.scheduling.baselines import even_split, hypercluster, parallax_shipped, petals
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import layer_ms
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec
from coordinator.scheduling.plan import Pipeline, Plan, Stage

STRATEGIES = ("parallax", "parallax-shipped", "hypercluster", "petals", "even", "ren")


def make_plan(
    strategy: str, cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE
) -> Plan:
    """The plan `strategy` makes for `cluster`; SchedulingError when it cannot make one."""
    planners: dict[str, Callable[[Cluster, ModelSpec, float], Plan]] = {
        "parallax": lambda c, m, r: allocate(c, m, AllocationOptions(kv_reserve=r)),
        "parallax-shipped": parallax_shipped,
        "hypercluster": hypercluster,
        "petals": petals,
        "even": even_split,
        "ren": ren,
    }
    if strategy not in planners:
        raise SchedulingError(f"strategy: unknown {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return planners[strategy](cluster, model, kv_reserve)


def ren(cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> Plan:
    """One pipeline from the Ren 2024 scheduler (our variant, "ours"), which minimizes single-request TPOT.

    Its capacities are in decoder layers; we keep room for both the embedding and the head on every GPU,
    since the scheduler may make any of them the first or the last stage.
    """
    from coordinator.scheduling.latency import InfeasibleError, LatencyMachine, LatencyProblem, solve

    caps = capacities(cluster, model, kv_reserve)
    reserved = model.embedding_units + model.head_units
    machines = [
        LatencyMachine(g.id, g.region, layer_ms(g, model), caps[g.id] - reserved)
        for g in stage_capable(cluster, caps, model)
        if caps[g.id] > reserved
    ]
    try:
        problem = LatencyProblem.from_regions(machines, cluster.rtt_ms, model.num_layers)
        problem.check_feasible()
        schedule = solve(problem)
    except InfeasibleError as err:
        raise SchedulingError(f"ren: {err}") from None
    stages = tuple(Stage(s.machine, s.start, s.end) for s in schedule.stages)
    notes = {"tpot_ms": schedule.tpot_ms, "optimal": schedule.optimal}
    return Plan("ren", model.num_layers, (Pipeline(stages),), routing="round-robin", notes=notes)
