"""miners publish the public key of their stage links

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.add_column(sa.Column("link_key", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.drop_column("link_key")
