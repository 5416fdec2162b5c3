"""work units keep their lines' partial outputs

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    add_columns("work_units", sa.Column("partial_outputs", sa.JSON(), nullable=True))


def downgrade() -> None:
    drop_columns("work_units", "partial_outputs")
