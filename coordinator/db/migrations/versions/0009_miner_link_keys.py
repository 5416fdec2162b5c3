"""miners publish the public key of their stage links

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.db.columns import add_columns, drop_columns

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    add_columns("miners", sa.Column("link_key", sa.String(length=40), nullable=True))


def downgrade() -> None:
    drop_columns("miners", "link_key")
