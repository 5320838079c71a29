"""Alembic's entry point: migrations run on the connection `bot.state.store` hands over."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
# One transaction for the whole upgrade, opened (and locked) by bot.state.store.
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
