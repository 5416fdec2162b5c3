"""Celery workers on a Redis broker. A beat task sweeps every few seconds and queues one `advance` per batch
that still has something to do; `advance` runs one idempotent lifecycle step under a per-batch Redis lock held
on a renewed lease (coordinator.leases), so a worker that is gone frees its batch within seconds.
Tasks are acknowledged late, so a worker killed mid-step loses nothing: the step runs again (here or on
another worker) and finds the chain and the database as they were left."""

from __future__ import annotations

import logging
import os
from functools import cache, partial

from celery import Celery
from redis import Redis
from sqlalchemy import or_, select

from client_sdk.keys import load_account
from client_sdk.protocol.constants import ACTIVE_BATCH_STATUSES, SETTLING_BATCH_STATUSES
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.leases import leased_lock
from coordinator.nudge import ADVANCE
from coordinator.services import lifecycle
from coordinator.services.live import LiveMembership
from coordinator.wakes import Doorbell, watch

log = logging.getLogger("batchmarket.worker")


@cache
def runtime() -> tuple[Settings, Database, lifecycle.Context, Redis]:
    """This worker process's connections, made on first use from the environment."""
    settings = Settings.from_env()
    if settings.rpc_url is None or settings.deployment_file is None:
        raise RuntimeError("the worker needs BATCHMARKET_RPC_URL and BATCHMARKET_DEPLOYMENT")
    redis = Redis.from_url(settings.redis_url)
    chain = CoordinatorChain.connect(settings.rpc_url, settings.deployment_file, load_account(None), redis)
    return (
        settings,
        Database(settings.database_url, on_commit=partial(watch, doorbell=Doorbell(redis))),
        lifecycle.Context(settings, chain, LiveMembership(redis, settings.heartbeat_ttl_s)),
        redis,
    )


# `coordinator worker` connects in the parent (to fail early on a bad key or chain), then Celery forks its
# pool: a child must not share the parent's sockets (its RPC's keep-alive connection, Redis, the database
# pool), or their requests interleave on one connection ("Invalid request", "RemoteDisconnected"). Each child
# connects anew on first use.
os.register_at_fork(after_in_child=runtime.cache_clear)


def make_celery(broker_url: str, sweep_s: float) -> Celery:
    app = Celery("batchmarket", broker=broker_url)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        beat_schedule={"sweep": {"task": "batchmarket.sweep", "schedule": sweep_s}},
        worker_hijack_root_logger=False,
    )

    @app.task(name=ADVANCE)
    def advance(batch_id: str) -> str | None:
        _settings, database, ctx, redis = runtime()
        with leased_lock(redis, f"lock:batch:{batch_id}") as held:
            if not held:
                return None  # another worker is on it
            with database.session() as session:
                before = session.get(Batch, batch_id)
                status_before = before.status if before else None
                status = lifecycle.advance(session, ctx, batch_id)
        if status != status_before:
            log.info("batch %s: %s -> %s", batch_id, status_before, status)
            advance.delay(batch_id)  # the next step may be ready at once: do not wait for the sweep
        return status

    @app.task(name="batchmarket.sweep")
    def sweep() -> int:
        _settings, database, _ctx, _redis = runtime()
        with database.session() as session:
            ids = session.scalars(
                select(Batch.id).where(
                    or_(
                        Batch.status.in_(ACTIVE_BATCH_STATUSES),
                        Batch.status.in_(SETTLING_BATCH_STATUSES)
                        & Batch.commit_tx.is_not(None)
                        & ~Batch.finalized,
                        # cancelled before anything was committed: its task expires at the deadline
                        (Batch.status == "cancelled") & Batch.commit_tx.is_(None) & ~Batch.finalized,
                    )
                )
            ).all()
        for batch_id in ids:
            advance.delay(batch_id)
        return len(ids)

    return app
