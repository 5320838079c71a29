"""Each failing signal against the merge base: what the same signal reported there (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
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

    @property
    def final(self) -> bool:
        """Every signal read on the merge base has settled: the answer will not change."""
        return self.error is None and not any(
            github_state(s) is State.PENDING for s in self.signals
        )


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
        return BaseCheck(merge.commit)
    found = reduce(lambda kept, s: s if newer(s, kept) else kept, matches)
    when = found.created_at if found.kind is Kind.STATUS else found.completed_at
    return BaseCheck(merge.commit, github_state(found), found.url, when or found.started_at)


def base_finding(base: BaseCheck | None) -> str | None:
    """The sentence that says why a failing signal was not compared with the merge base."""
    if base is None or base.error is None:
        return None
    return f"Not compared with the merge base: {base.error}."


def merge_base_payload(merge: MergeBase) -> str:
    """A merge base's signals as JSON text (kept in the state once final)."""
    rows = [
        {
            **{k: v for k, v in s._asdict().items() if not isinstance(v, datetime)},
            **{k: v.isoformat() for k, v in s._asdict().items() if isinstance(v, datetime)},
        }
        for s in merge.signals
    ]
    return json.dumps({"truncated": merge.truncated, "signals": rows})


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
    return MergeBase(commit, signals, truncated=bool(data["truncated"]))
