"""What a pass keeps of a head's signals (bot.cycle.model.FromSignals) is what computing it
from scratch gives: a failure's index entries, its failing signals and its failing checks,
kept only while a listing gives the very same signals again."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from support import RECENT, run, snapshot, status

from bot.core.history import FailingIndex, check_key, elsewhere_of
from bot.core.model import FAILING_STATES, Kind, PullSnapshot, Signal
from bot.core.reconcile import dedupe, github_state
from bot.cycle.model import FromSignals, Reports

EARLIER = RECENT - timedelta(minutes=30)

TABLE: dict[str, tuple[Signal, ...]] = {
    "none": (),
    "passing": (run("lint", "success"), status("ci/docs", "success")),
    "pending": (run("lint", "in_progress"), status("ci/docs", "pending")),
    "a failing run": (run("lint", "success"), run("tests", "failure", database_id=2)),
    "a failing status": (status("ci/legacy", "error"), run("lint", "success")),
    "superseded failure": (
        run("tests", "failure", database_id=1, started_at=EARLIER, completed_at=EARLIER),
        run("tests", "success", database_id=2),
    ),
    "failure superseding a pass": (
        run("tests", "success", database_id=1, started_at=EARLIER, completed_at=EARLIER),
        run("tests", "failure", database_id=2),
    ),
    "two events": (
        run("tests", "failure", event="push", database_id=1),
        run("tests", "failure", event="pull_request", database_id=2, completed_at=EARLIER),
    ),
    "expected": (Signal("required", Kind.EXPECTED, "expected"), run("x", "timed_out")),
    "action required": (run("dco", "action_required"), run("lint", "cancelled")),
}


def _scratch_entries(signals: tuple[Signal, ...]) -> dict[tuple[object, ...], datetime | None]:
    """FailingIndex.add as it was written before its entries were kept."""
    index = FailingIndex()
    if any(github_state(s) in FAILING_STATES for s in signals):
        for signal in dedupe(signals):
            if signal.kind is Kind.EXPECTED or github_state(signal) not in FAILING_STATES:
                continue
            seen = index.failing.setdefault(check_key(signal), {})
            since = signal.created_at if signal.kind is Kind.STATUS else signal.completed_at
            since = since or signal.started_at
            known = seen.get(1)
            if 1 not in seen or (since is not None and (known is None or since < known)):
                seen[1] = since
    return {key: by[1] for key, by in index.failing.items()}


def _kept_entries(found: FromSignals) -> dict[tuple[object, ...], datetime | None]:
    index = FailingIndex()
    index.add(replace(snapshot(*found.signals), number=1), found.entries)
    return {key: by[1] for key, by in index.failing.items()}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_what_is_kept_is_what_a_rebuild_computes(name: str) -> None:
    signals = TABLE[name]
    found = FromSignals.of(signals)
    assert _kept_entries(found) == _scratch_entries(signals)
    assert list(found.failing) == [
        s for s in signals if s.kind is not Kind.EXPECTED and github_state(s) in FAILING_STATES
    ]
    assert list(found.checks) == [
        s
        for s in dedupe(signals)
        if s.kind in (Kind.CHECK_RUN, Kind.STATUS) and github_state(s) in FAILING_STATES
    ]


def _open(number: int, signals: tuple[Signal, ...]) -> PullSnapshot:
    return replace(snapshot(*signals), number=number, head_sha=f"{number:040x}")


def test_a_kept_index_and_elsewhere_are_those_built_from_scratch() -> None:
    pulls = [_open(n, TABLE[name]) for n, name in enumerate(sorted(TABLE), start=1)]
    pulls.append(_open(99, TABLE["a failing run"]))
    reports, kept, scratch = Reports(), FailingIndex(), FailingIndex()
    for pull in pulls:
        kept.add(pull, reports.from_signals(pull).entries)
        scratch.add(pull)
    assert (kept.pulls, kept.failing) == (scratch.pulls, scratch.failing)
    for pull in pulls:
        assert elsewhere_of(kept, pull, reports.from_signals(pull).failing) == elsewhere_of(
            scratch, pull
        )
    assert elsewhere_of(kept, pulls[-1])  # the same check fails on another: not vacuous


def test_kept_while_the_signals_are_the_very_same_and_computed_again_otherwise() -> None:
    reports = Reports()
    first = _open(5, TABLE["a failing run"])
    kept = reports.from_signals(first)
    assert reports.from_signals(replace(first, title="renamed")) is kept  # the same tuple
    equal = _open(5, tuple(TABLE["a failing run"]))
    copied = _open(5, tuple(list(equal.signals)))  # equal signals, another tuple
    assert copied.signals is not first.signals
    assert reports.from_signals(copied) is not kept
    assert reports.from_signals(copied) == FromSignals.of(copied.signals)
    fixed = _open(5, TABLE["passing"])
    assert reports.from_signals(fixed) == FromSignals.of(fixed.signals)
    assert reports.from_signals(fixed).entries == ()
    reports.keep_only("example/omni", [])
    assert reports.from_signals(first) is not kept  # forgotten once no longer open
