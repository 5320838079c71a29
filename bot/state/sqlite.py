"""The embedded state (SQLite): comment ids, observed facts, first-seen times, RTD reads, audit."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from bot.core.model import RequiredChecks, RequiredContext, Rule

Action = Literal["created", "edited", "adopted"]

_WRITE_ACTIONS = ("created", "edited")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# Required-ness (branch protection, rulesets) changes rarely: it is learned again after this.
REQUIRED_TTL = timedelta(hours=24)
# What a base branch requires is read again after this (sooner on its webhooks).
REQUIRED_SETS_TTL = timedelta(hours=1)

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
    # 3: the triage view: each open pull request's last reconciled report (issue 10)
    (
        """CREATE TABLE IF NOT EXISTS triage (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            title TEXT NOT NULL,
            author TEXT,
            draft INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            verdict TEXT NOT NULL,
            url TEXT NOT NULL,
            details TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        )""",
    ),
    # 4: Read the Docs reads keyed by host + project + commit: the last good answer (cache and
    # evidence that stands during an outage) and since when reading it fails
    (
        "DROP TABLE rtd_final",
        """CREATE TABLE rtd_reads (
            host TEXT NOT NULL,
            project TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            payload TEXT,
            read_at TEXT,
            failing_since TEXT,
            failure TEXT,
            PRIMARY KEY (host, project, commit_sha)
        )""",
    ),
    # 5: whether a check name is required on a base branch, as GitHub said (cached, expiring)
    (
        """CREATE TABLE required_checks (
            repo TEXT NOT NULL,
            base TEXT NOT NULL,
            name TEXT NOT NULL,
            required INTEGER CHECK (required IN (0, 1)),  -- NULL: GitHub did not say
            learned_at TEXT NOT NULL,
            PRIMARY KEY (repo, base, name)
        )""",
    ),
    # 6: webhook deliveries already handled (X-GitHub-Delivery), kept for a day
    (
        """CREATE TABLE deliveries (
            delivery_id TEXT PRIMARY KEY,
            event TEXT NOT NULL,
            received_at TEXT NOT NULL
        )""",
        "CREATE INDEX deliveries_received_at ON deliveries (received_at)",
    ),
    # 7: pull requests whose comments were listed and held none of the bot's own: a comment
    # of ours can appear there only through our own write (one writer per state), so they are
    # not listed again each cycle while their create waits for the write budget
    (
        """CREATE TABLE no_comment (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            looked_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        )""",
    ),
    # 8: when the comment was last re-read to see that it still exists and says what the bot
    # wrote (NULL: not since it was written; it is then as old as updated_at)
    ("ALTER TABLE comments ADD COLUMN checked_at TEXT",),
    # 9: repositories whose last read failed (renamed, access removed, an error): since when
    # and why, so the triage view marks their rows as last read instead of "as of now"
    (
        """CREATE TABLE repo_reads (
            repo TEXT PRIMARY KEY,
            failing_since TEXT NOT NULL,
            failure TEXT NOT NULL
        )""",
    ),
    # 10: what a base branch requires (branch protection and rulesets), as read, per repository
    # and base branch: the required set changes rarely; its webhooks drop it (issue 15)
    (
        """CREATE TABLE required_sets (
            repo TEXT NOT NULL,
            base TEXT NOT NULL,
            payload TEXT NOT NULL,
            read_at TEXT NOT NULL,
            PRIMARY KEY (repo, base)
        )""",
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


def _copy(uri: str, target: sqlite3.Connection) -> None:
    """Copy the database at `uri` (opened read-only) into `target`."""
    source = sqlite3.connect(uri, uri=True, timeout=10.0)
    try:
        source.backup(target)
    finally:
        source.close()


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
    checked_at: datetime | None = None  # last re-read that found it as written (None: not since)

    @property
    def last_known_good(self) -> datetime:
        """When the comment was last known to say what the bot wrote."""
        return self.updated_at if self.checked_at is None else max(self.checked_at, self.updated_at)


@dataclass(frozen=True, slots=True)
class RtdRead:
    """The state's row of one Read the Docs commit: last good answer, and a failing run."""

    payload: str | None  # opaque JSON (bot.docs.readthedocs.evidence); None: never read well
    read_at: datetime | None
    failing_since: datetime | None  # None while reads succeed
    failure: str | None = None  # what the first failure of the run was


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One recorded write (or adoption) of a status comment."""

    at: datetime
    repo: str
    number: int
    comment_id: int
    action: Action


@dataclass(frozen=True, slots=True)
class StoredTriage:
    """One pull request's row of the triage view, with the bot's comment id if recorded."""

    repo: str
    number: int
    title: str
    author: str | None
    draft: bool
    head_sha: str
    verdict: str
    url: str
    details: str  # compact JSON of the computed parts (bot.triage.view)
    observed_at: datetime
    updated_at: datetime
    comment_id: int | None


def required_to_json(checks: RequiredChecks) -> str:
    """A read required set as text (only sets that were read are kept)."""
    return json.dumps(
        [
            {"name": c.name, "rules": [list(r) for r in c.rules], "app_id": c.app_id}
            for c in checks.contexts
        ]
    )


def required_from_json(base: str, text: str) -> RequiredChecks:
    """A required set kept by `required_to_json`."""
    contexts = tuple(
        RequiredContext(item["name"], tuple(Rule(*r) for r in item["rules"]), item["app_id"])
        for item in json.loads(text)
    )
    return RequiredChecks(base, read=True, contexts=contexts)


def _to_text(moment: datetime) -> str:
    """An aware datetime as fixed-width ISO-8601 UTC text (sorts as time does)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: pass an aware (UTC) datetime")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def _from_text(text: str) -> datetime:
    """Stored text back to an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


class StateBusy(Exception):
    """Another process owns the state (its lock is held); the message names the holder."""


class StateLock:
    """The one-writer lock of a state: flock on `<state>.lock`, released by the OS at exit."""

    def __init__(self, path: Path, fd: int) -> None:
        """Wrap a held lock; use `StateLock.acquire`."""
        self.path = path
        self._fd: int | None = fd

    @staticmethod
    def lock_path(state_path: Path | str) -> Path:
        """The lock file next to the state."""
        state = Path(state_path)
        return state.with_name(state.name + ".lock")

    @classmethod
    def acquire(cls, state_path: Path | str, *, now: datetime | None = None) -> StateLock:
        """Take the lock at once or raise StateBusy naming the holder (pid, host, since)."""
        path = cls.lock_path(state_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise StateBusy(
                f"state {state_path} is in use by another process "
                f"({holder or 'holder not yet recorded'}); one process owns a state"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        since = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        holder = f"pid {os.getpid()} on {socket.gethostname()} since {since}\n"
        try:  # who holds it is information for the next process; the lock is the flock
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
        except OSError:
            pass
        return cls(path, fd)

    def release(self) -> None:
        """Release the lock (the OS also does when the process ends)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)

    def __enter__(self) -> Self:
        """Hold the lock for a block."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Release on leaving the block."""
        self.release()


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
        except sqlite3.DatabaseError as exc:
            connection.close()
            raise StoreError(f"state {path}: cannot be used: {exc}") from exc
        except BaseException:
            connection.close()
            raise
        return store

    @classmethod
    def open_readonly(cls, path: Path | str) -> Self:
        """A private in-memory copy of the existing state at `path`, read without writing to it.

        For `--dry-run`, `show` and `report`: the file (and its folder) may be read-only, and
        another process may hold the state; nothing is ever written to the file.
        """
        if not Path(path).is_file():
            raise StoreError(f"no state at {path}: run `ci-status-bot once` or `run` first")
        uri = Path(path).resolve().as_uri()
        memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            try:
                _copy(f"{uri}?mode=ro", memory)
            except sqlite3.OperationalError:  # a WAL state in a folder it cannot write to
                _copy(f"{uri}?mode=ro&immutable=1", memory)
            store = cls(memory)
            if store.schema_version > SCHEMA_VERSION:
                raise StoreError(
                    f"state database has schema version {store.schema_version}; this bot knows "
                    f"up to {SCHEMA_VERSION} (written by a newer version?)"
                )
            store._migrate()
        except sqlite3.DatabaseError as exc:
            memory.close()
            raise StoreError(f"the state at {path} cannot be read: {exc}") from exc
        except BaseException:
            memory.close()
            raise
        return store

    @staticmethod
    def check_readable(path: Path | str) -> None:
        """Raise StoreError unless the state at `path` opens as SQLite (cheap: no copy)."""
        if not Path(path).is_file():
            raise StoreError(f"no state at {path}: run `ci-status-bot once` or `run` first")
        uri = Path(path).resolve().as_uri()
        try:
            connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=10.0)
            try:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                connection.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"the state at {path} cannot be read: {exc}") from exc

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
                "node_id, checked_at FROM comments WHERE repo = ? AND number = ?",
                (repo, number),
            ).fetchone()
        if row is None:
            return None
        comment_id, body_hash, facts_key, observed_at, head_sha, updated_at, node_id, checked = row
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
            checked_at=None if checked is None else _from_text(checked),
        )

    def mark_checked(self, comments: Iterable[tuple[str, int]], *, now: datetime) -> None:
        """These (repo, number) comments were re-read and found as the bot wrote them."""
        at = _to_text(now)
        with self._transaction() as db:
            db.executemany(
                "UPDATE comments SET checked_at = ? WHERE repo = ? AND number = ?",
                [(at, repo, number) for repo, number in comments],
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
            db.execute("DELETE FROM no_comment WHERE repo = ? AND number = ?", (repo, number))
            db.execute(
                "INSERT INTO audit (at, repo, number, comment_id, action) VALUES (?, ?, ?, ?, ?)",
                (at, repo, number, comment_id, action),
            )

    def note_no_comment(self, repo: str, number: int, *, now: datetime) -> None:
        """The pull request's comments were listed: none is the bot's own."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO no_comment (repo, number, looked_at) VALUES (?, ?, ?) "
                "ON CONFLICT (repo, number) DO UPDATE SET looked_at = excluded.looked_at",
                (repo, number, _to_text(now)),
            )

    def known_without_comment(self, repo: str, number: int) -> bool:
        """Whether a listing found no comment of the bot's own (and it wrote none since)."""
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM no_comment WHERE repo = ? AND number = ?", (repo, number)
            ).fetchone()
        return row is not None

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

    def get_rtd_read(self, host: str, project: str, commit: str) -> RtdRead | None:
        """The last good RTD answer of a commit, and since when (and how) reading it fails."""
        with self._lock:
            row = self._db.execute(
                "SELECT payload, read_at, failing_since, failure FROM rtd_reads "
                "WHERE host = ? AND project = ? AND commit_sha = ?",
                (host, project, commit),
            ).fetchone()
        if row is None:
            return None
        payload, read_at, failing, failure = row
        return RtdRead(
            payload=payload,
            read_at=None if read_at is None else _from_text(read_at),
            failing_since=None if failing is None else _from_text(failing),
            failure=failure,
        )

    def put_rtd_read(
        self, host: str, project: str, commit: str, *, payload: str, now: datetime
    ) -> None:
        """Keep a good RTD answer read at `now`; reading no longer fails."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO rtd_reads (host, project, commit_sha, payload, read_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (host, project, commit_sha) DO UPDATE "
                "SET payload = excluded.payload, read_at = excluded.read_at, "
                "failing_since = NULL, failure = NULL",
                (host, project, commit, payload, _to_text(now)),
            )

    def rtd_read_failed(
        self, host: str, project: str, commit: str, *, now: datetime, failure: str
    ) -> None:
        """Note a failed read; the first failure of a run of them (its time, its text) is kept."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO rtd_reads (host, project, commit_sha, failing_since, failure) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (host, project, commit_sha) DO UPDATE "
                "SET failure = coalesce(rtd_reads.failure, excluded.failure), "
                "failing_since = coalesce(rtd_reads.failing_since, excluded.failing_since)",
                (host, project, commit, _to_text(now), failure),
            )

    def adopt_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record these facts as first observed at `observed_at` (taken from an adopted comment)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO facts (repo, number, facts_key, observed_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (repo, number) DO UPDATE SET facts_key = excluded.facts_key, "
                "observed_at = excluded.observed_at",
                (repo, number, facts_key, _to_text(observed_at)),
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

    # -- the triage view (issue 10) -------------------------------------------------------

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
        row = (repo, number, title, author, int(draft), head_sha, verdict, url, details,
               _to_text(observed_at), _to_text(now))  # fmt: skip
        with self._transaction() as db:
            db.execute(
                "INSERT INTO triage (repo, number, title, author, draft, head_sha, verdict, url, "
                "details, observed_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (repo, number) DO UPDATE SET title = excluded.title, "
                "author = excluded.author, draft = excluded.draft, "
                "head_sha = excluded.head_sha, verdict = excluded.verdict, url = excluded.url, "
                "details = excluded.details, observed_at = excluded.observed_at, "
                "updated_at = excluded.updated_at",
                row,
            )

    def prune_triage(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop the repository's triage rows except `keep` (pull requests still open)."""
        kept = sorted(set(keep))
        with self._transaction() as db:
            rows = db.execute("SELECT number FROM triage WHERE repo = ?", (repo,)).fetchall()
            gone = [(repo, n) for (n,) in rows if n not in set(kept)]
            db.executemany("DELETE FROM triage WHERE repo = ? AND number = ?", gone)
        return len(gone)

    def triage_rows(self) -> list[StoredTriage]:
        """Every triage row, with the bot's comment id where one is recorded."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT t.repo, t.number, t.title, t.author, t.draft, t.head_sha, t.verdict, "
                    "t.url, t.details, t.observed_at, t.updated_at, c.comment_id FROM triage t "
                    "LEFT JOIN comments c ON c.repo = t.repo AND c.number = t.number"
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # a state from before the triage view
                    return []
                raise
        return [
            StoredTriage(
                repo=r[0],
                number=r[1],
                title=r[2],
                author=r[3],
                draft=bool(r[4]),
                head_sha=r[5],
                verdict=r[6],
                url=r[7],
                details=r[8],
                observed_at=_from_text(r[9]),
                updated_at=_from_text(r[10]),
                comment_id=r[11],
            )
            for r in rows
        ]

    def repo_read_failed(self, repo: str, *, now: datetime, failure: str) -> None:
        """Note that `repo` could not be read: the first failure's time stands, the text is new."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO repo_reads (repo, failing_since, failure) VALUES (?, ?, ?) "
                "ON CONFLICT (repo) DO UPDATE SET failure = excluded.failure",
                (repo, _to_text(now), failure),
            )

    def repo_read_ok(self, repo: str) -> None:
        """`repo` was read completely: it no longer fails."""
        with self._transaction() as db:
            db.execute("DELETE FROM repo_reads WHERE repo = ?", (repo,))

    def unread_repos(self) -> dict[str, tuple[datetime, str]]:
        """Repositories whose last read failed: since when, and what failed."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT repo, failing_since, failure FROM repo_reads"
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # a state from before this table
                    return {}
                raise
        return {repo: (_from_text(since), failure) for repo, since, failure in rows}

    # -- required checks (learned from GitHub's isRequired, per base branch and name) --------

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
        marks = ", ".join("?" for _ in wanted)
        since = "" if max_age is None else _to_text(now - max_age)
        with self._lock:
            rows = self._db.execute(
                "SELECT base, name, required FROM required_checks "
                f"WHERE repo = ? AND base IN ({marks}) AND learned_at > ?",
                (repo, *wanted, since),
            ).fetchall()
        return {(base, name): None if flag is None else bool(flag) for base, name, flag in rows}

    def remember_required(
        self, repo: str, learned: Mapping[tuple[str, str], bool | None], *, now: datetime
    ) -> None:
        """Record what GitHub said is required, per (base, name), at `now` (None: not said)."""
        at = _to_text(now)
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO required_checks (repo, base, name, required, learned_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (repo, base, name) DO UPDATE SET "
                "required = excluded.required, learned_at = excluded.learned_at",
                [
                    (repo, b, n, None if flag is None else int(flag), at)
                    for (b, n), flag in learned.items()
                ],
            )

    def required_sets(
        self, repo: str, bases: Iterable[str], *, now: datetime
    ) -> dict[str, RequiredChecks]:
        """What these base branches require, as read within REQUIRED_SETS_TTL."""
        wanted = sorted(set(bases))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        with self._lock:
            rows = self._db.execute(
                "SELECT base, payload FROM required_sets "
                f"WHERE repo = ? AND base IN ({marks}) AND read_at > ?",
                (repo, *wanted, _to_text(now - REQUIRED_SETS_TTL)),
            ).fetchall()
        return {base: required_from_json(base, payload) for base, payload in rows}

    def remember_required_sets(
        self, repo: str, sets: Mapping[str, RequiredChecks], *, now: datetime
    ) -> None:
        """Record what base branches require, read at `now`."""
        at = _to_text(now)
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO required_sets (repo, base, payload, read_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (repo, base) DO UPDATE SET payload = excluded.payload, "
                "read_at = excluded.read_at",
                [(repo, base, required_to_json(checks), at) for base, checks in sets.items()],
            )

    def forget_required(self, repo: str) -> int:
        """Drop what is known to be required in `repo` (its rules changed); rows dropped."""
        with self._transaction() as db:
            dropped = db.execute("DELETE FROM required_sets WHERE repo = ?", (repo,)).rowcount
            dropped += db.execute("DELETE FROM required_checks WHERE repo = ?", (repo,)).rowcount
            return dropped

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
