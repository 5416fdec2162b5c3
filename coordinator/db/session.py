"""Engines and sessions for SQLite (the embedded default) and PostgreSQL, from one URL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

# at most as many connections as the API has worker threads (anyio's default: 40); SQLite keeps them all open
# (a new one costs a file open and the pragmas), PostgreSQL closes the 20 above its steady pool when idle
MAX_CONNECTIONS = 40
# the API's requests take one of these before their session touches the pool (see coordinator.api.deps); the
# remaining connections serve code that takes one within a single call (uploads, /healthz)
REQUEST_SLOTS = 32


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=MAX_CONNECTIONS,
            max_overflow=0,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url, pool_size=MAX_CONNECTIONS // 2, max_overflow=MAX_CONNECTIONS // 2, pool_pre_ping=True
    )


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    # WAL lets readers (status polls) proceed while a worker writes; foreign keys are off by default in SQLite
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class Database:
    def __init__(self, url: str, on_commit: Callable[[sessionmaker[Session]], None] | None = None) -> None:
        """`on_commit` installs what the sessions do around their commits (coordinator.wakes.watch)."""
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        if on_commit is not None:
            on_commit(self.sessions)
        self.request_slots = anyio.CapacityLimiter(REQUEST_SLOTS)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on any error."""
        with self.sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
