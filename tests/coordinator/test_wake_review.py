"""A cold security review of the wake feature (coordinator.wakes, coordinator.api.wakes, the heartbeat's fast
path, the node's wait for news, pipeline_stages, the signing trees' cache), by a reviewer that did not write
it. Each test marked FIXED failed on the code reviewed and shows the weakness gone; those marked WITHSTOOD pin
what held."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from eth_account import Account
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import select

from client_sdk.device import DeviceProfile
from coordinator.api import wakes as wakes_module
from coordinator.api.auth import command_slots
from coordinator.api.wakes import WakeWaits
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch, Miner, PipelineRecord, PipelineStage, WorkUnit
from coordinator.db.session import Database
from coordinator.services import acceptances, dispatch
from coordinator.services.live import LiveMembership
from coordinator.wakes import Doorbell, counter_key
from tests.coordinator.conftest import ApiServer
from tests.coordinator.helpers import stored_batch


def fresh(count: int) -> list[str]:
    return [Account.create().address for _ in range(count)]


def counter(redis: Redis, miner: str) -> int:
    return int(redis.get(counter_key(miner)) or 0)


def a_miner(address: str) -> Miner:
    return Miner(
        address=address, model="m", endpoint="tcp://127.0.0.1:1", link_key="k" * 40, region="r", gpu="cpu",
        memory_gb=1, tflops=1, mem_bandwidth_gb_s=1, layer_latency_ms=1, joined_at=0, session_started_at=0,
    )  # fmt: skip


# --- the API's waits ----------------------------------------------------------------------------------------


def test_a_herd_of_waits_woken_together_leaves_the_redis_pool_whole(redis_url: str) -> None:
    """FIXED (medium; actor: a hostile miner running ~50 registered miners, or simply 50+ honest idle nodes
    per API process and one re-plan or Redis pub/sub reconnect). Every wait re-reads its counter with its own
    Redis command on the API's asyncio client (`Redis.from_url`, a pool of 100 connections that FAILS with
    MaxConnectionsError instead of waiting), with no bound on how many do so at once, although up to 20,000
    waits per process are admitted. A re-plan rings every live miner of the model at once (and every
    resubscription of the channel wakes every waiter), so all their waits read at once: past ~100 they fail
    with a 500 (and the same pool serves every request's nonce claim and the heartbeat fast path, which fail
    alike meanwhile). Fix: bound the wakes' Redis reads (an anyio.CapacityLimiter under the pool size, as
    NonceStore does, or one MGET per wake batch), and size the pool for the admitted waits."""

    async def herd() -> list[BaseException]:
        redis = AsyncRedis.from_url(redis_url)  # as create_app makes the API's client
        waits = WakeWaits(redis, command_slots(redis))
        miners = [m.lower() for m in fresh(100)]
        held = []
        try:
            for miner in miners:
                for _ in range(2):  # WAITS_PER_MINER
                    held.append(asyncio.create_task(waits.wait(miner, 0, 5.0)))
                    await asyncio.sleep(0.002)  # they come in one after the other, as requests do
            await asyncio.sleep(0.3)  # all parked
            await asyncio.to_thread(Doorbell(Redis.from_url(redis_url)).ring, miners)  # one re-plan
            answers = await asyncio.gather(*held, return_exceptions=True)
        finally:
            await waits.close()
            await redis.aclose()
        return [a for a in answers if isinstance(a, BaseException)]

    failed = asyncio.run(herd())
    assert failed == [], f"{len(failed)} of 200 waits failed: {sorted({type(e).__name__ for e in failed})}"


def test_a_refused_wait_leaves_no_bookkeeping(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """FIXED (informational; actor: live miners while the process is at MAX_WAITS). A wait refused because
    the process is full still creates an empty entry in `_waiting` (a defaultdict read before the refusal),
    which nothing ever removes: each refused live miner leaks one entry for the life of the process (bounded
    by the number of registered miners, and every resubscription then iterates them). Fix: read with
    `.get(key, ())` before refusing."""
    monkeypatch.setattr(wakes_module, "MAX_WAITS", 0)

    async def refused() -> dict[str, Any]:
        redis = AsyncRedis.from_url(redis_url)
        waits = WakeWaits(redis, command_slots(redis))
        try:
            for miner in fresh(3):
                with pytest.raises(Exception, match="too many waits"):
                    await waits.wait(miner.lower(), 0, 1.0)
            return dict(waits._waiting)
        finally:
            await waits.close()
            await redis.aclose()

    assert asyncio.run(refused()) == {}


def test_a_ring_while_the_channel_is_resubscribing_is_not_lost(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WITHSTOOD: a stranger or a Redis blip dropping the API's subscription (CLIENT KILL) does not lose a
    ring made while it is down: on resubscribing, every waiter re-reads its counter."""
    monkeypatch.setattr(wakes_module, "RESUBSCRIBE_S", 0.3)
    miner = fresh(1)[0].lower()

    async def scenario() -> tuple[int, float]:
        redis = AsyncRedis.from_url(redis_url, client_name="wake-review")
        waits = WakeWaits(redis, command_slots(redis))
        admin = Redis.from_url(redis_url)
        try:
            Doorbell(admin).ring([miner])  # a counter that exists: the ring below moves it by one
            seen = int(admin.get(counter_key(miner)) or 0)
            waiting = asyncio.create_task(waits.wait(miner, seen, 10.0))
            await asyncio.sleep(0.3)
            ours = [c for c in admin.client_list(_type="pubsub") if c.get("name") == "wake-review"]
            assert ours
            for client in ours:  # only this test's subscription
                admin.client_kill_filter(_id=client["id"])
            await asyncio.sleep(0.05)
            started = time.monotonic()
            Doorbell(admin).ring([miner])  # published while nobody listens
            got = await waiting
            return got - seen, time.monotonic() - started
        finally:
            await waits.close()
            await redis.aclose()

    moved, took = asyncio.run(scenario())
    assert moved == 1 and took < 5


# --- rings --------------------------------------------------------------------------------------------------


def test_a_ring_that_fails_goes_with_the_next_one(
    wakes_db: Database, doorbell: Doorbell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FIXED (medium; no attacker needed: any Redis hiccup on the ringing side, e.g. a worker's connection
    reset or a failover, while the node's wait stays parked). `Doorbell.ring` runs once, after the commit;
    on a RedisError it logs and drops the ring. The module says "a lost announcement costs one wait's
    length", which holds for a lost PUBLISH but not for a lost INCR: the counter never moves, every later wait
    of the node ends with the counter it has seen, and the node (which no longer polls) never reads the
    proposal, the commitment to sign or the unit queued for it: the task stalls until its deadline and
    expires. Fix: keep failed rings and retry them (on the next ring or from the sweep), and/or have the node
    read everything now and then without news (see the node tests below). Fixed: an owed ring goes with the
    next one."""
    miner = fresh(1)[0]
    with wakes_db.session() as session:
        batch_id = stored_batch(session, miner, 2, 0, status="validating").id
    before = counter(doorbell.redis, miner)

    real_pipeline = doorbell.redis.pipeline
    failures = iter([True])

    def flaky_pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = real_pipeline(*args, **kwargs)
        if next(failures, False):

            def down() -> None:
                raise RedisConnectionError("Connection reset by peer")

            pipe.execute = down
        return pipe

    monkeypatch.setattr(doorbell.redis, "pipeline", flaky_pipeline)
    with wakes_db.session() as session:  # the proposal: its ring fails once
        batch = session.get(Batch, batch_id)
        assert batch is not None
        acceptances.propose(session, batch, [miner], 10, chain_now=0)
    other = fresh(1)[0]
    with wakes_db.session() as session:  # Redis answers again: a later, unrelated ring goes through
        session.add(a_miner(other))
        other_batch = stored_batch(session, other, 1, 0, status="validating")
        acceptances.propose(session, other_batch, [other], 10, chain_now=0)
    assert counter(doorbell.redis, other) != 0
    assert counter(doorbell.redis, miner) != before, "the proposal's miner is never told"


def test_a_replan_wakes_only_the_miners_whose_assignment_changed(
    wakes_db: Database, doorbell: Doorbell
) -> None:
    """FIXED (low; actor: a hostile miner that flaps, joining then going silent, each flap a re-plan). A
    new PipelineRecord rings `members` (every live miner of the model when the plan was made), not only its
    stage miners: spares and the miners of the other pipelines, whose assignment does not change, all wake and
    each read their assignment, proposals, a claim and their signing requests. Each re-plan costs about four
    requests per live miner of the model, however few pipelines changed. Fix: ring `obj.miners` only (the old
    plan's stage miners are already rung by ensure_plan)."""
    head, second, spare = everyone = fresh(3)
    before = [counter(doorbell.redis, m) for m in everyone]
    with wakes_db.session() as session:
        stages = [{"miner": head, "start": 0, "end": 2}, {"miner": second, "start": 2, "end": 4}]
        session.add(
            PipelineRecord(model="m", version=1, stages=stages, members=everyone, active=True, created_at=0)
        )
    woken = [m for m, b in zip(everyone, before, strict=True) if counter(doorbell.redis, m) != b]
    assert woken == [head, second], f"the spare {spare} was woken too"


def test_a_replan_by_bulk_update_wakes_the_old_plans_stage_miners(
    wakes_db: Database, doorbell: Doorbell, served_model: Any
) -> None:
    """WITHSTOOD: ensure_plan deactivates the old plan with a bulk UPDATE (no ORM event), but names its stage
    miners to wake on commit: a miner dropped from the plan learns at once that its stage is gone, and the new
    plan's miners that theirs began."""
    from coordinator.services.planning import ensure_plan

    old_head, old_second, newcomer = everyone = fresh(3)
    with wakes_db.session() as session:
        stages = [{"miner": old_head, "start": 0, "end": 1}, {"miner": old_second, "start": 1, "end": 2}]
        session.add(
            PipelineRecord(
                model=served_model.name, version=1, stages=stages, members=[old_head, old_second],
                active=True, created_at=0,
            )
        )  # fmt: skip
        miner = a_miner(newcomer)
        miner.model, miner.region, miner.memory_gb = served_model.name, "us-east-1", 64
        session.add(miner)
    before = [counter(doorbell.redis, m) for m in everyone]
    with wakes_db.session() as session:
        joined = session.get(Miner, newcomer)
        assert joined is not None
        assert ensure_plan(session, served_model, [joined], 1)
    woken = [m for m, b in zip(everyone, before, strict=True) if counter(doorbell.redis, m) != b]
    assert woken == everyone


# --- the heartbeat's fast path ------------------------------------------------------------------------------


def test_a_beat_with_a_live_key_but_no_miner_row_is_refused(chainless_api: ApiServer, redis_url: str) -> None:
    """FIXED (low; actor: a wallet whose live key outlived its miner row: a wakes_db restored or replaced
    under the same Redis, or a join whose transaction failed after `live.beat`, which is written before the
    join commits). The fast path takes the live key as proof of a join (`SET ... XX`), so such a wallet's
    beats are answered ok and renew the key for ever (it may hold waits too); before, the beat read the row
    and answered 404. Its node is told all is well while the coordinator cannot plan it (live_miners needs
    the row). Fix: write the live key only after the join commits, and have the fast path require a marker
    only a committed join writes (falling back to the row check without it)."""
    never_joined = Account.create()
    live = LiveMembership(Redis.from_url(redis_url))
    live.redis.set(live.key(never_joined.address), '{"layer_latency_ms": 1.0}', ex=live.ttl_s)
    body = {"layer_latency_ms": 2.0, "queue_depth": 0, "units": [], "rtt_ms": {}}
    answer = chainless_api.client(never_joined).post("/v1/miners/heartbeat", json=body)
    assert answer.status_code == 404, answer.text


def test_a_stranger_cannot_take_the_fast_path_or_wait(chainless_api: ApiServer) -> None:
    """WITHSTOOD: a wallet that never joined has no live key: its beat takes the wakes_db path (404), its wait
    is refused (409 not_live), and a beat naming units always reads the wakes_db."""
    stranger = Account.create()
    client = chainless_api.client(stranger)
    body = {"layer_latency_ms": 2.0, "queue_depth": 0, "units": [], "rtt_ms": {}}
    assert client.post("/v1/miners/heartbeat", json=body).status_code == 404
    assert client.get("/v1/miners/wake?seen=0&wait_s=1").json()["error"]["code"] == "not_live"
    assert httpx.get(chainless_api.url + "/v1/miners/wake").status_code == 401


# --- pipeline_stages and per-request cost -------------------------------------------------------------------


def test_lease_renewal_cost_does_not_grow_with_the_miners_history(tmp_path: Path) -> None:
    """FIXED (low-medium; actor: time, or a hostile miner forcing re-plans by flapping). `headed_by` and
    `pipelines_of(active_only=False)` read the index, but then return every pipeline the miner ever headed or
    staged in, and `renew_leases` (each heartbeat naming units), `give_back` and `break_leases_of` (each join)
    send them all back as an `IN (...)` list: each such request binds one parameter per plan the miner was
    ever in. On PostgreSQL with psycopg 3 (server-side binding, at most 65,535 parameters) a long-lived head's
    heartbeats and joins then fail outright; before that, each costs O(history). Fix: keep the selection in
    SQL (`WorkUnit.pipeline_id.in_(select(PipelineStage.pipeline_id)...)` or a join) instead of materialising
    the ids."""

    def parameters_of_a_renewal(history: int) -> int:
        url = f"sqlite:///{tmp_path / f'h{history}.db'}"
        upgrade(url)
        wakes_db = Database(url)
        head = fresh(1)[0]
        with wakes_db.session() as session:
            session.add(a_miner(head))
            batch = stored_batch(session, head, 1, 0, status="in_progress")
            session.execute(
                sa.insert(PipelineRecord),
                [
                    {
                        "model": "m",
                        "version": v,
                        "stages": [],
                        "members": [],
                        "active": False,
                        "created_at": 0,
                    }
                    for v in range(history)
                ],
            )
            old = session.scalars(select(PipelineRecord.id)).all()
            session.execute(
                sa.insert(PipelineStage), [{"pipeline_id": p, "position": 0, "miner": head} for p in old]
            )
            current = PipelineRecord(
                model="m", version=history + 1, stages=[{"miner": head, "start": 0, "end": 1}],
                members=[head], active=True, created_at=0,
            )  # fmt: skip
            session.add(current)
            session.flush()
            unit = WorkUnit(
                batch_id=batch.id, line_indices=[0], pipeline_id=current.id, status="leased", attempts=1,
                created_at=0, leased_at=1, leased_until=100,
            )  # fmt: skip
            session.add(unit)
            session.flush()
            unit_id = unit.id
        most = 0

        def count(_conn: Any, _cursor: Any, _statement: str, parameters: Any, *_rest: Any) -> None:
            nonlocal most
            most = max(most, len(parameters) if isinstance(parameters, (tuple, list, dict)) else 0)

        sa.event.listen(wakes_db.engine, "before_cursor_execute", count)
        with wakes_db.session() as session:
            assert dispatch.renew_leases(session, head, [unit_id], 10, 60) == []
        wakes_db.dispose()
        return most

    assert parameters_of_a_renewal(1_000) <= parameters_of_a_renewal(1) + 2


def test_pipeline_stages_follow_stages_when_they_are_replaced(wakes_db: Database) -> None:
    """WITHSTOOD: `stages` is only ever set whole (never mutated in place, never bulk-inserted, by the
    services), and setting it again on a stored pipeline replaces its index rows (the row switch works), so
    pipelines_of and the co-stage wakes read what `stages` says."""
    a, b, c = fresh(3)
    with wakes_db.session() as session:
        stages = [{"miner": a, "start": 0, "end": 1}, {"miner": b, "start": 1, "end": 2}]
        session.add(
            PipelineRecord(model="m", version=1, stages=stages, members=[a, b], active=True, created_at=0)
        )
    with wakes_db.session() as session:
        pipeline = session.scalars(select(PipelineRecord)).one()
        pipeline.stages = [{"miner": c, "start": 0, "end": 2}]
    with wakes_db.session() as session:
        rows = session.execute(select(PipelineStage.position, PipelineStage.miner)).all()
        assert [tuple(r) for r in rows] == [(0, c)]
        assert dispatch.pipelines_of(session, a, active_only=False) == []
        assert dispatch.headed_by(session, c, active_only=True) == [pipeline.id]


# --- the node's wait for news -------------------------------------------------------------------------------


class QuietCoordinator:
    """A coordinator at which nothing changes after the node's first read, except where a test says so: the
    wake counter stays at 0 (a first wait, with nothing seen, answers 0 at once; later ones wait and answer
    0), no proposals, no work, no assignment; `pending` is what the node is asked to sign."""

    def __init__(self, pending: list[dict[str, Any]] | None = None) -> None:
        self.pending = list(pending or [])
        self.signed: list[str] = []
        self.signing_reads = 0
        self.on_signing_read: Any = None

    def clone(self) -> QuietCoordinator:
        return self

    def close(self) -> None:
        pass

    def wake(self, seen: int | None, wait_s: float) -> int:
        if seen is not None:
            time.sleep(min(wait_s, 0.2))
        return 0

    def assignment(self) -> None:
        return None

    def heartbeat(self, *_args: Any) -> list[int]:
        return []

    def proposals(self) -> list[dict[str, Any]]:
        return []

    def claim(self) -> None:
        return None

    def pending_signatures(self) -> list[dict[str, Any]]:
        self.signing_reads += 1
        answer = [p for p in self.pending if p["batch_id"] not in self.signed]
        if self.on_signing_read is not None:  # what changes at the coordinator once this read was answered
            self.on_signing_read()
        return answer

    def sign(self, batch_id: str, _signature: bytes) -> None:
        self.signed.append(batch_id)


class FlakyChainVoucher:
    """A voucher whose chain RPC is away for its first `down` vouching checks, then answers."""

    def __init__(self, down: int) -> None:
        self.down = down

    def signed(self, _commitment: object) -> None:
        if self.down:
            self.down -= 1
            raise OSError("connection refused: the chain's RPC is away")

    def check(self) -> None:
        pass


def quiet_node(client: QuietCoordinator, tmp_path: Path, **kwargs: Any) -> Any:
    from miner.node.journal import Journal
    from miner.node.serve import Node, NodeConfig
    from miner.node.stage_host import HostSettings
    from tests.miner.nodes import CACHE

    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", 31337, "0x" + "11" * 20, 0.2, 0.05)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    settings = HostSettings(tmp_path / "no-model", "tcp://127.0.0.1:1", CACHE)

    class NoExecutor:
        reader = None

    node = Node(
        config,
        Account.create(),
        client,
        device,
        settings,
        NoExecutor(),
        Journal(tmp_path / "j.jsonl"),
        **kwargs,
    )  # type: ignore[arg-type]
    node._join = lambda stop: True  # joined
    return node


def run_for(node: Any, seconds: float) -> None:
    stop = threading.Event()
    runner = threading.Thread(target=node.run, args=(stop,), daemon=True)
    runner.start()
    time.sleep(seconds)
    stop.set()
    runner.join(timeout=10)


@pytest.fixture
def signs_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every signing request checks out (the checks themselves are tested in tests/miner/test_node.py)."""
    from miner.node import serve as serve_module
    from miner.node.signer import Signed

    monkeypatch.setattr(
        serve_module,
        "check_and_sign",
        lambda *_a, **_k: Signed(b"\x01" * 65, object(), None),  # type: ignore[arg-type]
    )


def test_a_node_retries_a_signature_it_deferred_without_waiting_for_news(
    tmp_path: Path, signs_anything: None
) -> None:
    """FIXED (medium-high; no attacker needed: a chain RPC that fails for a moment, as the node's own
    comment expects). When vouching on-chain fails, `_sign_pending` skips the batch "for the next poll"; but
    the node no longer polls: it reads signing requests only on news, and nothing at the coordinator changes
    while it waits for this very signature (a live miner is never taken as gone), so the node never signs,
    the commitment never gets committed and the task expires unpaid. Fix: a turn that deferred something
    counts as busy (or schedules a retry after poll_s), and/or the node reads everything now and then without
    news."""
    client = QuietCoordinator(pending=[{"batch_id": "batch_x"}])
    node = quiet_node(client, tmp_path, voucher=FlakyChainVoucher(down=2))
    run_for(node, 2.5)
    assert client.signed == ["batch_x"], f"never signed after {client.signing_reads} read(s)"


def test_news_set_between_the_loops_check_and_its_clear_is_not_lost(
    tmp_path: Path, signs_anything: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FIXED (low-medium: a thread race, rare per wake but silent and unbounded). The loop computes
    `polls = busy or self._news.is_set() ...` and only then calls `self._news.clear()`: a `_listen` thread
    that sets the news between the two (the GIL may switch there) has its news wiped, the turn does not read
    (`polls` was False), and nothing sets it again until the next ring: a commitment to sign (or a proposal,
    or a unit) is never read. Reproduced by setting the news exactly in that window. Fix: clear only when the
    turn reads (`if polls: self._news.clear()`), or take the news with a lock/sequence number."""
    client = QuietCoordinator()
    node = quiet_node(client, tmp_path)
    monkeypatch.setattr(node, "_listen", lambda stop: None)  # the test is the listener
    monkeypatch.setattr(node, "_beat", lambda stop: None)

    class RacyNews(threading.Event):
        armed = False

        def is_set(self) -> bool:
            value = super().is_set()
            if self.armed:  # right after the loop's check, the coordinator has news and the listener says so
                self.armed = False
                client.pending.append({"batch_id": "batch_x"})
                self.set()
            return value

    news = RacyNews()
    node._news = news

    def first_read_done() -> None:
        news.armed = True
        client.on_signing_read = None

    client.on_signing_read = first_read_done
    run_for(node, 2.0)
    assert client.signed == ["batch_x"], f"the news was lost ({client.signing_reads} signing read(s))"


def test_a_node_without_news_still_reads_now_and_then(tmp_path: Path, signs_anything: None) -> None:
    """FIXED (medium; the node-side half of `test_a_ring_that_fails_is_lost_for_good`). Whatever made a
    ring go missing (a failed INCR, the race above, a Redis restored from a snapshot under the counter a node
    has seen), the node has no safety net: the 30 s refresh re-reads only the assignment and makes news only
    if it changed, so a commitment waiting for this node is never read. Modelled by a signing request that
    appears at the coordinator without its counter moving, with the node's read without news every 0.3 s.
    Fixed: the node reads everything every READ_ANYWAY_S, news or not."""
    from miner.node import serve as serve_module

    client = QuietCoordinator()
    original = serve_module.READ_ANYWAY_S
    serve_module.READ_ANYWAY_S = 0.3
    try:
        node = quiet_node(client, tmp_path)
        # committed once the node's first reads are done; its ring was lost
        threading.Timer(0.8, client.pending.append, args=({"batch_id": "batch_x"},)).start()
        run_for(node, 3.0)
    finally:
        serve_module.READ_ANYWAY_S = original
    assert client.signed == ["batch_x"], f"never read again ({client.signing_reads} signing read(s))"
