"""a miner's restart breaks the leases of units its pipelines hold: join times and lease times

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    add_columns("miners", sa.Column("session_started_at", sa.BigInteger(), nullable=True))
    add_columns("work_units", sa.Column("leased_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    drop_columns("work_units", "leased_at")
    drop_columns("miners", "session_started_at")
