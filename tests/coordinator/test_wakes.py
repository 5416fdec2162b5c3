"""Waking nodes instead of having them poll: a committed change wakes exactly the miners that act on it (none
for a rolled-back one), and `GET /v1/miners/wake` answers a node's wait at once when its counter moved, when
it is rung, or when the wait ends; waits are for live miners, a few at a time each."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from eth_account import Account
from redis import Redis
from sqlalchemy import select

from coordinator.db.models import Batch, Miner, PipelineRecord, Signature, WorkUnit
from coordinator.db.session import Database
from coordinator.services import acceptances
from coordinator.services.live import Heartbeat, LiveMembership
from coordinator.wakes import COUNTER_START_BOUND, Doorbell, counter_key
from tests.coordinator.conftest import ApiServer
from tests.coordinator.helpers import stored_batch


def counters(doorbell: Doorbell, miners: list[str]) -> list[int]:
    return [int(doorbell.redis.get(counter_key(m)) or 0) for m in miners]


def woken(doorbell: Doorbell, miners: list[str], change: object) -> list[str]:
    """Which of `miners` the change (a callable run in its own transaction's context) woke."""
    before = counters(doorbell, miners)
    assert callable(change)
    change()
    after = counters(doorbell, miners)
    return [m for m, b, a in zip(miners, before, after, strict=True) if a != b]


def fresh(count: int) -> list[str]:
    return [Account.create().address for _ in range(count)]


def test_each_committed_change_wakes_the_miners_that_act_on_it(
    wakes_db: Database, doorbell: Doorbell
) -> None:
    head, second, spare, other = everyone = fresh(4)
    with wakes_db.session() as session:
        batch_id = stored_batch(session, other, 4, 0, status="validating").id

    def propose() -> None:
        with wakes_db.session() as session:
            batch = session.get(Batch, batch_id)
            assert batch is not None
            acceptances.propose(session, batch, [head, second, spare], 10, chain_now=0)

    assert woken(doorbell, everyone, propose) == [head, second, spare]

    def assign_and_plan() -> None:
        with wakes_db.session() as session:
            batch = session.get(Batch, batch_id)
            assert batch is not None
            batch.miners, batch.status = [head, second, spare], "in_progress"
            stages = [{"miner": head, "start": 0, "end": 2}, {"miner": second, "start": 2, "end": 4}]
            session.add(
                PipelineRecord(
                    model="m", version=1, stages=stages, members=[head, second], active=True, created_at=0
                )
            )

    assert woken(doorbell, everyone, assign_and_plan) == [head, second, spare]
    with wakes_db.session() as session:
        pipeline_id = session.scalars(select(PipelineRecord.id)).one()

    def queue_a_unit() -> None:
        with wakes_db.session() as session:
            unit = WorkUnit(
                batch_id=batch_id,
                line_indices=[0, 1],
                pipeline_id=pipeline_id,
                status="queued",
                attempts=0,
                created_at=0,
            )
            session.add(unit)

    assert woken(doorbell, everyone, queue_a_unit) == [head]  # only the head claims

    def lease_it_and_count_a_result() -> None:
        with wakes_db.session() as session:
            unit = session.scalars(select(WorkUnit)).one()
            unit.status, unit.leased_until = "leased", 60
            batch = session.get(Batch, batch_id)
            assert batch is not None
            batch.completed_count = 1

    assert woken(doorbell, everyone, lease_it_and_count_a_result) == []  # what the head itself did

    def lease_runs_out() -> None:
        with wakes_db.session() as session:
            unit = session.scalars(select(WorkUnit)).one()
            unit.status, unit.leased_until = "queued", None

    assert woken(doorbell, everyone, lease_runs_out) == [head]

    def commit_results() -> None:
        with wakes_db.session() as session:
            batch = session.get(Batch, batch_id)
            assert batch is not None
            batch.status, batch.commitment = "finalizing", {"root": "0x00"}
            session.add(Signature(batch_id=batch_id, miner=head, signature="0x01", created_at=0))

    assert woken(doorbell, everyone, commit_results) == [head, second, spare]

    def drop_a_stale_signature() -> None:
        with wakes_db.session() as session:
            session.delete(session.get(Signature, (batch_id, head)))

    assert woken(doorbell, everyone, drop_a_stale_signature) == [head]  # to sign again


def test_a_rolled_back_change_wakes_no_one(wakes_db: Database, doorbell: Doorbell) -> None:
    miners = fresh(2)
    with wakes_db.session() as session:
        batch_id = stored_batch(session, miners[0], 1, 0, status="validating").id

    def failing() -> None:
        with pytest.raises(RuntimeError), wakes_db.session() as session:
            batch = session.get(Batch, batch_id)
            assert batch is not None
            acceptances.propose(session, batch, miners, 10, chain_now=0)
            session.flush()  # collected, then thrown away with the transaction
            raise RuntimeError("the step failed")

    assert woken(doorbell, miners, failing) == []


def test_a_stage_that_moved_wakes_its_co_stages(wakes_db: Database, doorbell: Doorbell) -> None:
    head, second, _elsewhere = everyone = fresh(3)
    with wakes_db.session() as session:
        for address in everyone:
            session.add(
                Miner(
                    address=address, model="m", endpoint="tcp://127.0.0.1:1", link_key="k" * 40,
                    region="r", gpu="cpu", memory_gb=1, tflops=1, mem_bandwidth_gb_s=1, layer_latency_ms=1,
                    joined_at=0,
                )
            )  # fmt: skip
        stages = [{"miner": head, "start": 0, "end": 2}, {"miner": second, "start": 2, "end": 4}]
        session.add(
            PipelineRecord(model="m", version=1, stages=stages, members=everyone, active=True, created_at=0)
        )

    def restart_with_a_new_key() -> None:
        with wakes_db.session() as session:
            miner = session.get(Miner, second)
            assert miner is not None
            miner.link_key, miner.session_started_at = "n" * 40, 5

    assert woken(doorbell, everyone, restart_with_a_new_key) == [head, second]

    def heartbeat_profile_only() -> None:
        with wakes_db.session() as session:
            miner = session.get(Miner, second)
            assert miner is not None
            miner.layer_latency_ms = 2.0

    assert woken(doorbell, everyone, heartbeat_profile_only) == []


def wait(client: httpx.Client, seen: int | None = None, wait_s: float = 10) -> httpx.Response:
    query = f"?wait_s={wait_s}" + ("" if seen is None else f"&seen={seen}")
    return client.get("/v1/miners/wake" + query)


def test_a_wait_answers_at_once_on_a_ring_or_at_its_end(
    chainless_api: ApiServer, doorbell: Doorbell, redis_url: str
) -> None:
    miner = Account.create()
    LiveMembership(Redis.from_url(redis_url)).beat(miner.address, Heartbeat(1.0))
    client = chainless_api.client(miner)
    first = wait(client)
    assert first.status_code == 200 and first.json() == {"counter": 0}  # nothing seen yet: at once

    threading.Timer(0.5, doorbell.ring, args=([miner.address.lower()],)).start()
    started = time.monotonic()
    rung = wait(client, seen=0, wait_s=20)
    start = rung.json()["counter"]  # a new counter starts at a random value (never one a node saw before)
    assert 0 < start <= COUNTER_START_BOUND and time.monotonic() - started < 10  # the ring, not the end

    doorbell.ring([miner.address])  # rung while no one waited: the next wait sees it at once
    assert wait(client, seen=start, wait_s=20).json() == {"counter": start + 1}
    started = time.monotonic()
    assert wait(client, seen=start + 1, wait_s=0.5).json() == {"counter": start + 1}  # no ring: the wait ends
    assert time.monotonic() - started >= 0.5


def test_waits_are_for_live_miners_a_few_at_a_time(chainless_api: ApiServer, redis_url: str) -> None:
    stranger = Account.create()
    refused = wait(chainless_api.client(stranger))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_live"
    unsigned = httpx.get(chainless_api.url + "/v1/miners/wake")
    assert unsigned.status_code == 401

    miner = Account.create()
    LiveMembership(Redis.from_url(redis_url)).beat(miner.address, Heartbeat(1.0))
    answers: list[httpx.Response] = []
    holders = [
        threading.Thread(target=lambda: answers.append(wait(chainless_api.client(miner), seen=0, wait_s=3)))
        for _ in range(2)
    ]
    for holder in holders:
        holder.start()
    time.sleep(1.0)  # both holders are waiting (on a loaded machine, a holder still connecting is refused
    # later instead: either way at most two waits of one miner are held at once)
    third = wait(chainless_api.client(miner), seen=0, wait_s=3)
    for holder in holders:
        holder.join()
    statuses = sorted([third.status_code] + [a.status_code for a in answers])
    assert statuses == [200, 200, 409]
    over = next(r for r in [third, *answers] if r.status_code == 409)
    assert over.json()["error"]["code"] == "too_many_waits"

    for bad in ("seen=-1", "seen=x", "wait_s=31", f"seen={2**63}"):
        answer = chainless_api.client(miner).get(f"/v1/miners/wake?{bad}")
        assert answer.status_code == 400, bad
