"""Dispatch feeds Phase 2 from the database and the live heartbeats: the units a batch is cut into, and those
it re-routes, go to the cheapest live pipeline."""

from __future__ import annotations

import secrets
from collections import Counter

import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select
from sqlalchemy.orm import Session

from client_sdk.chain.contracts import Market
from client_sdk.device import DeviceProfile
from client_sdk.protocol.model_identity import model_id_of
from coordinator.chain import CoordinatorChain
from coordinator.db.models import Batch, Miner, PipelineRecord, WorkUnit
from coordinator.db.session import Database
from coordinator.services import dispatch, miners
from coordinator.services.errors import Conflict
from coordinator.services.live import Heartbeat, LiveMembership
from coordinator.services.miners import Joining
from demo.lifecycle import MODEL
from miner.transport.security import LinkKeys
from tests.coordinator.conftest import MODEL_NAME
from tests.coordinator.helpers import batch_file, running_batch
from tests.helpers import register_miner

NOW = 1_000
UNIT = 4


def reachable(_endpoint: str) -> bool:
    """The join's reachability probe: these tests' miners listen nowhere, and are taken as reachable."""
    return True


def address() -> str:
    return "0x" + secrets.token_hex(20)  # fresh per test: the Redis server is shared


def add_pipeline(
    session: Session, live: LiveMembership, *, alive: bool = True, tail: str | None = None
) -> PipelineRecord:
    """A 2-stage pipeline over two new miners in one region (or a new head and the joined `tail`), both
    beating unless `alive` is false."""
    head, known = address(), tail is not None
    tail = tail or address()
    for miner in (head,) if known else (head, tail):
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


def test_a_restarted_stage_ends_its_pipelines_leases_and_the_head_cannot_renew_them(
    db: Database, live: LiveMembership, admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """The second stage of a pipeline restarts (its node joins again) while the head still holds a unit: the
    unit's lease ends at once, the head's heartbeats no longer renew it, and the sweep gives it to another
    pipeline; a unit leased after the restart is renewed as usual."""
    tail_account = accounts[5]
    register_miner(admin_market, tail_account, 200 * 10**6)
    registry = CoordinatorChain(admin_market).registry
    device = DeviceProfile(
        gpu="cpu", memory_gb=8.0, tflops=1.0, mem_bandwidth_gb_s=10.0, layer_latency_ms=1.0
    )
    joining = Joining(MODEL, "tcp://127.0.0.1:5555", LinkKeys.generate().public.decode(), "us-east-1", device)
    with db.session() as session:
        tail = tail_account.address
        miners.join(session, registry, live, tail, joining, model_id_of(MODEL), NOW, probe=reachable)
        stuck, spare = add_pipeline(session, live, tail=tail), add_pipeline(session, live)
        batch = running_batch(session, address(), UNIT, NOW, batch_file(UNIT))
        dispatch.create_units(session, live, batch, [stuck], UNIT, NOW)
        session.flush()
        claimed = dispatch.claim(session, stuck.head, NOW, 60)
        assert claimed is not None
        unit = session.get(WorkUnit, claimed["unit_id"])
        assert unit is not None
        assert dispatch.renew_leases(session, stuck.head, [unit.id], NOW + 10, 60) == []
        assert unit.leased_until == NOW + 70

        miners.join(
            session, registry, live, tail, joining, model_id_of(MODEL), NOW + 20, probe=reachable
        )  # the tail's node restarted
        assert unit.leased_until == NOW + 20
        lost = dispatch.renew_leases(session, stuck.head, [unit.id], NOW + 25, 60)
        assert unit.leased_until == NOW + 20, "the head's heartbeat renewed work that died with the tail"
        assert lost == [unit.id]  # the head is told, and gives the unit up instead of waiting on it
        assert dispatch.reroute(session, live, batch, [stuck, spare], NOW + 26) == 1
        assert (unit.pipeline_id, unit.status) == (spare.id, "queued")

        unit.pipeline_id = stuck.id  # leased again to the restarted pipeline: renewed as usual
        claimed = dispatch.claim(session, stuck.head, NOW + 30, 60)
        assert claimed is not None and claimed["unit_id"] == unit.id
        assert dispatch.renew_leases(session, stuck.head, [unit.id, 10**9], NOW + 40, 60) == [10**9]
        assert unit.leased_until == NOW + 100


def test_a_join_from_another_endpoint_than_the_registered_one_is_refused(
    db: Database, live: LiveMembership, admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """Peers dial the endpoint the coordinator hands out, which must be the one the miner registered on-chain;
    a node announcing another is told how to change the registered one."""
    account = accounts[5]
    register_miner(admin_market, account, 200 * 10**6)
    registered = admin_market.registry.profile_of(account.address).endpoint
    device = DeviceProfile(
        gpu="cpu", memory_gb=8.0, tflops=1.0, mem_bandwidth_gb_s=10.0, layer_latency_ms=1.0
    )
    joining = Joining(MODEL, "tcp://10.9.9.9:5555", LinkKeys.generate().public.decode(), "us-east-1", device)
    registry = CoordinatorChain(admin_market).registry
    with db.session() as session, pytest.raises(Conflict) as refused:
        miners.join(
            session, registry, live, account.address, joining, model_id_of(MODEL), NOW, probe=reachable
        )
    assert refused.value.code == "endpoint_mismatch"
    assert str(refused.value) == (
        f"{account.address} joined with the endpoint 'tcp://10.9.9.9:5555', but its registered endpoint is "
        f"{registered!r}, which its peers dial (`miner update --endpoint` changes it)"
    )
    with db.session() as session:
        assert session.get(Miner, account.address) is None
