"""The state's database: SQLite (a file, the default) or PostgreSQL (`state.url`).

The engines, the schema version and its migration (Alembic, `migrations/`; a state written
by a newer bot is refused, naming both versions), and `Database`: the connections every
table's methods read and write through, each write one transaction. A read-only database
(`bot.state.readonly`) has the tables it has and records nothing: `reads` and `records`
say, on each method once, what it reads as where its table is missing and what a method
that records nothing returns.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, Final, ParamSpec, Self, TypeVar, cast

from sqlalchemy import Connection, Engine, Row, Select, create_engine, event, select, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool, StaticPool

from bot.state import schema as t
from bot.state.closing import Closing
from bot.state.ports import StoreError

# Pull requests whose records are read (or whose triage rows are touched) in one statement:
# well under SQLite's and PostgreSQL's limits on bound parameters.
RECORDS_BATCH = 500
_Key = TypeVar("_Key", int, str)  # what is batched: pull request numbers, head commits
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
HEAD = 19  # the schema version this bot writes: the newest revision in migrations/versions
SCHEMA_VERSION = HEAD
EPOCH_SINCE = 15  # the schema version that gave every state its epoch
_ADVISORY_MIGRATION_KEY = 0x43495342  # one transaction-scoped lock while a PostgreSQL migrates
_DB = TypeVar("_DB", bound="Database")
_P = ParamSpec("_P")
_R = TypeVar("_R")
TABLES: frozenset[str] = frozenset(t.metadata.tables)  # every table of this bot's schema


def to_text(moment: datetime) -> str:
    """An aware datetime as fixed-width ISO-8601 UTC text (sorts as time does)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: pass an aware (UTC) datetime")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def from_text(value: str) -> datetime:
    """Stored text back to an aware UTC datetime."""
    return datetime.fromisoformat(value).astimezone(UTC)


def is_url(where: str) -> bool:
    """Whether the state's location is a PostgreSQL URL (else a SQLite path)."""
    return where.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def describe(where: str) -> str:
    """The state's location for messages: a path, or the URL without its password."""
    if not is_url(where):
        return where
    try:
        return make_url(where).render_as_string(hide_password=True)
    except ArgumentError:
        return "the configured PostgreSQL URL"


def _pg_url(where: str) -> str:
    """postgresql://... as SQLAlchemy's psycopg 3 dialect spells it."""
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if where.startswith(scheme):
            return "postgresql+psycopg://" + where[len(scheme) :]
    raise ValueError(f"not a PostgreSQL URL: {describe(where)}")


def _host(where: str) -> str:
    """The server a PostgreSQL URL names (for the message when it cannot be reached)."""
    try:
        url = make_url(_pg_url(where))
    except (ArgumentError, ValueError):
        return "?"
    host = url.host or str(url.query.get("host") or "localhost")
    return f"{host}:{url.port or 5432}"


def sqlite_engine(path: str, *, read_only: bool) -> Engine:
    """An engine on a SQLite file (or ':memory:'), transactions begun by the bot itself."""
    if path == ":memory:":
        engine = create_engine(
            "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    elif read_only:  # the database refuses every write; a fresh connection for each read
        uri = Path(path).resolve().as_uri()
        engine = create_engine(
            "sqlite://",
            poolclass=NullPool,
            creator=lambda: _sqlite_readonly(uri),
        )
    else:
        engine = create_engine(
            f"sqlite:///{path}",
            connect_args={"check_same_thread": False, "timeout": 10.0},
        )

    @event.listens_for(engine, "connect")
    def _connect(dbapi: Any, _: Any) -> None:
        dbapi.isolation_level = None  # pysqlite's own BEGIN handling off: ours below
        if not read_only and path != ":memory:":
            dbapi.execute("PRAGMA journal_mode=WAL")
            dbapi.execute("PRAGMA synchronous=NORMAL")

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        writing = conn.get_execution_options().get("bot_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

    return engine


def _sqlite_readonly(uri: str) -> Any:
    """A read-only connection; a WAL state in a folder it cannot write to is read immutable."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        connection = sqlite3.connect(
            f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
    return connection


# A session left idle inside a transaction this long is ended by the server: a replica stopped
# mid-write (SIGSTOP, a frozen VM) keeps its row locks, and the others wait on it no longer.
IDLE_IN_TRANSACTION_S: Final = 10


def pg_engine(url: str, *, read_only: bool) -> Engine:
    """A pooled engine on a PostgreSQL server (psycopg 3); read-only sessions refuse writes."""
    options = "-c default_transaction_read_only=on" if read_only else ""
    connect_args: dict[str, Any] = {"connect_timeout": 5, "application_name": "ci-status-bot"}
    if options:
        connect_args["options"] = options
    engine = create_engine(_pg_url(url), pool_pre_ping=True, pool_size=4, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _bound_idle_transactions(dbapi: Any, _: Any) -> None:
        # a SET, not a startup option: PgBouncer refuses unknown startup parameters
        autocommit, dbapi.autocommit = dbapi.autocommit, True
        dbapi.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'")
        dbapi.autocommit = autocommit

    return engine


def schema_version(conn: Connection) -> int:
    """The schema version of the state (0: empty); an unknown revision is reported as such."""
    dialect = conn.dialect.name
    tables = set(conn.dialect.get_table_names(conn))
    if "alembic_version" in tables:
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        if row is not None:
            revision = str(row[0])
            if not revision.isdigit():
                raise StoreError(
                    f"the state has schema revision {revision!r}, unknown to this bot "
                    f"(it knows up to {HEAD}): written by a newer version?"
                )
            return int(revision)
    if dialect == "sqlite":  # written before Alembic: the hand-rolled migrations' counter
        return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())
    return 0


def read_epoch(conn: Connection) -> str:
    """The state's epoch as recorded ("" when it has none)."""
    found = conn.execute(select(t.state_identity.c.epoch).limit(1)).scalar()
    return found if isinstance(found, str) else ""


def refuse_newer(version: int, where: str) -> None:
    """Raise StoreError when the state was written by a newer bot (both versions named)."""
    if version > HEAD:
        raise StoreError(
            f"state {describe(where)}: its schema version is {version}; this bot knows up to "
            f"{HEAD} (written by a newer version?)"
        )


def migrate(engine: Engine, where: str) -> None:
    """Bring the state to this bot's schema, in one transaction, one migrating process."""
    with engine.connect() as conn:
        if schema_version(conn) == HEAD:
            conn.rollback()
            return
        conn.rollback()
    writer = engine.execution_options(bot_write=True)
    with writer.connect() as conn, conn.begin():
        if conn.dialect.name == "postgresql":  # released at commit: PgBouncer-safe
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_MIGRATION_KEY})
        current = schema_version(conn)
        refuse_newer(current, where)
        if current < HEAD:
            _upgrade(conn, current)


def _upgrade(conn: Connection, current: int) -> None:
    """Run Alembic's upgrade to head on `conn` (inside its transaction)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "bot.state:migrations")
    config.attributes["connection"] = conn
    tables = set(conn.dialect.get_table_names(conn))
    if current > 0 and "alembic_version" not in tables:  # a state the old code migrated
        command.stamp(config, f"{current:04d}")
    command.upgrade(config, "head")
    if conn.dialect.name == "sqlite":  # an older bot reads this and refuses a newer state
        conn.exec_driver_sql(f"PRAGMA user_version = {HEAD:d}")


class Database(Closing):
    """Connections to a migrated state; every write is one transaction."""

    def __init__(
        self,
        engine: Engine,
        where: str,
        *,
        tables: frozenset[str] = TABLES,
        current: bool = True,
        recording: bool = True,
    ) -> None:
        """Wrap an engine on a migrated state; use `Store.open` (or `bot.state.readonly`).

        `tables`: those the state has; `current`: it has this bot's schema (else a table may
        lack newer columns); `recording`: False for a read-only state, which records nothing.
        """
        self._engine = engine
        self._writer = engine.execution_options(bot_write=True)
        self.where = where
        self.dialect = engine.dialect.name
        self.tables, self.current, self.recording = tables, current, recording
        self._epoch: str | None = None  # read once: a state's epoch never changes
        # SQLite: one writer at a time in this process too (its connection is shared in memory)
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if self.dialect == "sqlite" else nullcontext()
        )

    @classmethod
    def open(cls, where: Path | str) -> Self:
        """Open (creating on first use) a SQLite path (or ':memory:') or a PostgreSQL URL."""
        where = str(where)
        engine = _engine_for(where)
        try:
            migrate(engine, where)
        except DBAPIError as exc:
            engine.dispose()
            raise state_error(where, exc) from None
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, where)

    def close(self) -> None:
        """Close the state's connections."""
        self._engine.dispose()

    @property
    def schema_version(self) -> int:
        """The schema version the state records."""
        with self._read() as conn:
            return schema_version(conn)

    @property
    def epoch(self) -> str:
        """The state's identity, written in every stamp ("" for a state of this run's memory
        only, or one read before it had an epoch): generations are ordered only within it."""
        if self.where == ":memory:" or "state_identity" not in self.tables:
            return ""
        if self._epoch is None:
            with self._read() as conn:
                self._epoch = read_epoch(conn)
        return self._epoch

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for reads; a database failure becomes StoreError."""
        with self._read() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection for reads; a database failure becomes StoreError."""
        with self._serial:
            try:
                with self._engine.connect() as conn:
                    yield conn
            except SQLAlchemyError as exc:  # a driver error, or a connection it gave up
                raise state_error(self.where, exc) from None

    def _rows(
        self, table: str, values: Iterable[_Key], query: Callable[[list[_Key]], Select[Any]]
    ) -> list[Row[Any]]:
        """The rows `query(batch)` selects for each RECORDS_BATCH of the distinct values, one
        statement a batch (none on a state without `table`: an older one, read in place)."""
        if table not in self.tables:
            return []
        found: list[Row[Any]] = []
        with self._read() as conn:
            for batch in batches(values):
                found.extend(conn.execute(query(batch)).all())
        return found

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE on SQLite), rolled back on any error."""
        with self._serial:
            try:
                with self._writer.begin() as conn:
                    yield conn
            except SQLAlchemyError as exc:  # a driver error, or a connection it gave up
                raise state_error(self.where, exc) from None

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction; a database failure becomes StoreError."""
        with self._write() as conn:
            yield conn

    def insert(self, table: Any) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        if self.dialect == "postgresql":  # imported only by a PostgreSQL state (~0.15 s)
            from sqlalchemy.dialects.postgresql import insert

            return insert(table)
        return sqlite_insert(table)


def reads(
    table: str, *, absent: Callable[[], object] = lambda: None
) -> Callable[[Callable[Concatenate[_DB, _P], _R]], Callable[Concatenate[_DB, _P], _R]]:
    """A method reading `table`: on a state without it (older, read in place) it is `absent()`."""

    def wrap(method: Callable[Concatenate[_DB, _P], _R]) -> Callable[Concatenate[_DB, _P], _R]:
        @functools.wraps(method)
        def read(db: _DB, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if table not in db.tables:
                return cast(_R, absent())
            return method(db, *args, **kwargs)

        return read

    return wrap


def records(
    nothing: _R,
) -> Callable[[Callable[Concatenate[_DB, _P], _R]], Callable[Concatenate[_DB, _P], _R]]:
    """A method recording something: on a read-only state it records nothing, returns `nothing`."""

    def wrap(method: Callable[Concatenate[_DB, _P], _R]) -> Callable[Concatenate[_DB, _P], _R]:
        @functools.wraps(method)
        def record(db: _DB, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            return method(db, *args, **kwargs) if db.recording else nothing

        return record

    return wrap


def _engine_for(where: str) -> Engine:
    """A writing engine on the state's location (a SQLite file's folder is created)."""
    if is_url(where):
        return pg_engine(where, read_only=False)
    if where != ":memory:":
        Path(where).parent.mkdir(parents=True, exist_ok=True)
    return sqlite_engine(where, read_only=False)


def batches(values: Iterable[_Key]) -> list[list[_Key]]:
    """The distinct values, sorted, RECORDS_BATCH a list (one statement each)."""
    wanted = sorted(set(values))
    return [wanted[start : start + RECORDS_BATCH] for start in range(0, len(wanted), RECORDS_BATCH)]


def state_error(where: str, exc: SQLAlchemyError) -> StoreError:
    """A database failure as one line: what, and where (a server's host, never its password)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    lines = str(orig if orig is not None else exc).strip().splitlines()
    reason = lines[0] if lines else exc.__class__.__name__
    lost = isinstance(exc, DBAPIError) and (exc.connection_invalidated or _is_connection(exc))
    if is_url(where) and lost:
        return StoreError(
            f"the state's PostgreSQL server at {_host(where)} cannot be reached: {reason}"
        )
    return StoreError(f"state {describe(where)}: {reason}")


def _is_connection(exc: DBAPIError) -> bool:
    """Whether psycopg could not connect, or lost the connection."""
    import psycopg

    return isinstance(exc.orig, psycopg.OperationalError)
