"""What every provider's row says the same way (pure): could not verify, and the last good
record standing while its provider cannot be read."""

from __future__ import annotations

from datetime import datetime

from bot.core.evidence import Judge, Since
from bot.core.model import Reconciliation, Row, Signal, State, format_utc
from bot.core.reconcile import github_finding, github_state


def clock(value: datetime | None) -> str:
    """A provider's time in the row: absolute, like every time the bot writes."""
    return "an unknown time" if value is None else format_utc(value)


def unverified_row(
    signal: Signal,
    *,
    since: Since,
    judge: Judge,
    provider: str,
    label: str,
    project: str,
    failure: str,
    failing_since: datetime | None,
    fetched_at: datetime | None,
) -> Row:
    """The row of a signal its provider could not be asked about: GitHub's state, aged as
    ever, and what failed ("could not verify", never a conclusion)."""
    base = github_state(signal)
    state = judge.aged(base, since.at)
    shown = judge.unverified(failing_since)
    when = "" if shown is None else f" since {format_utc(shown)}"
    finding = f"Could not verify with {label}{when}: {failure.strip().rstrip('.')}."
    rec = Reconciliation(
        provider=provider,
        project=project,
        build_id=None,
        build_state=None,
        success=None,
        builds_for_commit=None,
        divergent=False,
        finding=finding,
        fetched_at=fetched_at,
    )
    said = github_finding(signal, base, state=state, since=since.at, judge=judge)
    return Row(signal, state, since.at, since.source, rec, said)


def as_last_read(
    label: str,
    *,
    failure: str | None,
    failing_since: datetime | None,
    read_at: datetime | None,
    judge: Judge,
) -> str:
    """Once the provider has not been readable for the policy's limit: since when, why, and
    that the row says its last good record (read at ...); before that, nothing (no edit)."""
    since = judge.unverified(failing_since)
    if since is None or failure is None:
        return ""
    why = failure.strip().rstrip(".")
    return (
        f" {label} could not be read since {format_utc(since)}: {why}. "
        f"This is what it reported at {clock(read_at)}."
    )


def aged(signal: Signal, since: Since, judge: Judge, at: datetime | None = None) -> State:
    """GitHub's pending state, aged from `at` (the provider's own start) or GitHub's since."""
    return judge.aged(github_state(signal), at or since.at)
