"""The state's migrations (Alembic): revision N is schema version N, for SQLite and PostgreSQL."""
