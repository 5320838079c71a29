"""A report whose only change is its failures' `elsewhere` (issue 31's changed cycle), told and
keyed from what was kept of its last report, against the same report built from scratch: the
rows (bot.core.history.with_elsewhere), the facts key (bot.core.facts.rekeyed, from KeyText)
and the triage row (bot.core.history.told_anew) must be exactly those of a rebuild."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import run, snapshot, status

from bot.core.base import MergeBase
from bot.core.facts import facts_key, keyed, rekeyed
from bot.core.history import BranchHistory, HistoryInputs, told_anew, with_elsewhere, with_history
from bot.core.model import (
    Attempt,
    Elsewhere,
    Policy,
    QueueEntry,
    QueueFinding,
    QueueState,
    Report,
    Signal,
    State,
)
from bot.core.reconcile import reconcile
from bot.triage.rows import entry_for

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
RUNS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
STATES = ("failure", "timed_out", "action_required", "success", "in_progress", "cancelled")
NAMES = ("build", "lint", "tests", "docs", "Zeta", "alpha")
QUEUED = QueueFinding(QueueEntry(QueueState.QUEUED, "QUEUED", position=2), checks=3, passed=1)


def _signal(kind: str, name: str, state: str, n: int) -> Signal:
    when = NOW - timedelta(minutes=n)
    if kind == "status":
        raw = {"failure": "failure", "timed_out": "error", "success": "success"}.get(state)
        return status(name, raw or "pending", created_at=when, url=f"https://ci/{n}")
    return run(name, state, database_id=100 + n, started_at=when, url=f"https://ci/runs/{n}")


signals = st.lists(
    st.tuples(st.sampled_from(("run", "status")), st.sampled_from(NAMES), st.sampled_from(STATES)),
    max_size=9,
    unique_by=lambda t: (t[0], t[1]),
).map(lambda found: tuple(_signal(*one, n) for n, one in enumerate(found)))
elsewhere = st.none() | st.builds(
    Elsewhere,
    st.integers(1, 40),
    st.integers(40, 60),
    st.none() | st.integers(0, 300).map(lambda m: NOW - timedelta(minutes=m)),
)
attempts = st.lists(
    st.builds(Attempt, st.sampled_from((State.SUCCESS, State.FAILURE)), st.just(NOW), st.none()),
    max_size=2,
).map(tuple)


def _inputs(given: tuple[Signal, ...], draw: Any) -> HistoryInputs:
    keys = [s.key for s in given]
    base = MergeBase("b" * 40, tuple(s._replace(event="push") for s in given[:2]))
    return HistoryInputs(
        attempts={k: draw(attempts) for k in keys},
        elsewhere={k: draw(elsewhere) for k in keys},
        branch=draw(st.sampled_from((None, BranchHistory("main", (base,))))),
    )


def _report(given: tuple[Signal, ...], *, queued: bool) -> Report:
    report = reconcile(snapshot(*given), {}, Policy(), now=NOW)
    return replace(report, merge_queue=QUEUED) if queued else report


@RUNS
@given(signals, st.booleans(), st.data())
def test_a_report_told_another_elsewhere_is_what_a_rebuild_gives(
    given: tuple[Signal, ...], queued: bool, data: st.DataObject
) -> None:
    before = _inputs(given, data.draw)
    after = replace(before, elsewhere={s.key: data.draw(elsewhere) for s in given})
    last = with_history(_report(given, queued=queued), before)
    key, text = keyed(last)
    assert key == facts_key(last)

    first = None if text is None else text.told
    patched = replace(last, rows=with_elsewhere(last.rows, after.elsewhere, first=first))
    scratch = with_history(_report(given, queued=queued), after)
    assert patched == scratch
    assert (facts_key(patched) if text is None else rekeyed(patched, text)) == facts_key(scratch)
    # a triage row shows no history: the last report's row, observed again, is a rebuild's
    assert told_anew(last, patched)
    assert entry_for(snapshot(*given), patched, docs=()) == entry_for(
        snapshot(*given), scratch, docs=()
    )


FAIL, PASS = run("tests", "failure", database_id=1), run("build", "success")


@pytest.mark.parametrize(
    ("case", "given", "queued"),
    [
        ("no row: no text (nothing to tell)", (), False),
        ("one failing row: a tuple of one", (FAIL,), False),
        ("one passing row: no row tells a history", (PASS,), False),
        ("a failing row, then passing ones", (FAIL, PASS, run("z", "success")), False),
        ("every row failing", (FAIL, status("ci/x", "failure")), False),
        ("queued: the merge queue's facts after the rows", (FAIL, PASS), True),
    ],
)
def test_the_key_from_the_text_kept_is_the_whole_key(
    case: str, given: tuple[Signal, ...], queued: bool
) -> None:
    report = _report(given, queued=queued)
    key, text = keyed(report)
    assert key == facts_key(report), case
    assert (text is None) == (FAIL not in given), case
    if text is not None:
        told = with_history(report, HistoryInputs(elsewhere={FAIL.key: Elsewhere(3, 9, NOW)}))
        assert any(row.history is not None for row in told.rows)
        assert rekeyed(told, text) == facts_key(told) != key, case


def test_a_report_of_other_rows_is_keyed_whole() -> None:
    _, text = keyed(_report((FAIL, PASS), queued=False))
    assert text is not None
    other = _report((FAIL, PASS, run("more", "success")), queued=False)
    assert rekeyed(other, text) == facts_key(other)


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("a row's state", lambda r: replace(r, rows=(r.rows[0]._replace(state=State.STALE),))),
        ("the verdict", lambda r: replace(r, verdict=r.verdict.PASSING)),
        ("the head", lambda r: replace(r, head_sha="c" * 40)),
        ("the title", lambda r: replace(r, title="another")),
        ("a row more", lambda r: replace(r, rows=(*r.rows, r.rows[0]))),
    ],
)
def test_anything_but_the_history_told_is_not_told_anew(case: str, change: Any) -> None:
    report = with_history(_report((FAIL,), queued=False), HistoryInputs())
    assert told_anew(report, replace(report, observed_at=NOW + timedelta(hours=1)))
    assert not told_anew(report, change(report)), case
