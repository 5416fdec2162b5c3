"""The FastAPI application: `create_app(settings)` wires the database, Redis and the routers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DataError, OperationalError, ProgrammingError
from starlette.exceptions import HTTPException as StarletteHTTPException

from coordinator.api import (
    audits,
    batches,
    disputes,
    docs,
    files,
    health,
    metrics,
    miners,
    models,
    prices,
    relays,
    sessions,
    wakes,
)
from coordinator.api.auth import NonceStore, SessionKeys, command_slots
from coordinator.api.body_guard import BodyGuard
from coordinator.api.errors import (
    database_down_handler,
    http_error_handler,
    redis_down_handler,
    service_error_handler,
    unstorable_value_handler,
    validation_error_handler,
)
from coordinator.api.wakes import WakeWaits
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.session import Database
from coordinator.explorer import routes as explorer
from coordinator.explorer.reads import Explorer
from coordinator.nudge import Nudger
from coordinator.services.errors import ServiceError
from coordinator.services.live import LiveMembership
from coordinator.wakes import Doorbell, watch

DESCRIPTION = """OpenAI-compatible Batch API backed by an on-chain escrow.

Every call is signed by the caller's wallet: `Authorization: Wallet address=..., nonce=..., expiry=...,
signature=...` (see `client_sdk.auth`). A wallet sees only its own files and batches."""


def create_app(settings: Settings, chain: CoordinatorChain | None = None) -> FastAPI:
    """The app; `chain` (read-only is enough) serves the miner endpoints, which check registrations."""
    redis = Redis.from_url(settings.redis_url)
    sync_redis = SyncRedis.from_url(settings.redis_url)
    database = Database(settings.database_url, on_commit=partial(watch, doorbell=Doorbell(sync_redis)))
    slots = command_slots(redis)
    waits = WakeWaits(redis, slots)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await waits.close()
        await redis.aclose()
        sync_redis.close()
        database.dispose()

    app = FastAPI(
        title="batchmarket coordinator",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by coordinator.api.docs, from a package instead of a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.database = database
    app.state.redis = redis
    app.state.wakes = waits
    app.state.redis_slots = slots
    app.state.nonces = NonceStore(redis, slots)
    app.state.sessions = SessionKeys(redis)
    app.state.live = LiveMembership(sync_redis, settings.heartbeat_ttl_s)
    app.state.live_link_keys = relays.live_link_keys_reader(database, app.state.live)
    metrics.install(app, database, app.state.live)
    app.state.chain = chain
    app.state.nudge = Nudger(settings.redis_url)
    app.add_exception_handler(ServiceError, service_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(DataError, unstorable_value_handler)
    app.add_exception_handler(OperationalError, database_down_handler)
    app.add_exception_handler(ProgrammingError, database_down_handler)
    for unreachable in (RedisConnectionError, RedisTimeoutError):  # BusyLoadingError is a ConnectionError
        app.add_exception_handler(unreachable, redis_down_handler)
    routers = (
        files.router,
        batches.router,
        prices.router,
        models.router,
        sessions.router,
        miners.router,
        wakes.router,
        relays.router,
        disputes.router,
        audits.router,
        health.router,
    )
    for router in routers:
        app.include_router(router)
    docs.install(app)
    explorer.install(app, Explorer(database, app.state.live, chain, lambda: app.state.settings))
    app.add_middleware(
        BodyGuard,
        max_bytes=lambda: app.state.settings.max_body_bytes,
        max_json_bytes=lambda: app.state.settings.max_json_bytes,
    )
    return app
