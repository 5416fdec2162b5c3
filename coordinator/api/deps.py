"""Dependencies shared by the routers: a database session per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import anyio
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from coordinator.config import Settings
from coordinator.db.session import Database


async def session(request: Request) -> AsyncIterator[Session]:
    """The request's session, once a connection slot is free; committed (or rolled back) once the endpoint's
    response is built and before it is sent, so that what a client is told was stored is stored, and a
    failed commit answers as an error instead of after a 200.

    A request holds its connection from its endpoint until then, and in between FastAPI validates the
    response on a worker thread; if worker threads waited on an exhausted pool, the requests holding its
    connections could wait for a worker thread for ever (until the pool's 30 s timeout). Waiting for a slot
    here, on the event loop, holds no thread."""
    database: Database = request.app.state.database
    async with database.request_slots:
        db = database.sessions()  # no I/O yet: it connects on first use, in the endpoint's worker thread
        succeeded = False
        try:
            yield db
            succeeded = True
        finally:
            # commit (or roll back) and return the connection on a thread of its own, never queued behind
            # requests that wait for a worker thread
            await anyio.to_thread.run_sync(end_session, db, succeeded, limiter=anyio.CapacityLimiter(1))


def end_session(db: Session, commit: bool) -> None:
    with db:  # closing rolls back whatever was not committed
        if commit:
            db.commit()


def settings(request: Request) -> Settings:
    value: Settings = request.app.state.settings
    return value


# scope="function": the session ends before the response is sent (by default FastAPI ends it after)
DbSession = Annotated[Session, Depends(session, scope="function")]
AppSettings = Annotated[Settings, Depends(settings)]
