"""/healthz: the database is reachable and migrated to this code's schema, and Redis is reachable."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from coordinator.db.migrate import head_revision, schema_revision

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness and dependencies")
async def healthz(request: Request) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        with request.app.state.database.session() as db:
            db.execute(text("SELECT 1"))
            revision = schema_revision(db.connection())
        head = head_revision()
        checks["database"] = (
            "ok"
            if revision == head
            else f"not migrated (at {revision or 'nothing'}, needs {head}): run `coordinator db upgrade`"
        )
    except Exception as exc:  # report, don't crash: this endpoint exists to say what is down
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        await request.app.state.redis.ping()
        checks["redis"] = "ok"
    except Exception as exc:
        checks["redis"] = f"error: {type(exc).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status_code=200 if healthy else 503
    )
