"""dispute evidence carries the request line's proof in the task's input tree

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    add_columns("dispute_evidence", sa.Column("input_proof", sa.JSON(), nullable=True))


def downgrade() -> None:
    drop_columns("dispute_evidence", "input_proof")
