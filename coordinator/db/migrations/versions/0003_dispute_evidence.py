"""dispute evidence

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "dispute_evidence",
        sa.Column("dispute_id", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("challenger", sa.String(length=42), nullable=False),
        sa.Column("leaf_hash", sa.String(length=66), nullable=False),
        sa.Column("request_line", sa.Text(), nullable=False),
        sa.Column("result_line", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("dispute_id"),
    )
    with op.batch_alter_table("dispute_evidence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dispute_evidence_task_id"), ["task_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dispute_evidence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dispute_evidence_task_id"))

    op.drop_table("dispute_evidence")
