"""What the stages of a pass hand each other: plain data, and the memory kept across passes.

`gather` makes `Inputs`; `judge` turns them into a `Judged` (or the `Wants` it needs first);
`plan` turns a `Judged` into a `Plan`; each returns the state writes it decided (`Write`), which
`run` applies. Imports only the core and render (the stamp).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

import msgspec

from bot.core.base import MergeBase
from bot.core.comment import Comment
from bot.core.evidence import Evidence
from bot.core.facts import KeyText
from bot.core.history import (
    FailingIndex,
    HistoryInputs,
    IndexEntries,
    failing_checks,
    failing_now,
    index_entries,
)
from bot.core.merge_queue import QueueRead
from bot.core.model import (
    FAILING_STATES,
    Annotation,
    KeptRead,
    Policy,
    PullSnapshot,
    Report,
    Signal,
    Verdict,
)
from bot.core.reconcile import github_state
from bot.core.required import HEAD_SEEN_KEY, expected_signals
from bot.render.comment import Renderer
from bot.render.stamp import Stamp

# The order writes go out in: attention first.
PRIORITY = {Verdict.FAILING: 0, Verdict.INCOMPLETE: 1, Verdict.PENDING: 2, Verdict.PASSING: 3}

Found = Mapping[int, tuple[Annotation, ...]]  # a head's failing runs' annotations, by run id
Action = Literal["create", "edit", "leave", "adopt"]
# An extra read a stage wants before it can decide: a failing head's merge base, its failing
# runs' annotations, its failure's history, a queued pull request's merge group; the comment
# a dry run's edit would re-read first, and the bot's own comment where that one is gone.
Want = Literal["base", "annotations", "history", "group", "current", "own"]


def sha256(text: str) -> str:
    """Hex sha256 of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_ENCODER = msgspec.msgpack.Encoder()


def docs_digest(docs: Mapping[str, Evidence]) -> bytes | None:
    """A digest of what the second sources say, equal for equal evidence (each source's own
    plain data, named by its type); None where some of it is not plain data."""
    try:
        raw = _ENCODER.encode([(key, type(ev).__qualname__, ev) for key, ev in docs.items()])
    except (TypeError, ValueError, OverflowError):
        return None
    return hashlib.blake2b(raw, digest_size=20).digest()


def has_failing(snapshot: PullSnapshot) -> bool:
    """Whether a signal of the head fails on GitHub (its merge base is then read)."""
    return any(github_state(signal) in FAILING_STATES for signal in snapshot.signals)


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


@dataclass(frozen=True, slots=True)
class Voice:
    """How the bot's comments are written and told apart: the template, its login, the state's
    epoch stamped beside the lease generation, and whether it only shows what it would write."""

    renderer: Renderer
    login: str
    epoch: str = ""
    dry_run: bool = False

    def body(self, report: Report, generation: int) -> str:
        """The comment body of a report, stamped with its repository's lease generation."""
        return self.renderer.markdown(report, generation=generation, epoch=self.epoch)

    def comment_key(self, report: Report, key: str) -> str:
        """What the recorded comment says, as a key: its facts, since when, and the template."""
        return sha256(key + report.observed_at.isoformat() + self.renderer.fingerprint)


@dataclass(frozen=True, slots=True)
class Known:
    """The comment the state records for a pull request: the parts a plan needs."""

    comment_id: int
    node_id: str
    facts_key: str


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
    # Kept by an earlier process (bot.cycle.digests): `docs` is not kept, only its digest
    docs_digest: bytes | None = None
    # the text its key hashes but for its failing rows' (None: not kept, or no row can tell a
    # history): a report whose only change is their history is keyed from it (bot.cycle.judge)
    text: KeyText | None = None

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
            same and policy == self.policy and self._same_docs(docs)
            and first_seen == self.first_seen
        )  # fmt: skip

    def _same_docs(self, docs: Mapping[str, Evidence]) -> bool:
        """Whether the second sources say what they said (by digest, where it was kept)."""
        if self.docs_digest is None:
            return docs == self.docs
        return docs_digest(docs) == self.docs_digest


@dataclass(frozen=True, slots=True)
class FromSignals:
    """What is computed from a head's signals alone, kept while a listing gives the very same
    signals again (an unchanged node is not parsed again: its snapshot is the last one)."""

    signals: tuple[Signal, ...]
    entries: IndexEntries  # its failing checks as FailingIndex counts them
    failing: tuple[Signal, ...]  # its signals failing on GitHub (a failure's `elsewhere`)
    checks: tuple[Signal, ...]  # its failing check runs and statuses (their earlier attempts)
    # the signals each second source is asked about, by its name (filled as each first asks)
    asked: dict[str, tuple[Signal, ...]] = field(default_factory=dict, compare=False)

    def asked_by(self, name: str, asks: Callable[[Signal], bool]) -> tuple[Signal, ...]:
        """The signals the source `name` asks about (`asks`: from a signal alone), in order."""
        found = self.asked.get(name)
        if found is None:
            found = self.asked[name] = tuple(s for s in self.signals if asks(s))
        return found

    @classmethod
    def of(cls, signals: tuple[Signal, ...]) -> FromSignals:
        """Computed from `signals` (nothing to compute where none fails)."""
        if not any(github_state(s) in FAILING_STATES for s in signals):
            return cls(signals, (), (), ())
        return cls(signals, index_entries(signals), failing_now(signals), failing_checks(signals))


class Reports:
    """The last report of each pull request, kept across the cycles of one process (`run`),
    and read at a process's first pass from what the state kept (bot.cycle.digests: `once`, a
    restart): a pull request whose inputs did not change, before any limit is crossed, is not
    reconciled or keyed again."""

    def __init__(self) -> None:
        """None yet."""
        self._built: dict[tuple[str, int], Built] = {}
        self.restored: set[str] = set()  # repositories whose kept reports were read (once)
        # each head's failing check runs, with the signals they were found in (bot.cycle.gather)
        self.runs: dict[tuple[str, int], tuple[tuple[Signal, ...], list[Signal]]] = {}
        # each repository's failing checks by pull request, as its last complete listing had
        # them (a failure's `elsewhere`: no request of its own)
        self.index: dict[str, FailingIndex] = {}
        self._from_signals: dict[tuple[str, int], FromSignals] = {}

    def from_signals(self, snapshot: PullSnapshot) -> FromSignals:
        """What is computed from the head's signals alone: kept while they are the very same
        signals (the same tuple: an unchanged node's), computed again otherwise."""
        key = (snapshot.repo, snapshot.number)
        kept = self._from_signals.get(key)
        if kept is None or kept.signals is not snapshot.signals:
            kept = self._from_signals[key] = FromSignals.of(snapshot.signals)
        return kept

    def get(self, repo: str, number: int) -> Built | None:
        """The last report built for this pull request, if any."""
        return self._built.get((repo, number))

    def put(self, built: Built, *, derived: tuple[FromSignals, list[Signal]] | None = None) -> None:
        """Keep this pull request's newest report; `derived`: what was computed from its
        snapshot's signals (its FromSignals and failing runs), as an earlier process kept it."""
        key = (built.report.repo, built.report.number)
        self._built[key] = built
        if derived is not None:
            self._from_signals[key], runs = derived
            self.runs[key] = (built.snapshot.signals, runs)

    def keep_only(self, repo: str, numbers: Iterable[int]) -> None:
        """Forget the pull requests of `repo` that are no longer open."""
        kept = set(numbers)
        for key in [k for k in self._built if k[0] == repo and k[1] not in kept]:
            del self._built[key]
        for key in [k for k in self.runs if k[0] == repo and k[1] not in kept]:
            del self.runs[key]
        for key in [k for k in self._from_signals if k[0] == repo and k[1] not in kept]:
            del self._from_signals[key]


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything one pull request is judged and planned from, as `gather` read it."""

    snapshot: PullSnapshot
    expected: tuple[str, ...]  # the contexts the repository's configuration expects
    now: datetime  # when it is judged (one reading of the cycle's clock)
    comment: Known | None  # the state's record of its comment
    without_comment: bool  # a listing found no comment of the bot's own (the state says)
    facts: tuple[str, datetime] | None  # the state's last facts key and since when
    last: Built | None  # its report of an earlier pass of this process
    failing: bool  # a signal of the head fails (as last time when its signals are the same)
    keys: tuple[str, ...]  # the keys whose first sight the state (or the stamp) dates
    seen: Mapping[str, datetime]  # the state's first-seen times on the head (where `keys`)
    docs: Mapping[str, Evidence]  # what every second source says, by context
    generation: int  # the lease generation its comment is stamped with
    looked: bool = False  # its comments were looked at (the state knows no comment)
    own: Comment | None = None  # the bot's own comment found by looking
    stamp: Stamp | None = None  # that comment's stamp, where GitHub says the bot edited it last
    merge: MergeBase | None = None  # its head's merge base (None: not read)
    annotations: Found | None = None  # its failing runs' annotations (None: not read)
    history: HistoryInputs | None = None  # its failure's history (None: not read)
    group: QueueRead | None = None  # its merge-group commit's read
    group_read: bool = False  # whether `group` was read this pass
    current: Comment | None = None  # a dry run's re-read of the recorded comment
    current_read: bool = False
    # the second sources' final records `docs` were read from (the comment's carried line)
    kept_reads: tuple[KeptRead, ...] = ()

    @property
    def label(self) -> str:
        """owner/name#N."""
        return f"{self.snapshot.repo}#{self.snapshot.number}"


@dataclass(frozen=True, slots=True)
class MarkSeen:
    """Record `at` as the first sight of `keys` on the head (where not yet recorded)."""

    keys: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class SetFacts:
    """Record the facts key and since when those facts were first observed."""

    facts_key: str
    observed_at: datetime


@dataclass(frozen=True, slots=True)
class NoComment:
    """A listing found no comment of the bot's own, at `at`."""

    at: datetime


Write = MarkSeen | SetFacts | NoComment


@dataclass(frozen=True, slots=True)
class Wants:
    """The extra reads a stage needs before it can decide (gathered, then decided again)."""

    reads: frozenset[Want]


Wanted = tuple["Inputs", frozenset[Want]]  # one pull request's inputs and what it wants


@dataclass(frozen=True, slots=True)
class Judged:
    """One pull request's report and facts key, what to keep of it, and its state writes."""

    inputs: Inputs
    report: Report
    key: str
    stamp: Stamp | None  # the stamp it was judged with (a comment the state does not know)
    built: Built | None  # to keep for the next pass (None: the kept one served)
    writes: tuple[Write, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What the bot would write for one pull request."""

    report: Report
    action: Action
    body: str
    comment_key: str
    comment_id: int | None
    node_id: str = ""
    # the bot's own comment found by listing the PR's comments (the state did not know it)
    found: Comment | None = None
    looked: bool = False  # the PR's comments were listed for this plan
    writes: tuple[Write, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        """owner/name#N."""
        return f"{self.report.repo}#{self.report.number}"
