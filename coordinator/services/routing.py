"""Which planned pipeline serves a work unit, by Phase 2's cost model (coordinator/scheduling/routing.py).

A miner sends its activations to the next stage of its own pipeline only, so a chain that mixes stages of two
pipelines cannot be served: each pipeline is priced as the one chain of its own stages (`chain_cost`, with the
round trips miners measured to each other), and a unit goes to the pipeline whose chain is cheapest now. The
load term counts the lines already waiting on each pipeline, so units given out one by one spread in
proportion to the pipelines' speed.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.plan import Stage
from coordinator.scheduling.routing import chain_cost
from coordinator.services.live import Heartbeat


@dataclass(frozen=True)
class MeasuredLinks(Cluster):
    """The cluster's latencies, with the round trip a miner measured to a peer
    (`measured_rtt_ms[miner][peer]`) in place of their regions' figure, which is only a typical one."""

    measured_rtt_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def one_way_ms(self, a: str, b: str) -> float:
        measured = self.measured_rtt_ms.get(a, {}).get(b)
        return super().one_way_ms(a, b) if measured is None else measured / 2.0


def measured_through_relays(beats: Mapping[str, Heartbeat]) -> dict[str, dict[str, float]]:
    """Each miner's measured round trips to its peers, by its latest heartbeat. A miner measures a link to a
    peer behind a relay as far as the relay; the peer measures its own round trip to the relay, so such a
    link counts both hops (where the peer has measured it)."""
    relay_ms = {miner: beat.relay_rtt_ms or 0.0 for miner, beat in beats.items()}
    return {
        miner: {peer: ms + relay_ms.get(peer, 0.0) for peer, ms in beat.rtt_ms.items()}
        for miner, beat in beats.items()
    }


class Router:
    """Prices the planned pipelines with Phase 2 and keeps the lines given to each, so that every unit it
    routes weighs on the next choice.

    `pipelines` maps a pipeline's id to its stages, first stage first; `step_ms` is each miner's per-layer
    latency; `queued_lines` the lines already queued or leased on each pipeline; `queue_depth` what each
    miner reports still in hand; a pipeline with a miner in `dead` is never chosen.
    """

    def __init__(
        self,
        pipelines: Mapping[int, Sequence[Stage]],
        links: Cluster,
        step_ms: Mapping[str, float],
        queued_lines: Mapping[int, int],
        queue_depth: Mapping[str, float],
        dead: Collection[str] = (),
    ) -> None:
        self.pipelines = {pipeline_id: tuple(stages) for pipeline_id, stages in pipelines.items()}
        self.links = links
        self.step_ms = step_ms
        self.miners = {pipeline_id: {s.gpu for s in stages} for pipeline_id, stages in pipelines.items()}
        self._pipelines_of: dict[str, list[int]] = {}  # each miner's pipelines, by id
        for pipeline_id in sorted(self.miners):
            for miner in self.miners[pipeline_id]:
                self._pipelines_of.setdefault(miner, []).append(pipeline_id)
        self.lines = Counter({pipeline_id: queued_lines.get(pipeline_id, 0) for pipeline_id in pipelines})
        self.queue_depth = queue_depth
        self.dead = dead

    def cheapest(self) -> int | None:
        """The pipeline whose chain costs least under the current load (the lowest id on a tie); None when
        every pipeline has a dead miner."""
        load = self._load()
        costs = [(self._cost(pipeline_id, load), pipeline_id) for pipeline_id in self._live()]
        return min(costs)[1] if costs else None

    def assign(self, unit_lines: Sequence[int]) -> list[int | None]:
        """The pipeline of each unit (of `unit_lines[i]` lines), chosen and counted in order exactly as
        `cheapest` then `move` would, in one pass: a heap of pipeline costs in which only the pipelines that
        share a miner with the one just chosen are priced again, so a large batch costs about one pricing per
        unit instead of one per unit and pipeline. None for every unit when no pipeline is live."""
        live = self._live()
        if not live:
            return [None] * len(unit_lines)
        load = self._load()
        # how often each pipeline was priced: a heap row of an earlier pricing is stale
        priced = dict.fromkeys(live, 0)
        heap = [(self._cost(pipeline_id, load), pipeline_id, 0) for pipeline_id in live]
        heapq.heapify(heap)
        chosen: list[int | None] = []
        for lines in unit_lines:
            while heap[0][2] != priced[heap[0][1]]:
                heapq.heappop(heap)
            target = heap[0][1]
            chosen.append(target)
            self.move(lines, to=target)
            for miner in self.miners[target]:
                load[miner] = self._miner_load(miner)
            sharing = {p for miner in self.miners[target] for p in self._pipelines_of[miner] if p in priced}
            for pipeline_id in sharing:
                priced[pipeline_id] += 1
                heapq.heappush(heap, (self._cost(pipeline_id, load), pipeline_id, priced[pipeline_id]))
        return chosen

    def move(self, lines: int, to: int, source: int | None = None) -> None:
        """Counts `lines` on pipeline `to`, and no longer on `source` when that one is planned here."""
        self.lines[to] += lines
        if source is not None and source in self.lines:
            self.lines[source] -= lines

    def _live(self) -> list[int]:
        """The pipelines without a dead miner, by id."""
        return sorted(p for p, miners in self.miners.items() if not any(m in self.dead for m in miners))

    def _cost(self, pipeline_id: int, load: Mapping[str, float]) -> float:
        return chain_cost(self.pipelines[pipeline_id], self.links, self.step_ms, load)

    def _load(self) -> dict[str, float]:
        """Each miner's queue depth: what it reports in hand plus every line waiting on its pipeline (a
        pipeline's every stage runs each of its lines)."""
        return {miner: self._miner_load(miner) for miner in self._pipelines_of}

    def _miner_load(self, miner: str) -> float:
        waiting = sum(self.lines[pipeline_id] for pipeline_id in self._pipelines_of[miner])
        return self.queue_depth.get(miner, 0.0) + waiting
