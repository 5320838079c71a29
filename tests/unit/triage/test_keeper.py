"""The triage rows a fresh process keeps (bot.triage.keeper): a row the state holds, computed
from a report of the same facts key, observed since the same time, by the same code with the
same sources counting stuck docs builds, for the same title and author, is taken as it is;
anything else is computed again (issue 31: `once` does not compute 2,000 rows again)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from support import NOW as TOLD_NOW
from support import run, snapshot, status

from bot.core.facts import facts_key
from bot.core.history import HistoryInputs, with_history
from bot.core.model import (
    Elsewhere,
    Kind,
    Policy,
    PullSnapshot,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
)
from bot.core.reconcile import reconcile
from bot.sources.base import Source
from bot.state.store import Store
from bot.triage.keeper import RowMemo, TriageKeeper, stored_entries

REPO = "octo/omni"
NOW = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
URL = f"https://github.com/{REPO}/pull/1"
SNAPSHOT = PullSnapshot(REPO, 1, "Fix", "alice", False, "a" * 40, URL)
FAILING = Row(Signal("lint", Kind.CHECK_RUN, "failure", required=True), State.FAILURE, NOW,
              SinceSource.GITHUB)  # fmt: skip
REPORT = Report(REPO, 1, "Fix", URL, "a" * 40, False, NOW, Verdict.FAILING, rows=(FAILING,))
KEY = facts_key(REPORT)


class Docs:
    """What a docs host's source is to a triage row: its name, and the signals it recognises."""

    name = "docs"

    def recognises(self, signal: Signal) -> bool:
        return signal.kind is Kind.STATUS


DOCS = (cast(Source, Docs()),)  # the sources that count stuck docs builds


def _keeper(store: Store, *, version: str = "v1", docs: tuple[Source, ...] = DOCS) -> TriageKeeper:
    return TriageKeeper(store, clock=lambda: LATER, docs=docs, version=version)


def _kept(tmp_path: Path, version: str = "v1") -> Store:
    """A state whose row of REPORT was written by a first process (of `version`), then marked
    (its failing count made 7): taken as kept, it stays 7; computed again, it is 1."""
    store = Store.open(str(tmp_path / "state.sqlite3"))
    keeper = _keeper(store, version=version)
    keeper.pull_done(SNAPSHOT, REPORT, KEY)
    keeper.repo_done(REPO, [1])
    [row] = store.triage_rows()
    details = row.details.replace('"failing":1', '"failing":7')
    assert details != row.details
    store.put_triage(REPO, 1, title=row.title, author=row.author, draft=row.draft,
                     head_sha=row.head_sha, verdict=row.verdict, url=row.url, details=details,
                     observed_at=row.observed_at, now=NOW)  # fmt: skip
    return store


def _failing(store: Store) -> int:
    [entry] = stored_entries(store)
    return entry.counts["failing"]


def test_a_row_computed_from_the_same_facts_by_this_code_is_taken_as_kept(tmp_path: Path) -> None:
    with _kept(tmp_path) as store:
        keeper = _keeper(store)  # a fresh process: nothing in its memory
        keeper.pull_done(SNAPSHOT, REPORT, KEY)
        keeper.repo_done(REPO, [1])
        assert _failing(store) == 7  # not computed again (the first process's row)
        [row] = store.triage_rows()
        assert row.updated_at == LATER  # read again: dated
        assert json.loads(row.details)["from"].endswith(KEY)


@pytest.mark.parametrize(
    ("first", "snapshot", "report", "key", "version", "docs"),
    [
        ("v1", SNAPSHOT, REPORT, "other", "v1", DOCS),  # other facts
        ("v1", SNAPSHOT, replace(REPORT, observed_at=LATER), KEY, "v1", DOCS),  # observed since
        ("v1", replace(SNAPSHOT, title="Fix it"), REPORT, KEY, "v1", DOCS),  # retitled
        ("v1", replace(SNAPSHOT, author="bob"), REPORT, KEY, "v1", DOCS),
        ("v1", SNAPSHOT, REPORT, KEY, "v2", DOCS),  # another version of the bot's code
        ("v1", SNAPSHOT, REPORT, KEY, "v1", ()),  # no source counts stuck docs builds now
        ("v1", SNAPSHOT, REPORT, KEY, "", DOCS),  # no version known: never taken
        ("v1", SNAPSHOT, REPORT, "", "v1", DOCS),  # no facts key known: never taken
        ("", SNAPSHOT, REPORT, KEY, "v1", DOCS),  # a row that names no origin (an older bot)
    ],
    ids=["facts", "observed", "title", "author", "version", "docs", "no-version", "no-key",
         "no-origin"],
)  # fmt: skip
def test_any_other_row_is_computed_again(
    tmp_path: Path, first: str, snapshot: PullSnapshot, report: Report, key: str, version: str,
    docs: tuple[Source, ...],
) -> None:  # fmt: skip
    with _kept(tmp_path, first) as store:
        keeper = _keeper(store, version=version, docs=docs)
        keeper.pull_done(snapshot, report, key)
        keeper.repo_done(REPO, [1])
        assert _failing(store) == 1


def test_a_row_of_the_same_report_in_one_process_is_not_computed_again(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "state.sqlite3")) as store:
        memo: RowMemo = {}
        keeper = TriageKeeper(store, clock=lambda: NOW, docs=DOCS, memo=memo)
        keeper.pull_done(SNAPSHOT, REPORT, "")
        values = memo[(REPO, 1)][3]
        again = TriageKeeper(store, clock=lambda: LATER, docs=DOCS, memo=memo)
        again.pull_done(SNAPSHOT, REPORT, "")
        assert memo[(REPO, 1)][3] is values


# -- one process's rows across cycles (its memo): a report that only told its failures' history
# anew (issue 31's changed cycle: a failure's `elsewhere` moved) keeps its row, observed again and
# naming the new facts key, without computing it; the row must be what a fresh keeper computes.

TOLD_SNAPSHOT = snapshot(
    run("build", "failure", database_id=1), status("ci/x", "pending"), run("lint", "success")
)
TOLD_LATER = TOLD_NOW + timedelta(minutes=5)


def _told_anew(report: Report, heads: int) -> Report:
    key = TOLD_SNAPSHOT.signals[0].key
    return with_history(report, HistoryInputs(elsewhere={key: Elsewhere(heads, 40, TOLD_NOW)}))


TOLD_FIRST = _told_anew(reconcile(TOLD_SNAPSHOT, {}, Policy(), now=TOLD_NOW), 3)
Change = Callable[[Report], Report]


def _rows_after(where: Path, cycles: list[Report]) -> list[tuple[Any, ...]]:
    """The triage rows a process keeps after these cycles, one keeper a cycle (a shared memo)."""
    memo: RowMemo = {}
    with Store.open(where) as store:
        for report in cycles:
            keeper = TriageKeeper(store, clock=lambda: TOLD_LATER, docs=(), memo=memo, version="v1")
            keeper.pull_done(TOLD_SNAPSHOT, report, facts_key(report))
            keeper.pulls_done()
        return [
            (r.title, r.author, r.draft, r.head_sha, r.verdict, r.url, r.details, r.observed_at)
            for r in store.triage_rows()
        ]


@pytest.mark.parametrize(
    ("case", "change"),
    [
        (
            "elsewhere moved, observed again",
            lambda r: replace(_told_anew(r, 4), observed_at=TOLD_LATER),
        ),
        ("elsewhere gone", lambda r: replace(_told_anew(r, 0), observed_at=TOLD_LATER)),
        (
            "a row's state changed too",
            lambda r: replace(
                _told_anew(r, 4),
                rows=(*r.rows[:1], r.rows[1]._replace(state=State.STALE), *r.rows[2:]),
            ),
        ),
        ("the head moved", lambda r: replace(_told_anew(r, 4), head_sha="c" * 40)),
    ],
)
def test_the_row_of_a_report_told_anew_is_a_fresh_keepers(
    tmp_path: Path, case: str, change: Change
) -> None:
    after = change(TOLD_FIRST)
    kept = _rows_after(tmp_path / "process.sqlite3", [TOLD_FIRST, after])
    fresh = _rows_after(tmp_path / "fresh.sqlite3", [after])
    assert kept == fresh, case
    assert kept[0][-1] == after.observed_at
