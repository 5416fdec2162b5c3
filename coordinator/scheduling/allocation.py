"""Phase 1 of Parallax: how many pipeline replicas to build, from which GPUs, holding which layers.

For each region (region-bounded first), the exact minimal-stage search (`stages.py`) gives s*(k), the fewest
GPUs forming k pipelines, and k maximizes Z(k) = k^alpha / (T_comp + (s*(k)/k) * r_RTT), with T_comp one
pass of the model at the region's mean per-layer time and r_RTT the region's round trip. GPUs of regions that
cannot complete a pipeline are pooled into cross-region pipelines the same way (r_RTT: their mean round
trip). Each pipeline is then balanced by water-filling its layers (in proportion to memory by default, see
AllocationOptions), and GPUs left over join as extra shards on the bottleneck layers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, islice
from typing import Literal

from coordinator.scheduling.cluster import Cluster, Gpu
from coordinator.scheduling.costs import step_times
from coordinator.scheduling.coverage import Coverage
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec
from coordinator.scheduling.plan import Pipeline, Plan, Stage
from coordinator.scheduling.stages import DEFAULT_WIDTH, PatternCache, StagePlan, StageSearch
from coordinator.scheduling.waterfill import water_fill

# Water-filling results by the units (capacities clipped to a replica) and then the speeds of the stages.
Splits = dict[tuple[float, ...], list[int]]


@dataclass(frozen=True)
class AllocationOptions:
    """alpha weighs replicas against stages in Z(k); kv_reserve is the memory share kept for KV cache and
    runtime; width bounds the search frontier (levels past it are proven on demand).

    `balance` is what water-filling splits layers by. "memory" (the default) gives every stage the same KV
    room per layer it holds: offline decode over slow links is bound by how many sequences the KV cache holds
    (DeServe), and the pipeline holds as many as its tightest stage. "speed" (1 / per-layer time, Parallax's
    compute-proportional split) evens out stage times instead; it simulated slightly slower on every
    benchmark cluster (bench/allocation_quality.py).
    """

    alpha: float = 2.0
    kv_reserve: float = DEFAULT_KV_RESERVE
    width: int = DEFAULT_WIDTH
    place_leftovers: bool = True
    balance: Literal["memory", "speed"] = "memory"


@dataclass(frozen=True)
class GroupChoice:
    """The pipelines chosen for one group of GPUs (a region, or the cross-region pool)."""

    k: int
    stages: int
    exact: bool
    pipelines: tuple[tuple[Gpu, ...], ...]


DEFAULT_OPTIONS = AllocationOptions()


def allocate(cluster: Cluster, model: ModelSpec, options: AllocationOptions | None = None) -> Plan:
    """Parallax Phase 1 as the paper describes it; raises SchedulingError when no pipeline can be formed."""
    options = options or DEFAULT_OPTIONS
    caps = capacities(cluster, model, options.kv_reserve)
    step_ms = step_times(cluster.gpus, model)
    regions: dict[str, list[Gpu]] = defaultdict(list)
    room: dict[str, int] = defaultdict(int)  # layer units per region
    for gpu in stage_capable(cluster, caps, model):
        regions[gpu.region].append(gpu)
        room[gpu.region] += caps[gpu.id]
    chosen: list[GroupChoice] = []
    patterns: PatternCache = {}
    pool: list[Gpu] = []
    per_region: dict[str, int] = {}
    need = model.units_needed
    for region in sorted(regions):
        group = regions[region]
        if room[region] < need:  # cannot complete a pipeline on its own
            per_region[region] = 0
            pool.extend(group)
            continue
        group.sort(key=lambda g: (step_ms[g.id], g.id))
        choice = choose_pipelines(group, caps, step_ms, model, cluster.rtt(region, region), options, patterns)
        per_region[region] = choice.k if choice else 0
        taken = {g.id for p in choice.pipelines for g in p} if choice else set()
        pool.extend(g for g in group if g.id not in taken)  # what the region cannot complete on its own
        if choice is not None:
            chosen.append(choice)
    cross = 0
    if sum(caps[g.id] for g in pool) >= need:  # less room than one replica forms no pipeline
        rank = region_tour(pool, cluster)

        def tour_order(gpu: Gpu) -> int:
            return rank[gpu.region]

        ordered = sorted(pool, key=tour_order)
        rtt = mean_rtt(ordered, cluster)
        choice = choose_pipelines(ordered, caps, step_ms, model, rtt, options, patterns, tour_order)
        if choice is not None:
            chosen.append(choice)
            cross = choice.k
    if not chosen:
        total = sum(caps[g.id] for g in cluster.gpus)
        raise SchedulingError(
            f"cluster: too small to hold one replica ({total} layer units in all, a replica needs "
            f"{model.units_needed})"
        )
    if options.balance == "memory":
        speed = {g.id: g.memory_bytes for g in cluster.gpus}
    else:
        speed = {gpu: 1.0 / ms for gpu, ms in step_ms.items()}
    splits: Splits = {}  # pipelines of the same GPU types split the same way
    pipelines = tuple(balance(p, caps, speed, model, splits) for c in chosen for p in c.pipelines)
    used = {gpu.id for c in chosen for p in c.pipelines for gpu in p}
    extra = place_leftovers(cluster, model, caps, step_ms, pipelines, used) if options.place_leftovers else ()
    notes = {
        "pipelines_per_region": per_region,
        "cross_region_pipelines": cross,
        "total_stages": sum(c.stages for c in chosen),
        "s_star_exact": all(c.exact for c in chosen),
        "alpha": options.alpha,
    }
    return Plan("parallax", model.num_layers, pipelines, extra, "dag", notes)


def capacities(cluster: Cluster, model: ModelSpec, kv_reserve: float) -> dict[str, int]:
    """Layer units each GPU can hold after the KV and runtime reserve (once per distinct memory size)."""
    by_memory: dict[float, int] = {}
    out: dict[str, int] = {}
    for gpu in cluster.gpus:
        memory = gpu.memory_bytes
        units = by_memory.get(memory)
        if units is None:
            units = by_memory[memory] = model.capacity_units(memory, kv_reserve)
        out[gpu.id] = units
    return out


def stage_capable(cluster: Cluster, caps: dict[str, int], model: ModelSpec) -> list[Gpu]:
    """GPUs that can be any stage of a pipeline: room for a layer next to the embedding or the head."""
    least = 1 + max(model.embedding_units, model.head_units)
    return [g for g in cluster.gpus if caps[g.id] >= least]


def choose_pipelines(
    gpus: Sequence[Gpu],
    caps: dict[str, int],
    step_ms: dict[str, float],
    model: ModelSpec,
    rtt_ms: float,
    options: AllocationOptions,
    shared: PatternCache,
    stage_order: Callable[[Gpu], int] | None = None,
) -> GroupChoice | None:
    """The k maximizing Z(k) over this group, with its minimal-stage pipelines (None: not even one); the
    stages of each in capacity order, or sorted (stably) by `stage_order` when given."""
    search = StageSearch([caps[g.id] for g in gpus], model.units_needed, options.width, shared)
    t_comp = model.num_layers * sum(step_ms[g.id] for g in gpus) / len(gpus)

    def score(k: int, stages: int) -> float:
        return math.pow(k, options.alpha) / (t_comp + stages / k * rtt_ms)

    found = [(score(k, stages), k) for k in range(1, search.k_found + 1) if (stages := search.upper(k))]
    best = max(found, default=None)
    exact = search.complete
    if not exact:  # some s*(k) are upper bounds: prove every k whose optimistic score could still win
        exact = True
        lows = {k: search.lower(k) for k in range(1, search.k_bound + 1)}
        for optimistic, k in sorted(((score(k, low), k) for k, low in lows.items() if low), reverse=True):
            if best is not None and optimistic <= best[0]:
                break
            plan = search.exact(k)
            exact = exact and (plan is None or plan.exact)
            if plan is not None and (best is None or score(k, plan.stages) > best[0]):
                best = (score(k, plan.stages), k)
    if best is None:
        return None
    plan = search.plan(best[1])
    assert plan is not None
    pipelines = assign(gpus, caps, search, plan)
    if stage_order is not None:
        pipelines = tuple(tuple(sorted(p, key=stage_order)) for p in pipelines)
    return GroupChoice(best[1], plan.stages, exact, pipelines)


def assign(
    gpus: Sequence[Gpu], caps: dict[str, int], search: StageSearch, plan: StagePlan
) -> tuple[tuple[Gpu, ...], ...]:
    """Real GPUs for each pattern: within a capacity class, in the order given (fastest or nearest first)."""
    need = search.need
    by_size: dict[int, list[Gpu]] = {size: [] for size in search.sizes}
    for gpu in gpus:
        by_size[min(caps[gpu.id], need)].append(gpu)
    queues = [iter(by_size[size]) for size in search.sizes]
    # each pipeline takes the next n GPUs of each class (islice draws exactly n from the class's queue)
    return tuple(tuple(chain.from_iterable(map(islice, queues, pattern))) for pattern in plan.patterns)


def balance(
    gpus: Sequence[Gpu], caps: dict[str, int], speed: dict[str, float], model: ModelSpec, splits: Splits
) -> Pipeline:
    """Water-fills a pipeline's layer units over its GPUs, in the given stage order, by `speed`."""
    need = model.units_needed
    units = [min(caps[g.id], need) for g in gpus]
    speeds = [speed[g.id] for g in gpus]
    key = (*units, *speeds)
    shares = splits.get(key)
    if shares is None:
        lows = [need]
        if len(gpus) > 1:
            lows = [model.embedding_units + 1, *[1] * (len(gpus) - 2), model.head_units + 1]
        shares = splits[key] = water_fill(units, speeds, need, lows)
    stages: list[Stage] = []
    start = 0
    for gpu, end in zip(gpus, accumulate(shares), strict=True):
        stages.append(Stage(gpu.id, *model.layers_of_units(start, end)))
        start = end
    return Pipeline(tuple(stages))


def place_leftovers(
    cluster: Cluster,
    model: ModelSpec,
    caps: dict[str, int],
    step_ms: dict[str, float],
    pipelines: Sequence[Pipeline],
    used: set[str],
) -> tuple[Stage, ...]:
    """Unused GPUs, largest first, each as an extra shard on the then-weakest layers."""
    if len(used) == len(cluster.gpus):
        return ()
    coverage = Coverage((stage for p in pipelines for stage in p.stages), step_ms, model)
    extra: list[Stage] = []
    for gpu in sorted((g for g in cluster.gpus if g.id not in used), key=lambda g: (-caps[g.id], g.id)):
        stage = coverage.bottleneck_shard(gpu.id, caps[gpu.id])
        if stage is not None:
            coverage.add(stage)
            extra.append(stage)
    return tuple(extra)


def region_tour(gpus: Sequence[Gpu], cluster: Cluster) -> dict[str, int]:
    """A rank per region, nearest-neighbour order, so stages sorted by it hop between close regions."""
    regions = sorted({g.region for g in gpus})
    tour = [regions.pop(0)]
    while regions:
        nearest = min(regions, key=lambda r: cluster.rtt(tour[-1], r))
        regions.remove(nearest)
        tour.append(nearest)
    return {region: i for i, region in enumerate(tour)}


def mean_rtt(gpus: Sequence[Gpu], cluster: Cluster) -> float:
    """Mean round trip over pairs of distinct GPUs of the group."""
    counts: dict[str, int] = defaultdict(int)
    for gpu in gpus:
        counts[gpu.region] += 1
    n = len(gpus)
    if n < 2:
        return 0.0
    total = 0.0
    for a, ca in counts.items():
        for b, cb in counts.items():
            if a != b:
                total += ca * cb * cluster.rtt(a, b)
            elif ca > 1:  # a region with one GPU has no pair inside it
                total += ca * (ca - 1) * cluster.rtt(a, a)
    return total / (n * (n - 1))
