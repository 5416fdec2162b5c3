"""The migrations build exactly the schema the models declare, on SQLite and PostgreSQL, and every one of them
steps down and back up: a migration's downgrade undoes its upgrade."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from coordinator.db.migrate import downgrade, head_revision, schema_revision, upgrade
from coordinator.db.models import Base


def schema_drift(url: str) -> list[Any]:
    """What alembic's autogenerate would change to make the database match the models, server defaults
    included (nothing: no drift)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_server_default": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return schema_revision(connection)
    finally:
        engine.dispose()


def test_the_migrated_schema_is_the_models_schema(database_url: str) -> None:
    assert revision_of(database_url) == head_revision()
    assert schema_drift(database_url) == []


def test_every_migration_steps_down_and_back_up(database_url: str) -> None:
    downgrade(database_url, "base")
    assert revision_of(database_url) is None
    upgrade(database_url, "0001")
    for _ in range(int(head_revision()) - 1):  # each step: up one, down one (its downgrade), up one again
        upgrade(database_url, "+1")
        downgrade(database_url, "-1")
        upgrade(database_url, "+1")
    assert revision_of(database_url) == head_revision()
    assert schema_drift(database_url) == []
