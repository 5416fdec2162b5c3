"""Adding and dropping columns in a migration. Both go through Alembic's batch mode: SQLite cannot alter a
column in place, so there the table is copied with the change; PostgreSQL alters it directly."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Adds `columns` to `table`."""
    with op.batch_alter_table(table) as batch:
        for column in columns:
            batch.add_column(column)


def drop_columns(table: str, *names: str) -> None:
    """Drops the columns `names` from `table`, in that order."""
    with op.batch_alter_table(table) as batch:
        for name in names:
            batch.drop_column(name)
