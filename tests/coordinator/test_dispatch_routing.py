"""Dispatch feeds Phase 2 from the database and the live heartbeats: the units a batch is cut into, and those
it re-routes, go to the cheapest live pipeline."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator

import pytest
from redis import Redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from coordinator.db.models import Batch, Miner, PipelineRecord, WorkUnit
from coordinator.db.session import Database
from coordinator.services import dispatch
from coordinator.services.live import Heartbeat, LiveMembership
from tests.coordinator.conftest import MODEL_NAME
from tests.coordinator.helpers import running_batch

NOW = 1_000
UNIT = 4


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def live(redis_url: str) -> LiveMembership:
    return LiveMembership(Redis.from_url(redis_url))


def address() -> str:
    return "0x" + secrets.token_hex(20)  # fresh per test: the Redis server is shared


def add_pipeline(session: Session, live: LiveMembership, *, alive: bool = True) -> PipelineRecord:
    """A 2-stage pipeline over two new miners in one region, both beating unless `alive` is false."""
    head, tail = address(), address()
    for miner in (head, tail):
        session.add(
            Miner(
                address=miner,
                model=MODEL_NAME,
                endpoint="tcp://127.0.0.1:1",
                region="us-east-1",
                gpu="RTX4090",
                memory_gb=24.0,
                tflops=82.6,
                mem_bandwidth_gb_s=1008.0,
                layer_latency_ms=1.0,
                joined_at=NOW,
            )
        )
    live.beat(head, Heartbeat(layer_latency_ms=1.0))
    if alive:
        live.beat(tail, Heartbeat(layer_latency_ms=1.0))
    pipeline = PipelineRecord(
        model=MODEL_NAME,
        version=1,
        stages=[{"miner": head, "start": 0, "end": 2}, {"miner": tail, "start": 2, "end": 4}],
        members=[head, tail],
        active=True,
        created_at=NOW,
    )
    session.add(pipeline)
    session.flush()
    return pipeline


def add_batch(session: Session, requests: int) -> Batch:
    return running_batch(session, address(), requests, NOW)


def units_per_pipeline(session: Session, batch: Batch) -> Counter[int]:
    return Counter(session.scalars(select(WorkUnit.pipeline_id).where(WorkUnit.batch_id == batch.id)))


def test_units_spread_over_equal_pipelines_and_skip_one_with_a_dead_miner(
    db: Database, live: LiveMembership
) -> None:
    with db.session() as session:
        first, second = add_pipeline(session, live), add_pipeline(session, live)
        broken = add_pipeline(session, live, alive=False)
        batch = add_batch(session, 10 * UNIT)
        assert dispatch.create_units(session, live, batch, [first, second, broken], UNIT, NOW) == 10
        session.flush()
        assert units_per_pipeline(session, batch) == {first.id: 5, second.id: 5}


def test_an_expired_unit_goes_to_the_less_loaded_pipeline(db: Database, live: LiveMembership) -> None:
    with db.session() as session:
        busy, idle = add_pipeline(session, live), add_pipeline(session, live)
        batch = add_batch(session, 3 * UNIT)
        dispatch.create_units(session, live, batch, [busy], UNIT, NOW)
        session.flush()
        stranded = session.scalars(select(WorkUnit).where(WorkUnit.batch_id == batch.id)).first()
        assert stranded is not None
        stranded.status, stranded.leased_until = "leased", NOW - 1
        assert dispatch.reroute(session, live, batch, [busy, idle], NOW) == 1
        assert (stranded.pipeline_id, stranded.status) == (idle.id, "queued")
        assert dispatch.reroute(session, live, batch, [busy, idle], NOW) == 0
