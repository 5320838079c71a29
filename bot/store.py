"""The embedded state (SQLite): comment ids, observed facts, first-seen times, RTD cache, audit."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, cast

Action = Literal["created", "edited", "adopted"]

_WRITE_ACTIONS = ("created", "edited")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE comments (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            comment_id INTEGER NOT NULL,
            body_hash TEXT NOT NULL,
            facts_key TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        )""",
        """CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            comment_id INTEGER NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('created', 'edited', 'adopted'))
        )""",
        "CREATE INDEX audit_at ON audit (at)",
        """CREATE TABLE facts (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            facts_key TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        )""",
        """CREATE TABLE first_seen (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            key TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            PRIMARY KEY (repo, number, head_sha, key)
        )""",
        """CREATE TABLE rtd_final (
            project TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            payload TEXT NOT NULL,
            stored_at TEXT NOT NULL,
            PRIMARY KEY (project, commit_sha)
        )""",
    ),
    # 2: the comment's GraphQL node id, so edits can be re-read in batches
    ("ALTER TABLE comments ADD COLUMN node_id TEXT NOT NULL DEFAULT ''",),
    # 3: webhook deliveries already handled (X-GitHub-Delivery), kept for a day
    (
        """CREATE TABLE deliveries (
            delivery_id TEXT PRIMARY KEY,
            event TEXT NOT NULL,
            received_at TEXT NOT NULL
        )""",
        "CREATE INDEX deliveries_received_at ON deliveries (received_at)",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)

_UPSERT_COMMENT = (
    "INSERT INTO comments (repo, number, comment_id, body_hash, facts_key, observed_at, "
    "head_sha, updated_at, node_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (repo, number) DO UPDATE SET comment_id = excluded.comment_id, "
    "body_hash = excluded.body_hash, facts_key = excluded.facts_key, "
    "observed_at = excluded.observed_at, head_sha = excluded.head_sha, "
    "updated_at = excluded.updated_at, node_id = excluded.node_id"
)


class StoreError(Exception):
    """The state database cannot be used (e.g. written by a newer version of the bot)."""


@dataclass(frozen=True, slots=True)
class StoredComment:
    """The bot's comment on one pull request, as last written or adopted."""

    repo: str
    number: int
    comment_id: int
    body_hash: str
    facts_key: str
    observed_at: datetime
    head_sha: str
    updated_at: datetime
    node_id: str = ""


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One recorded write (or adoption) of a status comment."""

    at: datetime
    repo: str
    number: int
    comment_id: int
    action: Action


def _to_text(moment: datetime) -> str:
    """An aware datetime as fixed-width ISO-8601 UTC text (sorts as time does)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: pass an aware (UTC) datetime")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def _from_text(text: str) -> datetime:
    """Stored text back to an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


class Store:
    """The bot's state in one SQLite file; every write is one transaction."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Wrap an open connection; use `Store.open`."""
        self._db = connection
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: Path | str) -> Self:
        """Open (creating on first run) the database at `path`; ':memory:' for tests."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            str(path), timeout=10.0, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA foreign_keys=ON")
            store = cls(connection)
            store._migrate()
        except BaseException:
            connection.close()
            raise
        return store

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        """Use as a context manager that closes the store."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close on leaving the block."""
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the file (PRAGMA user_version)."""
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        """Apply the migrations the file has not seen, each in its own transaction."""
        current = self.schema_version
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"state database has schema version {current}; this bot knows up to "
                f"{SCHEMA_VERSION} (written by a newer version?)"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._transaction() as db:
                for statement in _MIGRATIONS[version - 1]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {version:d}")

    def get_comment(self, repo: str, number: int) -> StoredComment | None:
        """The bot's comment on this pull request, if one is recorded."""
        with self._lock:
            row = self._db.execute(
                "SELECT comment_id, body_hash, facts_key, observed_at, head_sha, updated_at, "
                "node_id FROM comments WHERE repo = ? AND number = ?",
                (repo, number),
            ).fetchone()
        if row is None:
            return None
        comment_id, body_hash, facts_key, observed_at, head_sha, updated_at, node_id = row
        return StoredComment(
            repo=repo,
            number=number,
            comment_id=comment_id,
            body_hash=body_hash,
            facts_key=facts_key,
            observed_at=_from_text(observed_at),
            head_sha=head_sha,
            updated_at=_from_text(updated_at),
            node_id=node_id,
        )

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
        at = _to_text(now)
        observed = _to_text(observed_at)
        row = (repo, number, comment_id, body_hash, facts_key, observed, head_sha, at, node_id)
        with self._transaction() as db:
            db.execute(_UPSERT_COMMENT, row)
            db.execute(
                "INSERT INTO audit (at, repo, number, comment_id, action) VALUES (?, ?, ?, ?, ?)",
                (at, repo, number, comment_id, action),
            )

    def forget_comment(self, repo: str, number: int) -> None:
        """Drop the recorded comment (it was deleted on GitHub); the audit is kept."""
        with self._transaction() as db:
            db.execute("DELETE FROM comments WHERE repo = ? AND number = ?", (repo, number))

    def get_facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        """The last observed facts key and when those facts were first observed."""
        with self._lock:
            row = self._db.execute(
                "SELECT facts_key, observed_at FROM facts WHERE repo = ? AND number = ?",
                (repo, number),
            ).fetchone()
        return None if row is None else (row[0], _from_text(row[1]))

    def set_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record an observation; `observed_at` stays that of the first sighting of these facts."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO facts (repo, number, facts_key, observed_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (repo, number) DO UPDATE SET facts_key = excluded.facts_key, "
                "observed_at = excluded.observed_at WHERE facts.facts_key != excluded.facts_key",
                (repo, number, facts_key, _to_text(observed_at)),
            )

    def first_seen(self, repo: str, number: int, head_sha: str) -> dict[str, datetime]:
        """When each signal key was first seen on this head commit."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, seen_at FROM first_seen "
                "WHERE repo = ? AND number = ? AND head_sha = ?",
                (repo, number, head_sha),
            ).fetchall()
        return {key: _from_text(seen_at) for key, seen_at in rows}

    def mark_seen(
        self, repo: str, number: int, head_sha: str, keys: Iterable[str], *, now: datetime
    ) -> None:
        """Record `now` for keys not yet seen on this head; forget the PR's other heads."""
        at = _to_text(now)
        with self._transaction() as db:
            db.execute(
                "DELETE FROM first_seen WHERE repo = ? AND number = ? AND head_sha != ?",
                (repo, number, head_sha),
            )
            db.executemany(
                "INSERT OR IGNORE INTO first_seen (repo, number, head_sha, key, seen_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(repo, number, head_sha, key, at) for key in keys],
            )

    def get_rtd_final(self, project: str, commit: str) -> str | None:
        """The cached payload of a commit's final RTD builds, if stored."""
        with self._lock:
            row = self._db.execute(
                "SELECT payload FROM rtd_final WHERE project = ? AND commit_sha = ?",
                (project, commit),
            ).fetchone()
        return None if row is None else cast(str, row[0])

    def put_rtd_final(self, project: str, commit: str, *, payload: str, now: datetime) -> None:
        """Cache the payload (opaque JSON text) of a commit's final RTD builds."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO rtd_final (project, commit_sha, payload, stored_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (project, commit_sha) DO UPDATE SET "
                "payload = excluded.payload, stored_at = excluded.stored_at",
                (project, commit, payload, _to_text(now)),
            )

    def writes_since(self, since: datetime) -> int:
        """How many comments were created or edited on GitHub at or after `since`."""
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM audit WHERE at >= ? AND action IN (?, ?)",
                (_to_text(since), *_WRITE_ACTIONS),
            ).fetchone()
        return int(row[0])

    def last_write_at(self) -> datetime | None:
        """When a comment was last created or edited on GitHub, if ever."""
        with self._lock:
            row = self._db.execute(
                "SELECT max(at) FROM audit WHERE action IN (?, ?)", _WRITE_ACTIONS
            ).fetchone()
        return None if row[0] is None else _from_text(row[0])

    def audit(self, limit: int = 100) -> list[AuditRow]:
        """The newest `limit` audit rows, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT at, repo, number, comment_id, action FROM audit ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            AuditRow(at=_from_text(at), repo=repo, number=number, comment_id=cid, action=action)
            for at, repo, number, cid, action in rows
        ]

    def note_delivery(self, delivery_id: str, event: str, *, now: datetime) -> bool:
        """Record a webhook delivery; False when it was already recorded (a repeat)."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO deliveries (delivery_id, event, received_at) "
                "VALUES (?, ?, ?)",
                (delivery_id, event, _to_text(now)),
            )
            return cursor.rowcount == 1

    def forget_deliveries(self, before: datetime) -> int:
        """Drop deliveries received before `before`; returns how many were dropped."""
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM deliveries WHERE received_at < ?", (_to_text(before),))
            return cursor.rowcount
