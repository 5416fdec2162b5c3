"""work units keep their lines' partial outputs

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.add_column(sa.Column("partial_outputs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.drop_column("partial_outputs")
