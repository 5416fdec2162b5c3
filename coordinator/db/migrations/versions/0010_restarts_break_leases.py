"""a miner's restart breaks the leases of units its pipelines hold: join times and lease times

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.add_column(sa.Column("session_started_at", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.add_column(sa.Column("leased_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.drop_column("leased_at")
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.drop_column("session_started_at")
