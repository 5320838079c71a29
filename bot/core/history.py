"""Facts about a failure's history (pure; never a label): earlier attempts of the same check
on the same head commit, the same check failing now on other open heads of the repository,
and the base branch's recent record of it."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Final

from bot.core.base import MergeBase, merge_base_of_payload, merge_base_payload, on_base
from bot.core.model import (
    FAILING_STATES,
    Attempt,
    BaseRecord,
    Elsewhere,
    History,
    Kind,
    PullSnapshot,
    Report,
    Row,
    Signal,
    State,
    parse_optional_time,
)
from bot.core.reconcile import dedupe, github_state, newer

BASE_COMMITS: Final = 20  # the base branch's last commits whose checks are read
CheckKey = tuple[str, str, str | None, str | None, str | None]
_TOLD: Final = frozenset({Kind.CHECK_RUN, Kind.STATUS})  # the kinds of signal with a history


def needs_history(row: Row) -> bool:
    """A failing check run or status has a history; nothing else is asked for one."""
    return row.state in FAILING_STATES and row.signal.kind in _TOLD


def check_key(signal: Signal) -> CheckKey:
    """The same check on another commit or pull request: kind, name, app, workflow and file
    (any event: a base branch's runs are `push`, a pull request's `pull_request`)."""
    return (signal.kind.value, signal.name, signal.app, signal.workflow, signal.workflow_path)


def same_attempt(one: Signal, other: Signal) -> bool:
    """Another attempt of the same check on one commit: same name, app, workflow file and
    event (a check renamed between runs, or run from another workflow file, is not one)."""
    return check_key(one) == check_key(other) and one.event == other.event


def _completed(signal: Signal) -> datetime | None:
    return signal.created_at if signal.kind is Kind.STATUS else signal.completed_at


def earlier_attempts(current: Signal, runs: Iterable[Signal]) -> tuple[Attempt, ...]:
    """The earlier attempts of `current` among `runs` (every run or state GitHub keeps for the
    head), oldest first; what is newer than `current`, or another check, is left out."""
    earlier = [run for run in runs if same_attempt(run, current) and _earlier(run, current)]
    ordered = sorted(earlier, key=_order)
    return tuple(Attempt(github_state(run), _completed(run), run.url) for run in ordered)


def _earlier(run: Signal, current: Signal) -> bool:
    if current.kind is Kind.STATUS:
        return (
            run.created_at is not None
            and current.created_at is not None
            and run.created_at < current.created_at
        )
    if run.database_id is not None and run.database_id == current.database_id:
        return False
    return newer(current, run)


def _order(run: Signal) -> tuple[float, int]:
    when = run.created_at or run.started_at or run.completed_at
    return (when.timestamp() if when else 0.0, run.database_id or 0)


def attempts_final(runs: Iterable[Signal]) -> bool:
    """Every run read has settled: its earlier attempts will not change (kept for good)."""
    return all(github_state(run) is not State.PENDING for run in runs)


def _failure_since(signal: Signal) -> datetime | None:
    return _completed(signal) or signal.started_at


IndexEntries = tuple[tuple[CheckKey, datetime | None], ...]


def index_entries(signals: Sequence[Signal]) -> IndexEntries:
    """The checks failing on a head now (superseded runs left out), each with since when it
    fails: what FailingIndex counts of one pull request."""
    if not any(github_state(s) in FAILING_STATES for s in signals):
        return ()  # most heads: nothing to index (and nothing to dedupe)
    return tuple(
        (check_key(signal), _failure_since(signal))
        for signal in dedupe(signals)
        if signal.kind is not Kind.EXPECTED and github_state(signal) in FAILING_STATES
    )


def failing_now(signals: Sequence[Signal]) -> tuple[Signal, ...]:
    """The head's signals that fail on GitHub (what elsewhere_of tells)."""
    return tuple(
        s for s in signals if s.kind is not Kind.EXPECTED and github_state(s) in FAILING_STATES
    )


def failing_checks(signals: Sequence[Signal]) -> tuple[Signal, ...]:
    """The head's failing check runs (superseded ones left out) and statuses (whose earlier
    attempts are its history)."""
    return tuple(
        s
        for s in dedupe(signals)
        if s.kind in (Kind.CHECK_RUN, Kind.STATUS) and github_state(s) in FAILING_STATES
    )


@dataclass(slots=True)
class FailingIndex:
    """Which checks fail on which open pull requests of one repository (built from what the
    cycle read anyway: no request of its own)."""

    pulls: set[int] = field(default_factory=set)
    failing: dict[CheckKey, dict[int, datetime | None]] = field(default_factory=dict)
    # by check: how many heads it fails on and its two earliest failures (what `elsewhere`
    # tells of every head but one), summed up once per check; dropped by `add`
    _sums: dict[CheckKey, _Sum] = field(default_factory=dict, compare=False, repr=False)

    def add(self, snapshot: PullSnapshot, entries: IndexEntries | None = None) -> None:
        """Count one open pull request and the checks failing on its head now (`entries`:
        index_entries of its signals, where already known)."""
        self.pulls.add(snapshot.number)
        self._sums.clear()
        for key, since in index_entries(snapshot.signals) if entries is None else entries:
            seen = self.failing.setdefault(key, {})
            known = seen.get(snapshot.number)
            earlier = since is not None and (known is None or since < known)
            if snapshot.number not in seen or earlier:
                seen[snapshot.number] = since

    def elsewhere(self, number: int, signal: Signal) -> Elsewhere | None:
        """The same check failing on the other open pull requests (None: on none of them)."""
        key = check_key(signal)
        summed = self._sums.get(key)
        if summed is None:
            summed = self._sums[key] = _Sum.of(self.failing.get(key, {}))
        heads = summed.others(number)
        if not heads:
            return None
        of = len(self.pulls) - (number in self.pulls)
        return Elsewhere(heads, of, summed.earliest_but(number))


@dataclass(frozen=True, slots=True)
class _Sum:
    """One check across the index: the heads it fails on (with since when) and its two
    earliest failures (the earliest on every head but one is one of them)."""

    seen: Mapping[int, datetime | None]
    earliest: tuple[tuple[datetime, int], ...]

    @classmethod
    def of(cls, seen: Mapping[int, datetime | None]) -> _Sum:
        """Summed up from the heads the check fails on, with since when."""
        dated = ((t, n) for n, t in seen.items() if t is not None)
        return cls(seen, tuple(heapq.nsmallest(2, dated)))

    def others(self, number: int) -> int:
        """On how many heads but `number` the check fails."""
        return len(self.seen) - (number in self.seen)

    def earliest_but(self, number: int) -> datetime | None:
        """The earliest failure on any head but `number` (None: none of them is dated)."""
        return next((t for t, n in self.earliest if n != number), None)


@dataclass(frozen=True, slots=True)
class BranchHistory:
    """The base branch's last commits (newest first), each with the contexts GitHub reported."""

    branch: str
    commits: tuple[MergeBase, ...]
    read_at: datetime | None = None


def base_record(history: BranchHistory, signal: Signal) -> BaseRecord | None:
    """On how many of the branch's last commits the same check failed; None where it ran on
    none of them. A commit whose contexts could not all be read, and that does not show the
    check, is not counted (neither way)."""
    known, ran, failed = 0, False, []
    for commit in history.commits:
        check = on_base(signal, commit)
        if check.error is not None or commit.commit is None:
            continue
        known += 1
        ran = ran or check.state is not None
        if check.also_failing:
            failed.append(commit.commit)
    if not ran:
        return None
    return BaseRecord(history.branch, len(failed), known, tuple(failed))


@dataclass(frozen=True, slots=True)
class HistoryInputs:
    """What one head's failing rows' history is made of, as read this pass."""

    attempts: Mapping[str, tuple[Attempt, ...]] = field(default_factory=dict)  # by signal key
    elsewhere: Mapping[str, Elsewhere | None] = field(default_factory=dict)  # by signal key
    branch: BranchHistory | None = None
    # the signal keys whose earlier attempts are final (kept, or every run read had settled)
    final: frozenset[str] = frozenset()


def elsewhere_of(
    index: FailingIndex, snapshot: PullSnapshot, failing: Sequence[Signal] | None = None
) -> dict[str, Elsewhere | None]:
    """The same checks failing elsewhere, for each signal of the head that fails on GitHub
    (`failing`: failing_now of its signals, where already known)."""
    found = failing_now(snapshot.signals) if failing is None else failing
    return {s.key: index.elsewhere(snapshot.number, s) for s in found}


def history_of(row: Row, inputs: HistoryInputs) -> History | None:
    """The row's history: each fact that is known (None where none is)."""
    signal = row.signal
    found = History(
        attempts=inputs.attempts.get(signal.key, ()),
        elsewhere=inputs.elsewhere.get(signal.key),
        base_branch=None if inputs.branch is None else base_record(inputs.branch, signal),
    )
    return None if found.empty else found


def with_history(report: Report, inputs: HistoryInputs) -> Report:
    """The report with each failing row's history attached (verdict and rows' states as they
    were: history never changes what a signal is)."""
    rows = tuple(
        row._replace(history=history_of(row, inputs)) if needs_history(row) else row
        for row in report.rows
    )
    return replace(report, rows=rows)


def with_elsewhere(
    rows: tuple[Row, ...], elsewhere: Mapping[str, Elsewhere | None], *, first: int | None = None
) -> tuple[Row, ...]:
    """with_history's rows for inputs that differ from those `rows` were told with in their
    `elsewhere` alone: each failing row's earlier attempts and base branch's record as they
    were; `first`: no row after that many needs a history (bot.core.facts.KeyText.told)."""
    upto = len(rows) if first is None else first
    told = tuple(_elsewhere(row, elsewhere) if needs_history(row) else row for row in rows[:upto])
    return told + rows[upto:]


def _elsewhere(row: Row, elsewhere: Mapping[str, Elsewhere | None]) -> Row:
    was, now = row.history, elsewhere.get(row.signal.key)
    if was is None:
        return row if now is None else row._replace(history=History(elsewhere=now))
    if was.elsewhere == now:
        return row
    found = replace(was, elsewhere=now)
    return row._replace(history=None if found.empty else found)


# What a report told its failures' history anew may differ in besides its rows' history.
_TOLD_ANEW: Final = frozenset({"rows", "observed_at", "kept_attempts"})
_AS_IT_WAS: Final = tuple(f.name for f in fields(Report) if f.name not in _TOLD_ANEW)


def told_anew(before: Report, after: Report) -> bool:
    """Whether `after` is `before` with at most its rows' history told anew (a failure's
    `elsewhere` moved), observed again and with other final attempts: all else as it was."""
    if after is before:
        return True
    if len(after.rows) != len(before.rows):
        return False
    return all(getattr(after, name) == getattr(before, name) for name in _AS_IT_WAS) and all(
        one is other or one._replace(history=None) == other._replace(history=None)
        for one, other in zip(before.rows, after.rows, strict=True)
    )


def final_attempts(
    report: Report, inputs: HistoryInputs
) -> tuple[tuple[int, tuple[Attempt, ...]], ...]:
    """The failing check runs' earlier attempts that never change again, by run id (() where a
    run has none): what the comment's carried line takes to a run with no state."""
    found = {
        run: inputs.attempts.get(row.signal.key, ())
        for row in report.rows
        if needs_history(row)
        and row.signal.kind is Kind.CHECK_RUN
        and (run := row.signal.database_id) is not None
        and row.signal.key in inputs.final
    }
    return tuple(sorted(found.items()))


# -- kept in the state -----------------------------------------------------------------------


def attempts_payload(attempts: Sequence[Attempt]) -> str:
    """Earlier attempts as JSON text (kept once every run read was final)."""
    return json.dumps(
        [[a.state.value, None if a.at is None else a.at.isoformat(), a.url] for a in attempts]
    )


def attempts_of_payload(payload: str) -> tuple[Attempt, ...]:
    """The attempts kept by attempts_payload (ValueError/TypeError when malformed)."""
    rows = json.loads(payload)
    if not isinstance(rows, list):
        raise ValueError("kept attempts are not a list")
    found = []
    for state, at, url in rows:
        if url is not None and not isinstance(url, str):
            raise TypeError("a kept attempt's url is not text")
        found.append(Attempt(State(state), parse_optional_time(at), url))
    return tuple(found)


def branch_payload(history: BranchHistory) -> str:
    """A base branch's history as JSON text (kept: read again at most hourly)."""
    return json.dumps(
        {
            "branch": history.branch,
            "read_at": None if history.read_at is None else history.read_at.isoformat(),
            "commits": [[c.commit, merge_base_payload(c)] for c in history.commits],
        }
    )


def branch_of_payload(payload: str) -> BranchHistory:
    """The history kept by branch_payload (ValueError/TypeError/KeyError when malformed)."""
    data = json.loads(payload)
    commits = tuple(merge_base_of_payload(str(sha), text) for sha, text in data["commits"])
    return BranchHistory(
        str(data["branch"]), commits, read_at=parse_optional_time(data.get("read_at"))
    )
