"""How a Read the Docs lookup becomes a row (or a note): the build that settles a status,
and what the row says about it (pure; the core calls RtdLookup.row / RtdLookup.note)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final, NamedTuple

from bot.core.evidence import Judge, Since
from bot.core.model import Reconciliation, Row, Signal, State, format_utc
from bot.core.reconcile import github_finding, github_state
from bot.core.remedies import READTHEDOCS
from bot.sources.readthedocs.rules import RtdBuild, Settled, named_build, settling

RTD_SKIP_NOTIFICATION: Final = "build:user:exit-code-183"
RTD_CANCEL_NOTIFICATION: Final = "build:user:cancelled"


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


@dataclass(frozen=True, slots=True)
class RtdLookup:
    """What Read the Docs answered about one project and one exact commit."""

    project: str
    commit: str
    fetched_at: datetime
    builds: tuple[RtdBuild, ...] = ()  # newest first (see below)
    notifications: tuple[str, ...] = ()  # message ids of the settling build, when it was read
    error: str | None = None  # set when RTD could not be read: what it answered
    # `builds`: every build of the exact commit, all versions, plus a build a status named;
    # which of them settles a status is settle_status's one rule.
    # `notifications` are those of that settling build; False here when they could not be read:
    notifications_read: bool = True
    # set while RTD cannot be read (429, 5xx, 403, timeout): since when; the evidence is the
    # last good, and `failure` what failed (stable words: a status code and what it means)
    unverified_since: datetime | None = None
    failure: str | None = None

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        """The row of a Read the Docs status of pull request `number`."""
        ev = _Ev(self, settle_status(self, number=number, url=signal.url))
        return _rtd_row(signal, ev, since=since, clock=judge)

    def note(self, *, number: int, judge: Judge) -> str:
        """What RTD says about `repos[].rtd_project` for a head with no RTD status."""
        return _project_note(self, judge, number=number)


def settle_status(lookup: RtdLookup, *, number: int, url: str | None) -> Settled:
    """Which of a lookup's builds settles the status of pull request `number` naming `url`."""
    named = named_build(url, lookup.project)
    return settling(lookup.builds, commit=lookup.commit, version=str(number), named=named)


class _Ev(NamedTuple):
    """What RTD answered for one status, and which of its builds settles that status."""

    lookup: RtdLookup
    settled: Settled

    @property
    def build(self) -> RtdBuild:
        """The settling build (only asked for when there is one)."""
        assert self.settled.build is not None
        return self.settled.build


def _rtd_row(signal: Signal, ev: _Ev, *, since: Since, clock: Judge) -> Row:
    base = github_state(signal)
    if ev.lookup.error is not None or ev.settled.build is None:
        state = clock.aged(base, since.at)
        finding = github_finding(signal, base, state=state, since=since.at, judge=clock)
        return Row(signal, state, since.at, since.source, _unsettled(ev, clock), finding)
    outcome = _outcome(ev.build, ev.lookup.notifications)
    if base in (State.SUCCESS, State.FAILURE):
        state, rec = _settled_on_github(signal, ev, outcome=outcome, clock=clock)
    else:
        state, rec = _pending_on_github(ev, outcome, base=base, since=since.at, clock=clock)
    finding = None
    if outcome is _Rtd.UNKNOWN:
        finding = github_finding(signal, base, state=state, since=since.at, judge=clock)
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


def _unverified(lookup: RtdLookup, clock: Judge) -> datetime | None:
    """Since when RTD cannot be read, once that has lasted the policy's limit; else None."""
    return clock.unverified(lookup.unverified_since)


def _unsettled(ev: _Ev, clock: Judge) -> Reconciliation:
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
    if lookup.error is None:
        finding += _as_last_read(lookup, clock)
    return Reconciliation(
        provider=READTHEDOCS,
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


def _as_last_read(lookup: RtdLookup, clock: Judge) -> str:
    """Once RTD has not been readable for the policy's limit: since when, and that what the row
    says is its last good answer (with when it was read); before that, nothing (no edit)."""
    since = _unverified(lookup, clock)
    if since is None:
        return ""
    when, at = format_utc(since), format_utc(lookup.fetched_at)
    if lookup.failure is None:
        return f" Read the Docs could not be read since {when}; this is what it reported at {at}."
    why = lookup.failure.strip().rstrip(".")
    return (
        f" Read the Docs could not be read since {when}: {why}. This is what it reported at {at}."
    )


def _evidence(ev: _Ev, *, divergent: bool, finding: str, clock: Judge) -> Reconciliation:
    build, lookup = ev.build, ev.lookup
    finding += _others(ev.settled) + _as_last_read(lookup, clock)
    return Reconciliation(
        provider=READTHEDOCS,
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
        link_label="RTD build",
    )


def _pending_on_github(
    ev: _Ev, outcome: _Rtd, *, base: State, since: datetime | None, clock: Judge
) -> tuple[State, Reconciliation]:
    build = ev.build
    if outcome is _Rtd.RUNNING:
        state = clock.aged(base, build.created or since)
        finding = _running_sentence(
            build, stale=state is State.STALE, clock=clock, version=ev.settled.version
        )
        return state, _evidence(ev, divergent=False, finding=finding, clock=clock)
    finding = _rtd_sentence(ev, outcome)
    if outcome is _Rtd.UNKNOWN:
        return clock.aged(base, since), _evidence(ev, divergent=False, finding=finding, clock=clock)
    if base is State.PENDING and outcome in (_Rtd.SUCCEEDED, _Rtd.FAILED):
        finding += " GitHub's status was not updated after the build finished."
    return _RTD_AS_STATE[outcome], _evidence(ev, divergent=True, finding=finding, clock=clock)


def _settled_on_github(
    signal: Signal, ev: _Ev, *, outcome: _Rtd, clock: Judge
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
        rtd_says = _running_sentence(
            ev.build, stale=state is State.STALE, clock=clock, version=ev.settled.version
        )
    else:
        state = _RTD_AS_STATE[outcome]
        rtd_says = _rtd_sentence(ev, outcome)
    github_says = f"GitHub's status says {signal.github_state}."
    if base is State.FAILURE and outcome is _Rtd.CANCELLED:
        github_says += " Read the Docs sets that state when a running build is cancelled."
    finding = f"{github_says} {rtd_says}"
    return state, _evidence(ev, divergent=True, finding=finding, clock=clock)


def _build_ref(build: RtdBuild, version: str | None = None) -> str:
    """ "build 123 for this exact commit"; a build of another version than the pull request's
    `version` (the build a pre-2020 status names: a branch build, `latest`) says which."""
    other = f" of version {build.version}" if version and build.version != version else ""
    if not build.commit:  # a named build RTD has not yet recorded a commit for
        return f"build {build.id}{other}, which the status names (RTD gives no commit for it yet),"
    return f"build {build.id}{other} for this exact commit"


def _running_sentence(
    build: RtdBuild, *, stale: bool, clock: Judge, version: str | None = None
) -> str:
    text = f"Read the Docs reports {_build_ref(build, version)} as {build.state}"
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
        done = "succeeded" if outcome is _Rtd.SUCCEEDED else "failed"
        return f"{lead} that {_build_ref(build, ev.settled.version)} {done}{when}."
    return (
        f'{lead} {_build_ref(build, ev.settled.version)} with state "{build.state}"'
        f"{_outcome_words(build)}, which this bot does not map."
    )


def _outcome_words(build: RtdBuild) -> str:
    """ " and a success", " and a failure", "" while RTD gives no outcome."""
    if build.success is None:
        return ""
    return " and a success" if build.success else " and a failure"


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
    return f"{_build_ref(build, ev.settled.version)} as cancelled; {_position(ev.settled)}. {said}"


def _project_note(lookup: RtdLookup, clock: Judge, *, number: int) -> str:
    """What RTD says about `repos[].rtd_project` for a head with no RTD status: a note, no row."""
    where = f"Read the Docs project {lookup.project}"
    absent = "no Read the Docs status is reported on GitHub for this commit."
    build = settle_status(lookup, number=number, url=None).build
    if lookup.error is None and build is not None:
        said = (
            f"reports build {build.id} of version {number} for this exact commit as {build.state}"
        )
        if build.state == "finished":
            said += _outcome_words(build)
        if lookup.notifications:
            said += f", with notification {', '.join(lookup.notifications)}"
        return f"{where} {said}; {absent}{_as_last_read(lookup, clock)}"
    if lookup.error is None:
        said = f"lists no build of version {number} for this exact commit"
        return f"{where} {said}; {absent}{_as_last_read(lookup, clock)}"
    since = _unverified(lookup, clock)
    when = "" if since is None else f" since {format_utc(since)}"
    return f"{where} could not be read{when}: {lookup.error.strip().rstrip('.')}."
