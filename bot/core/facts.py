"""The facts key: a hash of every fact a report states (a fact left out is never updated)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.core.merge_queue import queue_facts
from bot.core.model import BaseCheck, History, Reconciliation, Report, Row, Signal


def facts_key(report: Report) -> str:
    """A sha256 of every fact the report states: not observed_at, the title or fetch times."""
    rows = tuple(_row_facts(row) for row in report.rows)
    facts: tuple[Any, ...] = (
        report.repo,
        report.number,
        report.url,
        report.head_sha,
        report.draft,
        report.verdict.value,
        report.stale_after.total_seconds(),
        report.truncated,
        report.notes,
        _required_facts(report),
        rows,
    )
    if report.merge_queue is not None:  # appended only when queued: other keys stay as they were
        facts = (*facts, "merge_queue", queue_facts(report.merge_queue))
    return hashlib.sha256(repr(facts).encode("utf-8")).hexdigest()


def core_key(report: Report) -> str:
    """The facts key of the report without what a second read of GitHub's adds to its rows
    (the merge-base findings, the quoted annotations): equal to facts_key where it has none.

    A run with no state compares it with its comment's stamp: the same core facts, with a
    failed read of the merge base's checks or of annotations, is no new fact (the comment is
    left as it is)."""
    if all(
        row.base is None and row.annotations is None and row.history is None for row in report.rows
    ):
        return facts_key(report)
    rows = tuple(row._replace(base=None, annotations=None, history=None) for row in report.rows)
    return facts_key(replace(report, rows=rows))


def _required_facts(report: Report) -> tuple[Any, ...] | None:
    checks = report.required_checks
    if checks is None:
        return None
    contexts = tuple((c.name, c.app_id, tuple(c.rules)) for c in checks.contexts)
    return (checks.base, checks.read, checks.error, contexts)


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _row_facts(row: Row) -> tuple[Any, ...]:
    """Plain values only (str, float, bool, None): their repr is fast and stable."""
    plain = (
        *_signal_facts(row.signal),
        row.state.value,
        _ts(row.since),
        row.since_source.value,
        row.finding,
        _evidence_facts(row.reconciliation),
    )
    on_base = None if row.base is None else _base_facts(row.base)
    # appended only where looked up: the facts of a report without a base finding keep their key
    facts = plain if on_base is None else (*plain, on_base)
    # the same for the quoted annotations (a row quoting none keeps its key)
    facts = facts if row.annotations is None else (*facts, "annotations", tuple(row.annotations))
    # and for the failure's history (a row with none keeps its key)
    return facts if row.history is None else (*facts, "history", _history_facts(row.history))


def _signal_facts(s: Signal) -> tuple[Any, ...]:
    return (
        s.name,
        s.kind.value,
        s.github_state,
        s.app,
        s.workflow,
        s.url,
        s.description,
        s.summary,
        _ts(s.started_at),
        _ts(s.completed_at),
        _ts(s.created_at),
        s.required,
        s.database_id,
        s.event,
        s.workflow_path,
        s.app_id,
        tuple(s.rules),
    )


def _evidence_facts(rec: Reconciliation | None) -> tuple[Any, ...] | None:
    if rec is None:
        return None
    return (
        rec.provider,
        rec.project,
        rec.build_id,
        rec.build_state,
        rec.success,
        rec.builds_for_commit,
        rec.divergent,
        rec.finding,
        rec.build_url,
        rec.notification,
        _ts(rec.build_created),
        _ts(rec.build_finished),
    )


def _base_facts(base: BaseCheck) -> tuple[Any, ...]:
    on_base: tuple[Any, ...] = (
        base.commit, base.state and base.state.value, base.url, _ts(base.since), base.error
    )  # fmt: skip
    if base.workflow_ran:  # appended only when true: the keys of others stay
        on_base = (*on_base, "workflow ran")
    if base.unverified_since is not None:  # appended only when said: the key stays
        on_base = (*on_base, _ts(base.unverified_since), base.failure, _ts(base.read_at))
    return on_base


def _history_facts(history: History) -> tuple[Any, ...]:
    attempts = tuple((a.state.value, _ts(a.at), a.url) for a in history.attempts)
    elsewhere = history.elsewhere
    return (
        attempts,
        None if elsewhere is None else (elsewhere.heads, elsewhere.of, _ts(elsewhere.since)),
        None if history.base_branch is None else tuple(history.base_branch),
    )
