"""pipelines' stages in a table of their own, indexed by miner (a miner's pipelines without reading all plans)

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    stages = op.create_table(
        "pipeline_stages",
        sa.Column("pipeline_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("miner", sa.String(length=42), nullable=False),
        sa.ForeignKeyConstraint(["pipeline_id"], ["pipelines.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pipeline_id", "position"),
    )
    op.create_index("ix_pipeline_stages_miner", "pipeline_stages", ["miner", "position"])
    pipelines = sa.table("pipelines", sa.column("id", sa.Integer()), sa.column("stages", sa.JSON()))
    rows = [
        {"pipeline_id": pipeline_id, "position": position, "miner": stage["miner"]}
        for pipeline_id, stages_json in op.get_bind().execute(sa.select(pipelines.c.id, pipelines.c.stages))
        for position, stage in enumerate(stages_json)
    ]
    if rows:
        op.bulk_insert(stages, rows)


def downgrade() -> None:
    op.drop_index("ix_pipeline_stages_miner", table_name="pipeline_stages")
    op.drop_table("pipeline_stages")
