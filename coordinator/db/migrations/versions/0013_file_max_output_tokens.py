"""input files record their lines' max_tokens added up (the most output a task for the file can be billed)

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from coordinator.db.columns import add_columns, drop_columns

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    add_columns("files", sa.Column("max_output_tokens", sa.BigInteger(), nullable=True))
    op.execute(
        sa.text(
            "UPDATE files SET max_output_tokens = (SELECT coalesce(sum(max_tokens), 0) FROM requests "
            "WHERE requests.file_id = files.id) WHERE purpose = 'batch'"
        )
    )


def downgrade() -> None:
    drop_columns("files", "max_output_tokens")
