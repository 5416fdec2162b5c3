"""batches count their stored results (a status poll no longer counts the results table)

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches", schema=None) as batch_op:
        batch_op.add_column(sa.Column("completed_count", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("failed_count", sa.Integer(), server_default="0", nullable=False))
    for column, ok in (("completed_count", True), ("failed_count", False)):
        op.execute(
            sa.text(
                f"UPDATE batches SET {column} = (SELECT count(*) FROM results "
                "WHERE results.batch_id = batches.id AND results.ok = :ok)"
            ).bindparams(ok=ok)
        )


def downgrade() -> None:
    with op.batch_alter_table("batches", schema=None) as batch_op:
        batch_op.drop_column("failed_count")
        batch_op.drop_column("completed_count")
