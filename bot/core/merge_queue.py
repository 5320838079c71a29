"""A pull request in GitHub's merge queue: what its merge-group commit lacks (pure).

The queue waits for the base branch's required checks on the merge-group commit (the
`gh-readonly-queue/<base>/pr-<N>-<sha>` branch it creates), not on the pull request's head: a
required context that never reports there stalls the entry until the queue's
`checkResponseTimeout`, which then counts as a failure. Nothing here guesses: an entry, a
commit or a configuration that could not be read is said to be unread, once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from bot.core.base import MergeBase
from bot.core.model import (
    CONFIGURATION,
    FAILING_STATES,
    Kind,
    QueueEntry,
    QueueFinding,
    QueueState,
    RequiredChecks,
    Signal,
    State,
    Verdict,
    parse_optional_time,
)
from bot.core.reconcile import dedupe, github_state
from bot.core.required import expected_signals, satisfies, with_required

QUEUE_STATES: Final[Mapping[str, QueueState]] = {
    s.value: s for s in QueueState if s is not QueueState.UNKNOWN
}
# A merge group's branch, as GitHub names it: gh-readonly-queue/<base>/pr-<N>-<sha>
_QUEUE_REF: Final = re.compile(r"(?:refs/heads/)?gh-readonly-queue/.+/pr-(\d{1,10})-[0-9a-f]{40}")
_SHA: Final = re.compile(r"[0-9a-f]{40}")
# A check in these states on the merge-group commit keeps the entry from merging.
_BLOCKING: Final = FAILING_STATES | {State.CANCELLED}
_PASSED: Final = frozenset({State.SUCCESS, State.SKIPPED, State.NEUTRAL})
NO_COMMIT: Final = "GitHub named no merge-group commit for the queue entry"
HEAD_COMMIT: Final = (
    "GitHub named the pull request's own head as the queue entry's commit, not a merge-group commit"
)


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A merge queue's configuration as read: its checkResponseTimeout, or why it is unknown."""

    timeout_minutes: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class QueueRead:
    """What a cycle read for one queued pull request: its merge-group commit's checks (a
    MergeBase: a commit and its signals, or why they could not be read) and the queue's
    configuration (None: not asked)."""

    group: MergeBase | None
    config: QueueConfig | None


def queue_state(raw: object) -> QueueState:
    """GitHub's MergeQueueEntryState through the one table; anything else is UNKNOWN."""
    return QUEUE_STATES.get(raw, QueueState.UNKNOWN) if isinstance(raw, str) else QueueState.UNKNOWN


def queued_number(ref: object) -> int | None:
    """The pull request a merge group's branch is named after
    (`refs/heads/gh-readonly-queue/main/pr-104-<sha>` -> 104); None for any other ref."""
    if not isinstance(ref, str):
        return None
    match = _QUEUE_REF.fullmatch(ref)
    number = int(match.group(1)) if match else 0
    return number if 0 < number < 2**31 else None


def entry_of(in_queue: Any, node: Any) -> QueueEntry | None:
    """A PullRequest's `isInMergeQueue` and `mergeQueueEntry` as a QueueEntry (None: not
    queued). An entry of an odd shape is kept with what it could say, never dropped."""
    if not isinstance(node, dict):
        if in_queue is True:
            return QueueEntry(QueueState.UNKNOWN, "", error="GitHub gave no merge-queue entry")
        return None
    raw = node.get("state")
    position = node.get("position")
    try:
        enqueued = parse_optional_time(node.get("enqueuedAt"))
    except (TypeError, ValueError):
        enqueued = None
    return QueueEntry(
        queue_state(raw),
        raw if isinstance(raw, str) else "",
        position if isinstance(position, int) and not isinstance(position, bool) else None,
        enqueued,
        _oid(node.get("headCommit")),
        _oid(node.get("baseCommit")),
    )


def _oid(commit: Any) -> str | None:
    oid = commit.get("oid") if isinstance(commit, dict) else None
    return oid if isinstance(oid, str) and _SHA.fullmatch(oid) else None


def judge_queue(
    entry: QueueEntry,
    read: QueueRead | None,
    checks: RequiredChecks | None,
    expected: Iterable[str] = (),
    *,
    head: str | None = None,
) -> QueueFinding:
    """What the merge-group commit carries of the required (and `expected`) contexts; an entry
    naming the pull request's `head` as its commit is not taken for a merge group's."""
    config = None if read is None else read.config
    found = QueueFinding(
        entry,
        timeout_minutes=None if config is None else config.timeout_minutes,
        timeout_error=None if config is None else config.error,
        required_read=checks is not None and checks.read,
    )
    if entry.error is not None:
        return found
    group = None if read is None else read.group
    error = HEAD_COMMIT if head is not None and entry.commit == head else None
    error = error or _commit_error(entry, group)
    if error is not None or group is None:
        return replace(found, commit_error=error or "its checks were not read")
    signals = dedupe(with_required(group.signals, checks))
    names = tuple(dict.fromkeys(expected))
    wanted = [s for s in signals if _counts(s, checks, names)]
    states = [(s, github_state(s)) for s in wanted]
    missing = () if group.truncated else tuple(expected_signals(signals, checks, names))
    return replace(
        found,
        checks=len(signals),
        truncated=group.truncated,
        missing=missing,
        failing=tuple(s for s, state in states if state in _BLOCKING),
        pending=tuple(s for s, state in states if state not in _BLOCKING | _PASSED),
        passed=sum(1 for _, state in states if state in _PASSED),
    )


def _commit_error(entry: QueueEntry, group: MergeBase | None) -> str | None:
    if entry.commit is None:
        return NO_COMMIT
    if group is not None and group.error is not None:
        return group.error
    return None


def _counts(signal: Signal, checks: RequiredChecks | None, names: tuple[str, ...]) -> bool:
    """A signal the queue waits for: it reports a required context, or a configured name."""
    if signal.name in names:
        return True
    return checks is not None and checks.read and any(satisfies(signal, c) for c in checks.contexts)


def queue_verdict(found: QueueFinding) -> Verdict:
    """The queue entry's own verdict: failing where a required context fails on its merge-group
    commit; incomplete where anything needed was not read; pending while a required context is
    missing or running there; passing only when every one has passed there."""
    if found.failing:
        return Verdict.FAILING
    unread = found.entry.error or found.commit_error or found.truncated
    if unread or not found.required_read:
        return Verdict.INCOMPLETE
    if found.missing or found.pending:
        return Verdict.PENDING
    return Verdict.PASSING


def stuck(found: QueueFinding | None) -> bool:
    """Stuck in the merge queue: a required context failing, or never reported, on the
    merge-group commit (the queue will not merge the entry as it is)."""
    return found is not None and bool(found.failing or found.missing)


def stuck_names(found: QueueFinding | None) -> tuple[str, ...]:
    """The required contexts failing, then those never reported, on the merge-group commit."""
    return () if found is None else tuple(s.name for s in (*found.failing, *found.missing))


def required_words(signal: Signal) -> bool:
    """Whether a missing or failing context is required by a rule (not only configured)."""
    return any(rule.source != CONFIGURATION for rule in signal.rules) or (
        signal.kind is not Kind.EXPECTED and signal.required is True
    )


def minutes_between(start: datetime | None, end: datetime) -> int | None:
    """Whole minutes from `start` to `end` (never negative); None without a start."""
    if start is None:
        return None
    return max(0, int((end - start).total_seconds() // 60))


def queue_facts(found: QueueFinding | None) -> tuple[Any, ...] | None:
    """The facts of a finding the comment states, as plain values (None: not queued)."""
    if found is None:
        return None
    entry = found.entry
    return (
        entry.raw_state,
        None if entry.enqueued_at is None else entry.enqueued_at.timestamp(),
        entry.commit,
        entry.error,
        found.timeout_minutes,
        found.timeout_error,
        found.commit_error,
        found.required_read,
        found.checks,
        found.truncated,
        tuple((s.name, tuple(s.rules), s.app_id) for s in found.missing),
        tuple((s.name, s.github_state, s.url) for s in found.failing),
        tuple(s.name for s in found.pending),
        found.passed,
    )
