"""Dependencies shared by the routers: a database session per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import contextmanager_in_threadpool
from sqlalchemy.orm import Session

from coordinator.config import Settings
from coordinator.db.session import Database


async def session(request: Request) -> AsyncIterator[Session]:
    """The request's session, once a connection slot is free. A request holds its connection from its endpoint
    until its response is sent, and in between FastAPI validates the response on a worker thread; if worker
    threads waited on an exhausted pool, the requests holding its connections could wait for a worker thread
    for ever (until the pool's 30 s timeout). Waiting for a slot here, on the event loop, holds no thread."""
    database: Database = request.app.state.database
    async with database.request_slots, contextmanager_in_threadpool(database.session()) as db:
        yield db


def settings(request: Request) -> Settings:
    value: Settings = request.app.state.settings
    return value


DbSession = Annotated[Session, Depends(session)]
AppSettings = Annotated[Settings, Depends(settings)]
