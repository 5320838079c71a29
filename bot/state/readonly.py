"""The read-only state: `--dry-run`, `report`, the page and /readyz read, and record nothing.

It reads the state where it is (no copy) over a connection the database itself refuses
writes on (SQLite `mode=ro`, PostgreSQL `default_transaction_read_only`); the recording
methods of the ports are there so a dry-run cycle runs the same code, and they drop what
they are given. A state older than this bot is read as it is (a table it lacks reads as
empty: readers never migrate); one newer than this bot is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Self

from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError

from bot.core.model import RequiredChecks
from bot.state import schema
from bot.state import store as s
from bot.state.closing import Closing
from bot.state.ports import (
    REQUIRED_SETS_TTL,
    REQUIRED_TTL,
    Action,
    PullRecord,
    RtdRead,
    StoredComment,
    StoredTriage,
    StoreError,
)


class ReadOnlyState(Closing):
    """The state, read where it is; every recording method records nothing."""

    def __init__(self, reads: s.Store, tables: frozenset[str], *, current: bool = True) -> None:
        """Wrap a store on a read-only engine; use `ReadOnlyState.open` or `.empty`.

        `current`: the state has this bot's schema (else a table may lack newer columns).
        """
        self._reads = reads
        self._tables = tables
        self._current = current

    @classmethod
    def open(cls, where: Path | str) -> Self:
        """Read the existing state at a SQLite path or a PostgreSQL URL (never created)."""
        where = str(where)
        if s.is_url(where):
            engine = s.pg_engine(where, read_only=True)
        else:
            if not Path(where).is_file():
                raise StoreError(f"no state at {where}: run `ci-status-bot once` or `run` first")
            engine = s.sqlite_engine(where, read_only=True)
        try:
            tables, version = _check(engine, where)
            return cls(s.Store(engine, where), tables, current=version == s.HEAD)
        except BaseException:
            engine.dispose()
            raise

    @classmethod
    def empty(cls) -> Self:
        """A state with nothing in it (a dry run before any state exists)."""
        store = s.Store.open(":memory:")
        return cls(store, frozenset(schema.metadata.tables))

    @classmethod
    def open_or_empty(cls, where: Path | str) -> Self:
        """The existing state, or an empty one when a SQLite state does not exist yet."""
        where = str(where)
        if not s.is_url(where) and not Path(where).exists():
            return cls.empty()
        return cls.open(where)

    def close(self) -> None:
        """Close the connections."""
        self._reads.close()

    def _has(self, table: str) -> bool:
        return table in self._tables

    @property
    def schema_version(self) -> int:
        """The schema version the state records."""
        return self._reads.schema_version

    @property
    def epoch(self) -> str:
        """The state's identity ("" where it has none yet: an older schema, an empty state)."""
        return self._reads.epoch if self._has("state_identity") else ""

    # -- reads -----------------------------------------------------------------------------

    def get_comment(self, repo: str, number: int) -> StoredComment | None:
        """The recorded comment."""
        if not self._has("comments"):
            return None
        if self._current:
            return self._reads.get_comment(repo, number)
        return _old_comment(self._reads, repo, number)

    def known_without_comment(self, repo: str, number: int) -> bool:
        """Whether a listing found no comment of the bot's own."""
        return self._has("no_comment") and self._reads.known_without_comment(repo, number)

    def pull_records(self, repo: str, numbers: Iterable[int]) -> dict[int, PullRecord]:
        """The records of many pull requests (batched where the state has this bot's schema)."""
        wanted = sorted(set(numbers))
        if self._current and all(self._has(n) for n in ("comments", "no_comment", "facts")):
            return self._reads.pull_records(repo, wanted)
        return {
            n: PullRecord(
                self.get_comment(repo, n),
                self.known_without_comment(repo, n),
                self.get_facts(repo, n),
            )
            for n in wanted
        }

    def get_facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        """The last facts key and since when."""
        return self._reads.get_facts(repo, number) if self._has("facts") else None

    def first_seen(self, repo: str, number: int, head_sha: str) -> dict[str, datetime]:
        """First-seen times on this head."""
        return self._reads.first_seen(repo, number, head_sha) if self._has("first_seen") else {}

    def writes_since(self, since: datetime) -> int:
        """Writes recorded since `since`."""
        return self._reads.writes_since(since) if self._has("audit") else 0

    def last_write_at(self) -> datetime | None:
        """The last recorded write."""
        return self._reads.last_write_at() if self._has("audit") else None

    def get_rtd_read(self, host: str, project: str, commit: str) -> RtdRead | None:
        """The kept RTD read."""
        return self._reads.get_rtd_read(host, project, commit) if self._has("rtd_reads") else None

    def get_source_read(self, source: str, key: str) -> RtdRead | None:
        """The kept read of a source's record."""
        if not self._has("source_reads"):
            return None
        return self._reads.get_source_read(source, key)

    def required_known(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta | None = REQUIRED_TTL,
    ) -> dict[tuple[str, str], bool | None]:
        """What the state learned of required checks."""
        if not self._has("required_checks"):
            return {}
        return self._reads.required_known(repo, bases, now=now, max_age=max_age)

    def required_sets(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta = REQUIRED_SETS_TTL,
    ) -> dict[str, RequiredChecks]:
        """What the state read of base branches' required checks."""
        if not self._has("required_sets"):
            return {}
        return self._reads.required_sets(repo, bases, now=now, max_age=max_age)

    def get_merge_base(self, repo: str, base: str, head_sha: str) -> str | None:
        """The kept merge base (none in a state from before merge bases)."""
        if not self._has("merge_bases"):
            return None
        return self._reads.get_merge_base(repo, base, head_sha)

    def merge_bases(
        self, repo: str, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The kept merge bases (none in a state from before merge bases)."""
        return self._reads.merge_bases(repo, pairs) if self._has("merge_bases") else {}

    def get_base_contexts(self, repo: str, commit: str) -> str | None:
        """The kept final contexts of a merge base (none in a state from before them)."""
        return self._reads.get_base_contexts(repo, commit) if self._has("base_contexts") else None

    def get_annotations(self, repo: str, run_ids: Iterable[int]) -> dict[int, str]:
        """The kept annotations of these runs (none in a state from before them)."""
        return self._reads.get_annotations(repo, run_ids) if self._has("run_annotations") else {}

    def get_history(self, repo: str, keys: Iterable[str]) -> dict[str, tuple[str, datetime]]:
        """The kept history reads (none in a state from before them)."""
        return self._reads.get_history(repo, keys) if self._has("history_reads") else {}

    def unread_repos(self) -> dict[str, tuple[datetime, str]]:
        """Repositories whose last read failed (none in a state from before that table)."""
        return self._reads.unread_repos() if self._has("repo_reads") else {}

    def triage_rows(self) -> list[StoredTriage]:
        """The triage rows (none in a state from before the triage view)."""
        return self._reads.triage_rows() if self._has("triage") else []

    # -- records: dropped ------------------------------------------------------------------

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
        """Record nothing."""

    def mark_checked(self, comments: Iterable[tuple[str, int]], *, now: datetime) -> None:
        """Record nothing."""

    def forget_comment(self, repo: str, number: int) -> None:
        """Record nothing."""

    def note_no_comment(self, repo: str, number: int, *, now: datetime) -> None:
        """Record nothing."""

    def set_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record nothing."""

    def adopt_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record nothing."""

    def mark_seen(
        self, repo: str, number: int, head_sha: str, keys: Iterable[str], *, now: datetime
    ) -> None:
        """Record nothing."""

    def put_rtd_read(
        self, host: str, project: str, commit: str, *, payload: str, now: datetime
    ) -> None:
        """Record nothing."""

    def rtd_read_failed(
        self, host: str, project: str, commit: str, *, now: datetime, failure: str
    ) -> None:
        """Record nothing."""

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Record nothing."""

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Record nothing."""

    def remember_required(
        self, repo: str, learned: Mapping[tuple[str, str], bool | None], *, now: datetime
    ) -> None:
        """Record nothing."""

    def remember_required_sets(
        self, repo: str, sets: Mapping[str, RequiredChecks], *, now: datetime
    ) -> None:
        """Record nothing."""

    def put_merge_base(
        self, repo: str, base: str, head_sha: str, merge_base: str, *, now: datetime
    ) -> None:
        """Record nothing."""

    def put_base_contexts(self, repo: str, commit: str, *, payload: str, now: datetime) -> None:
        """Record nothing."""

    def put_annotations(
        self, repo: str, runs: Mapping[int, tuple[str, str]], *, now: datetime
    ) -> None:
        """Record nothing."""

    def put_history(self, repo: str, rows: Mapping[str, tuple[str, str]], *, now: datetime) -> None:
        """Record nothing."""

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
        """Record nothing."""

    def touch_triage(self, repo: str, numbers: Iterable[int], *, now: datetime) -> None:
        """Record nothing."""

    def prune_triage(self, repo: str, *, keep: Iterable[int]) -> int:
        """Record nothing."""
        return 0

    def repo_read_failed(self, repo: str, *, now: datetime, failure: str) -> None:
        """Record nothing."""

    def repo_read_ok(self, repo: str) -> None:
        """Record nothing."""


def _old_comment(reads: s.Store, repo: str, number: int) -> StoredComment | None:
    """A comment row of an older schema: the columns it has (the others as a new row has them)."""
    c = schema.comments.c
    query = select(*s.comment_columns(checked=False)).where(c.repo == repo, c.number == number)
    with reads.reading() as conn:
        row = conn.execute(query).first()
    return None if row is None else s.stored_comment(repo, number, row)


def _check(engine: Engine, where: str) -> tuple[frozenset[str], int]:
    """The state's tables and version; StoreError when unreadable or newer than this bot."""
    try:
        with engine.connect() as conn:
            version = s.schema_version(conn)
            s.refuse_newer(version, where)
            tables = frozenset(conn.dialect.get_table_names(conn))
            if "comments" in tables:
                columns = {c["name"] for c in conn.dialect.get_columns(conn, "comments")}
                if "node_id" not in columns:
                    raise StoreError(
                        f"the state at {s.describe(where)} is from before schema version 2: "
                        "run `ci-status-bot once` to upgrade it"
                    )
            return tables, version
    except DBAPIError as exc:
        raise s.state_error(where, exc) from None
