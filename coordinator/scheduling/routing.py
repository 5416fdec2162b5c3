"""Phase 2: which chain of shards serves a work unit.

`ShardGraph.cheapest_chain` is Parallax's chain selection: a DP over the shard-level DAG (an edge joins
shard u to shard v when v starts where u ends). A shard costs its GPU's per-layer time times *all* the layers
it holds (a request runs every layer a GPU holds before moving on), inflated by the GPU's live queue depth;
an edge costs the one-way latency between the two GPUs' regions (none on one GPU). `chain_cost` prices one
given chain, with any links (the coordinator's router prices its pipelines with measured ones).
`RoundRobin` cycles over fixed pipelines (Parallax's production default). `SpanGraph` is Petals-style
routing, where a server may serve any part of its span, so chains can switch servers at any shard boundary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from itertools import cycle

import numpy as np

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import REFERENCE_BATCH
from coordinator.scheduling.plan import Pipeline, Stage

# How strongly queue depth inflates a shard's cost. 0 strands KV memory (requests crowd the cheapest chains
# and cross-paired chains block complete ones); 1 spreads work over many stitched chains whose microbatches
# no longer batch together. 0.25 gave the highest simulated throughput on every benchmark cluster.
LOAD_WEIGHT = 0.25


@dataclass(frozen=True)
class Chain:
    """The stages a work unit visits, in order, and the estimated cost (ms) the router minimized."""

    stages: tuple[Stage, ...]
    cost_ms: float


def chain_cost(
    stages: Sequence[Stage],
    links: Cluster,
    step_ms: Mapping[str, float],
    load: Mapping[str, float] | None = None,
    load_weight: float = LOAD_WEIGHT,
) -> float:
    """What Phase 2 charges for a work unit run through `stages` in order: each stage's layers times its GPU's
    per-layer time, inflated by the GPU's queue depth as in `ShardGraph`, plus the one-way latency of each hop
    (`links.one_way_ms`, which may be measured per pair of GPUs)."""
    total = 0.0
    for i, stage in enumerate(stages):
        if i:
            total += links.one_way_ms(stages[i - 1].gpu, stage.gpu)
        depth = load.get(stage.gpu, 0.0) if load else 0.0
        total += stage.layers * step_ms[stage.gpu] * (1.0 + load_weight * depth / REFERENCE_BATCH)
    return total


class ShardGraph:
    """The shard DAG of a placement, built once in time linear in its shards; `cheapest_chain` runs per work
    unit, in time linear in the shards plus the layer boundaries times the regions squared.

    An edge's latency depends only on the two GPUs' regions (zero when both shards are on one GPU), so the DP
    never walks the quadratic set of edges: at each layer boundary it keeps the cheapest arrival per region,
    and every shard starting there enters from the cheapest region (`tests/scheduling/test_routing.py` holds
    the edge-by-edge DP as the reference it must equal)."""

    def __init__(
        self, shards: Sequence[Stage], cluster: Cluster, step_ms: Mapping[str, float], num_layers: int
    ) -> None:
        self.shards = sorted(shards, key=lambda s: (s.start, s.end, s.gpu))
        self.num_layers = num_layers
        self.cost = np.array([s.layers * step_ms[s.gpu] for s in self.shards], dtype=float)
        gpus = sorted({s.gpu for s in self.shards})
        self._gpu_index = {gpu: i for i, gpu in enumerate(gpus)}
        self._gpu = np.array([self._gpu_index[s.gpu] for s in self.shards], dtype=np.int64)
        regions = sorted({cluster.gpu(gpu).region for gpu in gpus})
        region_index = {region: i for i, region in enumerate(regions)}
        self._region = np.array(
            [region_index[cluster.gpu(s.gpu).region] for s in self.shards], dtype=np.int64
        )
        self._link = np.array([[cluster.rtt(a, b) / 2.0 for b in regions] for a in regions], dtype=float)
        self._levels = _Levels(self.shards, self._region, self._gpu)

    def cheapest_chain(
        self,
        load: Mapping[str, float] | None = None,
        load_weight: float = LOAD_WEIGHT,
        blocked: Container[str] = (),
    ) -> Chain | None:
        """The gap-free chain from layer 0 to L of least cost, skipping GPUs in `blocked`.

        `load[gpu]` is the GPU's live queue depth (requests in flight); its shards cost
        (1 + load_weight * depth / REFERENCE_BATCH) times their idle cost. None when no chain exists.
        """
        own = self._own_costs(load, load_weight, blocked)
        levels = self._levels
        best = np.full(len(self.shards), math.inf)
        entry = np.zeros(len(self.shards))
        for level in range(len(levels.bounds)):
            starting = levels.starting[level]
            if not len(starting):
                continue
            if levels.bounds[level]:  # a chain starts at layer 0 and enters any later shard over a link
                arrival = self._arrival_by_region(best, level)
                entry[starting] = arrival[self._region[starting]]
                for v, same_gpu in levels.same_gpu.get(level, ()):
                    entry[v] = min(entry[v], float(best[same_gpu].min()))  # no link on one GPU
            best[starting] = entry[starting] + own[starting]
        finals = (
            levels.ending[levels.level_of[self.num_layers]] if self.num_layers in levels.level_of else None
        )
        if finals is None or not len(finals) or math.isinf(best[finals].min()):
            return None
        last = int(finals[int(best[finals].argmin())])
        return Chain(self._walk_back(last, best, entry), float(best[last]))

    def _own_costs(
        self, load: Mapping[str, float] | None, load_weight: float, blocked: Container[str]
    ) -> np.ndarray:
        depth = np.zeros(len(self._gpu_index))
        for gpu, value in (load or {}).items():
            index = self._gpu_index.get(gpu)
            if index is not None:
                depth[index] = value
        unusable = np.array([gpu in blocked for gpu in self._gpu_index], dtype=bool)
        own = self.cost * (1.0 + load_weight * depth[self._gpu] / REFERENCE_BATCH)
        own[unusable[self._gpu]] = math.inf
        return own

    def _arrival_by_region(self, best: np.ndarray, level: int) -> np.ndarray:
        """The cheapest cost of entering a shard of each region at boundary `level`: over the regions that
        shards end in there, the cheapest of them plus the link."""
        levels = self._levels
        ending = levels.ending[level]
        if not len(ending):
            return np.full(len(self._link), math.inf)
        cheapest = np.minimum.reduceat(best[ending], levels.region_starts[level])
        arrival: np.ndarray = (cheapest[:, None] + self._link[levels.ending_regions[level]]).min(axis=0)
        return arrival

    def _walk_back(self, last: int, best: np.ndarray, entry: np.ndarray) -> tuple[Stage, ...]:
        """The chain ending in shard `last`: from each shard, the predecessor whose arrival is its entry."""
        path = [last]
        while self.shards[path[-1]].start != 0:
            v = path[-1]
            ending = self._levels.ending[self._levels.level_of[self.shards[v].start]]
            link = np.where(
                self._gpu[ending] == self._gpu[v], 0.0, self._link[self._region[ending], self._region[v]]
            )
            path.append(int(ending[int((best[ending] + link).argmin())]))
        return tuple(self.shards[v] for v in reversed(path))


class _Levels:
    """The layer boundaries of sorted shards, and per boundary the shards starting and ending there (the
    ending ones grouped by region, for one reduction per boundary) and the shards that may continue on their
    own GPU."""

    def __init__(self, shards: Sequence[Stage], region: np.ndarray, gpu: np.ndarray) -> None:
        self.bounds = sorted({s.start for s in shards} | {s.end for s in shards})
        self.level_of = {bound: i for i, bound in enumerate(self.bounds)}
        starting: list[list[int]] = [[] for _ in self.bounds]
        ending: list[list[int]] = [[] for _ in self.bounds]
        for i, shard in enumerate(shards):
            starting[self.level_of[shard.start]].append(i)
            ending[self.level_of[shard.end]].append(i)
        self.starting = [np.array(ids, dtype=np.int64) for ids in starting]
        self.ending, self.ending_regions, self.region_starts = [], [], []
        for ids in ending:
            ordered = np.array(sorted(ids, key=lambda i: region[i]), dtype=np.int64)
            regions, firsts = np.unique(region[ordered], return_index=True)
            self.ending.append(ordered)
            self.ending_regions.append(regions)
            self.region_starts.append(firsts)
        # shards whose GPU also holds a shard ending where they start: that step costs no link
        self.same_gpu: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
        for level, ids in enumerate(starting):
            ending_on: dict[int, list[int]] = defaultdict(list)
            for u in ending[level]:
                ending_on[int(gpu[u])].append(u)
            for v in ids:
                if int(gpu[v]) in ending_on:
                    self.same_gpu[level].append((v, np.array(ending_on[int(gpu[v])], dtype=np.int64)))


class RoundRobin:
    """Fixed pipelines, taken in turn."""

    def __init__(self, pipelines: Sequence[Pipeline]) -> None:
        if not pipelines:
            raise ValueError("round-robin needs at least one pipeline")
        self._next = cycle(pipelines)

    def next_chain(self) -> Chain:
        return Chain(next(self._next).stages, 0.0)


class SpanGraph:
    """Petals-style routing: any server may run any contiguous part of its span, so a chain may switch
    servers at any span boundary. Minimizes the compute of the layers actually run, inflated by queue depth,
    plus one-way latencies; arrivals at a boundary are kept per region (best two GPUs each), which is all the
    next hop's latency depends on."""

    def __init__(
        self, spans: Sequence[Stage], cluster: Cluster, step_ms: Mapping[str, float], num_layers: int
    ) -> None:
        self.spans = list(spans)
        self.num_layers = num_layers
        self.step_ms = step_ms
        self.region = {s.gpu: cluster.gpu(s.gpu).region for s in self.spans}
        regions = sorted(set(self.region.values()))
        self.link = {a: {b: cluster.rtt(a, b) / 2.0 for b in regions} for a in regions}
        self.bounds = sorted({0, num_layers} | {s.start for s in self.spans} | {s.end for s in self.spans})
        self.covering: list[list[int]] = [[] for _ in self.bounds]
        self.exits: list[list[int]] = []
        for k, span in enumerate(self.spans):
            inside = [i for i, b in enumerate(self.bounds) if span.start <= b <= span.end]
            for i in inside[:-1]:
                self.covering[i].append(k)
            self.exits.append(inside)

    def cheapest_chain(
        self, load: Mapping[str, float] | None = None, blocked: Container[str] = ()
    ) -> Chain | None:
        # arrivals[i][region] = up to two (cost, gpu, previous arrival, stage run) reaching bounds[i]
        Arrival = tuple[float, str, object, Stage | None]
        arrivals: list[dict[str | None, list[Arrival]]] = [{} for _ in self.bounds]
        arrivals[0][None] = [(0.0, "", None, None)]
        for i, b in enumerate(self.bounds[:-1]):
            if not arrivals[i]:
                continue
            for k in self.covering[i]:
                span = self.spans[k]
                if span.gpu in blocked:
                    continue
                region = self.region[span.gpu]
                entry: Arrival | None = None
                entry_cost = math.inf
                for came_from, tops in arrivals[i].items():
                    for arrival in tops:
                        if arrival[1] != span.gpu:  # staying on a GPU is one longer run, not two
                            cost = arrival[0] + (self.link[came_from][region] if came_from else 0.0)
                            if cost < entry_cost:
                                entry, entry_cost = arrival, cost
                            break
                if entry is None:
                    continue
                depth = load.get(span.gpu, 0.0) if load else 0.0
                per_layer = self.step_ms[span.gpu] * (1.0 + depth / REFERENCE_BATCH)
                for j in self.exits[k]:
                    e = self.bounds[j]
                    if e <= b:
                        continue
                    _keep_two(
                        arrivals[j].setdefault(region, []),
                        (entry_cost + (e - b) * per_layer, span.gpu, entry, Stage(span.gpu, b, e)),
                    )
        finals = [a for tops in arrivals[-1].values() for a in tops]
        if not finals:
            return None
        best = min(finals, key=lambda a: a[0])
        path: list[Stage] = []
        node: object = best
        while node is not None and node[3] is not None:  # type: ignore[index]
            path.append(node[3])  # type: ignore[index]
            node = node[2]  # type: ignore[index]
        return Chain(tuple(reversed(path)), best[0])


def _keep_two(
    tops: list[tuple[float, str, object, Stage | None]], new: tuple[float, str, object, Stage | None]
) -> None:
    """Keeps the two cheapest arrivals of distinct GPUs, cheapest first."""
    for n, old in enumerate(tops):
        if old[1] == new[1]:
            if new[0] < old[0]:
                tops[n] = new
                tops.sort(key=lambda a: a[0])
            return
    tops.append(new)
    tops.sort(key=lambda a: a[0])
    del tops[2:]
