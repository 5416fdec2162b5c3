"""batches remember the assigned miners that revoked their signer (their lines are never routed to them again)

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    add_columns("batches", sa.Column("revoked_miners", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    drop_columns("batches", "revoked_miners")
