"""The state: the ports the rest uses, the SQLite or PostgreSQL store, the read-only state."""
