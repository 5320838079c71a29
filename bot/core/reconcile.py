"""Turn one pull request's GitHub signals and a second source's evidence into a Report (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Final

from bot.core.evidence import HEAD_KEY, Evidence, Judge, Since, evidence_key
from bot.core.model import (
    FAILING_STATES,
    GROUP_ORDER,
    INCOMPLETE_STATES,
    Kind,
    Policy,
    PullSnapshot,
    Report,
    RequiredChecks,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
    format_utc,
    group_of,
)
from bot.core.required import HEAD_SEEN_KEY, expected_signals, rules_words, with_required

NO_SIGNALS_NOTE: Final = "No check runs or commit statuses are reported on this commit."
TRUNCATED_NOTE: Final = (
    "GitHub reported more checks and statuses on this commit than were read; "
    "the signals not read are not counted, so the verdict cannot be passing."
)
NOT_REPORTED: Final = "Not reported on this commit"
EXPECTED_FINDING: Final = "GitHub lists this context as expected; no source has reported it."

# GitHub check run: its status while running, its conclusion once completed.
CHECK_RUN_STATES: Final[Mapping[str, State]] = {
    "success": State.SUCCESS,
    "failure": State.FAILURE,
    "neutral": State.NEUTRAL,
    "cancelled": State.CANCELLED,
    "skipped": State.SKIPPED,
    "timed_out": State.TIMED_OUT,
    "action_required": State.ACTION_REQUIRED,
    "startup_failure": State.FAILURE,
    "stale": State.STALE,
    "queued": State.PENDING,
    "in_progress": State.PENDING,
    "waiting": State.PENDING,
    "pending": State.PENDING,
    "requested": State.PENDING,
}

# GitHub commit status (REST state, or GraphQL StatusState lower-cased).
STATUS_STATES: Final[Mapping[str, State]] = {
    "success": State.SUCCESS,
    "failure": State.FAILURE,
    "error": State.FAILURE,
    "pending": State.PENDING,
    "expected": State.UNKNOWN,
}


_Seen = Mapping[str, datetime]


def reconcile(
    snapshot: PullSnapshot,
    docs: Mapping[str, Evidence],
    policy: Policy,
    *,
    now: datetime,
    first_seen: Mapping[str, datetime] | None = None,
    expected: Iterable[str] = (),
) -> Report:
    """Reconcile every signal on the head commit with the docs evidence; compute the verdict.

    `docs` holds evidence by status context (it settles that status's row) and, under a key
    starting with HEAD_KEY, evidence about the head as a whole (reported as a note). Every
    context the base branch requires (or `expected` names) that nothing on the head reports
    is a signal of its own, pending from when the bot first knew the head, then stale.
    """
    return reconcile_until(
        snapshot, docs, policy, now=now, first_seen=first_seen, expected=expected
    )[0]


def reconcile_until(
    snapshot: PullSnapshot,
    docs: Mapping[str, Evidence],
    policy: Policy,
    *,
    now: datetime,
    first_seen: Mapping[str, datetime] | None = None,
    expected: Iterable[str] = (),
) -> tuple[Report, datetime | None]:
    """reconcile's report and the first time the same inputs would give another (a limit
    crossed: a pending signal turning stale, a source unread for too long); None: never."""
    clock = Judge(policy, now)
    report = _reconcile(snapshot, docs, clock, first_seen, expected)
    return report, clock.valid_until()


def _reconcile(
    snapshot: PullSnapshot,
    docs: Mapping[str, Evidence],
    clock: Judge,
    first_seen: Mapping[str, datetime] | None,
    expected: Iterable[str],
) -> Report:
    policy, now = clock.policy, clock.now
    seen = first_seen or {}
    signals = dedupe(with_required(snapshot.signals, snapshot.required_checks))
    missing = expected_signals(signals, snapshot.required_checks, expected)
    rows = tuple(
        sorted(
            (
                _row(s, docs, clock=clock, seen=seen, number=snapshot.number)
                for s in (*signals, *missing)
            ),
            key=row_order,
        )
    )
    return Report(
        repo=snapshot.repo,
        number=snapshot.number,
        title=snapshot.title,
        url=snapshot.url,
        head_sha=snapshot.head_sha,
        draft=snapshot.draft,
        observed_at=now,
        verdict=verdict_of(rows, truncated=snapshot.truncated),
        rows=rows,
        stale_after=policy.stale_after,
        truncated=snapshot.truncated,
        notes=_report_notes(snapshot, rows, docs=docs, clock=clock),
        required_checks=snapshot.required_checks,
        first_seen=tuple(sorted(seen.items())),
    )


def _report_notes(
    snapshot: PullSnapshot, rows: tuple[Row, ...], *, docs: Mapping[str, Evidence], clock: Judge
) -> tuple[str, ...]:
    """The report's notes: its rows', the required checks', then each head source's."""
    return (
        _notes(rows, truncated=snapshot.truncated)
        + _required_note(snapshot.required_checks)
        + tuple(
            ev.note(number=snapshot.number, judge=clock)
            for key, ev in docs.items()
            if key.startswith(HEAD_KEY)
        )
    )


def dedupe(signals: Iterable[Signal]) -> tuple[Signal, ...]:
    """Keep the newest check run per (name, app, workflow, event, workflow file); statuses
    pass through.

    Runs of one workflow triggered by different events (push, pull_request), and runs of two
    workflow files that share a name, are different signals: merging them can hide a failure.
    """
    newest: dict[tuple[str, str, str | None, str | None, str | None, str | None], Signal] = {}
    statuses: list[Signal] = []
    for signal in signals:
        if signal.kind is not Kind.CHECK_RUN:
            statuses.append(signal)
            continue
        key = signal.identity
        kept = newest.get(key)
        if kept is None or newer(signal, kept):
            newest[key] = signal
    return (*newest.values(), *statuses)


def verdict_of(rows: Iterable[Row], *, truncated: bool = False) -> Verdict:
    """Failing, else pending, else incomplete (no rows, truncated read, ...), else passing."""
    states = {row.state for row in rows}
    if states & FAILING_STATES:
        return Verdict.FAILING
    if State.PENDING in states:
        return Verdict.PENDING
    if not states or truncated or states & INCOMPLETE_STATES:
        return Verdict.INCOMPLETE
    return Verdict.PASSING


def row_order(row: Row) -> tuple[int, str, str, str, str, str, str, str]:
    """Sort key: failing, incomplete, pending, passing; then by name (case-insensitive), kind."""
    signal = row.signal
    return (
        _group_rank(row.state),
        signal.name.casefold(),
        signal.name,
        str(signal.kind),
        signal.app or "",
        signal.workflow or "",
        signal.workflow_path or "",
        signal.event or "",
    )


def github_state(signal: Signal) -> State:
    """Map GitHub's raw value through the one table for its kind; unknown values are UNKNOWN."""
    if signal.kind is Kind.EXPECTED:  # never reported: waiting, like GitHub's "Expected"
        return State.PENDING
    table = CHECK_RUN_STATES if signal.kind is Kind.CHECK_RUN else STATUS_STATES
    return table.get(signal.github_state, State.UNKNOWN)


def _group_rank(state: State) -> int:
    return GROUP_ORDER.index(group_of(state))


def newer(run: Signal, than: Signal) -> bool:
    """Whether `run` supersedes `than` (same name, app, workflow and event).

    The later start wins (domain facts); a pending run not started yet (a queued re-run) is
    newer than any that has; a completed run with no start is dated by its completion. Equal
    times go to GitHub's larger id when both have one; a tie that is left keeps the worse
    state, so no order of GitHub's answer can hide a failure.
    """
    mine, theirs = _when(run), _when(than)
    if mine != theirs:
        return mine > theirs
    if None not in (run.database_id, than.database_id) and run.database_id != than.database_id:
        return (run.database_id or 0) > (than.database_id or 0)
    mine_rank, their_rank = _group_rank(github_state(run)), _group_rank(github_state(than))
    if mine_rank != their_rank:
        return mine_rank < their_rank
    return (run.database_id or -1) > (than.database_id or -1)


def _when(run: Signal) -> tuple[int, float]:
    """(0, 0) no time at all, (1, t) started or completed at t, (2, 0) queued, not started."""
    if run.started_at is None and github_state(run) is State.PENDING:
        return (2, 0.0)
    at = run.started_at or run.completed_at
    return (0, 0.0) if at is None else (1, at.timestamp())


def _notes(rows: tuple[Row, ...], *, truncated: bool) -> tuple[str, ...]:
    notes: list[str] = []
    if all(row.signal.kind is Kind.EXPECTED for row in rows):
        notes.append(NO_SIGNALS_NOTE)
    if truncated:
        notes.append(TRUNCATED_NOTE)
    return tuple(notes)


def _row(
    signal: Signal, docs: Mapping[str, Evidence], *, clock: Judge, seen: _Seen, number: int
) -> Row:
    since = _since(signal, seen)
    evidence = docs.get(evidence_key(signal)) if signal.kind is not Kind.EXPECTED else None
    if evidence is not None:
        return evidence.row(signal, number=number, since=since, judge=clock)
    base = github_state(signal)
    state = clock.aged(base, since.at)
    finding = github_finding(signal, base, state=state, since=since.at, judge=clock)
    return Row(signal, state, since.at, since.source, None, finding)


def _required_note(checks: RequiredChecks | None) -> tuple[str, ...]:
    """Said once where the base branch's rules could not be read."""
    if checks is not None and checks.read and checks.pins_error is not None:
        pins = checks.pins_error.strip().rstrip(".") or "no reason given"
        return (
            f"Which app branch protection of {checks.base} requires each check from could not "
            f"be read ({pins}): a required check is counted as reported whichever app "
            "reported it.",
        )
    if checks is None or checks.read:
        return ()
    error = (checks.error or "no reason given").strip().rstrip(".")
    return (
        f"The checks required on {checks.base} could not be read ({error}): a required check "
        "that never reported on this commit is not shown.",
    )


def _since(signal: Signal, seen: _Seen) -> Since:
    if signal.kind is Kind.EXPECTED:  # GitHub gives no time: since the bot first knew the head
        first = seen.get(HEAD_SEEN_KEY)
        return Since(first, SinceSource.FIRST_SEEN if first else SinceSource.NONE)
    if signal.kind is Kind.STATUS:
        given = signal.created_at
    elif github_state(signal) is State.PENDING:
        given = signal.started_at
    else:
        given = signal.completed_at
    if given is not None:
        return Since(given, SinceSource.GITHUB)
    first = seen.get(signal.key)
    if first is not None:
        return Since(first, SinceSource.FIRST_SEEN)
    return Since(None, SinceSource.NONE)


def github_finding(
    signal: Signal, base: State, *, state: State, since: datetime | None, judge: Judge
) -> str | None:
    """What GitHub's own answer says about a row, when it says something beyond its state."""
    if signal.kind is Kind.EXPECTED:
        return _expected_finding(signal, state=state, since=since, judge=judge)
    if state is State.STALE and base is State.PENDING and since is not None:
        shown = f"GitHub has shown it {signal.github_state} since {format_utc(since)}"
        return f"{shown}, longer than {judge.limit}."
    if signal.kind is Kind.STATUS and signal.github_state == "expected":
        return EXPECTED_FINDING
    if base is State.STALE:
        return "GitHub marked this check run stale."
    if base is State.UNKNOWN:
        return f'GitHub reported the value "{signal.github_state}", which this bot does not map.'
    return None


def _expected_finding(signal: Signal, *, state: State, since: datetime | None, judge: Judge) -> str:
    """ "Not reported on this commit; required by branch protection of `main`." (and stale)."""
    said = NOT_REPORTED
    if state is State.STALE and since is not None:
        said += f", which this bot has known since {format_utc(since)}, longer than {judge.limit}"
    said = f"{said}; {rules_words(signal.rules, lambda name: f'`{name}`')}."
    return f"{said} {signal.description}" if signal.description else said
