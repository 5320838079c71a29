"""Triage rows in process: required signals and the order.

The view through the CLI against the sandbox: e2e/test_triage.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from support import (
    REPO,
)

from bot.core.model import (
    FAILING_STATES,
    Kind,
    PullSnapshot,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
    group_of,
)
from bot.triage.rows import COUNT_GROUPS, TriageEntry, entry_for, ordered

NOW = datetime.now(UTC).replace(microsecond=0)


def _row(name: str, state: State, *, required: bool | None = None, since: datetime = NOW) -> Row:
    signal = Signal(name=name, kind=Kind.CHECK_RUN, github_state=state.value, required=required)
    return Row(signal, state, since, SinceSource.GITHUB)


def _entry(number: int, verdict: Verdict, *rows: Row) -> TriageEntry:
    report_ = Report(
        repo=REPO, number=number, title=f"t{number}", url=f"https://x/{number}",
        head_sha="a" * 40, draft=False, observed_at=NOW, verdict=verdict, rows=rows,
    )  # fmt: skip
    snapshot = PullSnapshot(repo=REPO, number=number, title=f"t{number}", author="a",
                            draft=False, head_sha="a" * 40, url=f"https://x/{number}")  # fmt: skip
    return entry_for(snapshot, report_, docs=())


def test_a_required_failure_comes_first_and_is_named() -> None:
    hour = timedelta(hours=1)
    entries = [
        _entry(1, Verdict.PASSING, _row("ok", State.SUCCESS)),
        _entry(2, Verdict.FAILING, _row("lint", State.FAILURE, required=False)),
        _entry(3, Verdict.PENDING, _row("slow", State.PENDING, since=NOW - hour)),
        _entry(
            4,
            Verdict.FAILING,
            _row("tests", State.TIMED_OUT, required=True),
            _row("build", State.PENDING, since=NOW - 2 * hour),
        ),
        _entry(5, Verdict.INCOMPLETE, _row("old", State.STALE, since=NOW - 5 * hour)),
        _entry(6, Verdict.INCOMPLETE, _row("older", State.STALE, since=NOW - 9 * hour)),
        _entry(7, Verdict.PENDING, _row("slower", State.PENDING, since=NOW - 3 * hour)),
    ]
    assert [e.number for e in ordered(entries)] == [4, 2, 6, 5, 7, 3, 1]
    required = entries[3]
    assert required.required_failing == ("tests",)
    assert required.oldest_unsettled is not None and required.oldest_unsettled.name == "build"
    assert dict(required.counts) == {"failing": 1, "pending": 1, "incomplete": 0, "passing": 0}
    assert entries[1].required_failing == ()


@pytest.mark.parametrize("state", list(State))
def test_a_row_is_tallied_by_its_state_as_its_group_says(state: State) -> None:
    entry = _entry(1, Verdict.PASSING, _row("one", state, required=True))
    group = group_of(state)
    assert entry.counts == {g: int(g == group.value) for g in COUNT_GROUPS}
    assert entry.required_failing == (("one",) if state in FAILING_STATES else ())
    unsettled = state in (State.PENDING, State.STALE)
    assert (entry.oldest_unsettled is not None) == unsettled
    named = (*entry.incomplete, *entry.pending)
    assert [n.name for n in named] == (
        ["one"] if group in (Verdict.INCOMPLETE, Verdict.PENDING) else []
    )
