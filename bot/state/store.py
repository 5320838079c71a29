"""The bot's state in SQLite (a file, the default) or PostgreSQL (`state.url`), one schema.

`Store` implements every port of `bot.state.ports`; each write is one transaction. Opening a
state migrates it to this bot's schema (Alembic, `migrations/`); a state written by a newer
bot is refused, naming both versions.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    select,
    text,
    update,
)
from sqlalchemy import insert as sa_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool, StaticPool

from bot.core.model import RequiredChecks
from bot.state import schema as t
from bot.state.closing import Closing
from bot.state.ports import (
    REQUIRED_SETS_TTL,
    REQUIRED_TTL,
    Action,
    AuditRow,
    MarkRow,
    PullRecord,
    RtdRead,
    StoredComment,
    StoredTriage,
    StoreError,
    required_from_json,
    required_to_json,
)

_WRITE_ACTIONS = ("created", "edited")
# Pull requests whose records are read (or whose triage rows are touched) in one statement:
# well under SQLite's and PostgreSQL's limits on bound parameters.
RECORDS_BATCH = 500
_Key = TypeVar("_Key", int, str)  # what is batched: pull request numbers, head commits
# What `prune` keeps (issue 17): webhook deliveries (ids and body digests) a day, the write
# audit 30 days (the write budget looks back an hour), triage rows and first sightings of
# pull requests no cycle has seen for 7 days (closed, or their repository unconfigured),
# Read the Docs reads of commits last read (or last failing) 30 days ago; and (issue 16) the
# merge bases and check-run annotations of heads no triage row has (no open pull request's
# head: the cycle drops closed pull requests' rows) read over an hour ago, with the merge-base
# contexts no kept merge base names any more.
RETENTION = {
    "deliveries": timedelta(days=1),
    "audit": timedelta(days=30),
    "triage": timedelta(days=7),
    "first_seen": timedelta(days=7),
    "rtd_reads": timedelta(days=30),
    "source_reads": timedelta(days=30),
    "merge_bases": timedelta(hours=1),
    "base_contexts": timedelta(hours=1),
    "run_annotations": timedelta(hours=1),
    "history_reads": timedelta(hours=1),  # a base branch's row: a day (read again hourly)
}
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
HEAD = 16  # the schema version this bot writes: the newest revision in migrations/versions
SCHEMA_VERSION = HEAD
_ADVISORY_MIGRATION_KEY = 0x43495342  # one transaction-scoped lock while a PostgreSQL migrates

__all__ = ["REQUIRED_TTL", "SCHEMA_VERSION", "Store", "StoreError", "describe", "is_url"]


_ESCAPED: Final = re.compile(r"\\[0\\]")  # a NUL or a backslash, as `Store._key_out` escapes


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


def pg_engine(url: str, *, read_only: bool) -> Engine:
    """A pooled engine on a PostgreSQL server (psycopg 3); read-only sessions refuse writes."""
    options = "-c default_transaction_read_only=on" if read_only else ""
    connect_args: dict[str, Any] = {"connect_timeout": 5, "application_name": "ci-status-bot"}
    if options:
        connect_args["options"] = options
    return create_engine(_pg_url(url), pool_pre_ping=True, pool_size=4, connect_args=connect_args)


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


EPOCH_SINCE = 15  # the schema version that gave every state its epoch


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


class Store(Closing):
    """The bot's state; every write is one transaction."""

    def __init__(self, engine: Engine, where: str) -> None:
        """Wrap an engine on a migrated state; use `Store.open`."""
        self._engine = engine
        self._writer = engine.execution_options(bot_write=True)
        self.where = where
        self.dialect = engine.dialect.name
        self._epoch: str | None = None  # read once: a state's epoch never changes
        # SQLite: one writer at a time in this process too (its connection is shared in memory)
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if self.dialect == "sqlite" else nullcontext()
        )

    @classmethod
    def open(cls, where: Path | str) -> Self:
        """Open (creating on first use) a SQLite path (or ':memory:') or a PostgreSQL URL."""
        where = str(where)
        engine = cls._engine_for(where)
        try:
            migrate(engine, where)
        except DBAPIError as exc:
            engine.dispose()
            raise state_error(where, exc) from None
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, where)

    @staticmethod
    def _engine_for(where: str) -> Engine:
        if is_url(where):
            return pg_engine(where, read_only=False)
        if where != ":memory:":
            Path(where).parent.mkdir(parents=True, exist_ok=True)
        return sqlite_engine(where, read_only=False)

    def close(self) -> None:
        """Close the state's connections."""
        self._engine.dispose()

    @property
    def schema_version(self) -> int:
        """The schema version the state records."""
        with self._read() as conn:
            return schema_version(conn)

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
        return self._insert(table)

    def _insert(self, table: Any) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        if self.dialect == "postgresql":  # imported only by a PostgreSQL state (~0.15 s)
            from sqlalchemy.dialects.postgresql import insert

            return insert(table)
        return sqlite_insert(table)

    # -- comments ------------------------------------------------------------------------

    def get_comment(self, repo: str, number: int) -> StoredComment | None:
        """The bot's comment on this pull request, if one is recorded."""
        c = t.comments.c
        query = select(*comment_columns()).where(c.repo == repo, c.number == number)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else stored_comment(repo, number, row)

    def mark_checked(self, comments: Iterable[tuple[str, int]], *, now: datetime) -> None:
        """These (repo, number) comments were re-read and found as the bot wrote them."""
        c, at = t.comments.c, to_text(now)
        rows = [{"r": repo, "n": number, "at": at} for repo, number in comments]
        if not rows:
            return
        query = update(t.comments).where(c.repo == bindparam("r"), c.number == bindparam("n"))
        with self._write() as conn:
            conn.execute(query.values(checked_at=bindparam("at")), rows)

    def record_write(
        self,
        repo: str,
        number: int,
        *,
        comment_id: int,
        body_hash: str,
        facts_key: str,
        observed_at: datetime,
        head_sha: str,
        action: Action,
        now: datetime,
        node_id: str = "",
    ) -> None:
        """Upsert the pull request's comment row and append an audit row, atomically."""
        if action not in ("created", "edited", "adopted"):
            raise ValueError(f"unknown action {action!r}")
        at = to_text(now)
        values = {
            "comment_id": comment_id,
            "body_hash": body_hash,
            "facts_key": facts_key,
            "observed_at": to_text(observed_at),
            "head_sha": head_sha,
            "updated_at": at,
            "node_id": node_id,
        }
        upsert = self._insert(t.comments).values(repo=repo, number=number, **values)
        upsert = upsert.on_conflict_do_update(index_elements=["repo", "number"], set_=values)
        nc = t.no_comment.c
        with self._write() as conn:
            conn.execute(upsert)
            conn.execute(delete(t.no_comment).where(nc.repo == repo, nc.number == number))
            conn.execute(
                sa_insert(t.audit).values(
                    at=at, repo=repo, number=number, comment_id=comment_id, action=action
                )
            )

    def note_no_comment(self, repo: str, number: int, *, now: datetime) -> None:
        """The pull request's comments were listed: none is the bot's own."""
        at = to_text(now)
        upsert = self._insert(t.no_comment).values(repo=repo, number=number, looked_at=at)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"], set_={"looked_at": at}
        )
        with self._write() as conn:
            conn.execute(upsert)

    def known_without_comment(self, repo: str, number: int) -> bool:
        """Whether a listing found no comment of the bot's own (and it wrote none since)."""
        nc = t.no_comment.c
        with self._read() as conn:
            row = conn.execute(
                select(nc.number).where(nc.repo == repo, nc.number == number)
            ).first()
        return row is not None

    def pull_records(self, repo: str, numbers: Iterable[int]) -> dict[int, PullRecord]:
        """Comments, listings that found none, and facts of many pull requests: three
        queries per RECORDS_BATCH numbers instead of three per pull request."""
        wanted = _batches(numbers)
        comments: dict[int, StoredComment] = {}
        without: set[int] = set()
        facts: dict[int, tuple[str, datetime]] = {}
        c, nc, f = t.comments.c, t.no_comment.c, t.facts.c
        with self._read() as conn:
            for chunk in wanted:
                query = select(c.number, *comment_columns()).where(
                    c.repo == repo, c.number.in_(chunk)
                )
                for row in conn.execute(query):
                    comments[row.number] = stored_comment(repo, row.number, row)
                query = select(nc.number).where(nc.repo == repo, nc.number.in_(chunk))
                without.update(conn.execute(query).scalars())
                query = select(f.number, f.facts_key, f.observed_at).where(
                    f.repo == repo, f.number.in_(chunk)
                )
                for row in conn.execute(query):
                    facts[row.number] = (row.facts_key, from_text(row.observed_at))
        return {
            n: PullRecord(comments.get(n), n in without, facts.get(n))
            for chunk in wanted
            for n in chunk
        }

    def forget_comment(self, repo: str, number: int) -> None:
        """Drop the recorded comment (it was deleted on GitHub); the audit is kept."""
        c = t.comments.c
        with self._write() as conn:
            conn.execute(delete(t.comments).where(c.repo == repo, c.number == number))

    # -- facts and first-seen times ------------------------------------------------------

    def get_facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        """The last observed facts key and when those facts were first observed."""
        f = t.facts.c
        with self._read() as conn:
            row = conn.execute(
                select(f.facts_key, f.observed_at).where(f.repo == repo, f.number == number)
            ).first()
        return None if row is None else (row.facts_key, from_text(row.observed_at))

    def set_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record an observation; `observed_at` stays that of the first sighting of these facts."""
        self._put_facts(repo, number, facts_key, observed_at, keep_same=True)

    def adopt_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record these facts as first observed at `observed_at` (taken from an adopted comment)."""
        self._put_facts(repo, number, facts_key, observed_at, keep_same=False)

    def _put_facts(
        self, repo: str, number: int, key: str, observed_at: datetime, *, keep_same: bool
    ) -> None:
        values = {"facts_key": key, "observed_at": to_text(observed_at)}
        upsert = self._insert(t.facts).values(repo=repo, number=number, **values)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"],
            set_=values,
            where=(t.facts.c.facts_key != upsert.excluded.facts_key) if keep_same else None,
        )
        with self._write() as conn:
            conn.execute(upsert)

    def first_seen(self, repo: str, number: int, head_sha: str) -> dict[str, datetime]:
        """When each signal key was first seen on this head commit."""
        s = t.first_seen.c
        query = select(s.key, s.seen_at).where(
            s.repo == repo, s.number == number, s.head_sha == head_sha
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {self._key_in(row.key): from_text(row.seen_at) for row in rows}

    def _key_out(self, key: str) -> str:
        """A signal key as stored: PostgreSQL's text holds no NUL, so it is escaped there."""
        if self.dialect != "postgresql":
            return key
        return key.replace("\\", "\\\\").replace("\0", "\\0")

    def _key_in(self, stored: str) -> str:
        """A stored signal key as the bot knows it (the inverse of `_key_out`)."""
        if self.dialect != "postgresql":
            return stored
        return _ESCAPED.sub(lambda m: "\0" if m[0] == "\\0" else "\\", stored)

    def mark_seen(
        self, repo: str, number: int, head_sha: str, keys: Iterable[str], *, now: datetime
    ) -> None:
        """Record `now` for keys not yet seen on this head; forget the PR's other heads."""
        at, s = to_text(now), t.first_seen.c
        rows = [
            {
                "repo": repo,
                "number": number,
                "head_sha": head_sha,
                "key": self._key_out(k),
                "seen_at": at,
            }
            for k in dict.fromkeys(keys)
        ]
        with self._write() as conn:
            conn.execute(
                delete(t.first_seen).where(
                    s.repo == repo, s.number == number, s.head_sha != head_sha
                )
            )
            if rows:
                conn.execute(self._insert(t.first_seen).on_conflict_do_nothing(), rows)

    # -- Read the Docs reads -------------------------------------------------------------

    def get_rtd_read(self, host: str, project: str, commit: str) -> RtdRead | None:
        """The last good RTD answer of a commit, and since when (and how) reading it fails."""
        r = t.rtd_reads.c
        query = select(r.payload, r.read_at, r.failing_since, r.failure).where(
            r.host == host, r.project == project, r.commit_sha == commit
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return RtdRead(
            payload=row.payload,
            read_at=None if row.read_at is None else from_text(row.read_at),
            failing_since=None if row.failing_since is None else from_text(row.failing_since),
            failure=row.failure,
        )

    def put_rtd_read(
        self, host: str, project: str, commit: str, *, payload: str, now: datetime
    ) -> None:
        """Keep a good RTD answer read at `now`; reading no longer fails."""
        values = {"payload": payload, "read_at": to_text(now)}
        upsert = self._insert(t.rtd_reads).values(
            host=host, project=project, commit_sha=commit, **values
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["host", "project", "commit_sha"],
            set_={**values, "failing_since": None, "failure": None},
        )
        with self._write() as conn:
            conn.execute(upsert)

    def rtd_read_failed(
        self, host: str, project: str, commit: str, *, now: datetime, failure: str
    ) -> None:
        """Note a failed read; the first failure of a run of them (its time, its text) is kept."""
        r = t.rtd_reads.c
        upsert = self._insert(t.rtd_reads).values(
            host=host, project=project, commit_sha=commit, failing_since=to_text(now),
            failure=failure,
        )  # fmt: skip
        upsert = upsert.on_conflict_do_update(
            index_elements=["host", "project", "commit_sha"],
            set_={
                "failure": func.coalesce(r.failure, upsert.excluded.failure),
                "failing_since": func.coalesce(r.failing_since, upsert.excluded.failing_since),
            },
        )
        with self._write() as conn:
            conn.execute(upsert)

    # -- every other second source's reads (bot.sources.cache) ---------------------------

    def get_source_read(self, source: str, key: str) -> RtdRead | None:
        """The last good answer of one record of a source, and since when reading it fails."""
        r = t.source_reads.c
        query = select(r.payload, r.read_at, r.failing_since, r.failure).where(
            r.source == source, r.record_key == key
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return RtdRead(
            payload=row.payload,
            read_at=None if row.read_at is None else from_text(row.read_at),
            failing_since=None if row.failing_since is None else from_text(row.failing_since),
            failure=row.failure,
        )

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Keep a good answer read at `now`; reading no longer fails."""
        values = {"payload": payload, "read_at": to_text(now)}
        upsert = self._insert(t.source_reads).values(source=source, record_key=key, **values)
        upsert = upsert.on_conflict_do_update(
            index_elements=["source", "record_key"],
            set_={**values, "failing_since": None, "failure": None},
        )
        with self._write() as conn:
            conn.execute(upsert)

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Note a failed read; the first failure of a run of them (its time, its text) is kept."""
        r = t.source_reads.c
        upsert = self._insert(t.source_reads).values(
            source=source, record_key=key, failing_since=to_text(now), failure=failure
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["source", "record_key"],
            set_={
                "failure": func.coalesce(r.failure, upsert.excluded.failure),
                "failing_since": func.coalesce(r.failing_since, upsert.excluded.failing_since),
            },
        )
        with self._write() as conn:
            conn.execute(upsert)

    # -- write pacing and the audit ------------------------------------------------------

    def writes_since(self, since: datetime) -> int:
        """How many comments were created or edited on GitHub at or after `since`."""
        a = t.audit.c
        query = select(func.count()).where(a.at >= to_text(since), a.action.in_(_WRITE_ACTIONS))
        with self._read() as conn:
            return int(conn.execute(query).scalar_one())

    @property
    def epoch(self) -> str:
        """The state's identity, written in every stamp ("" for a state of this run's memory
        only, or one read before it had an epoch): generations are ordered only within it."""
        if self.where == ":memory:":
            return ""
        if self._epoch is None:
            with self._read() as conn:
                self._epoch = read_epoch(conn)
        return self._epoch

    def last_write_at(self) -> datetime | None:
        """When a comment was last created or edited on GitHub, if ever."""
        a = t.audit.c
        with self._read() as conn:
            last = conn.execute(
                select(func.max(a.at)).where(a.action.in_(_WRITE_ACTIONS))
            ).scalar_one()
        return None if last is None else from_text(last)

    def audit(self, limit: int = 100) -> list[AuditRow]:
        """The newest `limit` audit rows, newest first."""
        a = t.audit.c
        query = select(a.at, a.repo, a.number, a.comment_id, a.action)
        with self._read() as conn:
            rows = conn.execute(query.order_by(a.id.desc()).limit(limit)).all()
        return [
            AuditRow(from_text(r.at), r.repo, r.number, comment_id=r.comment_id, action=r.action)
            for r in rows
        ]

    # -- the triage view (issue 10) ------------------------------------------------------

    def put_triage(
        self,
        repo: str,
        number: int,
        *,
        title: str,
        author: str | None,
        draft: bool,
        head_sha: str,
        verdict: str,
        url: str,
        details: str,
        observed_at: datetime,
        now: datetime,
    ) -> None:
        """Keep one pull request's last reconciled report for the triage view."""
        values = {
            "title": title, "author": author, "draft": int(draft), "head_sha": head_sha,
            "verdict": verdict, "url": url, "details": details,
            "observed_at": to_text(observed_at), "updated_at": to_text(now),
        }  # fmt: skip
        upsert = self._insert(t.triage).values(repo=repo, number=number, **values)
        upsert = upsert.on_conflict_do_update(index_elements=["repo", "number"], set_=values)
        with self._write() as conn:
            conn.execute(upsert)

    def touch_triage(self, repo: str, numbers: Iterable[int], *, now: datetime) -> None:
        """These rows were read again and found as they are: only their read time is new."""
        wanted, tr, at = _batches(numbers), t.triage.c, to_text(now)
        if not wanted:
            return
        with self._write() as conn:
            for chunk in wanted:
                conn.execute(
                    update(t.triage)
                    .where(tr.repo == repo, tr.number.in_(chunk))
                    .values(updated_at=at)
                )

    def prune_triage(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop the repository's triage rows except `keep` (pull requests still open)."""
        kept, tr = set(keep), t.triage.c
        with self._write() as conn:
            numbers = conn.execute(select(tr.number).where(tr.repo == repo)).scalars().all()
            gone = [n for n in numbers if n not in kept]
            if gone:
                conn.execute(delete(t.triage).where(tr.repo == repo, tr.number.in_(gone)))
        return len(gone)

    def triage_rows(self) -> list[StoredTriage]:
        """Every triage row, with the bot's comment id where one is recorded."""
        with self._read() as conn:
            return triage_rows(conn)

    # -- repositories whose last read failed -------------------------------------------

    def repo_read_failed(self, repo: str, *, now: datetime, failure: str) -> None:
        """Note that `repo` could not be read: the first failure's time stands, the text is new."""
        upsert = self._insert(t.repo_reads).values(
            repo=repo, failing_since=to_text(now), failure=failure
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo"], set_={"failure": upsert.excluded.failure}
        )
        with self._write() as conn:
            conn.execute(upsert)

    def repo_read_ok(self, repo: str) -> None:
        """`repo` was read completely: it no longer fails."""
        with self._write() as conn:
            conn.execute(delete(t.repo_reads).where(t.repo_reads.c.repo == repo))

    def unread_repos(self) -> dict[str, tuple[datetime, str]]:
        """Repositories whose last read failed: since when, and what failed."""
        r = t.repo_reads.c
        with self._read() as conn:
            rows = conn.execute(select(r.repo, r.failing_since, r.failure)).all()
        return {row.repo: (from_text(row.failing_since), row.failure) for row in rows}

    # -- merge bases (issue 16) ----------------------------------------------------------

    def get_merge_base(self, repo: str, base: str, head_sha: str) -> str | None:
        """The merge base of `head_sha` and branch `base` as GitHub gave it, if it was asked."""
        m = t.merge_bases.c
        query = select(m.merge_base).where(m.repo == repo, m.base == base, m.head_sha == head_sha)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else str(row.merge_base)

    def merge_bases(
        self, repo: str, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The kept merge bases of many (base branch, head) pairs, RECORDS_BATCH heads a query."""
        wanted = set(pairs)
        m, found = t.merge_bases.c, {}
        with self._read() as conn:
            for heads in _batches(head for _, head in wanted):
                query = select(m.base, m.head_sha, m.merge_base).where(
                    m.repo == repo, m.head_sha.in_(heads)
                )
                for row in conn.execute(query):
                    if (row.base, row.head_sha) in wanted:
                        found[(row.base, row.head_sha)] = str(row.merge_base)
        return found

    def put_merge_base(
        self, repo: str, base: str, head_sha: str, merge_base: str, *, now: datetime
    ) -> None:
        """Keep the merge base GitHub gave for a head and a base branch."""
        values = {"merge_base": merge_base, "read_at": to_text(now)}
        upsert = self._insert(t.merge_bases).values(
            repo=repo, base=base, head_sha=head_sha, **values
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "base", "head_sha"], set_=values
        )
        with self._write() as conn:
            conn.execute(upsert)

    def get_base_contexts(self, repo: str, commit: str) -> str | None:
        """The kept final answer (payload) of a merge-base commit's contexts, if any."""
        b = t.base_contexts.c
        query = select(b.payload).where(b.repo == repo, b.commit_sha == commit)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else str(row.payload)

    def put_base_contexts(self, repo: str, commit: str, *, payload: str, now: datetime) -> None:
        """Keep a merge-base commit's contexts once every one of them has settled."""
        values = {"payload": payload, "read_at": to_text(now)}
        upsert = self._insert(t.base_contexts).values(repo=repo, commit_sha=commit, **values)
        upsert = upsert.on_conflict_do_update(index_elements=["repo", "commit_sha"], set_=values)
        with self._write() as conn:
            conn.execute(upsert)

    # -- failing check runs' annotations (issue 16) ----------------------------------------

    def get_annotations(self, repo: str, run_ids: Iterable[int]) -> dict[int, str]:
        """The kept annotations (payload) of those of these check runs that were read."""
        wanted, a = sorted(set(run_ids)), t.run_annotations.c
        if not wanted:
            return {}
        query = select(a.run_id, a.payload).where(a.repo == repo, a.run_id.in_(wanted))
        with self._read() as conn:
            return {int(r.run_id): str(r.payload) for r in conn.execute(query).all()}

    def put_annotations(
        self, repo: str, runs: Mapping[int, tuple[str, str]], *, now: datetime
    ) -> None:
        """Keep check runs' annotations: run id -> (head commit, payload)."""
        if not runs:
            return
        at = to_text(now)
        rows = [
            {"repo": repo, "run_id": run, "head_sha": head, "payload": payload, "read_at": at}
            for run, (head, payload) in runs.items()
        ]
        upsert = self._insert(t.run_annotations)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "run_id"],
            set_={"payload": upsert.excluded.payload, "read_at": upsert.excluded.read_at},
        )
        with self._write() as conn:
            conn.execute(upsert, rows)

    # -- what a failure's history was read from (issue 27) ---------------------------------

    def get_history(self, repo: str, keys: Iterable[str]) -> dict[str, tuple[str, datetime]]:
        """The kept payloads of those of these keys that were read, with when."""
        wanted, h = sorted(set(keys)), t.history_reads.c
        found: dict[str, tuple[str, datetime]] = {}
        for start in range(0, len(wanted), RECORDS_BATCH):
            query = select(h.key, h.payload, h.read_at).where(
                h.repo == repo, h.key.in_(wanted[start : start + RECORDS_BATCH])
            )
            with self._read() as conn:
                for r in conn.execute(query).all():
                    found[str(r.key)] = (str(r.payload), from_text(str(r.read_at)))
        return found

    def put_history(self, repo: str, rows: Mapping[str, tuple[str, str]], *, now: datetime) -> None:
        """Keep history reads: key -> (head commit, or "" for a branch; payload)."""
        if not rows:
            return
        at = to_text(now)
        values = [
            {"repo": repo, "key": key, "head_sha": head, "payload": payload, "read_at": at}
            for key, (head, payload) in rows.items()
        ]
        upsert = self._insert(t.history_reads)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "key"],
            set_={"payload": upsert.excluded.payload, "read_at": upsert.excluded.read_at},
        )
        with self._write() as conn:
            conn.execute(upsert, values)

    # -- required checks (learned from GitHub's isRequired, per base branch and name) ----

    def required_known(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta | None = REQUIRED_TTL,
    ) -> dict[tuple[str, str], bool | None]:
        """(base, name) -> required (None: not said), learned within `max_age` (None: any age)."""
        wanted = sorted(set(bases))
        if not wanted:
            return {}
        rc = t.required_checks.c
        query = select(rc.base, rc.name, rc.required).where(rc.repo == repo, rc.base.in_(wanted))
        if max_age is not None:
            query = query.where(rc.learned_at > to_text(now - max_age))
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {(r.base, r.name): None if r.required is None else bool(r.required) for r in rows}

    def remember_required(
        self, repo: str, learned: Mapping[tuple[str, str], bool | None], *, now: datetime
    ) -> None:
        """Record what GitHub said is required, per (base, name), at `now` (None: not said)."""
        if not learned:
            return
        at = to_text(now)
        rows = [
            {"repo": repo, "base": b, "name": n, "required": None if f is None else int(f),
             "learned_at": at}
            for (b, n), f in learned.items()
        ]  # fmt: skip
        upsert = self._insert(t.required_checks)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "base", "name"],
            set_={"required": upsert.excluded.required, "learned_at": upsert.excluded.learned_at},
        )
        with self._write() as conn:
            conn.execute(upsert, rows)

    def required_sets(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta = REQUIRED_SETS_TTL,
    ) -> dict[str, RequiredChecks]:
        """What these base branches require, as read within `max_age`."""
        wanted = sorted(set(bases))
        if not wanted:
            return {}
        rs = t.required_sets.c
        query = select(rs.base, rs.payload).where(
            rs.repo == repo, rs.base.in_(wanted), rs.read_at > to_text(now - max_age)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {r.base: required_from_json(r.base, r.payload) for r in rows}

    def remember_required_sets(
        self, repo: str, sets: Mapping[str, RequiredChecks], *, now: datetime
    ) -> None:
        """Record what base branches require, read at `now`."""
        if not sets:
            return
        at = to_text(now)
        rows = [
            {"repo": repo, "base": base, "payload": required_to_json(checks), "read_at": at}
            for base, checks in sets.items()
        ]
        upsert = self._insert(t.required_sets)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "base"],
            set_={"payload": upsert.excluded.payload, "read_at": upsert.excluded.read_at},
        )
        with self._write() as conn:
            conn.execute(upsert, rows)

    def forget_required(self, repo: str) -> int:
        """Drop what is known to be required in `repo` (its rules changed); rows dropped."""
        with self._write() as conn:
            dropped = conn.execute(delete(t.required_sets).where(t.required_sets.c.repo == repo))
            learned = conn.execute(
                delete(t.required_checks).where(t.required_checks.c.repo == repo)
            )
            return int(dropped.rowcount or 0) + int(learned.rowcount or 0)

    # -- webhook deliveries --------------------------------------------------------------

    def note_delivery(self, delivery_id: str, event: str, *, now: datetime) -> bool:
        """Record a webhook delivery; False when it was already recorded (a repeat)."""
        insert = self._insert(t.deliveries).values(
            delivery_id=delivery_id, event=event, received_at=to_text(now)
        )
        insert = insert.on_conflict_do_nothing().returning(t.deliveries.c.delivery_id)
        with self._write() as conn:
            return conn.execute(insert).first() is not None

    def prune(self, *, now: datetime) -> dict[str, int]:
        """Drop what is older than RETENTION; how many rows went, by table."""
        cut = {table: to_text(now - age) for table, age in RETENTION.items()}
        tr, fs, rr = t.triage.c, t.first_seen.c, t.rtd_reads.c
        current_head = (
            select(tr.number)
            .where(tr.repo == fs.repo, tr.number == fs.number, tr.head_sha == fs.head_sha)
            .exists()
        )
        last_read = func.coalesce(rr.read_at, rr.failing_since, "")
        sr = t.source_reads.c
        source_read = func.coalesce(sr.read_at, sr.failing_since, "")
        mb, bc, ra = t.merge_bases.c, t.base_contexts.c, t.run_annotations.c
        hr = t.history_reads.c

        def open_head(table: Any) -> Any:  # a triage row (an open pull request) has this head
            return select(tr.number).where(tr.repo == table.repo, tr.head_sha == table.head_sha)

        named = select(mb.head_sha).where(mb.repo == bc.repo, mb.merge_base == bc.commit_sha)
        statements = {
            "deliveries": delete(t.deliveries).where(
                t.deliveries.c.received_at < cut["deliveries"]
            ),
            "audit": delete(t.audit).where(t.audit.c.at < cut["audit"]),
            "triage": delete(t.triage).where(tr.updated_at < cut["triage"]),
            "first_seen": delete(t.first_seen).where(fs.seen_at < cut["first_seen"], ~current_head),
            "rtd_reads": delete(t.rtd_reads).where(
                last_read < cut["rtd_reads"],
                func.coalesce(rr.failing_since, "") < cut["rtd_reads"],
            ),
            "source_reads": delete(t.source_reads).where(
                source_read < cut["source_reads"],
                func.coalesce(sr.failing_since, "") < cut["source_reads"],
            ),
            "merge_bases": delete(t.merge_bases).where(
                mb.read_at < cut["merge_bases"], ~open_head(mb).exists()
            ),
            "base_contexts": delete(t.base_contexts).where(
                bc.read_at < cut["base_contexts"], ~named.exists()
            ),
            "run_annotations": delete(t.run_annotations).where(
                ra.read_at < cut["run_annotations"], ~open_head(ra).exists()
            ),
            "history_reads": delete(t.history_reads).where(
                hr.read_at < cut["history_reads"],
                ~open_head(hr).exists(),
                (hr.head_sha != "") | (hr.read_at < to_text(now - timedelta(days=1))),
            ),
        }
        with self._write() as conn:
            return {table: conn.execute(sql).rowcount for table, sql in statements.items()}

    def forget_deliveries(self, before: datetime) -> int:
        """Drop deliveries received before `before`; returns how many were dropped."""
        d = t.deliveries.c
        gone = delete(t.deliveries).where(d.received_at < to_text(before)).returning(d.delivery_id)
        with self._write() as conn:
            return len(conn.execute(gone).all())

    # -- webhook marks for the repository's lease holder (several replicas) --------------

    def add_marks(self, marks: Iterable[MarkRow]) -> None:
        """Leave a delivery's marks for whichever replica works their repository."""
        rows = [
            {"repo": m.repo, "number": m.number, "sha": m.sha, "closed": int(m.closed),
             "head_known": int(m.head_known), "marked_at": to_text(m.marked_at)}
            for m in marks
        ]  # fmt: skip
        if rows:
            with self._write() as conn:
                conn.execute(sa_insert(t.marks), rows)

    def take_marks(self, repos: Iterable[str]) -> list[MarkRow]:
        """The marks left for these repositories, oldest first, taken out of the state."""
        wanted, m = sorted(set(repos)), t.marks.c
        if not wanted:
            return []
        taken = (
            delete(t.marks)
            .where(m.repo.in_(wanted))
            .returning(m.id, m.repo, m.number, m.sha, m.closed, m.head_known, m.marked_at)
        )
        with self._write() as conn:
            rows = sorted(conn.execute(taken).all(), key=lambda r: r.id)
        return [
            MarkRow(r.repo, r.number, r.sha, bool(r.closed), bool(r.head_known),
                    from_text(r.marked_at))
            for r in rows
        ]  # fmt: skip


def _batches(values: Iterable[_Key]) -> list[list[_Key]]:
    """The distinct values, sorted, RECORDS_BATCH a list (one statement each)."""
    wanted = sorted(set(values))
    return [wanted[start : start + RECORDS_BATCH] for start in range(0, len(wanted), RECORDS_BATCH)]


def comment_columns(*, checked: bool = True) -> list[Any]:
    """The comments columns a StoredComment is made of (`checked`: with `checked_at`, which
    a state from before schema version 8 lacks)."""
    c = t.comments.c
    columns = [
        c.comment_id, c.body_hash, c.facts_key, c.observed_at, c.head_sha, c.updated_at,
        c.node_id,
    ]  # fmt: skip
    return [*columns, c.checked_at] if checked else columns


def stored_comment(repo: str, number: int, row: Any) -> StoredComment:
    """The StoredComment of a row selected with `comment_columns` (a row without
    `checked_at`: not checked since written)."""
    checked_at = row._mapping.get("checked_at")
    return StoredComment(
        repo=repo,
        number=number,
        comment_id=row.comment_id,
        body_hash=row.body_hash,
        facts_key=row.facts_key,
        observed_at=from_text(row.observed_at),
        head_sha=row.head_sha,
        updated_at=from_text(row.updated_at),
        node_id=row.node_id,
        checked_at=None if checked_at is None else from_text(checked_at),
    )


def triage_rows(conn: Connection) -> list[StoredTriage]:
    """Every triage row on `conn`, with the bot's comment id where one is recorded."""
    tr, c = t.triage.c, t.comments.c
    query = select(t.triage, c.comment_id).select_from(
        t.triage.outerjoin(t.comments, (c.repo == tr.repo) & (c.number == tr.number))
    )
    return [
        StoredTriage(
            repo=r.repo,
            number=r.number,
            title=r.title,
            author=r.author,
            draft=bool(r.draft),
            head_sha=r.head_sha,
            verdict=r.verdict,
            url=r.url,
            details=r.details,
            observed_at=from_text(r.observed_at),
            updated_at=from_text(r.updated_at),
            comment_id=r.comment_id,
        )
        for r in conn.execute(query).all()
    ]


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
