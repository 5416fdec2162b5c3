"""Dependencies shared by the routers: a database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from coordinator.config import Settings


def session(request: Request) -> Iterator[Session]:
    with request.app.state.database.session() as db:
        yield db


def settings(request: Request) -> Settings:
    value: Settings = request.app.state.settings
    return value


DbSession = Annotated[Session, Depends(session)]
AppSettings = Annotated[Settings, Depends(settings)]
