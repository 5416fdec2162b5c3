"""Alembic environment: migrations run online against the URL the caller configured."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from coordinator.db.models import Base

config = context.config
connectable = engine_from_config(config.get_section(config.config_ini_section, {}), poolclass=pool.NullPool)
with connectable.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
    )
    with context.begin_transaction():
        context.run_migrations()
