"""batches count their stored results (a status poll no longer counts the results table)

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from coordinator.db.columns import add_columns, drop_columns

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    add_columns(
        "batches",
        sa.Column("completed_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed_count", sa.Integer(), server_default="0", nullable=False),
    )
    for column, ok in (("completed_count", True), ("failed_count", False)):
        op.execute(
            sa.text(
                f"UPDATE batches SET {column} = (SELECT count(*) FROM results "
                "WHERE results.batch_id = batches.id AND results.ok = :ok)"
            ).bindparams(ok=ok)
        )


def downgrade() -> None:
    drop_columns("batches", "failed_count", "completed_count")
