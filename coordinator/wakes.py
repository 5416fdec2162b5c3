"""Waking miners' nodes when something they act on changes, instead of having idle nodes poll.

Each miner has a wake counter in Redis. A committed change that a miner acts on (a proposal naming it, a
commitment it must sign or sign again, a plan it is part of, a work unit queued on a pipeline it heads, a
co-stage that moved) bumps the counters of the miners it concerns and announces each bump on one channel.
A node long-polls `GET /v1/miners/wake` with the counter it saw last (coordinator.api.wakes): the answer comes
at once when the counter has moved, else when the channel announces it or the wait ends. Best effort, as the
workers' nudges are: a lost announcement costs one wait's length, a ring Redis refused goes with the next one,
a node reads everything now and then without news (miner.node.serve.READ_ANYWAY_S), and a node reads what it
acts on after each wake, so no change is acted on from the announcement alone."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import event, inspect, select
from sqlalchemy.orm import Session, sessionmaker

from coordinator.db.models import Batch, Miner, PipelineRecord, PipelineStage, Signature, WorkUnit

log = logging.getLogger("batchmarket.wakes")
CHANNEL = "batchmarket:wake"
_PENDING = "wake"  # session.info key: the miners to wake once the session's transaction commits


def counter_key(address: str) -> str:
    return f"miner:wake:{address.lower()}"


# A counter Redis lost (a restart without its append-only file, a failover, a flush) starts again at a random
# value, not at 0: counting from 0 again would repeat values nodes have seen, and a node waiting with `seen`
# equal to the repeated value would take the ring for no news.
COUNTER_START_BOUND = 2**48  # far under the wake route's bound on `seen` (2**63), however long a node runs
_BUMP = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])
"""


class Doorbell:
    """Bumps miners' wake counters and announces each bump (a synchronous Redis client: called from the
    workers and from the API's worker threads, once a transaction committed). A ring Redis refused is owed:
    it goes with the next ring of this process (and the nodes read everything now and then anyway)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._owed: set[str] = set()
        self._lock = threading.Lock()

    def ring(self, miners: Iterable[str]) -> None:
        with self._lock:
            addresses = sorted({m.lower() for m in miners} | self._owed)
            self._owed.clear()
        if not addresses:
            return
        pipe = self.redis.pipeline(transaction=False)
        for address in addresses:
            # before the announcement: a waiter woken reads the new count
            pipe.eval(_BUMP, 1, counter_key(address), secrets.randbelow(COUNTER_START_BOUND))
            pipe.publish(CHANNEL, address)
        try:
            pipe.execute()
        except RedisError as exc:
            log.warning("could not wake %d miner(s), owed to the next ring: %s", len(addresses), exc)
            with self._lock:
                self._owed.update(addresses)


def _changed(obj: Any, *names: str) -> bool:
    state = inspect(obj)
    return any(state.attrs[name].history.has_changes() for name in names)


def concerned(session: Session) -> set[str]:
    """The miners whose nodes act on the changes this session is about to flush."""
    miners: set[str] = set()
    for obj in list(session.new) + list(session.dirty):
        if isinstance(obj, Batch):
            proposed = (obj.proposal or {}).get("miners", [])
            if _changed(obj, "proposal", "status"):
                miners.update(proposed)
            if _changed(obj, "commitment", "status", "miners"):
                miners.update(obj.miners or [])
        elif isinstance(obj, PipelineRecord) and _changed(obj, "active", "stages"):
            miners.update(obj.miners)  # the old plan's are woken by ensure_plan; a spare's assignment stays
        elif isinstance(obj, WorkUnit) and obj.status == "queued" and _changed(obj, "status", "pipeline_id"):
            pipeline = session.get(PipelineRecord, obj.pipeline_id)
            if pipeline is not None:
                miners.add(pipeline.head)
        elif isinstance(obj, Miner) and _changed(obj, "endpoint", "link_key", "relay_endpoint", "relay_key"):
            # its co-stages dial it where it now listens, by the key it now has
            miners.update(_co_stages(session, obj.address))
    miners.update(s.miner for s in session.deleted if isinstance(s, Signature))  # asked to sign again
    return miners


def wake_on_commit(session: Session, miners: Iterable[str]) -> None:
    """Wakes `miners` once the session's transaction commits: for a change the ORM does not see (a bulk
    UPDATE)."""
    session.info.setdefault(_PENDING, set()).update(miners)


def _co_stages(session: Session, address: str) -> set[str]:
    """The miners of the active pipelines `address` is a stage of."""
    mine = select(PipelineStage.pipeline_id).where(PipelineStage.miner == address)
    query = (
        select(PipelineStage.miner)
        .join(PipelineRecord, PipelineRecord.id == PipelineStage.pipeline_id)
        .where(PipelineRecord.active, PipelineStage.pipeline_id.in_(mine))
    )
    return set(session.scalars(query))


def watch(sessions: sessionmaker[Session], doorbell: Doorbell) -> None:
    """Wakes the miners each committed transaction of `sessions` concerns (none for a rolled-back one)."""

    @event.listens_for(sessions, "before_flush")
    def _collect(session: Session, _context: object, _instances: object) -> None:
        with session.no_autoflush:
            wake_on_commit(session, concerned(session))

    @event.listens_for(sessions, "after_commit")
    def _ring(session: Session) -> None:
        doorbell.ring(session.info.pop(_PENDING, set()))

    @event.listens_for(sessions, "after_rollback")
    def _drop(session: Session) -> None:
        session.info.pop(_PENDING, None)
