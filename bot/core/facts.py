"""The facts key: a hash of every fact a report states (a fact left out is never updated)."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot.core.history import needs_history
from bot.core.merge_queue import queue_facts
from bot.core.model import BaseCheck, History, Reconciliation, Report, Row, Signal


def facts_key(report: Report) -> str:
    """A sha256 of every fact the report states: not observed_at, the title or fetch times."""
    rows = tuple(_row_facts(row) for row in report.rows)
    facts = (*_report_facts(report), rows, *_queue_facts(report))
    return hashlib.sha256(repr(facts).encode("utf-8")).hexdigest()


def _report_facts(report: Report) -> tuple[Any, ...]:
    """The facts of the report as a whole, before its rows'."""
    return (
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
    )


def _queue_facts(report: Report) -> tuple[Any, ...]:
    """Appended only when queued: other keys stay as they were."""
    if report.merge_queue is None:
        return ()
    return ("merge_queue", queue_facts(report.merge_queue))


@dataclass(frozen=True, slots=True)
class KeyText:
    """The text a report's facts key hashes, but for its first rows: those up to its last row
    that can tell a failure's history (failing check runs and statuses, first in a report's
    order), compressed. The key of the same report with only those rows' history told anew
    hashes it again (`rekeyed`) without the text of every other row: a failure's `elsewhere`
    moves on most failing heads when a few heads change. About 2 kB for a report of 60 rows
    (its text: about 18 kB)."""

    rows: int  # how many rows the report has
    told: int  # how many rows come first (they are told again): the last that needs_history
    head: int  # characters before the first row's text (the facts of the report as a whole)
    text: bytes  # zlib: the text before the first row's, then that after row `told - 1`'s


def keyed(report: Report) -> tuple[str, KeyText | None]:
    """facts_key of the report, and its KeyText (None where no row can tell a history)."""
    told = 1 + max((i for i, row in enumerate(report.rows) if needs_history(row)), default=-1)
    if not told:
        return facts_key(report), None
    first = [repr(_row_facts(row)) for row in report.rows[:told]]
    rest = [repr(_row_facts(row)) for row in report.rows[told:]]
    head, tail = _around(report, rest)
    text = head + ", ".join(first) + tail
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    packed = zlib.compress((head + tail).encode("utf-8"), 1)
    return key, KeyText(len(report.rows), told, len(head.encode("utf-8")), packed)


def rekeyed(report: Report, known: KeyText) -> str:
    """facts_key of a report that differs from the one `known` was made of in its first
    `known.told` rows at most (each row's history: bot.core.history.with_history), from the
    text of those rows alone. A report of another number of rows is keyed whole."""
    if len(report.rows) != known.rows:
        return facts_key(report)
    first = ", ".join(repr(_row_facts(row)) for row in report.rows[: known.told])
    around = zlib.decompress(known.text)
    sha = hashlib.sha256(around[: known.head])
    sha.update(first.encode("utf-8"))
    sha.update(around[known.head :])
    return sha.hexdigest()


def _around(report: Report, rest: list[str]) -> tuple[str, str]:
    """The text of the facts before the first row's text, and after the last told row's
    (`rest`: the rows' after it), as repr writes the tuple facts_key hashes."""
    before = ", ".join(repr(fact) for fact in _report_facts(report))
    after = "".join(", " + repr(fact) for fact in _queue_facts(report))
    # a tuple of one row is written "(row,)"
    rows_end = ",)" if len(report.rows) == 1 else "".join(", " + row for row in rest) + ")"
    return "(" + before + ", (", rows_end + after + ")"


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
