"""batches say why they are waiting

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    add_columns("batches", sa.Column("status_detail", sa.Text(), nullable=True))


def downgrade() -> None:
    drop_columns("batches", "status_detail")
