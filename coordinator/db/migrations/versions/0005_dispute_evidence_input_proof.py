"""dispute evidence carries the request line's proof in the task's input tree

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dispute_evidence", schema=None) as batch_op:
        batch_op.add_column(sa.Column("input_proof", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dispute_evidence", schema=None) as batch_op:
        batch_op.drop_column("input_proof")
