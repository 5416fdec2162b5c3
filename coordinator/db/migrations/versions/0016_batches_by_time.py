"""batches indexed by time (the explorer's market page counts the last day's batches so)

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.create_index("ix_batches_created_at", "batches", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_batches_created_at", table_name="batches")
