"""miners record whether their endpoint was reachable at join, and the relay their peers send through;
pipelines record how many microbatches they keep in flight

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reachable", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("probed_at", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("relay_endpoint", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("relay_key", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("relay_region", sa.String(length=64), nullable=True))
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.add_column(sa.Column("microbatches", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.drop_column("microbatches")
    with op.batch_alter_table("miners", schema=None) as batch_op:
        for column in ("relay_region", "relay_key", "relay_endpoint", "probed_at", "reachable"):
            batch_op.drop_column(column)
