"""Phase 2: which chain of shards serves a work unit.

`ShardGraph.cheapest_chain` is Parallax's chain selection: a DP over the shard-level DAG (an edge joins
shard u to shard v when v starts where u ends). A shard costs its GPU's per-layer time times *all* the layers
it holds (a request runs every layer a GPU holds before moving on), inflated by the GPU's live queue depth;
an edge costs the one-way latency between the two GPUs. `RoundRobin` cycles over fixed pipelines (Parallax's
production default). `SpanGraph` is Petals-style routing, where a server may serve any part of its
span, so chains can switch servers at any shard boundary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from itertools import cycle

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


class ShardGraph:
    """The shard DAG of a placement, built once; `cheapest_chain` runs per work unit."""

    def __init__(
        self, shards: Sequence[Stage], cluster: Cluster, step_ms: Mapping[str, float], num_layers: int
    ) -> None:
        self.shards = sorted(shards, key=lambda s: (s.start, s.end, s.gpu))
        self.num_layers = num_layers
        self.cost = [s.layers * step_ms[s.gpu] for s in self.shards]
        ending: dict[int, list[int]] = defaultdict(list)
        for i, shard in enumerate(self.shards):
            ending[shard.end].append(i)
        self.preds: list[list[tuple[int, float]]] = [
            [(u, cluster.one_way_ms(self.shards[u].gpu, shard.gpu)) for u in ending[shard.start]]
            for shard in self.shards
        ]

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
        n = len(self.shards)
        best = [math.inf] * n
        back = [-1] * n
        finish, last = math.inf, -1
        for v, shard in enumerate(self.shards):
            if shard.gpu in blocked:
                continue
            depth = load.get(shard.gpu, 0.0) if load else 0.0
            own = self.cost[v] * (1.0 + load_weight * depth / REFERENCE_BATCH)
            if shard.start == 0:
                best[v] = own
            else:
                for u, link in self.preds[v]:
                    total = best[u] + link + own
                    if total < best[v]:
                        best[v], back[v] = total, u
            if shard.end == self.num_layers and best[v] < finish:
                finish, last = best[v], v
        if last < 0:
            return None
        path = []
        while last >= 0:
            path.append(self.shards[last])
            last = back[last]
        return Chain(tuple(reversed(path)), finish)


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
