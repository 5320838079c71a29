"""The state: the store, its migrations and the one-writer lock (bot.state.sqlite)."""
