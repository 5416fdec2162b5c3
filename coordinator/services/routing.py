"""Which planned pipeline serves a work unit, by Phase 2's cost model (coordinator/scheduling/routing.py).

A miner sends its activations to the next stage of its own pipeline only, so a chain that mixes stages of two
pipelines cannot be served: each pipeline gets a `ShardGraph` of its own stages, whose one chain is the
pipeline itself, and a unit goes to the pipeline whose chain is cheapest now. The load term counts the lines
already waiting on each pipeline, so units given out one by one spread in proportion to the pipelines' speed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.plan import Stage
from coordinator.scheduling.routing import ShardGraph
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
        self.graphs = {
            pipeline_id: ShardGraph(stages, links, step_ms, num_layers=stages[-1].end)
            for pipeline_id, stages in pipelines.items()
        }
        self.miners = {pipeline_id: {s.gpu for s in stages} for pipeline_id, stages in pipelines.items()}
        self.lines = Counter({pipeline_id: queued_lines.get(pipeline_id, 0) for pipeline_id in pipelines})
        self.queue_depth = queue_depth
        self.dead = dead

    def cheapest(self) -> int | None:
        """The pipeline whose chain costs least under the current load (the lowest id on a tie); None when
        every pipeline has a dead miner."""
        load = self._load()
        costs = []
        for pipeline_id, graph in self.graphs.items():
            chain = graph.cheapest_chain(load, blocked=self.dead)
            if chain is not None:
                costs.append((chain.cost_ms, pipeline_id))
        return min(costs)[1] if costs else None

    def move(self, lines: int, to: int, source: int | None = None) -> None:
        """Counts `lines` on pipeline `to`, and no longer on `source` when that one is planned here."""
        self.lines[to] += lines
        if source is not None and source in self.lines:
            self.lines[source] -= lines

    def _load(self) -> Counter[str]:
        """Each miner's queue depth: what it reports in hand plus every line waiting on its pipeline (a
        pipeline's every stage runs each of its lines)."""
        load: Counter[str] = Counter(self.queue_depth)
        for pipeline_id, lines in self.lines.items():
            for miner in self.miners[pipeline_id]:
                load[miner] += lines
        return load
