"""results indexed by time (the explorer's throughput over the last half hour reads them so)

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.create_index("ix_results_created_at", "results", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_results_created_at", table_name="results")
