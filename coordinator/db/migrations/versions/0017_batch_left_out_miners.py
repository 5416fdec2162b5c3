"""batches remember the assigned miners they left out (a revoked signer, no signature in time): none of their
lines is routed to them again; and a results file's batch is found by an index

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from coordinator.db.columns import add_columns, drop_columns

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    add_columns("batches", sa.Column("left_out_miners", sa.JSON(none_as_null=True), nullable=True))
    op.create_index("ix_batches_output_file_id", "batches", ["output_file_id"])
    op.create_index("ix_batches_error_file_id", "batches", ["error_file_id"])


def downgrade() -> None:
    op.drop_index("ix_batches_error_file_id", table_name="batches")
    op.drop_index("ix_batches_output_file_id", table_name="batches")
    drop_columns("batches", "left_out_miners")
