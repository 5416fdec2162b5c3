"""The coordinator's durable state: SQLAlchemy models, sessions and Alembic migrations."""
