"""Liveness and readiness. `/livez`: the process answers. `/readyz` (and `/healthz`, its older name): the
database is reachable and migrated to this code's schema, Redis is reachable, and the chain answers with the
deployment's chain id and contracts; 503 with the reason of each failing check otherwise, never a
traceback."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from coordinator.chain import CoordinatorChain
from coordinator.db.migrate import head_revision, schema_revision

router = APIRouter(tags=["operations"])


@router.get("/livez", summary="Liveness: the process answers")
async def livez() -> dict[str, str]:
    return {"status": "ok"}


NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"description": "Not ready: `status` is `degraded` and each failing check says why"}
}


@router.get(
    "/readyz", summary="Readiness: database migrated, Redis and the chain reachable", responses=NOT_READY
)
@router.get("/healthz", summary="Readiness (the older name of /readyz)", responses=NOT_READY)
async def readyz(request: Request) -> JSONResponse:
    checks = {
        "database": await run_in_threadpool(_database, request),
        "redis": await _redis(request),
        "chain": await run_in_threadpool(_chain, request.app.state.chain),
    }
    ready = all(value in ("ok", NO_CHAIN) for value in checks.values())  # no chain: only its routes refuse
    status = 200 if ready else 503
    return JSONResponse({"status": "ok" if ready else "degraded", **checks}, status_code=status)


NO_CHAIN = "not configured: miners and batches answer 409 until BATCHMARKET_RPC_URL and a deployment are set"


def _database(request: Request) -> str:
    try:
        with request.app.state.database.session() as db:
            db.execute(text("SELECT 1"))
            revision = schema_revision(db.connection())
    except Exception as exc:  # report, don't crash: this endpoint exists to say what is down
        return f"error: {type(exc).__name__}"
    head = head_revision()
    if revision != head:
        return f"not migrated (at {revision or 'nothing'}, needs {head}): run `coordinator db upgrade`"
    return "ok"


async def _redis(request: Request) -> str:
    try:
        await request.app.state.redis.ping()
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return "ok"


def _chain(chain: CoordinatorChain | None) -> str:
    if chain is None:
        return NO_CHAIN
    market = chain.market
    try:
        chain_id = market.w3.eth.chain_id
        code = market.w3.eth.get_code(market.w3.to_checksum_address(market.deployment.task_registry))
    except Exception as exc:
        return f"error: the RPC does not answer ({type(exc).__name__})"
    if chain_id != market.deployment.chain_id:
        return f"wrong chain: the RPC is on chain {chain_id}, the deployment on {market.deployment.chain_id}"
    if not code:
        return f"no contract at the deployment's task registry {market.deployment.task_registry}"
    return "ok"
