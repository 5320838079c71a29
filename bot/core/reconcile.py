"""Turn one pull request's GitHub signals and Read the Docs answers into a Report (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final, NamedTuple

from bot.core.model import (
    FAILING_STATES,
    INCOMPLETE_STATES,
    RTD_PROJECT_KEY,
    Kind,
    Policy,
    PullSnapshot,
    Reconciliation,
    Report,
    RequiredChecks,
    Row,
    RtdBuild,
    RtdLookup,
    Signal,
    SinceSource,
    State,
    Verdict,
    format_utc,
)
from bot.core.required import HEAD_SEEN_KEY, expected_signals, rules_words, with_required
from bot.docs.readthedocs.rules import Settled, settle_status, target_of

NO_SIGNALS_NOTE: Final = "No check runs or commit statuses are reported on this commit."
TRUNCATED_NOTE: Final = (
    "GitHub reported more checks and statuses on this commit than were read; "
    "the signals not read are not counted, so the verdict cannot be passing."
)
NOT_REPORTED: Final = "Not reported on this commit"
EXPECTED_FINDING: Final = "GitHub lists this context as expected; no source has reported it."
RTD_SKIP_NOTIFICATION: Final = "build:user:exit-code-183"
RTD_CANCEL_NOTIFICATION: Final = "build:user:cancelled"

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


class _Rtd(Enum):
    """What the newest Read the Docs build of a commit amounts to."""

    RUNNING = "running"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"


_RTD_RUNNING_CODES: Final = frozenset(
    {"triggered", "cloning", "installing", "building", "uploading"}
)
_RTD_AS_STATE: Final[Mapping[_Rtd, State]] = {
    _Rtd.RUNNING: State.PENDING,
    _Rtd.CANCELLED: State.CANCELLED,
    _Rtd.SKIPPED: State.SKIPPED,
    _Rtd.SUCCEEDED: State.SUCCESS,
    _Rtd.FAILED: State.FAILURE,
    _Rtd.UNKNOWN: State.UNKNOWN,
}
_AGREES: Final = frozenset(
    {
        (State.SUCCESS, _Rtd.SUCCEEDED),
        (State.SUCCESS, _Rtd.SKIPPED),
        (State.FAILURE, _Rtd.FAILED),
    }
)


class _Since(NamedTuple):
    """When a signal entered its GitHub state, and who said so."""

    at: datetime | None
    source: SinceSource


def rtd_project_of(context: str) -> tuple[str, str] | None:
    """(host, slug) of a Read the Docs status context with a valid slug, else None."""
    target = target_of(context)
    return (target.host, target.slug) if target is not None and target.valid else None


def reconcile(
    snapshot: PullSnapshot,
    rtd: Mapping[str, RtdLookup],
    policy: Policy,
    *,
    now: datetime,
    first_seen: Mapping[str, datetime] | None = None,
    expected: Iterable[str] = (),
) -> Report:
    """Reconcile every signal on the head commit with Read the Docs and compute the verdict.

    Every context the base branch requires (or `expected` names) that nothing on the head
    reports is a signal of its own, pending from when the bot first knew the head, then stale.
    """
    clock = _Clock(policy, now)
    seen = first_seen or {}
    signals = dedupe(with_required(snapshot.signals, snapshot.required_checks))
    missing = expected_signals(signals, snapshot.required_checks, expected)
    rows = tuple(
        sorted(
            (
                _row(s, rtd, clock=clock, seen=seen, number=snapshot.number)
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
        notes=_notes(rows, truncated=snapshot.truncated)
        + _required_note(snapshot.required_checks)
        + _project_note(rtd, clock, number=snapshot.number),
        required_checks=snapshot.required_checks,
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
        if kept is None or _newer(signal, kept):
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
    if state in FAILING_STATES:
        return 0
    if state in INCOMPLETE_STATES:
        return 1
    if state is State.PENDING:
        return 2
    return 3


def _newer(run: Signal, than: Signal) -> bool:
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


@dataclass(frozen=True, slots=True)
class _Clock:
    """The policy and the time one reconciliation is judged against."""

    policy: Policy
    now: datetime

    def aged(self, state: State, since: datetime | None) -> State:
        """A pending state older than the limit becomes STALE; anything else is unchanged."""
        if (
            state is State.PENDING
            and since is not None
            and self.now - since > self.policy.stale_after
        ):
            return State.STALE
        return state

    @property
    def limit(self) -> str:
        """The limit in words, e.g. "the 120-minute limit"."""
        return f"the {int(self.policy.stale_after.total_seconds() // 60)}-minute limit"


def _row(
    signal: Signal, rtd: Mapping[str, RtdLookup], *, clock: _Clock, seen: _Seen, number: int
) -> Row:
    since = _since(signal, seen)
    lookup = rtd.get(signal.name) if signal.kind is Kind.STATUS else None
    if lookup is not None:
        ev = _Ev(lookup, settle_status(lookup, number=number, url=signal.url))
        return _rtd_row(signal, ev, since=since, clock=clock)
    base = github_state(signal)
    state = clock.aged(base, since.at)
    finding = _github_finding(signal, base, state=state, since=since.at, clock=clock)
    return Row(signal, state, since.at, since.source, None, finding)


def _required_note(checks: RequiredChecks | None) -> tuple[str, ...]:
    """Said once where the base branch's rules could not be read."""
    if checks is None or checks.read:
        return ()
    error = (checks.error or "no reason given").strip().rstrip(".")
    return (
        f"The checks required on {checks.base} could not be read ({error}): a required check "
        "that never reported on this commit is not shown.",
    )


def _since(signal: Signal, seen: _Seen) -> _Since:
    if signal.kind is Kind.EXPECTED:  # GitHub gives no time: since the bot first knew the head
        first = seen.get(HEAD_SEEN_KEY)
        return _Since(first, SinceSource.FIRST_SEEN if first else SinceSource.NONE)
    if signal.kind is Kind.STATUS:
        given = signal.created_at
    elif github_state(signal) is State.PENDING:
        given = signal.started_at
    else:
        given = signal.completed_at
    if given is not None:
        return _Since(given, SinceSource.GITHUB)
    first = seen.get(signal.key)
    if first is not None:
        return _Since(first, SinceSource.FIRST_SEEN)
    return _Since(None, SinceSource.NONE)


def _github_finding(
    signal: Signal, base: State, *, state: State, since: datetime | None, clock: _Clock
) -> str | None:
    if signal.kind is Kind.EXPECTED:
        return _expected_finding(signal, state=state, since=since, clock=clock)
    if state is State.STALE and base is State.PENDING and since is not None:
        shown = f"GitHub has shown it {signal.github_state} since {format_utc(since)}"
        return f"{shown}, longer than {clock.limit}."
    if signal.kind is Kind.STATUS and signal.github_state == "expected":
        return EXPECTED_FINDING
    if base is State.STALE:
        return "GitHub marked this check run stale."
    if base is State.UNKNOWN:
        return f'GitHub reported the value "{signal.github_state}", which this bot does not map.'
    return None


def _expected_finding(
    signal: Signal, *, state: State, since: datetime | None, clock: _Clock
) -> str:
    """ "Not reported on this commit; required by branch protection of `main`." (and stale)."""
    said = NOT_REPORTED
    if state is State.STALE and since is not None:
        said += f", which this bot has known since {format_utc(since)}, longer than {clock.limit}"
    return f"{said}; {rules_words(signal.rules, lambda name: f'`{name}`')}."


# --- Read the Docs -------------------------------------------------------------------------
# Which build settles a status is the RTD rules' (settle_status); here it becomes a row.


class _Ev(NamedTuple):
    """What RTD answered for one status, and which of its builds settles that status."""

    lookup: RtdLookup
    settled: Settled

    @property
    def build(self) -> RtdBuild:
        """The settling build (only asked for when there is one)."""
        assert self.settled.build is not None
        return self.settled.build


def _rtd_row(signal: Signal, ev: _Ev, *, since: _Since, clock: _Clock) -> Row:
    base = github_state(signal)
    if ev.lookup.error is not None or ev.settled.build is None:
        state = clock.aged(base, since.at)
        finding = _github_finding(signal, base, state=state, since=since.at, clock=clock)
        return Row(signal, state, since.at, since.source, _unsettled(ev, clock), finding)
    outcome = _outcome(ev.build, ev.lookup.notifications)
    if base in (State.SUCCESS, State.FAILURE):
        state, rec = _settled_on_github(signal, ev, outcome=outcome, clock=clock)
    else:
        state, rec = _pending_on_github(ev, outcome, base=base, since=since.at, clock=clock)
    finding = None
    if outcome is _Rtd.UNKNOWN:
        finding = _github_finding(signal, base, state=state, since=since.at, clock=clock)
    return Row(signal, state, since.at, since.source, rec, finding)


def _outcome(build: RtdBuild, notifications: tuple[str, ...]) -> _Rtd:
    if build.state in _RTD_RUNNING_CODES:
        return _Rtd.RUNNING
    if build.state == "cancelled":
        skipped = RTD_SKIP_NOTIFICATION in notifications and RTD_CANCEL_NOTIFICATION not in (
            notifications
        )
        return _Rtd.SKIPPED if skipped else _Rtd.CANCELLED
    if build.state == "finished" and build.success is not None:
        return _Rtd.SUCCEEDED if build.success else _Rtd.FAILED
    return _Rtd.UNKNOWN


def _unverified(lookup: RtdLookup, clock: _Clock) -> datetime | None:
    """Since when RTD cannot be read, once that has lasted the policy's limit; else None."""
    since = lookup.unverified_since
    if since is None or clock.now - since < clock.policy.unverified_after:
        return None
    return since


def _unsettled(ev: _Ev, clock: _Clock) -> Reconciliation:
    lookup = ev.lookup
    count: int | None = None
    if lookup.error is not None:
        error = lookup.error.strip().rstrip(".")
        since = _unverified(lookup, clock)
        when = "" if since is None else f" since {format_utc(since)}"
        finding = f"Could not verify with Read the Docs{when}: {error}."
    elif ev.settled.missing is not None:
        count = len(ev.settled.candidates)
        finding = (
            f"The status names Read the Docs build {ev.settled.missing}, which Read the Docs did "
            "not give for this exact commit; no other build settles this status."
        )
    else:
        count = 0
        if ev.settled.others:
            version = ev.settled.version
            finding = (
                f"Read the Docs lists no build of version {version} for this exact commit."
                f"{_others(ev.settled)}"
            )
        else:
            finding = "Read the Docs lists no build for this exact commit."
    return Reconciliation(
        provider="readthedocs",
        project=lookup.project,
        build_id=None,
        build_state=None,
        success=None,
        builds_for_commit=count,
        divergent=False,
        finding=finding,
        fetched_at=lookup.fetched_at,
    )


def _others(settled: Settled) -> str:
    """A sentence naming builds of other versions of the commit, which never settle a status."""
    if not settled.others:
        return ""
    named = ", ".join(f"{b.id} (version {b.version})" for b in settled.others[:5])
    more = len(settled.others) - 5
    extra = f" and {more} more" if more > 0 else ""
    word = "build" if len(settled.others) == 1 else "builds"
    return (
        f" Read the Docs also lists {word} {named}{extra} of this commit for other versions; "
        "they do not settle this pull request's status."
    )


def _evidence(ev: _Ev, *, divergent: bool, finding: str, clock: _Clock) -> Reconciliation:
    build, lookup = ev.build, ev.lookup
    finding += _others(ev.settled)
    since = _unverified(lookup, clock)
    if since is not None:
        finding += (
            f" Read the Docs could not be read since {format_utc(since)}; this is what it "
            f"reported at {format_utc(lookup.fetched_at)}."
        )
    return Reconciliation(
        provider="readthedocs",
        project=lookup.project,
        build_id=build.id,
        build_state=build.state,
        success=build.success,
        builds_for_commit=len(ev.settled.candidates),
        divergent=divergent,
        finding=finding,
        build_url=build.url,
        notification=lookup.notifications[0] if lookup.notifications else None,
        build_created=build.created,
        build_finished=build.finished,
        fetched_at=lookup.fetched_at,
    )


def _pending_on_github(
    ev: _Ev, outcome: _Rtd, *, base: State, since: datetime | None, clock: _Clock
) -> tuple[State, Reconciliation]:
    build = ev.build
    if outcome is _Rtd.RUNNING:
        state = clock.aged(base, build.created or since)
        finding = _running_sentence(build, stale=state is State.STALE, clock=clock)
        return state, _evidence(ev, divergent=False, finding=finding, clock=clock)
    finding = _rtd_sentence(ev, outcome)
    if outcome is _Rtd.UNKNOWN:
        return clock.aged(base, since), _evidence(ev, divergent=False, finding=finding, clock=clock)
    if base is State.PENDING and outcome in (_Rtd.SUCCEEDED, _Rtd.FAILED):
        finding += " GitHub's status was not updated after the build finished."
    return _RTD_AS_STATE[outcome], _evidence(ev, divergent=True, finding=finding, clock=clock)


def _settled_on_github(
    signal: Signal, ev: _Ev, *, outcome: _Rtd, clock: _Clock
) -> tuple[State, Reconciliation]:
    base = github_state(signal)
    if base is State.FAILURE and outcome is _Rtd.SKIPPED:
        outcome = _Rtd.CANCELLED  # a skip never turns GitHub's failure into a pass
    if (base, outcome) in _AGREES:
        state = State.SKIPPED if outcome is _Rtd.SKIPPED else base
        finding = _rtd_sentence(ev, outcome, lead="Read the Docs agrees: it reports")
        return state, _evidence(ev, divergent=False, finding=finding, clock=clock)
    if outcome is _Rtd.RUNNING:
        state = clock.aged(State.PENDING, ev.build.created)
        rtd_says = _running_sentence(ev.build, stale=state is State.STALE, clock=clock)
    else:
        state = _RTD_AS_STATE[outcome]
        rtd_says = _rtd_sentence(ev, outcome)
    github_says = f"GitHub's status says {signal.github_state}."
    if base is State.FAILURE and outcome is _Rtd.CANCELLED:
        github_says += " Read the Docs sets that state when a running build is cancelled."
    finding = f"{github_says} {rtd_says}"
    return state, _evidence(ev, divergent=True, finding=finding, clock=clock)


def _build_ref(build: RtdBuild) -> str:
    if not build.commit:  # a named build RTD has not yet recorded a commit for
        return f"build {build.id}, which the status names (RTD gives no commit for it yet),"
    return f"build {build.id} for this exact commit"


def _running_sentence(build: RtdBuild, *, stale: bool, clock: _Clock) -> str:
    text = f"Read the Docs reports {_build_ref(build)} as {build.state}"
    if build.created is not None:
        text += f" since {format_utc(build.created)}"
    if stale:
        text += f", longer than {clock.limit}"
    return text + "."


def _rtd_sentence(ev: _Ev, outcome: _Rtd, *, lead: str = "Read the Docs reports") -> str:
    build = ev.build
    if outcome in (_Rtd.CANCELLED, _Rtd.SKIPPED):
        return f"{lead} {_cancelled_clause(ev)}"
    if outcome in (_Rtd.SUCCEEDED, _Rtd.FAILED):
        when = f" at {format_utc(build.finished)}" if build.finished else ""
        success = _json_bool(build.success)
        return f"{lead} {_build_ref(build)} as finished (success: {success}){when}."
    return (
        f'{lead} {_build_ref(build)} with state "{build.state}" and success '
        f"{_json_bool(build.success)}, which this bot does not map."
    )


def _position(settled: Settled) -> str:
    """Where the settling build stands among the builds that could settle the status."""
    chosen, count = settled.candidates[0], len(settled.candidates)
    newer = [b for b in settled.candidates[1:] if settled.named and _age(b) > _age(chosen)]
    if newer:  # only a build the status names can be older than another of its version
        ids = ", ".join(str(b.id) for b in newer)
        return f"it is the build GitHub's status names; newer builds of its version exist ({ids})"
    which = f"build of version {settled.version}" if settled.others else "build"
    if count == 1:
        return f"it is the only {which} for this commit, so no newer build exists"
    return f"it is the newest of {count} {which}s for this commit, so no newer build exists"


def _age(build: RtdBuild) -> tuple[float, int]:
    return (build.created.timestamp() if build.created else 0.0, build.id)


def _cancelled_clause(ev: _Ev) -> str:
    build, lookup = ev.build, ev.lookup
    if not lookup.notifications_read:
        said = "RTD's notifications for it could not be read."
    elif lookup.notifications:
        label = "notification" if len(lookup.notifications) == 1 else "notifications"
        said = f"RTD's {label} for it: {', '.join(lookup.notifications)}."
    else:
        said = "RTD gave no notification for it."
    return (
        f"{_build_ref(build)} as cancelled (success: {_json_bool(build.success)}); "
        f"{_position(ev.settled)}. {said} No other cause is stated by any source."
    )


def _project_note(rtd: Mapping[str, RtdLookup], clock: _Clock, *, number: int) -> tuple[str, ...]:
    """What RTD says about `repos[].rtd_project` for a head with no RTD status: a note, no row."""
    lookup = rtd.get(RTD_PROJECT_KEY)
    if lookup is None:
        return ()
    where = f"Read the Docs project {lookup.project}"
    absent = "no Read the Docs status is reported on GitHub for this commit."
    build = settle_status(lookup, number=number, url=None).build
    if lookup.error is None and build is not None:
        said = (
            f"reports build {build.id} of version {number} for this exact commit as {build.state}"
        )
        if build.state in ("finished", "cancelled"):
            said += f" (success: {_json_bool(build.success)})"
        if lookup.notifications:
            said += f", with notification {', '.join(lookup.notifications)}"
        return (f"{where} {said}; {absent}",)
    if lookup.error is None:
        return (f"{where} lists no build of version {number} for this exact commit; {absent}",)
    since = _unverified(lookup, clock)
    when = "" if since is None else f" since {format_utc(since)}"
    return (f"{where} could not be read{when}: {lookup.error.strip().rstrip('.')}.",)


def _json_bool(value: bool | None) -> str:
    return "null" if value is None else str(value).lower()
