"""The baselines our Phase 1 + 2 is measured against, each as its authors describe or ship it.

- `hypercluster`: HyperCluster's Algorithm 1, as written: one ring of every GPU, sorted by memory
  (descending, ties by id); GPU i < N gets max(1, floor(m_i / sum m * L)) layers, the last one the rest.
  It ignores capacity, so it fails on clusters it cannot fit; we say so instead of repairing it.
- `petals`: each GPU, in join order, serves as many consecutive layers as it holds, starting where the
  sorted serving rates of the covered layers are lowest (Petals' block choice); clients route over spans.
- `even_split`: a static even split (HexGen-like): the fewest stages s that let every GPU hold L/s layers,
  consecutive GPUs (by region) grouped into pipelines of s, routed round-robin.
- `parallax_shipped`: Parallax's released scheduler: k maximizing k^2/s*(k) over the whole cluster (no
  regions, no latency term), GPUs taken in join order rather than by speed (unsorted), layers water-filled by
  TFLOPS, requests sent round-robin over the fixed pipelines. Its DP is exact for s*(k) in any order, so our
  search gives the same s*(k) (in milliseconds instead of its exponential time).
"""

from __future__ import annotations

import math

from coordinator.scheduling.allocation import assign, balance, capacities, region_tour, stage_capable
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import step_times
from coordinator.scheduling.coverage import Coverage
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec
from coordinator.scheduling.plan import Pipeline, Plan, Stage
from coordinator.scheduling.routing import SpanGraph
from coordinator.scheduling.stages import StageSearch


def hypercluster(cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> Plan:
    ring = sorted(cluster.gpus, key=lambda g: (-g.memory_bytes, g.id))
    total = sum(g.memory_bytes for g in ring)
    L = model.num_layers
    layers = [max(1, math.floor(g.memory_bytes / total * L)) for g in ring[:-1]]
    layers.append(L - sum(layers))
    if layers[-1] < 1:
        raise SchedulingError(
            f"hypercluster: Algorithm 1 gives the last GPU ({ring[-1].id}) {layers[-1]} layers: "
            f"{len(ring)} GPUs are more than {L} layers can spread over"
        )
    stages, start = [], 0
    for gpu, n in zip(ring, layers, strict=True):
        stages.append(Stage(gpu.id, start, start + n))
        start += n
    plan = Plan("hypercluster", L, (Pipeline(tuple(stages)),), routing="round-robin")
    try:
        plan.validate(cluster, model, kv_reserve)
    except SchedulingError as err:
        raise SchedulingError(f"hypercluster: Algorithm 1 overfills a GPU: {err}") from None
    return plan


def petals(cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> Plan:
    caps = capacities(cluster, model, kv_reserve)
    step_ms = step_times(cluster.gpus, model)
    coverage = Coverage((), step_ms, model)
    spans: list[Stage] = []
    for gpu in cluster.gpus:
        options = [span for s in range(model.num_layers) if (span := _span(gpu.id, s, caps[gpu.id], model))]
        if options:
            best = min(options, key=lambda sp: (sorted(coverage.rates[sp.start : sp.end]), sp.start))
            coverage.add(best)
            spans.append(best)
    pipelines: list[Pipeline] = []
    graph = SpanGraph(spans, cluster, step_ms, model.num_layers)
    taken: set[str] = set()
    while chain := graph.cheapest_chain(blocked=taken):
        pipelines.append(Pipeline(chain.stages))
        taken |= {stage.gpu for stage in chain.stages}
    free = [s for s in spans if s.gpu not in taken]
    if not pipelines:
        raise SchedulingError("petals: the servers' spans do not cover every layer")
    notes = {"spans": {s.gpu: [s.start, s.end] for s in spans}}
    return Plan("petals", model.num_layers, tuple(pipelines), tuple(free), "petals", notes)


def _span(gpu: str, start: int, capacity: int, model: ModelSpec) -> Stage | None:
    """The longest span from `start` that fits, counting the embedding and head where it holds them."""
    room = capacity - (model.embedding_units if start == 0 else 0)
    end = min(model.num_layers, start + room)
    if end == model.num_layers and end - start + model.head_units > room:
        end = start + room - model.head_units
    return Stage(gpu, start, end) if end > start else None


def even_split(cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> Plan:
    caps = capacities(cluster, model, kv_reserve)
    members = stage_capable(cluster, caps, model)
    rank = region_tour(members, cluster) if members else {}
    members.sort(key=lambda g: (rank[g.region], g.id))
    L = model.num_layers
    for stages in range(1, len(members) + 1):
        sizes = [L // stages + (1 if i < L % stages else 0) for i in range(stages)]
        need = [sizes[0] + model.embedding_units, *sizes[1:]]
        need[-1] += model.head_units
        smallest = min((caps[g.id] for g in members), default=0)
        if max(need) <= smallest:
            break
    else:
        raise SchedulingError("even: no even split fits the smallest GPU")
    pipelines = []
    for k in range(len(members) // stages):
        group = members[k * stages : (k + 1) * stages]
        bounds = [sum(sizes[:i]) for i in range(stages + 1)]
        pipelines.append(Pipeline(tuple(Stage(g.id, bounds[i], bounds[i + 1]) for i, g in enumerate(group))))
    return Plan("even", L, tuple(pipelines), routing="round-robin", notes={"stages_per_pipeline": stages})


def parallax_shipped(cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> Plan:
    caps = capacities(cluster, model, kv_reserve)
    members = stage_capable(cluster, caps, model)  # join order: the shipped code does not sort
    search = StageSearch([caps[g.id] for g in members], model.units_needed)
    best: tuple[float, int] | None = None
    for k in range(1, search.k_bound + 1):
        plan = search.exact(k)
        if plan is not None and (best is None or k * k / plan.stages > best[0]):
            best = (k * k / plan.stages, k)
    if best is None:
        raise SchedulingError("parallax-shipped: the cluster cannot hold one replica")
    stage_plan = search.plan(best[1])
    assert stage_plan is not None
    order = {g.id: i for i, g in enumerate(cluster.gpus)}
    speed = {g.id: g.tflops for g in members}
    pipelines = tuple(
        balance(sorted(p, key=lambda g: order[g.id]), caps, speed, model, {})
        for p in assign(members, caps, search, stage_plan)
    )
    notes = {"k": best[1], "total_stages": stage_plan.stages, "s_star_exact": stage_plan.exact}
    return Plan("parallax-shipped", model.num_layers, pipelines, routing="round-robin", notes=notes)
