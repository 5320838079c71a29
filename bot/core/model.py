"""Plain, frozen data passed between the stages: fetch -> reconcile -> render -> publish."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _json_string
from typing import Final, NamedTuple

MARKER = "<!-- ci-status-bot:v1 -->"
REPORT_SCHEMA = "ci-status-bot.report/v1"


def as_utc(value: datetime) -> datetime:
    """The same instant in UTC (a naive time is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def format_utc(value: datetime) -> str:
    """Format a time as "2026-10-05 09:12 UTC": absolute, so a comment does not age."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M UTC")


@lru_cache(maxsize=8192)
def parse_time(value: str) -> datetime:
    """An ISO-8601 time from an API answer, as aware UTC (raises ValueError when malformed).

    The same text gives the same (immutable) object, from a bounded table of the last 8,192:
    the check runs of one workflow run start and end within the same seconds, and a cycle at
    2,000 x 60 keeps some 230,000 of these times (48 bytes each)."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is UTC else as_utc(parsed)


def parse_optional_time(value: object) -> datetime | None:
    """None for an absent time, else parse_time's (TypeError or ValueError when malformed)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"a time must be text, not {type(value).__name__}")
    return parse_time(value)


class Kind(StrEnum):
    """Where a signal lives on GitHub."""

    CHECK_RUN = "check_run"
    STATUS = "status"
    EXPECTED = "expected"  # a required (or configured) context no check run or status carries


class State(StrEnum):
    """The bot's reconciled state of one signal."""

    SUCCESS = "success"
    FAILURE = "failure"
    PENDING = "pending"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    NEUTRAL = "neutral"
    ACTION_REQUIRED = "action_required"
    TIMED_OUT = "timed_out"
    STALE = "stale"
    UNKNOWN = "unknown"


# The verdict's groups of reconciled states (interface.md); render groups rows by them too.
FAILING_STATES = frozenset({State.FAILURE, State.ACTION_REQUIRED, State.TIMED_OUT})
INCOMPLETE_STATES = frozenset({State.CANCELLED, State.STALE, State.UNKNOWN})


class Verdict(StrEnum):
    """The pull request's overall verdict, computed from reconciled states."""

    PASSING = "passing"
    FAILING = "failing"
    PENDING = "pending"
    INCOMPLETE = "incomplete"


# A state's group, most urgent first: a row is counted, ordered and marked by its group.
GROUP_ORDER = (Verdict.FAILING, Verdict.INCOMPLETE, Verdict.PENDING, Verdict.PASSING)


def group_of(state: State) -> Verdict:
    """The group a reconciled state falls in: failing, incomplete, pending or passing."""
    if state in FAILING_STATES:
        return Verdict.FAILING
    if state in INCOMPLETE_STATES:
        return Verdict.INCOMPLETE
    return Verdict.PENDING if state is State.PENDING else Verdict.PASSING


class SinceSource(StrEnum):
    """Who gave the time a signal entered its current state."""

    GITHUB = (
        "github"  # a timestamp in GitHub's answer (status createdAt, check startedAt/completedAt)
    )
    FIRST_SEEN = "first_seen"  # the bot's own first observation (GitHub gave no timestamp)
    NONE = "none"  # no timestamp at all


class Rule(NamedTuple):
    """Where a required context comes from: ("branch protection", "main"), ("ruleset",
    "Main"), or ("configuration", "") for a name in `[[repos]] expected`."""

    source: str
    name: str

    def words(self, quote: Callable[[str], str] = str) -> str:
        """ "branch protection of main", "ruleset Main", "this bot's configuration"."""
        if self.source == BRANCH_PROTECTION:
            return f"branch protection of {quote(self.name)}"
        if self.source == RULESET:
            return f"ruleset {quote(self.name)}" if self.name else "a ruleset"
        return "this bot's configuration"


BRANCH_PROTECTION: Final = "branch protection"
RULESET: Final = "ruleset"
CONFIGURATION: Final = "configuration"


class Signal(NamedTuple):
    """One check run or commit status on the head commit, as GitHub reported it.

    A NamedTuple, not a frozen dataclass: a cycle builds ~100,000 of these, and a frozen
    dataclass costs three times as much to construct. It is just as immutable.
    """

    name: str
    kind: Kind
    github_state: str  # lower case: status state, check status, or conclusion when completed
    app: str | None = None  # check run app slug; None for statuses
    workflow: str | None = None  # GitHub Actions workflow name, when GitHub gave it
    url: str | None = None  # status target_url / check details_url
    description: str | None = None  # status description / check title
    summary: str | None = None  # check run output summary (DCO lists offending commits here)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    created_at: datetime | None = None  # statuses: when this state was posted
    required: bool | None = None  # as GitHub said for this pull request; None where it did not
    database_id: int | None = None
    event: str | None = None  # what triggered the check run's workflow run (push, pull_request)
    workflow_path: str | None = None  # the workflow file (a workflow's identity), when given
    app_id: int | None = None  # the check run's app database id (rulesets name apps by it)
    rules: tuple[Rule, ...] = ()  # expected signals: the rules that require the context
    node_id: str | None = None  # the check run's GraphQL node id (its annotations are read by it)

    @property
    def identity(self) -> tuple[str, str, str | None, str | None, str | None, str | None]:
        """What tells two signals apart: kind, name, app, workflow, event and workflow file."""
        return (self.kind.value, self.name, self.app, self.workflow, self.event, self.workflow_path)

    @property
    def key(self) -> str:
        """Identity of the signal across cycles (first-seen bookkeeping): exactly the fields
        dedupe tells runs apart by, so no two of its signals share a key (None is not "").
        The workflow file is appended only where GitHub gave one (older keys stay valid)."""
        fields: tuple[str | None, ...] = (
            str(self.kind), self.app, self.workflow, self.name, self.event
        )  # fmt: skip
        if self.workflow_path is not None:
            fields = (*fields, self.workflow_path)
        # json.dumps(list(fields)), written out: a cycle asks some 25,000 keys
        return "[" + ", ".join("null" if f is None else _json_string(f) for f in fields) + "]"


@dataclass(frozen=True, slots=True)
class RequiredContext:
    """One context GitHub requires on a base branch, and which rules require it."""

    name: str
    rules: tuple[Rule, ...]
    app_id: int | None = None  # a ruleset's integrationId: only that app's check satisfies it


@dataclass(frozen=True, slots=True)
class RequiredChecks:
    """What GitHub requires on one base branch (branch protection and active rulesets)."""

    base: str
    read: bool
    contexts: tuple[RequiredContext, ...] = ()
    error: str | None = None  # why it could not be read (read is False)
    # why branch protection's app pins ("expected source": REST checks[].app_id) could not be
    # read (None: read, or no branch protection requires anything there)
    pins_error: str | None = None


class QueueState(StrEnum):
    """GitHub's MergeQueueEntryState; a value the schema does not list is UNKNOWN."""

    QUEUED = "QUEUED"
    AWAITING_CHECKS = "AWAITING_CHECKS"
    MERGEABLE = "MERGEABLE"
    UNMERGEABLE = "UNMERGEABLE"
    LOCKED = "LOCKED"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A pull request's place in its base branch's merge queue, as GitHub gave it."""

    state: QueueState
    raw_state: str  # GitHub's own word (differs from `state` only when UNKNOWN)
    position: int | None = None
    enqueued_at: datetime | None = None
    commit: str | None = None  # headCommit: the merge-group commit the queue tests
    base_commit: str | None = None
    error: str | None = None  # GitHub answered an error for the entry: nothing above is known


@dataclass(frozen=True, slots=True)
class QueueFinding:
    """What a queued pull request's merge-group commit carries of what the base requires."""

    entry: QueueEntry
    timeout_minutes: int | None = None  # the queue's checkResponseTimeout (None: not known)
    timeout_error: str | None = None  # why the queue's configuration could not be read
    commit_error: str | None = None  # why the merge-group commit's checks could not be read
    required_read: bool = True  # the base branch's required set was read
    checks: int = 0  # check runs and statuses GitHub reported on the merge-group commit
    truncated: bool = False  # more contexts there than were read
    missing: tuple[Signal, ...] = ()  # `expected` signals: required there, never reported
    failing: tuple[Signal, ...] = ()  # required (or expected) contexts failing there
    pending: tuple[Signal, ...] = ()  # required (or expected) contexts still running there
    passed: int = 0  # required (or expected) contexts that passed there


@dataclass(frozen=True, slots=True)
class PullSnapshot:
    """One open pull request and every CI signal on its head commit."""

    repo: str
    number: int
    title: str
    author: str | None
    draft: bool
    head_sha: str
    url: str
    labels: tuple[str, ...] = ()
    signals: tuple[Signal, ...] = ()
    fetched_at: datetime | None = None
    # True when GitHub's rollup for the head had more contexts than were read
    truncated: bool = False
    base: str | None = None  # the base branch's name
    # what the base branch requires; None where it was not asked (then no expected signals)
    required_checks: RequiredChecks | None = None
    queue: QueueEntry | None = None  # its merge-queue entry; None: not in a merge queue


@dataclass(frozen=True, slots=True)
class Policy:
    """The parts of the configuration the pure core needs."""

    stale_after: timedelta = timedelta(minutes=120)
    unverified_after: timedelta = timedelta(minutes=30)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """Evidence from a second source for one signal."""

    provider: str
    project: str
    build_id: int | None
    build_state: str | None
    success: bool | None
    builds_for_commit: int | None
    divergent: bool
    finding: str
    build_url: str | None = None
    notification: str | None = None
    build_created: datetime | None = None
    build_finished: datetime | None = None
    fetched_at: datetime | None = None
    link_label: str | None = None  # the words of the link to the record page, e.g. "RTD build"


@dataclass(frozen=True, slots=True)
class BaseCheck:
    """What the same signal reported on the pull request's merge-base commit."""

    commit: str | None  # the merge base (40 hex); None where it could not be read
    state: State | None = None  # None: the signal did not run there (or could not be read)
    url: str | None = None
    since: datetime | None = None
    error: str | None = None  # why the merge base or its checks could not be read
    # the merge base's checks could not be read again since then (said once that has lasted
    # the policy's limit; before that None): what is above is GitHub's last good answer
    unverified_since: datetime | None = None
    failure: str | None = None  # how that read fails, in stable words
    read_at: datetime | None = None  # when that last good answer was read
    # the signal did not run there, but its workflow did (same app and workflow): the check
    # runs on base-branch commits, so "not run on the merge base" says something
    workflow_ran: bool = False

    @property
    def also_failing(self) -> bool:
        """The signal fails on the merge base too (it was broken before this pull request)."""
        return self.error is None and self.state in FAILING_STATES


class Annotation(NamedTuple):
    """One failure-level annotation of a check run, as GitHub gave it (untrusted text)."""

    path: str
    start_line: int | None
    end_line: int | None
    message: str


class KeptRead(NamedTuple):
    """A second source's final record of a head as the state keeps it: the comment's carried
    line takes it to a run with no state (a `source_reads` row: e.g. source "readthedocs", key
    the JSON of site, project and commit)."""

    source: str
    key: str
    payload: str
    read_at: datetime


class MergeBaseOf(NamedTuple):
    """The merge-base commit GitHub's compare gave for a head and its base branch: a fact of
    the branch's commit it was asked with (`tip`), never of the branch, which moves. `tip`
    None: not known (asked by the branch's name, or kept before the tip was); `asked_at`
    None: when is not known (a stamp of an older bot)."""

    branch: str
    commit: str
    tip: str | None = None
    asked_at: datetime | None = None


class Attempt(NamedTuple):
    """An earlier run of the same check on the same head commit (or a status's earlier state)."""

    state: State
    at: datetime | None  # when it completed (a status: when it was posted)
    url: str | None


class Elsewhere(NamedTuple):
    """The same check failing now on other open pull request heads of the repository."""

    heads: int  # other open heads it fails on
    of: int  # other open heads the cycle holds
    since: datetime | None  # the earliest of those failures


class BaseRecord(NamedTuple):
    """The same check on the base branch's last commits: failed on `failed` of `of`."""

    branch: str
    failed: int
    of: int
    commits: tuple[str, ...]  # the commits it failed on, newest first


@dataclass(frozen=True, slots=True)
class History:
    """Facts about a failure's history (never a label): each is left out where unknown."""

    attempts: tuple[Attempt, ...] = ()  # earlier attempts on this head, oldest first
    elsewhere: Elsewhere | None = None
    base_branch: BaseRecord | None = None

    @property
    def empty(self) -> bool:
        """No fact present."""
        return not self.attempts and self.elsewhere is None and self.base_branch is None


class Row(NamedTuple):
    """One reconciled signal of a report (a NamedTuple for the same reason as Signal)."""

    signal: Signal
    state: State
    since: datetime | None
    since_source: SinceSource
    reconciliation: Reconciliation | None = None
    finding: str | None = None  # one factual sentence from GitHub's side (e.g. stale, expected)
    base: BaseCheck | None = None  # failing rows: the same signal on the merge base
    # failing check runs: the annotations quoted (None: not asked, or they could not be read)
    annotations: tuple[Annotation, ...] | None = None
    history: History | None = None  # failing rows: facts about the failure's history


@dataclass(frozen=True, slots=True)
class Report:
    """The reconciled facts of one pull request at one time."""

    repo: str
    number: int
    title: str
    url: str
    head_sha: str
    draft: bool
    observed_at: datetime
    verdict: Verdict
    rows: tuple[Row, ...] = ()
    stale_after: timedelta = timedelta(minutes=120)
    truncated: bool = False
    notes: tuple[str, ...] = field(default=())
    # what the base branch requires; None where it was not asked
    required_checks: RequiredChecks | None = None
    # The bot's own first sight of what GitHub gave no time for (signal key -> time), as used
    # for this report's rows: the comment's stamp carries it to a run with no state.
    first_seen: tuple[tuple[str, datetime], ...] = ()
    # the merge base the failing rows were compared on, with the base branch's commit it was
    # asked with and when; the stamp carries it, so a run with no state asks GitHub's compare
    # again only as a state would (bot.github.bases)
    merge_base: MergeBaseOf | None = None
    # where GitHub's merge queue holds the pull request: its merge-group commit's findings
    merge_queue: QueueFinding | None = None
    # the second sources' final records this report's evidence came from (not a fact: the
    # comment's carried line takes them to a run with no state; bot.render.stamp)
    kept_reads: tuple[KeptRead, ...] = ()
    # the failing check runs' earlier attempts that are final, by run id (not a fact either:
    # the carried line takes them, so a run with no state asks them once per run)
    kept_attempts: tuple[tuple[int, tuple[Attempt, ...]], ...] = ()

    @property
    def commit_url(self) -> str:
        """The web URL of the head commit inside the pull request."""
        return f"{self.url}/commits/{self.head_sha}"
