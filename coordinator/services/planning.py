"""Pipelines for a served model from the live miners: Phase 1 of the scheduling library over their measured
profiles, stored as a new plan version whenever the live set differs from the one planned."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from client_sdk.protocol.pipeline import microbatches
from coordinator.config import ServedModel
from coordinator.db.models import Miner, PipelineRecord
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.data import default_rtt_ms
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Pipeline
from coordinator.scheduling.strategies import make_plan
from coordinator.wakes import wake_on_commit

STRATEGY = "parallax"
# microbatches a live pipeline may keep in flight; its stages split the KV memory of one microbatch per
# stage among them (miner.node.stage_host), so more only makes each smaller
MAX_LIVE_MICROBATCHES = 16


@lru_cache(maxsize=8)
def model_spec(path: Path, name: str) -> ModelSpec:
    return ModelSpec.from_hf_config(json.loads((path / "config.json").read_text()), name=name)


def active_pipelines(session: Session, model: str) -> list[PipelineRecord]:
    query = select(PipelineRecord).where(PipelineRecord.model == model, PipelineRecord.active)
    return list(session.scalars(query.order_by(PipelineRecord.id)))


def cluster_of(miners: list[Miner]) -> Cluster:
    """The miners as the scheduling library sees them: their joined profiles and regions, with the round
    trips between regions from the AWS table, extended by `rtts_for` only when a region is not in it, and by
    `through_relays` when a miner is behind a relay (it then sits in a region of its own, `relayed_region`,
    whose inbound links are priced as two hops)."""
    relayed = {relayed_region(m): (m.region, m.relay_region) for m in miners if m.relay_region is not None}
    regions = {m.region for m in miners} | {r for m in miners if (r := m.relay_region) is not None}
    extended = {}
    if regions - set(default_rtt_ms()) or relayed:
        extended = {"rtt_ms": through_relays(rtts_for(regions), relayed)}
    return Cluster.from_dict(
        extended
        | {
            "gpus": [
                {
                    "id": m.address,
                    "type": m.gpu,
                    "region": relayed_region(m),
                    "vram_gb": m.memory_gb,
                    "tflops": m.tflops,
                    "mem_bandwidth_gb_s": m.mem_bandwidth_gb_s,
                    "layer_latency_ms": m.layer_latency_ms,
                }
                for m in miners
            ],
        }
    )


def rtts_for(regions: set[str]) -> dict[str, dict[str, float]]:
    """The round-trip table over the AWS regions and `regions`. A region the table does not know (a miner
    may name its region freely, e.g. "home-berlin") is priced pessimistically rather than refused: the
    table's shortest round trip within it, and its longest to every other region. Without this, one such
    miner made every plan fail, and the batch waited saying no miner could hold the model."""
    known = default_rtt_ms()
    table = {a: dict(row) for a, row in known.items()}
    within = min(row[a] for a, row in known.items() if a in row)
    across = max(ms for row in known.values() for ms in row.values())
    for region in sorted(regions - set(known)):
        for other in table:
            table[other][region] = across
        table[region] = dict.fromkeys(table, across) | {region: within}
    return table


def relayed_region(miner: Miner) -> str:
    """The region the planner places `miner` in: its own, or for a miner behind a relay, its own as reached
    through the relay's."""
    if miner.relay_region is None:
        return miner.region
    return f"{miner.region} via {miner.relay_region}"


def through_relays(
    table: dict[str, dict[str, float]], relayed: dict[str, tuple[str, str]]
) -> dict[str, dict[str, float]]:
    """`table` with a row and a column for each relayed region (name -> (own region, relay's region)). A
    relayed miner dials out directly, so its links out cost its own region's round trips; a link into it goes
    to its relay and on from there, two hops: rtt(sender, relay) + rtt(relay, own)."""
    out = {a: dict(row) for a, row in table.items()}
    for name, (own, relay) in relayed.items():
        out[name] = dict(table[own])
        for sender in table:
            out[sender][name] = table[sender][relay] + table[relay][own]
    for name, (own, _) in relayed.items():
        for other, (other_own, other_relay) in relayed.items():
            out[name][other] = table[own][other_relay] + table[other_relay][other_own]
    return out


def ensure_plan(
    session: Session,
    served: ServedModel,
    miners: list[Miner],
    now: int,
    committed: frozenset[str] = frozenset(),
) -> list[PipelineRecord]:
    """The active pipelines of the model, re-planned first if the live miners are not exactly the planned
    ones. Empty when the live miners cannot hold one replica.

    `committed` names the miners assigned on-chain to a batch still in progress. When those of them that are
    live can hold a replica on their own, they are planned apart from the rest: only a pipeline made of a
    task's own miners can serve it, so a pipeline that mixed one of them with an unassigned newcomer would
    leave the task's work waiting while its own miners sat idle."""
    current = active_pipelines(session, served.name)
    live = sorted(m.address for m in miners)
    if current and current[0].members == live:
        return current
    wake_on_commit(session, {m for p in current for m in p.miners})  # their stages end, re-planned or not
    session.execute(update(PipelineRecord).where(PipelineRecord.model == served.name).values(active=False))
    spec = model_spec(served.path, served.name)
    # no peer can send to a miner neither reachable nor behind a relay: it can only serve a model alone
    alone = [m for m in miners if not m.can_be_reached]
    miners = [m for m in miners if m.can_be_reached]
    bound = [m for m in miners if m.address in committed]
    free = [m for m in miners if m.address not in committed]
    pipelines = _pipelines(bound, spec)
    pipelines = pipelines + _pipelines(free, spec) if pipelines else _pipelines(miners, spec)
    pipelines += [p for m in alone for p in _pipelines([m], spec)]  # one miner: one-stage pipelines
    if not pipelines:
        return []
    latest = select(func.max(PipelineRecord.version)).where(PipelineRecord.model == served.name)
    version = (session.scalar(latest) or 0) + 1
    links = cluster_of(miners + alone)
    step_ms = {m.address: m.layer_latency_ms for m in miners + alone}
    records = [
        PipelineRecord(
            model=served.name,
            version=version,
            stages=[{"miner": s.gpu, "start": s.start, "end": s.end} for s in pipeline.stages],
            members=live,
            active=True,
            created_at=now,
            microbatches=in_flight(pipeline, links, step_ms),
        )
        for pipeline in pipelines
    ]
    session.add_all(records)
    session.flush()
    return records


def in_flight(pipeline: Pipeline, links: Cluster, step_ms: dict[str, float]) -> int:
    """Microbatches `pipeline` keeps in flight: DeServe's rule over its stages' compute times (per-layer
    latency times layers) and the links between them, the ring's return included (a link into a relayed
    miner counts both hops), at least one per stage and at most MAX_LIVE_MICROBATCHES."""
    stages = pipeline.stages
    compute = [(s.end - s.start) * step_ms[s.gpu] for s in stages]
    hops = [links.one_way_ms(s.gpu, stages[(i + 1) % len(stages)].gpu) for i, s in enumerate(stages)]
    return min(MAX_LIVE_MICROBATCHES, max(len(stages), microbatches(compute, hops)))


def _pipelines(miners: list[Miner], spec: ModelSpec) -> list[Pipeline]:
    """Phase 1's pipelines over `miners`; none when they cannot hold one replica."""
    if not miners:
        return []
    try:
        return list(make_plan(STRATEGY, cluster_of(miners), spec).pipelines)
    except SchedulingError:
        return []  # not enough memory among them for one replica yet
