"""The state seam: the records the state keeps and the narrow ports each consumer talks through.

Each port is what one consumer needs, nothing more, written once here: the cycle's comments,
facts and pacing, the second sources' and required-checks caches, the triage rows,
the webhook deliveries; and, made of them, one port per use: `CycleState` (a cycle),
`ReadState` (a dry run, `report`, the page) and `ServiceState` (the service's cycles,
webhooks and housekeeping). The writable state (`bot.state.store.Store`, SQLite or
PostgreSQL) implements every one; the read-only state (`bot.state.readonly`) is the same
class over a connection the database itself refuses writes on, recording nothing, typed
`ReadState`; mypy checks both where they are made. This module imports only `bot.core`:
every layer may depend on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal, Protocol, Self

from bot.core.model import RequiredChecks, RequiredContext, Rule

Action = Literal["created", "edited", "adopted"]
Pair = tuple[str, str]  # (base branch, check name)
# A triage row's values as the cycle writes them: title, author, draft, head sha, verdict, url,
# details (compact JSON) and since when its facts were observed.
TriageValues = tuple[str, str | None, bool, str, str, str, str, datetime]

# Required-ness (branch protection, rulesets) changes rarely: it is learned again after this.
REQUIRED_TTL = timedelta(hours=24)
# What a base branch requires is read again after this (sooner on its webhooks).
REQUIRED_SETS_TTL = timedelta(hours=1)
# Where reading it again fails, the set last read stands this long (a 502 is not a new fact).
REQUIRED_SETS_KEPT = timedelta(hours=24)


class StoreError(Exception):
    """The state cannot be used (unreachable, unreadable, or written by a newer bot)."""


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
class PullRecord:
    """What the state holds for one pull request, read in one batch with its neighbours."""

    comment: StoredComment | None  # the bot's comment, if recorded
    without_comment: bool  # a listing found no comment of the bot's own
    facts: tuple[str, datetime] | None  # the last facts key and since when


@dataclass(frozen=True, slots=True)
class SourceRead:
    """The state's row of one second source's record: last good answer, and a failing run."""

    payload: str | None  # opaque text (the provider's own); None: never read well
    read_at: datetime | None
    failing_since: datetime | None  # None while reads succeed
    failure: str | None = None  # what the first failure of the run was


@dataclass(frozen=True, slots=True)
class KeptBase:
    """A kept merge base of a head and a base branch: the commit GitHub's compare gave, the
    branch's commit it was asked with (None: not known) and when it was asked."""

    merge_base: str
    tip: str | None
    read_at: datetime


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


@dataclass(frozen=True, slots=True)
class MarkRow:
    """A webhook mark left in a shared state: a pull request (by number or head) to refresh."""

    repo: str
    number: int | None
    sha: str | None
    closed: bool
    head_known: bool
    marked_at: datetime


class CommentState(Protocol):
    """The cycle's record of its own comments."""

    def get_comment(self, repo: str, number: int) -> StoredComment | None:
        """The bot's comment on this pull request, if one is recorded."""

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
        """Record a write (or adoption) of the comment, with its audit row."""

    def mark_checked(self, comments: Iterable[tuple[str, int]], *, now: datetime) -> None:
        """These (repo, number) comments were re-read and found as the bot wrote them."""

    def forget_comment(self, repo: str, number: int) -> None:
        """The comment is gone on GitHub: drop the record."""

    def note_no_comment(self, repo: str, number: int, *, now: datetime) -> None:
        """The pull request's comments were listed: none is the bot's own."""

    def known_without_comment(self, repo: str, number: int) -> bool:
        """Whether a listing found no comment of the bot's own (and it wrote none since)."""

    def pull_records(self, repo: str, numbers: Iterable[int]) -> dict[int, PullRecord]:
        """`get_comment`, `known_without_comment` and `get_facts` of many pull requests at
        once (a few queries, whatever their number); every number asked has its record."""


class FactsState(Protocol):
    """What the cycle observed: the facts key and first-seen times."""

    def get_facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        """The last facts key and when those facts were first observed."""

    def set_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record an observation (the first sighting's time stays while the facts do)."""

    def set_facts_many(self, repo: str, facts: Sequence[tuple[int, str, datetime]]) -> None:
        """`set_facts` of many pull requests (number, facts key, observed at), in one
        transaction."""

    def adopt_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record facts first observed at `observed_at` (read from an adopted comment)."""

    def first_seen(self, repo: str, number: int, head_sha: str) -> dict[str, datetime]:
        """When each signal key was first seen on this head commit."""

    def mark_seen(
        self, repo: str, number: int, head_sha: str, keys: Iterable[str], *, now: datetime
    ) -> None:
        """Record `now` for keys not yet seen on this head."""


class PacingState(Protocol):
    """The write pacing's memory: comment writes made, and when."""

    def writes_since(self, since: datetime) -> int:
        """How many comments were created or edited at or after `since`."""

    def last_write_at(self) -> datetime | None:
        """When a comment was last created or edited, if ever."""


class SourceReads(Protocol):
    """Every second source's reads kept, by source and record key (the last good answer, and a
    failing run): one table for every provider (bot.sources.cache, Read the Docs' evidence)."""

    def get_source_read(self, source: str, key: str) -> SourceRead | None:
        """The last good answer, when it was read, and since when (and how) reading fails."""

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Keep a good answer."""

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Note a failed read."""


def required_to_json(checks: RequiredChecks) -> str:
    """A read required set as text (only sets that were read are kept)."""
    contexts = [
        {"name": c.name, "rules": [list(r) for r in c.rules], "app_id": c.app_id}
        for c in checks.contexts
    ]
    if checks.pins_error is None:  # the shape kept before issue 24
        return json.dumps(contexts)
    return json.dumps({"contexts": contexts, "pins_error": checks.pins_error})


def required_from_json(base: str, text: str) -> RequiredChecks:
    """A required set kept by `required_to_json`."""
    kept = json.loads(text)
    items, pins_error = (
        (kept, None) if isinstance(kept, list) else (kept["contexts"], kept["pins_error"])
    )
    contexts = tuple(
        RequiredContext(item["name"], tuple(Rule(*r) for r in item["rules"]), item["app_id"])
        for item in items
    )
    return RequiredChecks(base, read=True, contexts=contexts, pins_error=pins_error)


class RequiredCache(Protocol):
    """Which check names GitHub said are required on a base branch (cached, expiring)."""

    def required_known(
        self, repo: str, bases: Iterable[str], *, now: datetime, max_age: timedelta | None = ...
    ) -> dict[Pair, bool | None]:
        """(base, name) -> required (None: GitHub did not say), learned within `max_age`."""

    def remember_required(
        self, repo: str, learned: Mapping[Pair, bool | None], *, now: datetime
    ) -> None:
        """Record what GitHub said (None: asked, GitHub did not say)."""

    def required_sets(
        self, repo: str, bases: Iterable[str], *, now: datetime, max_age: timedelta = ...
    ) -> dict[str, RequiredChecks]:
        """What these base branches require (protection, rulesets), as read within `max_age`
        (default REQUIRED_SETS_TTL)."""

    def remember_required_sets(
        self, repo: str, sets: Mapping[str, RequiredChecks], *, now: datetime
    ) -> None:
        """Record what base branches require (read from GitHub at `now`)."""


class BaseKeeper(Protocol):
    """Merge bases (each of a head and the base branch's commit it was asked with) and merge
    bases' final contexts (issue 16)."""

    def get_merge_base(self, repo: str, base: str, head_sha: str) -> str | None:
        """The kept merge base of a head and a base branch."""

    def merge_bases(
        self, repo: str, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], KeptBase]:
        """The kept merge bases of many (base branch, head) pairs at once (those kept)."""

    def put_merge_base(
        self,
        repo: str,
        base: str,
        head_sha: str,
        merge_base: str,
        *,
        now: datetime,
        tip: str | None = None,
    ) -> None:
        """Keep a merge base, asked at `now` with the branch's commit `tip` (None: not known)."""

    def get_base_contexts(self, repo: str, commit: str) -> str | None:
        """The kept final answer (opaque JSON) of a merge base's contexts."""

    def put_base_contexts(self, repo: str, commit: str, *, payload: str, now: datetime) -> None:
        """Keep a merge base's final contexts."""


class AnnotationKeeper(Protocol):
    """Failing check runs' failure-level annotations, kept per run id (they never change)."""

    def get_annotations(self, repo: str, run_ids: Iterable[int]) -> dict[int, str]:
        """The kept annotations (opaque JSON) of those of these runs that were read."""

    def put_annotations(
        self, repo: str, runs: Mapping[int, tuple[str, str]], *, now: datetime
    ) -> None:
        """Keep runs' annotations: run id -> (its head commit, the JSON)."""


class HistoryKeeper(Protocol):
    """What a failure's history was read from (earlier attempts, base branches), by key."""

    def get_history(self, repo: str, keys: Iterable[str]) -> dict[str, tuple[str, datetime]]:
        """The kept payloads (opaque JSON) of those of these keys that were read, with when."""

    def put_history(self, repo: str, rows: Mapping[str, tuple[str, str]], *, now: datetime) -> None:
        """Keep history reads: key -> (its head commit, or "" for a branch; the JSON)."""


class ReportKeeper(Protocol):
    """Each open pull request's last report and what it was built from, kept across processes
    (issue 31): opaque payloads, each of one version; a payload of another is never read."""

    @property
    def keeps_reports(self) -> bool:
        """Whether what is kept outlives this process (not a state of its memory only)."""

    def kept_reports(self, repo: str, *, version: str) -> dict[int, bytes]:
        """The payloads kept for the pull requests of `repo` in `version`, by number."""

    def keep_reports(
        self, repo: str, payloads: Mapping[int, tuple[str, bytes]], *, version: str, now: datetime
    ) -> None:
        """Keep these payloads (number -> head commit, payload) in `version`, judged at `now`."""

    def forget_reports(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop what is kept for the pull requests of `repo` except `keep`; rows dropped."""


class TriageRows(Protocol):
    """The triage view's rows, as the readers (`report`, the page, /metrics) see them."""

    def triage_rows(self) -> list[StoredTriage]:
        """Every row, with the bot's comment id where one is recorded."""

    def unread_repos(self) -> dict[str, tuple[datetime, str]]:
        """Repositories whose last read failed: since when, and what failed."""


class TriageState(TriageRows, Protocol):
    """The triage rows the cycle keeps."""

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
        """Keep one pull request's last reconciled report."""

    def put_triage_many(
        self, repo: str, rows: Sequence[tuple[int, TriageValues]], *, now: datetime
    ) -> None:
        """`put_triage` of many pull requests (number, values), in one transaction."""

    def touch_triage(self, repo: str, numbers: Iterable[int], *, now: datetime) -> None:
        """These rows were read again and found as they are: only their read time is new."""

    def prune_triage(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop the repository's rows except `keep` (pull requests still open)."""

    def repo_read_failed(self, repo: str, *, now: datetime, failure: str) -> None:
        """The repository could not be read (the first failure's time stands)."""

    def repo_read_ok(self, repo: str) -> None:
        """The repository was read completely."""


class DeliveryState(Protocol):
    """Webhook deliveries already handled (X-GitHub-Delivery)."""

    def note_delivery(self, delivery_id: str, event: str, *, now: datetime) -> bool:
        """Record a delivery; False when it was already recorded (a repeat)."""

    def forget_deliveries(self, before: datetime) -> int:
        """Drop deliveries received before `before`."""


class MarkState(Protocol):
    """Webhook marks left for the replica that works their repository."""

    def add_marks(self, marks: Iterable[MarkRow]) -> None:
        """Leave marks."""

    def take_marks(self, repos: Iterable[str]) -> list[MarkRow]:
        """Take the marks left for these repositories."""


class StateIdentity(Protocol):
    """Which state this is: its epoch, written in every stamp beside the lease generation."""

    @property
    def epoch(self) -> str:
        """The state's identity ("" with no state kept)."""


class CycleState(
    StateIdentity,
    CommentState,
    FactsState,
    PacingState,
    SourceReads,
    RequiredCache,
    TriageState,
    BaseKeeper,
    AnnotationKeeper,
    HistoryKeeper,
    ReportKeeper,
    Protocol,
):
    """Everything one cycle reads and records."""


class Opened(Protocol):
    """An open state: its schema version, closed when done (`with ... as state:`)."""

    @property
    def schema_version(self) -> int:
        """The schema version the state records."""

    def close(self) -> None:
        """Close the connections."""

    def __enter__(self) -> Self:
        """Use as a context manager that closes the state."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close on leaving the block."""


class Housekeeping(Protocol):
    """The service's retention: what is past it goes (bot.state.store.RETENTION)."""

    def prune(self, *, now: datetime) -> dict[str, int]:
        """Drop what is older than its retention; how many rows went, by table."""


class RulesChanged(Protocol):
    """A repository's branch protection or rulesets changed (a webhook said so)."""

    def forget_required(self, repo: str) -> int:
        """Drop what is known to be required in `repo`; rows dropped."""


class ReadState(CycleState, TriageRows, Opened, Protocol):
    """What a dry run, `report` and the page read: the cycle's ports (recording nothing) and
    the triage rows."""


class ServiceState(
    CycleState, DeliveryState, MarkState, RulesChanged, Housekeeping, Opened, Protocol
):
    """What the service's cycles, webhooks and housekeeping use of the writable state."""
