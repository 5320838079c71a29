"""The triage view's rows: one entry per pull request, their order, filters and totals (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from bot.core.merge_queue import stuck_names
from bot.core.model import (
    FAILING_STATES,
    INCOMPLETE_STATES,
    PullSnapshot,
    Report,
    Row,
    Signal,
    State,
    Verdict,
    as_utc,
    group_of,
    parse_optional_time,
)
from bot.render.escape import iso_utc
from bot.sources.base import Source

COUNT_GROUPS: Final = ("failing", "pending", "incomplete", "passing")
VERDICTS: Final = tuple(v.value for v in (Verdict.FAILING, Verdict.INCOMPLETE, Verdict.PENDING,
                                          Verdict.PASSING))  # fmt: skip
UNSETTLED_STATES: Final = frozenset({State.PENDING, State.STALE})
NAMES_SHOWN: Final = 3  # names a row shows before "+N"
# GitHub's state of a context that is required (or expected) and that nothing reported
NEVER_REPORTED_STATE: Final = "expected"
DraftFilter = Literal["only", "exclude"]

_RANK: Final = {Verdict.FAILING: 1, Verdict.INCOMPLETE: 2, Verdict.PENDING: 3, Verdict.PASSING: 4}
_FAR_FUTURE: Final = "9999"


@dataclass(frozen=True, slots=True)
class Unsettled:
    """The oldest pending or stale signal of a pull request."""

    name: str
    state: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class Named:
    """A signal a row names beside its counts: its name, its state word ("cancelled",
    "stale", "unknown", "pending", "never reported"), whether it is required, since when."""

    name: str
    state: str
    required: bool | None = None
    since: datetime | None = None


NEVER_REPORTED: Final = "never reported"  # the state word of a context nothing reported
# The order a row names its incomplete and pending signals in, by state word.
STATE_ORDER: Final = (NEVER_REPORTED, "cancelled", "stale", "unknown", "pending")


@dataclass(frozen=True, slots=True)
class NotRead:
    """Why a row's repository could not be read by the last cycle, and since when."""

    since: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class TriageEntry:
    """One pull request's row of the triage view."""

    repo: str
    number: int
    title: str
    author: str | None
    draft: bool
    head_sha: str
    verdict: Verdict
    url: str
    observed_at: datetime
    counts: Mapping[str, int]
    required_failing: tuple[str, ...] = ()
    oldest_unsettled: Unsettled | None = None
    docs_stuck: int = 0
    comment_url: str | None = None
    read_at: datetime | None = None  # when GitHub was last read for this row
    not_read: NotRead | None = None  # set while its repository cannot be read
    failing: tuple[str, ...] = ()  # every failing signal's name, the required ones first
    never_reported: tuple[str, ...] = ()  # contexts required (or expected) that never reported
    required_never_reported: tuple[str, ...] = ()  # those of them a rule requires
    failing_on_base: tuple[str, ...] = ()  # failing ones that also fail on the merge base
    incomplete: tuple[Named, ...] = ()  # cancelled, stale, unknown (and never reported, stale)
    pending: tuple[Named, ...] = ()  # pending (and never reported, not yet stale)
    in_merge_queue: bool = False  # GitHub's merge queue holds it
    # required contexts missing or failing on its merge-group commit: stuck in the merge queue
    merge_queue_stuck: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """owner/name#N."""
        return f"{self.repo}#{self.number}"

    @property
    def urgency(self) -> str:
        """The verdict, with failing split by whether a required signal fails."""
        if self.verdict is Verdict.FAILING and self.required_failing:
            return "failing-required"
        return self.verdict.value


@dataclass(frozen=True, slots=True)
class Filters:
    """Which rows of the view to keep (empty means all)."""

    repos: frozenset[str] = frozenset()
    verdicts: frozenset[str] = frozenset()
    drafts: DraftFilter | None = None
    stuck_in_merge_queue: bool = False  # only those stuck in the merge queue

    def keep(self, entry: TriageEntry) -> bool:
        """Whether the entry passes every filter."""
        if self.repos and entry.repo.lower() not in {r.lower() for r in self.repos}:
            return False
        if self.stuck_in_merge_queue and not entry.merge_queue_stuck:
            return False
        if self.verdicts and entry.verdict.value not in self.verdicts:
            return False
        if self.drafts == "only":
            return entry.draft
        return not (self.drafts == "exclude" and entry.draft)


def parse_verdicts(text: str) -> frozenset[str]:
    """`failing,pending` as a set of verdicts; ValueError naming an unknown one."""
    names = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(names - set(VERDICTS))
    if unknown:
        raise ValueError(f"unknown verdict {', '.join(unknown)} (expected {', '.join(VERDICTS)})")
    return frozenset(names)


def entry_for(
    snapshot: PullSnapshot,
    report: Report,
    *,
    docs: Sequence[Source],
    comment_id: int | None = None,
    read_at: datetime | None = None,
) -> TriageEntry:
    """The triage row of one reconciled pull request (pure); `docs` tell their builds apart."""
    tally = _Tally()
    for row in report.rows:
        tally.add(row, docs)
    required, optional, never = tally.required, tally.optional, tally.never
    oldest = min(tally.unsettled, key=_since_key, default=None)
    never.sort(key=lambda s: s.required is not True)  # required first, GitHub's order kept
    return TriageEntry(
        repo=report.repo,
        number=report.number,
        title=snapshot.title,
        author=snapshot.author,
        draft=report.draft,
        head_sha=report.head_sha,
        verdict=report.verdict,
        url=report.url,
        observed_at=report.observed_at,
        counts=dict(tally.counts),
        required_failing=tuple(required),
        oldest_unsettled=oldest,
        docs_stuck=tally.docs_stuck,
        comment_url=comment_url(report.url, comment_id),
        read_at=read_at,
        failing=(*required, *optional),
        never_reported=tuple(s.name for s in never),
        required_never_reported=tuple(s.name for s in never if s.required is True),
        failing_on_base=tuple(tally.on_base),
        incomplete=in_order(tally.waiting[Verdict.INCOMPLETE]),
        pending=in_order(tally.waiting[Verdict.PENDING]),
        in_merge_queue=report.merge_queue is not None,
        merge_queue_stuck=stuck_names(report.merge_queue),
    )


@dataclass
class _Tally:
    """What a pull request's triage row gathers from its rows, in their order."""

    counts: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(COUNT_GROUPS, 0)))
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    never: list[Signal] = field(default_factory=list)
    on_base: list[str] = field(default_factory=list)
    unsettled: list[Unsettled] = field(default_factory=list)
    docs_stuck: int = 0
    waiting: dict[Verdict, list[Named]] = field(
        default_factory=lambda: {Verdict.INCOMPLETE: [], Verdict.PENDING: []}
    )

    def add(self, row: Row, docs: Sequence[Source]) -> None:
        """Count one row where it belongs."""
        group, counted, failing, unsettled, incomplete = _BY_STATE[row.state]
        signal = row.signal
        if group in self.waiting:
            self.waiting[group].append(named(row))
        self.counts[counted] += 1
        if failing:
            (self.required if signal.required else self.optional).append(signal.name)
            if row.base is not None and row.base.also_failing:
                self.on_base.append(signal.name)
        if signal.github_state == NEVER_REPORTED_STATE:
            self.never.append(signal)
        if unsettled:
            self.unsettled.append(Unsettled(signal.name, row.state.value, row.since))
        if incomplete and any(d.recognises(signal) for d in docs):
            self.docs_stuck += 1


# By state, what a row of it counts in (a table: a triage row tallies ~60 rows): its group,
# the group's name, and whether it fails, is unsettled, is incomplete.
_BY_STATE: Final = {
    state: (group_of(state), group_of(state).value, state in FAILING_STATES,
            state in UNSETTLED_STATES, state in INCOMPLETE_STATES)
    for state in State
}  # fmt: skip


def named(row: Row) -> Named:
    """The row as a triage row names it."""
    never = row.signal.github_state == NEVER_REPORTED_STATE
    word = NEVER_REPORTED if never else row.state.value
    return Named(row.signal.name, word, row.signal.required, row.since)


def in_order(items: Iterable[Named]) -> tuple[Named, ...]:
    """By state word (never reported, cancelled, stale, unknown, pending), required first,
    then oldest first (GitHub's order where no time is known)."""
    return tuple(
        sorted(
            items,
            key=lambda n: (
                STATE_ORDER.index(n.state) if n.state in STATE_ORDER else len(STATE_ORDER),
                n.required is not True,
                _FAR_FUTURE if n.since is None else as_utc(n.since).isoformat(),
            ),
        )
    )


def named_dict(item: Named) -> dict[str, Any]:
    """A named signal as plain data."""
    return {"name": item.name, "state": item.state, "required": item.required,
            "since": iso_utc(item.since)}  # fmt: skip


def named_of(data: Mapping[str, Any]) -> Named:
    """A named signal from named_dict's data (as the state keeps it)."""
    required = data.get("required")
    return Named(
        str(data["name"]),
        str(data["state"]),
        required if isinstance(required, bool) else None,
        parse_optional_time(data.get("since")),
    )


def _since_key(item: Unsettled) -> str:
    return _FAR_FUTURE if item.since is None else as_utc(item.since).isoformat()


def comment_url(pull_url: str, comment_id: int | None) -> str | None:
    """The link to the bot's comment on a pull request, when it has one."""
    return None if comment_id is None else f"{pull_url}#issuecomment-{comment_id}"


def unsettled_dict(item: Unsettled) -> dict[str, Any]:
    """The oldest unsettled signal as plain data."""
    return {"name": item.name, "state": item.state, "since": iso_utc(item.since)}


def shortlist(names: Sequence[str], limit: int = NAMES_SHOWN) -> tuple[tuple[str, ...], int]:
    """The first `limit` names, and how many more there are (shown as "+N")."""
    return tuple(names[:limit]), max(0, len(names) - limit)


def not_read_dict(item: NotRead | None) -> dict[str, Any] | None:
    """Why a row's repository could not be read, as plain data (None while it can be)."""
    return None if item is None else {"since": iso_utc(item.since), "reason": item.reason}


def unread_repos(entries: Iterable[TriageEntry]) -> dict[str, NotRead]:
    """The repositories of `entries` that the last cycle could not read, by name."""
    return {e.repo: e.not_read for e in entries if e.not_read is not None}


def urgency_key(entry: TriageEntry) -> tuple[int, str, str, int]:
    """Sort key: failing with a required signal, failing, incomplete, pending, passing."""
    rank = 0 if entry.urgency == "failing-required" else _RANK[entry.verdict]
    if entry.verdict in (Verdict.INCOMPLETE, Verdict.PENDING):
        oldest = entry.oldest_unsettled
        waiting = _FAR_FUTURE if oldest is None else _since_key(oldest)
    else:
        waiting = as_utc(entry.observed_at).isoformat()
    return rank, waiting, entry.repo.lower(), entry.number


def ordered(entries: Iterable[TriageEntry], filters: Filters | None = None) -> list[TriageEntry]:
    """The entries that pass `filters`, most urgent first."""
    chosen = entries if filters is None else (e for e in entries if filters.keep(e))
    return sorted(chosen, key=urgency_key)


@dataclass(frozen=True, slots=True)
class Totals:
    """The summary bar: pull requests per verdict, stuck docs builds, required failures."""

    verdicts: Mapping[str, int]
    failing_required: int
    docs_stuck: int
    never_reported: int  # pull requests with a required context that never reported
    drafts: int
    repos: tuple[str, ...] = field(default=())
    stuck_in_merge_queue: int = 0  # pull requests stuck in the merge queue

    @property
    def total(self) -> int:
        """Pull requests in the view."""
        return sum(self.verdicts.values())


def totals(entries: Sequence[TriageEntry]) -> Totals:
    """Count the view for the summary bar."""
    verdicts = Counter({v: 0 for v in VERDICTS})
    verdicts.update(e.verdict.value for e in entries)
    return Totals(
        verdicts=dict(verdicts),
        failing_required=sum(1 for e in entries if e.required_failing),
        never_reported=sum(1 for e in entries if e.required_never_reported),
        docs_stuck=sum(e.docs_stuck for e in entries),
        drafts=sum(1 for e in entries if e.draft),
        repos=tuple(sorted({e.repo for e in entries}, key=str.lower)),
        stuck_in_merge_queue=sum(1 for e in entries if e.merge_queue_stuck),
    )


def plural(count: int, one: str, many: str) -> str:
    """ "1 draft", "2 drafts"."""
    return f"{count} {one if count == 1 else many}"


def labels(t: Totals) -> list[tuple[str, int, str]]:
    """The summary's numbers with their words, one label per number, the same in every format:
    (key, number, "1 docs build cancelled, stale or unknown")."""
    return [
        ("failing-required", t.failing_required, f"{t.failing_required} failing a required check"),
        ("never-reported", t.never_reported,
         f"{t.never_reported} with a required check never reported"),
        ("docs-stuck", t.docs_stuck,
         plural(t.docs_stuck, "docs build", "docs builds") + " cancelled, stale or unknown"),
        ("queue-stuck", t.stuck_in_merge_queue,
         f"{t.stuck_in_merge_queue} stuck in the merge queue"),
        ("drafts", t.drafts, plural(t.drafts, "draft", "drafts")),
    ]  # fmt: skip


# Said only when there are some (most views have none): the table's and the markdown's summary.
QUIET_WHEN_NONE: Final = frozenset({"never-reported", "queue-stuck"})
