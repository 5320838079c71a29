"""The read-only state: `--dry-run`, `report`, the page and /readyz read, and record nothing.

It reads the state where it is (no copy) over a connection the database itself refuses
writes on (SQLite `mode=ro`, PostgreSQL `default_transaction_read_only`). It is the writable
state's own class (`Store`) told what it has and that it records nothing: each method says
once (`bot.state.db.reads`, `records`) what it reads as where its table is missing and what
it returns recording nothing, so a dry-run cycle runs the same code. A state older than
this bot is read as it is (a table it lacks reads as empty: readers never migrate); one
newer than this bot is refused. Typed `ReadState`: its users see the ports, no more.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from bot.state import db
from bot.state.ports import ReadState, StoreError
from bot.state.store import Store


def open_read_only(where: Path | str) -> ReadState:
    """Read the existing state at a SQLite path or a PostgreSQL URL (never created)."""
    where = str(where)
    if db.is_url(where):
        engine = db.pg_engine(where, read_only=True)
    else:
        if not Path(where).is_file():
            raise StoreError(f"no state at {where}: run `ci-status-bot once` or `run` first")
        engine = db.sqlite_engine(where, read_only=True)
    try:
        tables, version = _check(engine, where)
        return Store(engine, where, tables=tables, current=version == db.HEAD, recording=False)
    except BaseException:
        engine.dispose()
        raise


def empty_state() -> ReadState:
    """A state with nothing in it (a dry run before any state exists)."""
    store = Store.open(":memory:")
    store.recording = False
    return store


def open_or_empty(where: Path | str) -> ReadState:
    """The existing state, or an empty one when a SQLite state does not exist yet."""
    where = str(where)
    if not db.is_url(where) and not Path(where).exists():
        return empty_state()
    return open_read_only(where)


def _check(engine: Engine, where: str) -> tuple[frozenset[str], int]:
    """The state's tables and version; StoreError when unreadable or newer than this bot."""
    try:
        with engine.connect() as conn:
            version = db.schema_version(conn)
            db.refuse_newer(version, where)
            tables = frozenset(conn.dialect.get_table_names(conn))
            if "comments" in tables:
                columns = {c["name"] for c in conn.dialect.get_columns(conn, "comments")}
                if "node_id" not in columns:
                    raise StoreError(
                        f"the state at {db.describe(where)} is from before schema version 2: "
                        "run `ci-status-bot once` to upgrade it"
                    )
            return tables, version
    except DBAPIError as exc:
        raise db.state_error(where, exc) from None
