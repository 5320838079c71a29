"""Each failing signal against the merge base: what the same signal reported there (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import reduce
from typing import Final

from bot.core.model import (
    BaseCheck,
    Kind,
    Report,
    Row,
    Rule,
    Signal,
    State,
    Verdict,
    format_utc,
    group_of,
    parse_optional_time,
)
from bot.core.reconcile import github_state, newer

TRUNCATED_BASE: Final = (
    "GitHub reported more checks on the merge base than were read, and this one was not among them"
)


@dataclass(frozen=True, slots=True)
class MergeBase:
    """A pull request's merge-base commit and the signals GitHub reported on it (or why not)."""

    commit: str | None  # None: the merge base could not be read (error says why)
    signals: tuple[Signal, ...] = ()
    truncated: bool = False  # more contexts on the merge base than were read
    error: str | None = None  # the merge base, or its checks, could not be read
    # Its checks could not be read again: the signals above are the last good answer, read at
    # `read_at`; reading has failed since `failing_since`, as `failure` says (stable words).
    read_at: datetime | None = field(default=None, compare=False)  # shown only with the below
    failing_since: datetime | None = None
    failure: str | None = None
    # Of one head: the base branch's commit its merge base was asked with (None: not known)
    # and when GitHub's compare was asked (bot.github.bases)
    tip: str | None = None
    asked_at: datetime | None = None

    @property
    def final(self) -> bool:
        """Every signal read on the merge base has settled: the answer will not change."""
        return self.error is None and not any(
            github_state(s) is State.PENDING for s in self.signals
        )


def judged(
    merge: MergeBase, *, now: datetime, unverified_after: timedelta
) -> tuple[MergeBase, datetime | None]:
    """The merge base as a report says it at `now`: a last good answer whose re-read has failed
    for less than `unverified_after` reads as that answer alone (the failure is no new fact);
    also the first time this judgement would change (None: never)."""
    since = merge.failing_since
    if since is None or now - since >= unverified_after:
        return merge, None
    return replace(merge, failing_since=None, failure=None, read_at=None), since + unverified_after


def needs_base(row: Row) -> bool:
    """A failing check run or status is compared with the merge base; nothing else is."""
    return group_of(row.state) is Verdict.FAILING and row.signal.kind in (
        Kind.CHECK_RUN,
        Kind.STATUS,
    )


def with_base(report: Report, merge: MergeBase) -> Report:
    """The report with each failing row's merge-base finding attached."""
    rows = tuple(
        row._replace(base=on_base(row.signal, merge)) if needs_base(row) else row
        for row in report.rows
    )
    return replace(report, rows=rows)


def same_signal(one: Signal, other: Signal) -> bool:
    """The same signal on another commit: same kind, name, app, workflow and workflow file
    (any event: the base branch's runs are `push`)."""
    return (one.kind, one.name, one.app, one.workflow, one.workflow_path) == (
        other.kind,
        other.name,
        other.app,
        other.workflow,
        other.workflow_path,
    )


def on_base(signal: Signal, merge: MergeBase) -> BaseCheck:
    """What the same signal reported on the merge base: its state, or that it did not run."""
    if merge.commit is None or merge.error is not None:
        return BaseCheck(merge.commit, error=merge.error or "the merge base could not be read")
    matches = [s for s in merge.signals if same_signal(s, signal)]
    if not matches:
        if merge.truncated:
            return BaseCheck(merge.commit, error=TRUNCATED_BASE)
        return _unverified(BaseCheck(merge.commit, workflow_ran=workflow_ran(signal, merge)), merge)
    found = reduce(lambda kept, s: s if newer(s, kept) else kept, matches)
    when = found.created_at if found.kind is Kind.STATUS else found.completed_at
    state = github_state(found)
    return _unverified(BaseCheck(merge.commit, state, found.url, when or found.started_at), merge)


def workflow_ran(signal: Signal, merge: MergeBase) -> bool:
    """Whether another run of the signal's own workflow (same app, workflow file or, without
    one, workflow name) is on the merge base: the check runs on base-branch commits. A status,
    or a run GitHub gave no workflow for (the DCO app's), has no workflow to tell it by."""
    if signal.kind is not Kind.CHECK_RUN or (signal.workflow_path or signal.workflow) is None:
        return False
    return any(
        other.kind is Kind.CHECK_RUN
        and other.app == signal.app
        and (
            other.workflow_path == signal.workflow_path
            if signal.workflow_path is not None
            else other.workflow == signal.workflow
        )
        for other in merge.signals
    )


def _unverified(check: BaseCheck, merge: MergeBase) -> BaseCheck:
    """The failed re-read a last good answer carries (judged: only once it lasted the limit)."""
    if merge.failing_since is None:
        return check
    return replace(
        check, unverified_since=merge.failing_since, failure=merge.failure, read_at=merge.read_at
    )


def unverified_finding(base: BaseCheck | None) -> str | None:
    """The sentence that says the merge base's checks could not be read again since when."""
    if base is None or base.unverified_since is None or base.error is not None:
        return None
    why = f": {base.failure.strip().rstrip('.')}" if base.failure else ""
    at = "" if base.read_at is None else f" at {format_utc(base.read_at)}"
    return (
        f"GitHub's checks of the merge base could not be verified since "
        f"{format_utc(base.unverified_since)}{why}; this is what GitHub reported{at}."
    )


def base_finding(base: BaseCheck | None) -> str | None:
    """The sentence that says why a failing signal was not compared with the merge base."""
    if base is None or base.error is None:
        return None
    return f"Not compared with the merge base: {base.error}."


def merge_base_payload(merge: MergeBase) -> str:
    """A merge base's signals as JSON text (kept in the state: a final answer for good, one not
    final as the last good answer should a re-read fail), with when it was read and failing."""
    rows = [
        {
            **{k: v for k, v in s._asdict().items() if not isinstance(v, datetime)},
            **{k: v.isoformat() for k, v in s._asdict().items() if isinstance(v, datetime)},
        }
        for s in merge.signals
    ]
    data: dict[str, object] = {"truncated": merge.truncated, "signals": rows}
    for name in ("read_at", "failing_since"):
        value = getattr(merge, name)
        if value is not None:
            data[name] = value.isoformat()
    if merge.failure is not None:
        data["failure"] = merge.failure
    return json.dumps(data)


def merge_base_of_payload(commit: str, payload: str) -> MergeBase:
    """The MergeBase kept as `payload` by merge_base_payload (ValueError when malformed)."""
    data = json.loads(payload)
    times = ("started_at", "completed_at", "created_at")
    signals = tuple(
        Signal(
            **{
                **row,
                "kind": Kind(row["kind"]),
                "rules": tuple(Rule(*r) for r in row.get("rules", ())),
                **{k: parse_optional_time(row.get(k)) for k in times},
            }
        )
        for row in data["signals"]
    )
    failure = data.get("failure")
    return MergeBase(
        commit,
        signals,
        truncated=bool(data["truncated"]),
        read_at=parse_optional_time(data.get("read_at")),
        failing_since=parse_optional_time(data.get("failing_since")),
        failure=failure if isinstance(failure, str) else None,
    )
