"""One pass over the configured repositories: fetch -> reconcile -> render -> publish, per PR."""

from __future__ import annotations

import gc
import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, Protocol

from bot.core.annotations import needs_annotations, with_annotations
from bot.core.base import MergeBase, judged, needs_base, with_base
from bot.core.evidence import Evidence
from bot.core.facts import core_key, facts_key
from bot.core.history import (
    BranchHistory,
    FailingIndex,
    HistoryInputs,
    elsewhere_of,
    needs_history,
    with_history,
)
from bot.core.merge_queue import QueueRead, judge_queue
from bot.core.model import FAILING_STATES, Policy, PullSnapshot, Report, Signal, Verdict
from bot.core.reconcile import github_state, reconcile_until
from bot.core.remedies import READTHEDOCS
from bot.core.required import HEAD_SEEN_KEY, expected_signals
from bot.core.summary import Summary
from bot.github.annotations import AnnotationReader, Found, failing_runs
from bot.github.bases import BaseReader
from bot.github.client import Comment, GitHubApi, GitHubError, RateLimited
from bot.github.history import AttemptReader, Attempts, BranchReader
from bot.github.merge_groups import MergeGroupReader
from bot.github.ownership import (
    foreign_marked,
    is_claimed,
    kept_and_later,
    last_edit_is_the_bots,
)
from bot.github.parse import PullFailure
from bot.progress import WriteProgress
from bot.render.comment import Renderer
from bot.render.stamp import Stamp, generation_of, parse_stamp
from bot.retry import Retryable, RetryPolicy, Stopped, pause, run_with_retries
from bot.settings import PolicySettings, RepoSettings
from bot.sources.base import Source
from bot.state.ports import CycleState, PullRecord, StoredComment

log = logging.getLogger(__name__)

PRIORITY = {Verdict.FAILING: 0, Verdict.INCOMPLETE: 1, Verdict.PENDING: 2, Verdict.PASSING: 3}
# Comments to be edited are re-read in batches (one GraphQL query each) just before the batch's
# writes; writes are >= 1 s apart, so a re-read is at most about this many seconds old.
REREAD_BATCH = 50
# The bot's comments left as they are are re-read this many per GraphQL query (one point).
CHECK_BATCH = 100
# Pull requests whose comments the state does not know are listed this many at a time (GraphQL).
LIST_BATCH = 50
# A failed create is tried twice more, each time only after looking that it did not land.
CREATE_POLICY = RetryPolicy(attempts=3, backoff_s=1.0, jitter_s=1.0)


HOUR = timedelta(hours=1)


class WritePacing:
    """This process's comment writes on a monotonic clock: the gap between writes and the
    write budgets measure intervals on it, so a wall-clock step never stalls or rushes them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """No write yet."""
        self._clock = clock
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def wrote(self) -> None:
        """A comment was created or edited now."""
        with self._lock:
            now = self._clock()
            self._times.append(now)
            while self._times and now - self._times[0] > HOUR.total_seconds():
                self._times.popleft()

    def since_last(self) -> float | None:
        """Seconds since this process's last write (None: none yet)."""
        with self._lock:
            return self._clock() - self._times[-1] if self._times else None

    def count_within(self, seconds: float) -> int:
        """How many writes this process made in the last `seconds`."""
        with self._lock:
            now = self._clock()
            return sum(1 for t in self._times if now - t <= seconds)


@dataclass(frozen=True, slots=True)
class Built:
    """One pull request's last report, its facts key, and everything it was built from."""

    snapshot: PullSnapshot
    docs: Mapping[str, Evidence]
    first_seen: Mapping[str, datetime]
    policy: Policy
    expected: tuple[str, ...]  # the contexts the repository's configuration expects
    merge: MergeBase | None  # the merge-base answer of this pass for the head (if read)
    judged_at: datetime
    until: datetime | None  # the first time these inputs would give another report
    report: Report
    key: str
    annotations: Found | None = None  # the failing runs' annotations of this pass (if read)
    keys: tuple[str, ...] = ()  # needs_first_seen of the snapshot
    failing: bool = False  # a signal of the snapshot fails (its merge base is read)
    queue: QueueRead | None = None  # its merge-group commit's read of this pass (if queued)
    history: HistoryInputs | None = None  # what its failing rows' history was made of

    def same_signals(self, snapshot: PullSnapshot, expected: Sequence[str]) -> bool:
        """Whether `snapshot` holds the very signals (and required set) this was built from:
        what is computed from them alone is as it was."""
        last = self.snapshot
        return (
            last.signals is snapshot.signals
            and last.required_checks == snapshot.required_checks
            and self.expected == tuple(expected)
        )

    def serves(
        self,
        snapshot: PullSnapshot,
        docs: Mapping[str, Evidence],
        first_seen: Mapping[str, datetime],
        policy: Policy,
        now: datetime,
    ) -> bool:
        """Whether reconciling these inputs at `now` would give this same report."""
        if now < self.judged_at or (self.until is not None and now >= self.until):
            return False  # a limit crossed (or the clock went back): judged again
        same = replace(snapshot, fetched_at=self.snapshot.fetched_at) == self.snapshot
        return (
            same and policy == self.policy and docs == self.docs and (first_seen == self.first_seen)
        )


class Reports:
    """The last report of each pull request, kept across the cycles of one process (`run`):
    a pull request whose inputs did not change, before any limit is crossed, is not
    reconciled or keyed again."""

    def __init__(self) -> None:
        """None yet."""
        self._built: dict[tuple[str, int], Built] = {}
        # each head's failing check runs, with the signals they were found in
        self._runs: dict[tuple[str, int], tuple[tuple[Signal, ...], list[Signal]]] = {}
        # each repository's failing checks by pull request, as its last complete listing had
        # them (a failure's `elsewhere`: no request of its own)
        self.index: dict[str, FailingIndex] = {}

    def failing_runs(self, snapshot: PullSnapshot) -> list[Signal]:
        """The head's failing check runs (bot.github.annotations), found again only when its
        signals are not the very ones they were found in."""
        key = (snapshot.repo, snapshot.number)
        last = self._runs.get(key)
        if last is not None and last[0] is snapshot.signals:
            return last[1]
        runs = failing_runs(snapshot)
        self._runs[key] = (snapshot.signals, runs)
        return runs

    def get(self, repo: str, number: int) -> Built | None:
        """The last report built for this pull request, if any."""
        return self._built.get((repo, number))

    def put(self, built: Built) -> None:
        """Keep this pull request's newest report."""
        self._built[(built.report.repo, built.report.number)] = built

    def keep_only(self, repo: str, numbers: Iterable[int]) -> None:
        """Forget the pull requests of `repo` that are no longer open."""
        kept = set(numbers)
        for key in [k for k in self._built if k[0] == repo and k[1] not in kept]:
            del self._built[key]
        for key in [k for k in self._runs if k[0] == repo and k[1] not in kept]:
            del self._runs[key]


@dataclass(frozen=True)
class Plan:
    """What the bot would write for one pull request."""

    report: Report
    action: Literal["create", "edit", "leave", "adopt"]
    body: str
    comment_key: str
    comment_id: int | None
    node_id: str = ""
    # the bot's own comment found by listing the PR's comments (the state did not know it)
    found: Comment | None = None
    looked: bool = False  # the PR's comments were listed for this plan

    @property
    def label(self) -> str:
        """owner/name#N."""
        return f"{self.report.repo}#{self.report.number}"


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a cycle's answers makes millions of objects
    that live until the cycle ends, and each full collection would walk every one of them
    again (a quarter of a warm cycle's CPU at 500 pull requests). Objects freed by reference
    count still are; cycles of garbage wait for the collector, enabled again after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def sha256(text: str) -> str:
    """Hex sha256 of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def selected(snapshot: PullSnapshot, policy: PolicySettings) -> bool:
    """Whether the policy lets the bot report on this pull request."""
    if snapshot.draft and not policy.include_drafts:
        return False
    # Logins are in REST's form (a Bot's with `[bot]`) and compared as GitHub does, ignoring case.
    skip = {login.casefold() for login in policy.skip_authors}
    if snapshot.author is not None and snapshot.author.casefold() in skip:
        return False
    # GitHub's label names are unique ignoring case: compare them so.
    skip_labels = {label.casefold() for label in policy.skip_labels}
    return not {label.casefold() for label in snapshot.labels} & skip_labels


def read_docs(
    snapshot: PullSnapshot, repo: RepoSettings, docs: Sequence[Source], *, now: datetime
) -> dict[str, Evidence]:
    """What every docs provider says about the head's statuses, by context."""
    found: dict[str, Evidence] = {}
    for provider in docs:
        found.update(provider.evidence(snapshot, repo, now=now))
    return found


def needs_first_seen(snapshot: PullSnapshot, expected: Sequence[str] = ()) -> list[str]:
    """Keys of signals for which GitHub gave no timestamp (the bot's first sight stands in),
    and the head's own key when a context it expects was never reported on it."""
    keys = [
        s.key
        for s in snapshot.signals
        if s.started_at is None and s.completed_at is None and s.created_at is None
    ]
    if expected_signals(snapshot.signals, snapshot.required_checks, expected):
        keys.append(HEAD_SEEN_KEY)
    return keys


def queued(
    snapshots: Iterable[PullSnapshot | PullFailure], policy: PolicySettings
) -> list[PullSnapshot]:
    """The selected pull requests GitHub's merge queue holds (their merge groups are read)."""
    return [
        s
        for s in snapshots
        if isinstance(s, PullSnapshot) and s.queue is not None and selected(s, policy)
    ]


def has_failing(snapshot: PullSnapshot) -> bool:
    """Whether a signal of the head fails on GitHub (its merge base is then read)."""
    return any(github_state(signal) in FAILING_STATES for signal in snapshot.signals)


def due_for_check(
    last_good: Mapping[tuple[str, int], datetime], *, per_query: int = CHECK_BATCH
) -> list[tuple[str, int]]:
    """Which comments to re-read this pass: all of them when that takes no more queries than
    half of them would, else the least recently known good, whole queries, at least half."""
    queries = -(-len(last_good) // (2 * per_query))
    ordered = sorted(last_good, key=lambda key: (last_good[key], key))
    return ordered[: queries * per_query]


def unread_only(report: Report, stamp: Stamp) -> bool:
    """Whether the comment stamped `stamp` differs from `report` only by what a failed read
    took away: the same head and core facts, and a failing row whose merge base's checks or
    annotations could not be read this time (a failed read is no new fact)."""
    if stamp.head_sha != report.head_sha or stamp.core_key != core_key(report):
        return False
    return any(
        (needs_base(row) and row.base is not None and row.base.error is not None)
        or (needs_annotations(row) and row.annotations is None)
        for row in report.rows
    )


UNKNOWN_EDITOR = "(an editor GitHub did not name)"  # never a login: a stamp is then not trusted


class CycleObserver(Protocol):
    """What a writing cycle tells the rest of the bot (the triage rows, metrics) as it goes."""

    def pull_done(self, snapshot: PullSnapshot, report: Report) -> None:
        """A selected pull request was reconciled into `report`."""

    def pulls_done(self) -> None:
        """The pass (or refresh) planned every pull request it read."""

    def repo_done(self, repo: str, seen: Iterable[int]) -> None:
        """Every open pull request of `repo` was listed; `seen` are the numbers kept."""

    def repo_failed(self, repo: str, reason: str) -> None:
        """`repo` could not be read (renamed, access removed, an error): what failed."""


class LeaseLost(Exception):
    """A comment write refused: another replica works the repository now (fencing)."""


class Cycle:
    """One pass over repositories; one pull request's failure never stops the others."""

    def __init__(
        self,
        *,
        github: GitHubApi,
        docs: Sequence[Source],
        store: CycleState,
        renderer: Renderer,
        policy: PolicySettings,
        login: str,
        clock: Callable[[], datetime],
        dry_run: bool = False,
        out: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        stop: threading.Event | None = None,
        observers: Sequence[CycleObserver] = (),
        pacing: WritePacing | None = None,
        generation: Callable[[str], int] = lambda _repo: 0,
        fence: Callable[[str], int | None] | None = None,
        reports: Reports | None = None,
        progress: Callable[[str], None] | None = None,
        epoch: str = "",
    ) -> None:
        self.github, self.docs, self.store, self.renderer = github, tuple(docs), store, renderer
        self.progress = progress  # a terminal's line of how far the writes are ("" clears it)
        self.reports = reports or Reports()  # the service shares one across its cycles
        self.policy = policy
        self.pacing = pacing or WritePacing()  # the service shares one across its cycles
        self.core_policy = policy.core()
        self.login = login
        self.clock = clock
        self.dry_run = dry_run
        self.out = out
        self.sleep = sleep  # None: wait on `stop`; either way a wait ends on a stop request
        self.should_stop = should_stop
        self.stop = stop or threading.Event()
        self._left: list[Plan] = []  # this pass's comments left as they are (to be checked)
        # The bot's own comments (None: it has none) found by a batched listing, by PR.
        self._listed: dict[tuple[str, int], Comment | None] = {}
        # The bot's own comments found beside the one it keeps (two runs at once, a lost create
        # answer), by PR: deleted once the kept one is written.
        self._later: dict[tuple[str, int], list[Comment]] = {}
        # Marked comments other logins wrote, seen by this pass's listings: login -> ids.
        self._foreign: dict[str, set[int]] = {}
        # What the state holds for the pull requests being planned, read a chunk at a time.
        self._records: dict[tuple[str, int], PullRecord] = {}
        # The recorded comments this pass leaves as they are, as read when planned.
        self._left_stored: dict[tuple[str, int], StoredComment] = {}
        # The merge bases (and their signals) read for this pass's failing heads, by head.
        self._bases: dict[tuple[str, str], MergeBase] = {}
        # The readers tell time by the cycle's clock as it is when they ask (one clock per pass)
        self._base_reader = BaseReader(github, store, clock=lambda: self.clock())
        # The failing check runs' annotations read for this pass's failing heads, by head.
        self._annotations: dict[tuple[str, str], Found] = {}
        # The queued pull requests' merge-group commits (and queues) read this pass, by PR.
        self._groups: dict[tuple[str, int], QueueRead] = {}
        self._group_reader = MergeGroupReader(github, clock=lambda: self.clock())
        # Failing pull requests whose runs' annotations are not known yet: planned at the end
        # of their repository, after one batched read of all of them.
        self._waiting: list[PullSnapshot] = []
        self._annotation_reader = AnnotationReader(
            github, store, clock=lambda: self.clock(), runs_of=self.reports.failing_runs
        )
        # A failure's history (issue 27): failing heads' earlier attempts and base branches'
        # last commits read this pass, and each repository's index as its listing goes.
        self._attempts: dict[tuple[str, str], Attempts] = {}
        self._branches: dict[tuple[str, str], BranchHistory | None] = {}
        self._building: dict[str, FailingIndex] = {}
        self._attempt_reader = AttemptReader(github, store, clock=lambda: self.clock())
        self._branch_reader = BranchReader(github, store, clock=lambda: self.clock())
        # The lease generation a write to a repository's comments carries (0: no lease).
        self.generation = generation
        # Several replicas: the generation this replica may write under now, read from the
        # state just before each write (None: its lease is lost: no write). None: one process.
        self.fence = fence
        # The state's identity, stamped beside the generation: a stamp of another epoch (a
        # recreated or swapped database) is never newer than this state's lease.
        self.epoch = epoch
        self.observers = tuple(observers)

    # -- the pass ------------------------------------------------------------------------

    def run(self, repos: Sequence[RepoSettings]) -> Summary:
        """Read and reconcile every open pull request, then write what changed, paced.

        It always returns its summary: a repository that cannot be read is named in
        `failed` (with, after a rate limit, every repository not read because of it) and the
        others are still read; a stop request ends it early, naming what was left.
        """
        summary = Summary(dry_run=self.dry_run)
        plans: list[Plan] = []
        self._left, self._listed, self._bases, self._annotations = [], {}, {}, {}
        self._later, self._foreign = {}, {}
        self._waiting, self._groups = [], {}
        self._records, self._left_stored = {}, {}
        self._attempts, self._branches, self._building = {}, {}, {}
        gh_before, points_before = self.github.usage.total, self.github.usage.graphql_points
        sources_before = self._source_requests()
        with gc_paused():
            self._plan_all(repos, plans, summary)
            for observer in self.observers:
                observer.pulls_done()
            plans.extend(self._check_left(summary))
        self._publish_all(plans, summary)
        self._delete_later(summary)
        summary.foreign = {login: len(ids) for login, ids in sorted(self._foreign.items())}
        summary.github_requests = self.github.usage.total - gh_before
        summary.graphql_points = self.github.usage.graphql_points - points_before
        self._count_sources(summary, sources_before)
        return summary

    def _plan_all(self, repos: Sequence[RepoSettings], plans: list[Plan], summary: Summary) -> None:
        """Read and plan every repository (a failure is that repository's alone)."""
        for index, repo in enumerate(repos):
            if self.stopping():
                self._not_read(repos[index:], summary, "not read: the bot is stopping")
                break
            try:
                plans.extend(self._plan_repo(repo, summary))
            except RateLimited as exc:
                summary.rate_limited_s = exc.wait_s
                self._repo_failed(repo.name, summary, f"rate limited: {exc}")
                log.warning("rate limited while reading %s: %s", repo.name, exc)
                why = f"not read: GitHub's rate limit was reached while reading {repo.name}"
                self._not_read(repos[index + 1 :], summary, why)
                break
            except Stopped:
                self._not_read(repos[index:], summary, "not read: the bot is stopping")
                break
            except GitHubError as exc:
                self._repo_failed(repo.name, summary, str(exc))
                log.warning("could not read %s: %s", repo.name, exc)
            except Exception as exc:  # one repository's failure never loses the cycle
                self._repo_failed(repo.name, summary, f"{exc.__class__.__name__}: {exc}")
                log.warning("could not read %s", repo.name, exc_info=True)

    def _source_requests(self) -> dict[str, int]:
        return {source.name: source.requests for source in self.docs}

    def _count_sources(self, summary: Summary, before: Mapping[str, int]) -> None:
        """What this pass asked each second source (Read the Docs' also as `rtd_requests`)."""
        for source in self.docs:
            spent = source.requests - before.get(source.name, 0)
            summary.source_requests[source.name] = spent
            summary.source_labels[source.name] = source.label
        summary.rtd_requests = summary.source_requests.get(READTHEDOCS, 0)

    def stopping(self) -> bool:
        """Whether a stop was requested (the service's flag or the Event handed down)."""
        return self.stop.is_set() or self.should_stop()

    def _repo_failed(self, repo: str, summary: Summary, reason: str) -> None:
        summary.failed[repo] = reason
        for observer in self.observers:
            observer.repo_failed(repo, reason)

    @staticmethod
    def _not_read(repos: Sequence[RepoSettings], summary: Summary, why: str) -> None:
        for repo in repos:
            summary.failed.setdefault(repo.name, why)

    def _plan_repo(self, repo: RepoSettings, summary: Summary) -> Iterable[Plan]:
        required = self.store
        chunk: list[PullSnapshot | PullFailure] = []
        pulls = iter(self.github.open_pulls(repo.name, now=self.clock(), required=required))
        while True:
            try:
                snapshot = next(pulls)
            except StopIteration:
                break
            except Exception:  # what was read before the failure is still planned
                yield from self._plan_chunk(chunk, repo, summary)
                yield from self._plan_waiting(repo, summary)
                raise
            chunk.append(snapshot)
            if len(chunk) == LIST_BATCH:
                yield from self._plan_chunk(chunk, repo, summary)
                chunk = []
        yield from self._plan_chunk(chunk, repo, summary)
        if repo.name in self._building:  # listed whole: the index of its failing checks is too
            self.reports.index[repo.name] = self._building.pop(repo.name)
        yield from self._plan_waiting(repo, summary)
        prefix = f"{repo.name}#"  # the pull requests kept: planned, or failed this time
        labels = [label for group in (summary.verdicts, summary.failed) for label in group]
        seen = {int(label[len(prefix) :]) for label in labels if label.startswith(prefix)}
        for observer in self.observers:
            observer.repo_done(repo.name, seen)
        self.reports.keep_only(repo.name, seen)

    def _plan_chunk(
        self, chunk: Sequence[PullSnapshot | PullFailure], repo: RepoSettings, summary: Summary
    ) -> Iterator[Plan]:
        """Plan a few pull requests; first list, in one query, the comments of those whose
        comment the state does not know (with no state at all: every one)."""
        numbers = [s.number for s in chunk if isinstance(s, PullSnapshot)]
        for number, record in self.store.pull_records(repo.name, numbers).items():
            self._records[(repo.name, number)] = record
        self._list_unknown(repo.name, chunk)
        failing = [
            s
            for s in chunk
            if isinstance(s, PullSnapshot) and selected(s, self.policy) and self._failing(repo, s)
        ]
        self._stamped_bases(repo.name, failing)
        self.read_bases(repo.name, failing)
        self.read_annotations(repo.name, failing, ask=False)
        unread = [s for s in failing if (repo.name, s.head_sha) not in self._annotations]
        if self.policy.history:  # every open head is counted; the failing wait for them all
            index = self._building.setdefault(repo.name, FailingIndex())
            for snapshot in chunk:
                if isinstance(snapshot, PullSnapshot):
                    index.add(snapshot)
            unread = list(failing)
        # queued ones wait too: the repository's merge groups are read in one query at its end
        unread += [s for s in queued(chunk, self.policy) if all(s is not u for u in unread)]
        self._waiting.extend(unread)
        waiting = {id(s) for s in unread}
        yield from self._plan_each([s for s in chunk if id(s) not in waiting], repo, summary)

    def _plan_waiting(self, repo: RepoSettings, summary: Summary) -> Iterator[Plan]:
        """Plan the failing pull requests whose annotations were not kept: all of the
        repository's asked in one batch (100 runs a query), not one query per 50 pulls."""
        waiting, self._waiting = self._waiting, []
        self.read_groups(repo.name, waiting)
        failing = [s for s in waiting if self._failing(repo, s)]
        self.read_annotations(repo.name, failing)
        self.read_history(repo.name, failing)
        yield from self._plan_each(waiting, repo, summary)

    def _plan_each(
        self,
        snapshots: Sequence[PullSnapshot | PullFailure],
        repo: RepoSettings,
        summary: Summary,
    ) -> Iterator[Plan]:
        """Plan each in turn, dropping what its chunk read of the state (planned: it may
        differ now)."""
        for snapshot in snapshots:
            plan = self._plan_one(snapshot, repo, summary)
            if isinstance(snapshot, PullSnapshot):
                self._records.pop((repo.name, snapshot.number), None)
            if plan is not None:
                yield plan

    def _failing(self, repo: RepoSettings, snapshot: PullSnapshot) -> bool:
        """Whether a signal of the head fails (as last time when its signals are the same)."""
        last = self.reports.get(repo.name, snapshot.number)
        if last is not None and last.same_signals(snapshot, repo.expected):
            return last.failing
        return has_failing(snapshot)

    # What the state holds for a pull request: as read with its chunk (before anything was
    # recorded for it this pass), else read now (a webhook refresh, a dry run's report).

    def stored_comment(self, repo: str, number: int) -> StoredComment | None:
        """The recorded comment."""
        found = self._records.get((repo, number))
        return self.store.get_comment(repo, number) if found is None else found.comment

    def _without_comment(self, repo: str, number: int) -> bool:
        found = self._records.get((repo, number))
        if found is None:
            return self.store.known_without_comment(repo, number)
        return found.without_comment

    def _facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        found = self._records.get((repo, number))
        return self.store.get_facts(repo, number) if found is None else found.facts

    def _list_unknown(self, repo: str, chunk: Sequence[PullSnapshot | PullFailure]) -> None:
        numbers = [
            s.number
            for s in chunk
            if isinstance(s, PullSnapshot)
            and selected(s, self.policy)
            and self.stored_comment(repo, s.number) is None
            and not self._without_comment(repo, s.number)
        ]
        if not numbers:
            return
        try:
            listed = self.github.pulls_comments(
                repo, numbers, until=lambda c: is_claimed(c, self.login)
            )
        except GitHubError as exc:  # each is listed over REST when planned (or fails alone)
            log.warning("could not list the comments of %s over GraphQL: %s", repo, exc)
            return
        for number, comments in listed.items():
            self._listed[(repo, number)] = self._keep(repo, number, comments)

    def _stamped_bases(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """Keep the merge bases the bot's own listed comments are stamped with for their head
        and base branch (a run with no state then asks no compare it asked before)."""
        for snapshot in snapshots:
            own = self._listed.get((repo, snapshot.number))
            base = snapshot.base
            if own is None or base is None:
                continue
            stamp = self._trusted_stamp(own)
            commit = stamp and stamp.merge_base_of(snapshot.head_sha, base)
            if commit and not self.store.get_merge_base(repo, base, snapshot.head_sha):
                self.store.put_merge_base(repo, base, snapshot.head_sha, commit, now=self.clock())

    def read_bases(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """The merge base of each failing head and what GitHub reported on it (bot.github.bases)."""
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._bases]
        for head, merge in self._base_reader.read(repo, wanted).items():
            self._bases[(repo, head)] = merge

    def read_groups(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """The merge-group commits of the queued ones (bot.github.merge_groups), one query."""
        wanted = [s for s in snapshots if (repo, s.number) not in self._groups]
        for number, read in self._group_reader.read(repo, wanted).items():
            self._groups[(repo, number)] = read

    def read_annotations(
        self, repo: str, snapshots: Sequence[PullSnapshot], *, ask: bool = True
    ) -> None:
        """Each failing head's failing check runs' annotations (bot.github.annotations); with
        `ask` False only those the state keeps for every failing run of the head."""
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._annotations]
        for head, found in self._annotation_reader.read(repo, wanted, ask=ask).items():
            self._annotations[(repo, head)] = found

    def read_history(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """Each failing head's earlier attempts and its base branch's last commits, batched
        (bot.github.history); nothing with `[policy] history` off."""
        if not self.policy.history:
            return
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._attempts]
        for head, found in self._attempt_reader.read(repo, wanted).items():
            self._attempts[(repo, head)] = found
        branches = {s.base for s in snapshots if s.base and (repo, s.base) not in self._branches}
        read = self._branch_reader.read(repo, branches) if branches else {}
        for branch in branches:
            self._branches[(repo, branch)] = read.get(branch)

    def _history_inputs(self, repo: str, snapshot: PullSnapshot) -> HistoryInputs:
        """What the head's failing rows' history is made of this pass (read where not yet)."""
        if (repo, snapshot.head_sha) not in self._attempts or (
            snapshot.base and (repo, snapshot.base) not in self._branches
        ):
            self.read_history(repo, [snapshot])
        index = self.reports.index.get(repo)
        return HistoryInputs(
            attempts=self._attempts.get((repo, snapshot.head_sha), {}),
            elsewhere={} if index is None else elsewhere_of(index, snapshot),
            branch=self._branches.get((repo, snapshot.base)) if snapshot.base else None,
        )

    def _plan_one(
        self, snapshot: PullSnapshot | PullFailure, repo: RepoSettings, summary: Summary
    ) -> Plan | None:
        """Plan one open pull request into `summary`; the plan when something is to write."""
        summary.pulls_seen += 1
        if isinstance(snapshot, PullFailure):  # that pull request only; the others go on
            summary.failed[snapshot.label] = snapshot.reason
            log.debug("could not read %s: %s", snapshot.label, snapshot.reason)
            return None
        summary.heads[f"{repo.name}#{snapshot.number}"] = snapshot.head_sha
        if not selected(snapshot, self.policy):
            summary.skipped += 1
            return None
        try:
            plan = self.plan(snapshot, repo)
        except Stopped:
            raise
        except Exception as exc:  # one pull request's failure is isolated
            label = f"{repo.name}#{snapshot.number}"
            summary.failed[label] = f"{exc.__class__.__name__}: {exc}"
            log.debug("could not process %s", label, exc_info=True)
            return None
        summary.verdicts[plan.label] = str(plan.report.verdict)
        for observer in self.observers:
            observer.pull_done(snapshot, plan.report)
        if plan.action == "adopt" and plan.found is not None:
            self._record(plan, plan.found, "adopted")
        if plan.action in ("leave", "adopt"):
            summary.left += 1
            self._show(plan)
            if plan.action == "leave":
                self._left.append(plan)
            return None
        return plan

    def read_reports(
        self, repos: Sequence[RepoSettings]
    ) -> Iterator[tuple[PullSnapshot, Report, int | None]]:
        """Every selected open pull request's report now, with its comment's id (reads only)."""
        if not self.dry_run:
            raise ValueError("read_reports reads only: use a dry-run cycle")
        for repo in repos:
            pulls = list(self.github.open_pulls(repo.name, now=self.clock(), required=self.store))
            self.read_groups(repo.name, queued(pulls, self.policy))  # one query, not one each
            for snapshot in pulls:
                if isinstance(snapshot, PullFailure) or not selected(snapshot, self.policy):
                    continue  # a pull request that could not be read is named by `once`
                report, _ = self.report_for(snapshot, repo)
                stored = self.store.get_comment(repo.name, snapshot.number)
                yield snapshot, report, None if stored is None else stored.comment_id

    def preview(self, repo: RepoSettings, number: int) -> tuple[Report, str]:
        """One pull request read now: its report and the body of the comment the bot keeps for
        it, dated as that comment is (the state's times, else its own comment's stamp). Reads
        only: what `show` prints."""
        if not self.dry_run:
            raise ValueError("preview reads only: use a dry-run cycle")
        snapshot = self.github.pull(repo.name, number, now=self.clock())
        report = self.plan(snapshot, repo).report
        return report, self.body(report)

    def report_for(
        self, snapshot: PullSnapshot, repo: RepoSettings, *, stamp: Stamp | None = None
    ) -> tuple[Report, str]:
        """Reconcile one pull request with a stable observation time; also its facts key.

        The state's first-seen and first-observed times stand; where it has none, those the
        bot's own comment is stamped with (a run with no state, a lost state).
        """
        now = self.clock()
        last = self.reports.get(repo.name, snapshot.number)
        same = last is not None and last.same_signals(snapshot, repo.expected)
        keys = (
            list(last.keys)
            if last is not None and same
            else needs_first_seen(snapshot, repo.expected)
        )
        first_seen: dict[str, datetime] = {}
        if keys:
            args = (repo.name, snapshot.number, snapshot.head_sha)
            stamped = {k: t for k in keys if stamp and (t := stamp.seen(snapshot.head_sha, k))}
            for k, t in stamped.items():
                self.store.mark_seen(*args, [k], now=t)
            self.store.mark_seen(*args, keys, now=now)
            first_seen = self.store.first_seen(*args)
            first_seen = {k: first_seen.get(k) or stamped.get(k) or now for k in keys}
        docs = read_docs(snapshot, repo, self.docs, now=now)
        known = self._facts(repo.name, snapshot.number)
        merge = self._bases.get((repo.name, snapshot.head_sha))
        said = self._annotations.get((repo.name, snapshot.head_sha))
        history = (
            self._history_inputs(repo.name, snapshot)
            if self.policy.history and self._failing(repo, snapshot)
            else None
        )
        group = self._groups.get((repo.name, snapshot.number))
        if (
            stamp is None
            and last is not None
            and known == (last.key, last.report.observed_at)
            and last.merge == merge
            and last.annotations == said
            and last.history == history
            and last.queue == group
            and last.expected == tuple(repo.expected)
            and last.serves(snapshot, docs, first_seen, self.core_policy, now)
        ):
            return last.report, last.key
        policy = self.core_policy
        report, until = reconcile_until(
            snapshot, docs, policy, now=now, first_seen=first_seen, expected=repo.expected
        )
        if any(needs_base(row) for row in report.rows):
            if (repo.name, snapshot.head_sha) not in self._bases:
                self.read_bases(repo.name, [snapshot])
            merge = self._bases[(repo.name, snapshot.head_sha)]
            shown, turns = judged(merge, now=now, unverified_after=policy.unverified_after)
            report = with_base(report, shown)  # a failed re-read is said once it lasted
            until = turns if until is None or (turns is not None and turns < until) else until
            if merge.commit is not None and snapshot.base is not None:
                report = replace(report, merge_base=(snapshot.base, merge.commit))
        if any(needs_annotations(row) for row in report.rows):
            if (repo.name, snapshot.head_sha) not in self._annotations:
                self.read_annotations(repo.name, [snapshot])
            said = self._annotations[(repo.name, snapshot.head_sha)]
            report = with_annotations(report, said)
        if self.policy.history and any(needs_history(row) for row in report.rows):
            history = history or self._history_inputs(repo.name, snapshot)
            report = with_history(report, history)  # states, verdict and headline as they were
        if snapshot.queue is not None:
            report, group = self._with_queue(report, snapshot, repo)
        key = facts_key(report)
        failing = last.failing if last is not None and same else has_failing(snapshot)
        built = Built(
            snapshot, docs, first_seen, policy, tuple(repo.expected), merge, now, until, report,
            key, said, tuple(keys), failing, group, history,
        )  # fmt: skip
        if known is not None and known[0] == key:
            report = replace(report, observed_at=known[1])
            self.reports.put(replace(built, report=report))
            return report, key
        if stamp is not None and stamp.facts_key == key:
            now = stamp.observed_at  # adopted: a lost state re-dates nothing
            report = replace(report, observed_at=now)
        self.store.set_facts(repo.name, snapshot.number, facts_key=key, observed_at=now)
        self.reports.put(replace(built, report=report))
        return report, key

    def _with_queue(
        self, report: Report, snapshot: PullSnapshot, repo: RepoSettings
    ) -> tuple[Report, QueueRead | None]:
        """The report with what the queued pull request's merge-group commit carries (read now
        if this pass has not yet), and that read."""
        if (repo.name, snapshot.number) not in self._groups:
            self.read_groups(repo.name, [snapshot])
        group = self._groups.get((repo.name, snapshot.number))
        entry, checks = snapshot.queue, snapshot.required_checks
        head = snapshot.head_sha
        found = (
            None if entry is None else judge_queue(entry, group, checks, repo.expected, head=head)
        )
        return replace(report, merge_queue=found), group

    def plan(self, snapshot: PullSnapshot, repo: RepoSettings) -> Plan:
        """Decide create / edit / leave / adopt for one pull request (reads only).

        Where the state does not know the comment, the PR's comments are listed (the bot's own:
        marker AND login), as the write would, before reconciling: an own comment's stamp gives
        the first-seen and first-observed times it states (unless someone else edited it last),
        and one stating the same facts is adopted, so a lost or absent state re-dates nothing.
        """
        stored = self.stored_comment(repo.name, snapshot.number)
        if stored is None:
            return self._plan_unknown(snapshot, repo)
        report, key = self.report_for(snapshot, repo)
        comment_key = self._comment_key(report, key)
        if stored.facts_key == comment_key:
            self._left_stored[(repo.name, snapshot.number)] = stored
            return Plan(report, "leave", "", comment_key, stored.comment_id, stored.node_id)
        if self.dry_run:  # the write would re-read the comment first: so does the prediction
            current = self.github.get_comment(repo.name, stored.comment_id)
            if current is None or current.author != self.login:
                return self._plan_unknown(snapshot, repo)
            body = self.body(report)
            if current.body == body:
                return Plan(report, "adopt", body, comment_key, current.id, found=current)
        return Plan(report, "edit", "", comment_key, stored.comment_id, stored.node_id)

    def _comment_key(self, report: Report, key: str) -> str:
        return sha256(key + report.observed_at.isoformat() + self.renderer.fingerprint)

    def _plan_unknown(self, snapshot: PullSnapshot, repo: RepoSettings) -> Plan:
        """Plan for a pull request whose comment the state does not know: look at its comments
        (once: a listing that found none is kept, and the write looks again before creating)."""
        name, number = repo.name, snapshot.number
        if self._without_comment(name, number):
            report, key = self.report_for(snapshot, repo)
            return Plan(report, "create", "", self._comment_key(report, key), None)
        listed = (name, number) in self._listed
        own = (
            self._listed.pop((name, number))
            if listed
            else self._find_own(name, number, editor=True)
        )
        stamp = self._trusted_stamp(own)
        report, key = self.report_for(snapshot, repo, stamp=stamp)
        comment_key = self._comment_key(report, key)
        if own is None:
            self.store.note_no_comment(name, number, now=self.clock())
            return Plan(report, "create", "", comment_key, None, looked=True)
        body = self.body(report)
        if own.body != body and stamp is not None and unread_only(report, stamp):
            # Only a failed read would change it: no new fact, the comment is left as it is and
            # not recorded (the next pass reads its stamp again, until the read succeeds).
            report = replace(report, observed_at=stamp.observed_at)
            key = stamp.facts_key
            self.store.set_facts(name, number, facts_key=key, observed_at=stamp.observed_at)
            comment_key = self._comment_key(report, key)
            return Plan(report, "leave", own.body, comment_key, own.id, own.node_id)
        action: Literal["edit", "adopt"] = "adopt" if own.body == body else "edit"
        return Plan(report, action, body, comment_key, own.id, own.node_id, found=own, looked=True)

    def _trusted_stamp(self, own: Comment | None) -> Stamp | None:
        """The stamp of the bot's own comment, unless someone else edited the comment last (a
        stamp is not signed: anyone who may edit the comment could have written it)."""
        if own is None:
            return None
        if not last_edit_is_the_bots(own, self.login):
            log.info(
                "comment %d was last edited by %s: its stamp is not trusted", own.id, own.editor
            )
            return None
        return parse_stamp(own.body)

    def body(self, report: Report) -> str:
        """The comment body of a report, stamped with its repository's lease generation."""
        return self.renderer.markdown(
            report, generation=self.generation(report.repo), epoch=self.epoch
        )

    # -- the comment stays true ----------------------------------------------------------------

    def _check_left(self, summary: Summary) -> list[Plan]:
        """Re-read the comments this pass leaves as they are (the least recently checked, at
        least half of them: each is checked every second pass or more often, 100 per GraphQL
        point); plan a create for one deleted and an edit for one someone else changed."""
        left = {(p.report.repo, p.report.number): p for p in self._left if p.node_id}
        stored = {key: self._left_stored.get(key) or self.store.get_comment(*key) for key in left}
        kept = {key: s for key, s in stored.items() if s is not None and s.node_id}
        due = due_for_check({key: s.last_known_good for key, s in kept.items()})
        if not due:
            return []
        try:
            found = self.github.read_comments([kept[key].node_id for key in due])
        except RateLimited as exc:  # checked again next pass; the writes meet the limit too
            summary.rate_limited_s = exc.wait_s
            log.warning("rate limited while checking the bot's comments: %s", exc)
            return []
        except GitHubError as exc:  # checked again next pass; nothing is written on a guess
            log.warning("could not check the bot's comments: %s", exc)
            return []
        plans: list[Plan] = []
        good: list[tuple[str, int]] = []
        for key in due:
            record, plan = kept[key], left[key]
            current = found.get(record.node_id)
            if current is not None and current.author == self.login:  # marker or not
                if sha256(current.body) == record.body_hash:
                    good.append(key)
                    continue
                log.info("comment on %s was edited by %s: restoring it", plan.label, current.editor)
                plans.append(replace(plan, action="edit"))
            else:
                log.info("comment on %s is gone (or no longer the bot's): posting it", plan.label)
                self.store.forget_comment(*key)
                plans.append(replace(plan, action="create", comment_id=None, node_id=""))
            summary.left -= 1
        self.store.mark_checked(good, now=self.clock())
        return plans

    def rendered(self, plan: Plan) -> Plan:
        """The plan with its comment body (rendered only when it is about to be written)."""
        return replace(plan, body=self.body(plan.report))

    # -- writes ----------------------------------------------------------------------------

    def _publish_all(self, plans: list[Plan], summary: Summary) -> None:
        # A stale comment of the bot's own is the worst lie: edits first, then attention first.
        ordered = sorted(
            plans, key=lambda p: (p.action != "edit", PRIORITY[p.report.verdict], p.label)
        )
        progress = WriteProgress(
            0 if self.dry_run else len(ordered),
            gap_s=self.policy.min_seconds_between_writes,
            show=self.progress,
        )
        try:
            self._publish_each(ordered, summary, progress)
        finally:
            progress.finish()

    def _publish_each(
        self,
        ordered: Sequence[Plan],
        summary: Summary,
        progress: WriteProgress,
    ) -> None:
        current: dict[str, Comment | None] = {}
        for index, plan in enumerate(ordered):
            if self.dry_run:  # shown, and counted as what it would be
                self._show(self.rendered(plan))
                summary.created += plan.action == "create"
                summary.edited += plan.action == "edit"
                continue
            progress.wrote(index + 1)  # "comment 37 of 200": the one being written
            try:
                if index % REREAD_BATCH == 0 and self._has_write_budget():
                    current = self._reread(ordered[index : index + REREAD_BATCH], summary)
                if self.stopping() or not self._wait_for_write_budget():
                    summary.deferred = len(ordered) - index
                    log.info("write budget reached: %d writes deferred", summary.deferred)
                    return
                outcome = self.publish(self.rendered(plan), current=current)
            except RateLimited as exc:  # GitHub refused: this write and the rest are not made
                summary.rate_limited_s = exc.wait_s
                summary.refused = len(ordered) - index
                for left in ordered[index:]:
                    summary.failed[left.label] = f"not written: GitHub refused ({exc})"
                log.warning("rate limited while writing: %s", exc)
                return
            except Stopped:
                summary.deferred = len(ordered) - index
                log.info("stopping: %d writes deferred", summary.deferred)
                return
            except Exception as exc:  # isolate one pull request's failure
                summary.failed[plan.label] = f"{exc.__class__.__name__}: {exc}"
                log.debug("could not write the comment of %s", plan.label, exc_info=True)
                continue
            setattr(summary, outcome, getattr(summary, outcome) + 1)

    def _delete_later(self, summary: Summary) -> None:
        """Never two comments: delete the bot's own comments found beside the one it keeps
        (marker AND its login, never another's), once that one was written or left; a pull
        request whose write failed, or a lease no longer held, keeps them for the next run."""
        later, self._later = self._later, {}
        for (repo, number), comments in sorted(later.items()):
            label = f"{repo}#{number}"
            if self.dry_run:
                for comment in comments:
                    self._say(f"== {label}: would delete the bot's later comment {comment.id}")
                continue
            if label in summary.failed or (self.fence is not None and self.fence(repo) is None):
                continue
            for comment in comments:
                if self.stopping() or not self._wait_for_write_budget():
                    return
                try:
                    self.github.delete_own_comment(repo, comment, login=self.login)
                except RateLimited as exc:
                    summary.rate_limited_s = exc.wait_s
                    return
                except GitHubError as exc:
                    log.warning("could not delete comment %d on %s: %s", comment.id, label, exc)
                    continue
                self.pacing.wrote()
                summary.deleted += 1
                log.info("deleted the bot's later comment %d on %s (never two)", comment.id, label)

    def _say(self, text: str) -> None:
        if self.out is not None:
            self.out(text)

    def _reread(self, batch: Sequence[Plan], summary: Summary) -> dict[str, Comment | None]:
        """Re-read the comments this batch will edit, in one query (GitHub has no CAS).

        A rate limit is raised (the batch's writes are not made); another failure falls back
        to re-reading each comment over REST just before its edit.
        """
        ids = [p.node_id for p in batch if p.action == "edit" and p.node_id]
        try:
            return self.github.read_comments(ids)
        except RateLimited:
            raise
        except GitHubError as exc:  # fall back to re-reading each comment over REST
            log.warning("batched re-read failed, re-reading one by one: %s", exc)
            return {}

    def _has_write_budget(self) -> bool:
        minute, hour = self._writes_within(timedelta(minutes=1)), self._writes_within(HOUR)
        return minute < self.policy.max_writes_per_minute and hour < self.policy.max_writes_per_hour

    def _writes_within(self, window: timedelta) -> int:
        """Writes in the last `window`: this process's on the monotonic clock; the state's
        (earlier processes') by their wall-clock stamps, unless the wall clock went back."""
        own = self.pacing.count_within(window.total_seconds())
        now = self.clock()
        last = self.store.last_write_at()
        if last is not None and last > now:  # the wall clock stepped back: stamps mislead
            return own
        return max(own, self.store.writes_since(now - window))

    def _wait_for_write_budget(self) -> bool:
        """Sleep to keep writes apart; False when the minute or hour budget is spent."""
        if not self._has_write_budget():
            return False
        least = self.policy.min_seconds_between_writes
        since = self.pacing.since_last()
        if since is None:  # no write by this process yet: the state's last stamp, bounded
            last = self.store.last_write_at()
            since = least if last is None else (self.clock() - last).total_seconds()
        gap = min(least, least - since)  # a clock step never makes a wait longer than `least`
        if gap > 0:
            self._pause(gap)
        return True

    def _pause(self, seconds: float) -> None:
        """Wait; raise Stopped as soon as a stop is requested."""
        if self.sleep is None:
            pause(seconds, self.stop)
        else:
            self.sleep(seconds)
        if self.stopping():
            raise Stopped("stopped while waiting to write")

    def publish(self, plan: Plan, *, current: Mapping[str, Comment | None] | None = None) -> str:
        """Write one planned comment; returns "created", "edited" or "left".

        `current` holds comments already re-read in a batch, by node id; any other comment
        to edit is re-read here, over REST, just before the edit.
        """
        repo, number = plan.report.repo, plan.report.number
        if plan.comment_id is not None:
            reread = current or {}
            if plan.node_id in reread:
                existing = reread[plan.node_id]
            else:
                existing = self.github.get_comment(repo, plan.comment_id)
            if existing is not None and existing.author == self.login:
                return self._edit_or_keep(plan, existing)  # marker or not: the bot's, restored
            self.store.forget_comment(repo, number)
        own = (
            plan.found if plan.looked and plan.comment_id is None else self._find_own(repo, number)
        )
        if own is not None:
            return self._edit_or_keep(plan, own)
        self._record(plan, self._create(plan), "created")
        return "created"

    def _create(self, plan: Plan) -> Comment:
        """Create the comment; after a failed create, look, and create again only when the
        comment is absent (bounded by CREATE_POLICY, never blind). A refusal (4xx, a rate
        limit) is not tried again."""
        repo, number = plan.report.repo, plan.report.number

        def attempt() -> Comment:
            self._check_fence(plan, None)
            try:
                return self.github.create_comment(repo, number, plan.body)
            except RateLimited:
                raise
            except GitHubError as exc:
                # The create may have landed although the answer was lost: look first.
                own = self._find_own(repo, number)
                if own is not None:
                    return own
                if exc.status is not None and exc.status < 500:
                    raise
                raise Retryable(exc) from exc

        return run_with_retries(
            attempt, policy=CREATE_POLICY, stop=self.stop, sleep=self._pause, what="create"
        )

    def _edit_or_keep(self, plan: Plan, current: Comment) -> str:
        if current.body == plan.body:
            self._record(plan, current, "adopted")
            return "left"
        self._check_fence(plan, current)
        self.github.edit_comment(plan.report.repo, current.id, plan.body)
        self._record(plan, current, "edited")
        return "edited"

    def _check_fence(self, plan: Plan, current: Comment | None) -> None:
        """Raise LeaseLost unless this replica still holds the repository's lease, under the
        generation the body carries, and the comment is not stamped by a newer one."""
        if self.fence is None:
            return
        held = self.fence(plan.report.repo)
        if held is None:
            raise LeaseLost(f"{plan.label}: the lease of {plan.report.repo} is not held")
        if generation_of(plan.body) not in (None, held):
            raise LeaseLost(f"{plan.label}: rendered under another lease generation")
        stamped = None if current is None else generation_of(current.body, epoch=self.epoch)
        if stamped is not None and stamped > held and current is not None:
            if self._edited_by_the_bot(current):
                raise LeaseLost(
                    f"{plan.label}: the comment is stamped by generation {stamped}, newer than "
                    f"{held}"
                )
            log.info(
                "%s: the comment's stamp is not the bot's (someone else edited it last): "
                "restored whatever it says",
                plan.label,
            )

    def _edited_by_the_bot(self, comment: Comment) -> bool:
        """Whether GitHub attributes the comment's last edit to the bot (asked of GraphQL when
        the comment was read over REST; what cannot be asked is not the bot's edit)."""
        known = last_edit_is_the_bots(comment, self.login)
        if known is not None or not comment.node_id:
            return bool(known)
        try:
            read = self.github.read_comments([comment.node_id]).get(comment.node_id)
        except RateLimited:
            raise
        except GitHubError as exc:
            log.warning("could not read who last edited comment %d: %s", comment.id, exc)
            return False
        return read is not None and bool(last_edit_is_the_bots(read, self.login))

    def _find_own(self, repo: str, number: int, *, editor: bool = False) -> Comment | None:
        """The bot's oldest own comment on the pull request, if any. With `editor`, also its
        last editor: REST does not say who edited a comment, so it is asked of GraphQL before a
        stamp is trusted (where it cannot be asked, the editor is unknown and the stamp is not
        trusted); a write, which trusts no stamp, does not ask it."""
        found = self._keep(repo, number, self.github.list_comments(repo, number))
        if found is None:
            return None
        if not editor:
            return found
        try:
            read = (
                self.github.read_comments([found.node_id]).get(found.node_id)
                if found.node_id
                else None
            )
        except RateLimited:
            raise
        except GitHubError as exc:
            log.warning("could not read who last edited comment %d: %s", found.id, exc)
            read = None
        if read is None or read.author != self.login:
            return replace(found, editor=UNKNOWN_EDITOR, editor_read=True)
        return read

    def _keep(self, repo: str, number: int, comments: Sequence[Comment]) -> Comment | None:
        """The bot's comment to keep among a pull request's comments; its own later ones are
        noted, to be deleted once the kept one is written."""
        kept, later = kept_and_later(comments, self.login)
        for comment in comments:
            if foreign_marked([comment], self.login):
                self._foreign.setdefault(comment.author or "", set()).add(comment.id)
        if later:
            self._later[(repo, number)] = later
        else:
            self._later.pop((repo, number), None)
        return kept

    def _record(self, plan: Plan, comment: Comment, action: str) -> None:
        comment_id = comment.id
        if action != "adopted":  # an adoption writes nothing to GitHub
            self.pacing.wrote()
        self.store.record_write(
            plan.report.repo,
            plan.report.number,
            comment_id=comment_id,
            node_id=comment.node_id or plan.node_id,
            body_hash=sha256(plan.body),
            facts_key=plan.comment_key,
            observed_at=plan.report.observed_at,
            head_sha=plan.report.head_sha,
            action=action,  # type: ignore[arg-type]
            now=self.clock(),
        )
        log.info(
            "comment %s on %s",
            action,
            plan.label,
            extra={"repo": plan.report.repo, "pr": plan.report.number, "comment_id": comment_id},
        )

    def _show(self, plan: Plan) -> None:
        if self.out is None or not self.dry_run:
            return
        verb = {
            "create": "would create",
            "edit": "would edit",
            "leave": "would leave",
            "adopt": "would adopt",
        }[plan.action]
        text = f"== {plan.label}: {verb} the status comment (verdict {plan.report.verdict})"
        self.out(text if plan.action in ("leave", "adopt") else f"{text}\n{plan.body}")

    # -- a webhook refresh -------------------------------------------------------------------

    def run_pulls(
        self, pulls: Sequence[tuple[PullSnapshot | PullFailure, RepoSettings]]
    ) -> Summary:
        """Plan and publish already-read pull requests through the same rules as `run`; the
        failing heads' merge bases and annotations are asked first, batched, as a pass does."""
        summary = Summary(dry_run=self.dry_run)
        self._left = []  # a refresh checks no comment: the pass does
        self._groups = {}  # merge groups change by the minute: read again for this refresh
        gh_before, points_before = self.github.usage.total, self.github.usage.graphql_points
        sources_before = self._source_requests()
        failing: dict[str, list[PullSnapshot]] = {}  # asked together, as a pass does
        for snapshot, repo in pulls:
            if not isinstance(snapshot, PullSnapshot) or not selected(snapshot, self.policy):
                continue
            if self._failing(repo, snapshot):
                failing.setdefault(repo.name, []).append(snapshot)
        for name, snapshots in failing.items():
            self.read_bases(name, snapshots)
            self.read_annotations(name, snapshots)
            self.read_history(name, snapshots)
        by_repo: dict[str, list[PullSnapshot]] = {}  # each repository's merge groups: one query
        for snapshot, repo in pulls:
            if isinstance(snapshot, PullSnapshot) and snapshot.queue is not None:
                by_repo.setdefault(repo.name, []).append(snapshot)
        for name, snapshots in by_repo.items():
            self.read_groups(name, queued(snapshots, self.policy))
        plans = [p for s, r in pulls if (p := self._plan_one(s, r, summary)) is not None]
        for observer in self.observers:
            observer.pulls_done()
        self._publish_all(plans, summary)
        self._delete_later(summary)
        summary.github_requests = self.github.usage.total - gh_before
        summary.graphql_points = self.github.usage.graphql_points - points_before
        self._count_sources(summary, sources_before)
        return summary
