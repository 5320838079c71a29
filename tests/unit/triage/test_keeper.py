"""The triage keeper's rows across cycles of one process (its memo): a report that only told
its failures' history anew (issue 31's changed cycle: a failure's `elsewhere` moved) keeps its
row, observed again, without computing it; the row must be what a fresh keeper computes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support import NOW, run, snapshot, status

from bot.core.history import HistoryInputs, with_history
from bot.core.model import Elsewhere, Policy, Report, State
from bot.core.reconcile import reconcile
from bot.state.store import Store
from bot.triage.keeper import RowMemo, TriageKeeper

SNAPSHOT = snapshot(
    run("build", "failure", database_id=1), status("ci/x", "pending"), run("lint", "success")
)
LATER = NOW + timedelta(minutes=5)


def _told(report: Report, heads: int) -> Report:
    key = SNAPSHOT.signals[0].key
    return with_history(report, HistoryInputs(elsewhere={key: Elsewhere(heads, 40, NOW)}))


FIRST = _told(reconcile(SNAPSHOT, {}, Policy(), now=NOW), 3)
Change = Callable[[Report], Report]


def _rows(where: Path, cycles: list[Report]) -> list[tuple[Any, ...]]:
    """The triage rows a process keeps after these cycles, one keeper a cycle (a shared memo)."""
    memo: RowMemo = {}
    with Store.open(where) as store:
        for report in cycles:
            keeper = TriageKeeper(store, clock=lambda: LATER, docs=(), memo=memo)
            keeper.pull_done(SNAPSHOT, report)
            keeper.pulls_done()
        return [
            (r.title, r.author, r.draft, r.head_sha, r.verdict, r.url, r.details, r.observed_at)
            for r in store.triage_rows()
        ]


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("elsewhere moved, observed again", lambda r: replace(_told(r, 4), observed_at=LATER)),
        ("elsewhere gone", lambda r: replace(_told(r, 0), observed_at=LATER)),
        (
            "a row's state changed too",
            lambda r: replace(
                _told(r, 4), rows=(*r.rows[:1], r.rows[1]._replace(state=State.STALE), *r.rows[2:])
            ),
        ),
        ("the head moved", lambda r: replace(_told(r, 4), head_sha="c" * 40)),
    ],
)
def test_the_row_of_a_report_told_anew_is_a_fresh_keepers(
    tmp_path: Path, case: str, change: Change
) -> None:
    after = change(FIRST)
    kept = _rows(tmp_path / "process.sqlite3", [FIRST, after])
    fresh = _rows(tmp_path / "fresh.sqlite3", [after])
    assert kept == fresh, case
    assert kept[0][-1] == after.observed_at
