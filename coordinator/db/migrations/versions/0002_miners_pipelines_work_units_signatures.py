"""miners, pipelines, work units, signatures

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from coordinator.db.columns import add_columns, drop_columns

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "miners",
        sa.Column("address", sa.String(length=42), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("endpoint", sa.String(length=255), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("gpu", sa.String(length=64), nullable=False),
        sa.Column("memory_gb", sa.Double(), nullable=False),
        sa.Column("tflops", sa.Double(), nullable=False),
        sa.Column("mem_bandwidth_gb_s", sa.Double(), nullable=False),
        sa.Column("layer_latency_ms", sa.Double(), nullable=False),
        sa.Column("joined_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("address"),
    )
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_miners_model"), ["model"], unique=False)

    op.create_table(
        "pipelines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("stages", sa.JSON(), nullable=False),
        sa.Column("members", sa.JSON(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pipelines_model"), ["model"], unique=False)

    op.create_table(
        "signatures",
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("miner", sa.String(length=42), nullable=False),
        sa.Column("signature", sa.String(length=132), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("batch_id", "miner"),
    )
    op.create_table(
        "work_units",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("line_indices", sa.JSON(), nullable=False),
        sa.Column("pipeline_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("leased_until", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["pipeline_id"],
            ["pipelines.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_work_units_batch_id"), ["batch_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_work_units_pipeline_id"), ["pipeline_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_work_units_status"), ["status"], unique=False)

    add_columns("results", sa.Column("stage_layers", sa.JSON(), nullable=True))
    add_columns(
        "batches",
        sa.Column("miners", sa.JSON(), nullable=True),
        sa.Column("commitment", sa.JSON(), nullable=True),
        sa.Column("finalized", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    drop_columns("results", "stage_layers")
    drop_columns("batches", "finalized", "commitment", "miners")

    with op.batch_alter_table("work_units", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_work_units_status"))
        batch_op.drop_index(batch_op.f("ix_work_units_pipeline_id"))
        batch_op.drop_index(batch_op.f("ix_work_units_batch_id"))

    op.drop_table("work_units")
    op.drop_table("signatures")
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pipelines_model"))

    op.drop_table("pipelines")
    with op.batch_alter_table("miners", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_miners_model"))

    op.drop_table("miners")
