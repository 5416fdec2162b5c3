"""miners record whether their endpoint was reachable at join, and the relay their peers send through;
pipelines record how many microbatches they keep in flight

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    add_columns(
        "miners",
        sa.Column("reachable", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("probed_at", sa.BigInteger(), nullable=True),
        sa.Column("relay_endpoint", sa.String(length=255), nullable=True),
        sa.Column("relay_key", sa.String(length=40), nullable=True),
        sa.Column("relay_region", sa.String(length=64), nullable=True),
    )
    add_columns("pipelines", sa.Column("microbatches", sa.Integer(), nullable=True))


def downgrade() -> None:
    drop_columns("pipelines", "microbatches")
    drop_columns("miners", "relay_region", "relay_key", "relay_endpoint", "probed_at", "reachable")
