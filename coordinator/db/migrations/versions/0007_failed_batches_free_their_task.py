"""a failed batch no longer holds its task id: only batches that did not fail are unique per task

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"

LIVE = sa.text("status <> 'failed'")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("batches_task_id_key", "batches", type_="unique")
    else:  # SQLite's constraint has no name: batch mode names it by convention to drop it
        convention = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
        with op.batch_alter_table("batches", naming_convention=convention) as batch_op:
            batch_op.drop_constraint("uq_batches_task_id", type_="unique")
    op.create_index(
        "uq_batches_live_task", "batches", ["task_id"], unique=True, postgresql_where=LIVE, sqlite_where=LIVE
    )


def downgrade() -> None:
    op.drop_index("uq_batches_live_task", table_name="batches")
    # the names upgrade() looks for: PostgreSQL's own default, SQLite's by the batch-mode convention
    postgresql = op.get_bind().dialect.name == "postgresql"
    with op.batch_alter_table("batches", schema=None) as batch_op:
        batch_op.create_unique_constraint(
            "batches_task_id_key" if postgresql else "uq_batches_task_id", ["task_id"]
        )
