"""The JSON report (interface.md schema): raw source text, as plain data."""

from __future__ import annotations

import json
from typing import Any

from bot.core.base import base_finding, unverified_finding
from bot.core.model import (
    REPORT_SCHEMA,
    Annotation,
    BaseCheck,
    History,
    Reconciliation,
    Report,
    RequiredChecks,
    Row,
)
from bot.render.escape import iso_utc
from bot.render.queue import queue_dict


def report_dict(report: Report) -> dict[str, Any]:
    """Return the JSON report (interface.md schema, raw source text) as plain data."""
    return {
        "schema": REPORT_SCHEMA,
        "repo": report.repo,
        "number": report.number,
        "title": report.title,
        "url": report.url,
        "head_sha": report.head_sha,
        "draft": report.draft,
        "observed_at": iso_utc(report.observed_at),
        "verdict": str(report.verdict),
        "stale_after_minutes": int(report.stale_after.total_seconds() // 60),
        "truncated": report.truncated,
        "notes": list(report.notes),
        "required_checks": _required_dict(report.required_checks),
        "merge_queue": queue_dict(report.merge_queue),
        "signals": [_signal_dict(row) for row in report.rows],
    }


def _required_dict(checks: RequiredChecks | None) -> dict[str, Any]:
    """`{"read": true, "contexts": [...], "rules": [...]}` or `{"read": false, "error": ...}`;
    `rules[i]` says where `contexts[i]` comes from (every rule, joined by " and ")."""
    if checks is None:
        return {"read": False, "error": "GitHub gave no base branch for this pull request"}
    if not checks.read:
        return {"read": False, "error": checks.error}
    return {
        "read": True,
        "contexts": [c.name for c in checks.contexts],
        "rules": [" and ".join(rule.words() for rule in c.rules) for c in checks.contexts],
        "apps": [c.app_id for c in checks.contexts],
    }


def report_json(report: Report) -> str:
    """Return the JSON report as text (indent 2)."""
    return json.dumps(report_dict(report), indent=2, ensure_ascii=False)


def _signal_dict(row: Row) -> dict[str, Any]:
    signal = row.signal
    return {
        "name": signal.name,
        "kind": str(signal.kind),
        "app": signal.app,
        "app_id": signal.app_id,
        "workflow": signal.workflow,
        "workflow_path": signal.workflow_path,
        "event": signal.event,
        "github_state": signal.github_state,
        "state": str(row.state),
        "required": signal.required,
        "url": signal.url,
        "description": signal.description,
        "summary": signal.summary,
        "since": iso_utc(row.since),
        "since_source": str(row.since_source),
        "finding": " ".join(
            t for t in (row.finding, base_finding(row.base), unverified_finding(row.base)) if t
        )
        or None,
        "base": _base_dict(row.base),
        "history": _history_dict(row.history),
        "annotations": _annotations_list(row.annotations),
        "reconciliation": _reconciliation_dict(row.reconciliation),
    }


def _base_dict(base: BaseCheck | None) -> dict[str, Any] | None:
    """interface.md's `base`: null where not looked up or where the merge base was unread."""
    if base is None or base.commit is None or base.error is not None:
        return None
    return {
        "commit": base.commit,
        "state": None if base.state is None else str(base.state),
        "url": base.url,
        "since": iso_utc(base.since),
    }


def _history_dict(history: History | None) -> dict[str, Any] | None:
    """interface.md's `history`: null where no fact is known (or the signal is not failing)."""
    if history is None or history.empty:
        return None
    elsewhere, base = history.elsewhere, history.base_branch
    return {
        "attempts": [
            {"state": str(a.state), "at": iso_utc(a.at), "url": a.url} for a in history.attempts
        ],
        "elsewhere": None
        if elsewhere is None
        else {"heads": elsewhere.heads, "of": elsewhere.of, "since": iso_utc(elsewhere.since)},
        "base_branch": None
        if base is None
        else {
            "branch": base.branch,
            "failed": base.failed,
            "of": base.of,
            "commits": list(base.commits),
        },
    }


def _annotations_list(annotations: tuple[Annotation, ...] | None) -> list[dict[str, Any]] | None:
    """The failure annotations the row quotes (GitHub's text as given); null where not asked
    (not a failing check run) or not read."""
    if annotations is None:
        return None
    return [
        {"path": a.path, "start_line": a.start_line, "end_line": a.end_line, "message": a.message}
        for a in annotations
    ]


def _reconciliation_dict(rec: Reconciliation | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {
        "provider": rec.provider,
        "project": rec.project,
        "build_id": rec.build_id,
        "build_state": rec.build_state,
        "success": rec.success,
        "builds_for_commit": rec.builds_for_commit,
        "divergent": rec.divergent,
        "finding": rec.finding,
        "build_url": rec.build_url,
        "notification": rec.notification,
        "build_created": iso_utc(rec.build_created),
        "build_finished": iso_utc(rec.build_finished),
    }
