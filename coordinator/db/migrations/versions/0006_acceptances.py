"""miners accept a batch's proposed assignment before their stake is locked

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from coordinator.db.columns import add_columns, drop_columns

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    add_columns("batches", sa.Column("proposal", sa.JSON(), nullable=True))
    op.create_table(
        "acceptances",
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("miner", sa.String(length=42), nullable=False),
        sa.Column("expiry", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.String(length=132), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("batch_id", "miner"),
    )


def downgrade() -> None:
    op.drop_table("acceptances")
    drop_columns("batches", "proposal")
