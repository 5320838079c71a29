"""Issue 27: a failure's history in the pure core (bot.core.history), table-driven, plus the
property that history never changes a verdict, a state or the headline."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import at, run, snapshot, status

from bot.core.base import MergeBase
from bot.core.history import (
    BranchHistory,
    FailingIndex,
    HistoryInputs,
    attempts_of_payload,
    attempts_payload,
    base_record,
    branch_of_payload,
    branch_payload,
    earlier_attempts,
    elsewhere_of,
    with_history,
)
from bot.core.model import Attempt, BaseRecord, Elsewhere, Policy, PullSnapshot, Signal, State
from bot.core.reconcile import reconcile
from bot.render.comment import Renderer, headline
from bot.render.history import attempts_clause, base_branch_clause, elsewhere_clause
from bot.render.report import report_json

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
CI = {"workflow": "ci", "workflow_path": ".github/workflows/ci.yml", "event": "pull_request"}


def job(state: str, minute: int, run_id: int, **fields: Any) -> Signal:
    """An attempt of `tests` (run ids grow with each attempt, as GitHub's do)."""
    given = {**CI, **fields}
    when = at(13, minute)
    return run(
        given.pop("name", "tests"), state, started_at=when, completed_at=when,
        database_id=run_id, url=f"https://github.com/o/r/runs/{run_id}", **given,
    )  # fmt: skip


CURRENT = job("failure", 50, 30)


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        pytest.param([CURRENT], [], id="no earlier attempt"),
        pytest.param([job("success", 10, 10), CURRENT], [State.SUCCESS], id="passed before"),
        pytest.param(
            [job("failure", 30, 20), job("cancelled", 10, 10), CURRENT],
            [State.CANCELLED, State.FAILURE],
            id="oldest first whatever GitHub's order",
        ),
        pytest.param([job("success", 10, 10, name="test"), CURRENT], [], id="renamed: left out"),
        pytest.param(
            [job("success", 10, 10, workflow_path=".github/workflows/old.yml"), CURRENT],
            [],
            id="another workflow file: left out",
        ),
        pytest.param([job("success", 10, 10, event="push"), CURRENT], [], id="another event"),
        pytest.param([job("success", 10, 10, app="circleci"), CURRENT], [], id="another app"),
        pytest.param([CURRENT, job("success", 55, 40)], [], id="a newer run is no earlier attempt"),
    ],
)
def test_earlier_attempts(runs: list[Signal], expected: list[State]) -> None:
    assert [a.state for a in earlier_attempts(CURRENT, runs)] == expected


def test_a_status_s_earlier_states_are_its_attempts() -> None:
    states = [
        status("ci/jenkins", "failure", created_at=at(13, 50)),
        status("ci/jenkins", "success", created_at=at(13, 0)),
        status("ci/other", "success", created_at=at(12, 0)),
    ]
    found = earlier_attempts(states[0], states)
    assert found == (Attempt(State.SUCCESS, at(13, 0), None),)


def _numbered(number: int, signals: tuple[Signal, ...]) -> PullSnapshot:
    return replace(snapshot(*signals), number=number, head_sha=f"{number:040x}")


@pytest.mark.parametrize(
    ("failing_on", "expected"),
    [
        pytest.param({}, None, id="nowhere else"),
        pytest.param({2: 20}, Elsewhere(1, 3, at(13, 20)), id="one other"),
        pytest.param({2: 20, 3: 5}, Elsewhere(2, 3, at(13, 5)), id="since the earliest"),
        pytest.param({1: 1}, None, id="its own pull request is not elsewhere"),
    ],
)
def test_elsewhere(failing_on: dict[int, int], expected: Elsewhere | None) -> None:
    index = FailingIndex()
    for number in (1, 2, 3, 4):
        state = "failure" if number in failing_on or number == 1 else "success"
        minute = failing_on.get(number, 40)
        index.add(_numbered(number, (job(state, minute, 100 + number),)))
    index.add(_numbered(5, (job("failure", 1, 200, name="lint"),)))  # another check
    found = elsewhere_of(index, _numbered(1, (CURRENT,)))
    assert found[CURRENT.key] == (None if expected is None else expected._replace(of=4))


def base_commit(n: int, state: str | None, *, truncated: bool = False) -> MergeBase:
    signals = () if state is None else (job(state, 0, 1000 + n, event="push"),)
    return MergeBase(f"{n:040x}", signals, truncated=truncated)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        pytest.param(["success", "failure", None], (1, 3), id="counted over the commits read"),
        pytest.param([None, None], None, id="never ran there: no fact"),
        pytest.param(["success", "success"], (0, 2), id="failed on none"),
        pytest.param(["failure", "truncated"], (1, 1), id="an unread commit is not counted"),
    ],
)
def test_base_record(states: list[str | None], expected: tuple[int, int] | None) -> None:
    commits = tuple(
        base_commit(n, None, truncated=True) if s == "truncated" else base_commit(n, s)
        for n, s in enumerate(states)
    )
    record = base_record(BranchHistory("main", commits), CURRENT)
    if expected is None:
        assert record is None
        return
    assert record is not None
    assert (record.failed, record.of) == expected
    assert record.commits == tuple(
        c.commit for c, s in zip(commits, states, strict=True) if s == "failure"
    )


@pytest.mark.parametrize(
    ("attempts", "clause"),
    [
        ((), ""),
        (
            (Attempt(State.SUCCESS, None, "https://x.example/1"),),
            "passed on an earlier attempt of this commit ([attempt 1](https://x.example/1))",
        ),
        ((Attempt(State.FAILURE, None, None),), "also failed on an earlier attempt of this commit"),
        (
            (Attempt(State.FAILURE, None, None), Attempt(State.TIMED_OUT, None, None)),
            "also failed on 2 earlier attempts of this commit",
        ),
        (
            (Attempt(State.CANCELLED, None, None), Attempt(State.FAILURE, None, None)),
            "earlier attempts of this commit: attempt 1 was cancelled, attempt 2 failed",
        ),
    ],
)
def test_attempts_clause(attempts: tuple[Attempt, ...], clause: str) -> None:
    assert attempts_clause(attempts) == clause


def test_elsewhere_and_base_branch_clauses() -> None:
    since = "2026\u201110\u201105\u00a010:02\u00a0UTC"
    assert elsewhere_clause(Elsewhere(7, 41, at(10, 2))) == (
        f"also failing on 7 of 41 open pull requests since {since}"
    )
    record = BaseRecord("main", 3, 20, ())
    assert base_branch_clause(record, "https://github.com/o/r") == (
        "failed on 3 of [the last 20 `main` commits](https://github.com/o/r/commits/main)"
    )
    assert (
        base_branch_clause(BaseRecord("a`b", 0, 1, ()))
        == "failed on none of the last 1 ``a`b`` commit"
    )


def test_payloads_round_trip() -> None:
    attempts = (
        Attempt(State.SUCCESS, at(13, 0), "https://x.example/1"),
        Attempt(State.FAILURE, None, None),
    )
    assert attempts_of_payload(attempts_payload(attempts)) == attempts
    history = BranchHistory("main", (base_commit(1, "failure"), base_commit(2, None)), read_at=NOW)
    assert branch_of_payload(branch_payload(history)) == history
    for bad in ("{}", "[[1, 2]]", '[["nope", null, null]]', '[["success", 3, null]]'):
        with pytest.raises((ValueError, TypeError)):
            attempts_of_payload(bad)


# --- the property: history never changes what a signal is --------------------------------

RAW = ("success", "failure", "timed_out", "action_required", "cancelled", "in_progress", "neutral")
STATES = st.sampled_from(list(State))
ATTEMPTS = st.lists(
    st.builds(
        Attempt, STATES, st.none() | st.just(at(12, 0)), st.none() | st.just("https://x.example/a")
    ),
    max_size=4,
)


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    raws=st.lists(st.sampled_from(RAW), min_size=1, max_size=5),
    attempts=ATTEMPTS,
    elsewhere=st.none() | st.builds(Elsewhere, st.integers(1, 50), st.integers(50, 99), st.none()),
    base_states=st.lists(st.sampled_from([*RAW, None]), max_size=5),
)
def test_history_never_changes_a_verdict_a_state_or_the_headline(
    raws: list[str],
    attempts: list[Attempt],
    elsewhere: Elsewhere | None,
    base_states: list[str | None],
) -> None:
    signals = tuple(job(raw, 10 + i, 10 + i, name=f"job{i}") for i, raw in enumerate(raws))
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)
    branch = BranchHistory("main", tuple(base_commit(n, s) for n, s in enumerate(base_states)))
    inputs = HistoryInputs(
        attempts={s.key: tuple(attempts) for s in signals},
        elsewhere={s.key: elsewhere for s in signals},
        branch=branch,
    )
    told = with_history(report, inputs)
    assert told.verdict is report.verdict
    assert [r.state for r in told.rows] == [r.state for r in report.rows]
    assert headline(told.rows) == headline(report.rows)
    for row in told.rows:  # only failing rows carry a history
        if row.history is not None:
            assert row.state in (State.FAILURE, State.TIMED_OUT, State.ACTION_REQUIRED)
    body = Renderer().markdown(told)
    assert (
        body.split("### ", 1)[1].splitlines()[0]
        == Renderer().markdown(report).split("### ", 1)[1].splitlines()[0]
    )
    assert "flak" not in body.lower()


# --- the word the bot never writes -------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


def test_flaky_appears_nowhere_the_bot_writes() -> None:
    """No comment, report, page or log line says "flaky": the bot states facts, never a label
    (every string in bot/ and templates/ is what it can write)."""
    word = re.compile(r"fl[a4]k(y|iness|e)", re.IGNORECASE)
    sources = [*ROOT.joinpath("bot").rglob("*.py"), *ROOT.joinpath("templates").rglob("*")]
    said = [p for p in sources if p.is_file() and word.search(p.read_text(encoding="utf-8"))]
    assert said == []
    report = with_history(
        reconcile(snapshot(CURRENT), {}, Policy(), now=NOW),
        HistoryInputs(attempts={CURRENT.key: (Attempt(State.SUCCESS, at(13, 0), None),)}),
    )
    for text in (Renderer().markdown(report), report_json(report)):
        assert not word.search(text)
    assert "passed on an earlier attempt of this commit" in Renderer().markdown(report)


def test_the_rows_history_is_said_once_each() -> None:
    report = with_history(
        reconcile(snapshot(CURRENT), {}, Policy(), now=NOW),
        HistoryInputs(
            attempts={CURRENT.key: (Attempt(State.SUCCESS, at(13, 0), None),)},
            elsewhere={CURRENT.key: Elsewhere(2, 9, at(12, 0))},
            branch=BranchHistory("main", (base_commit(1, "failure"),)),
        ),
    )
    body = Renderer().markdown(report)
    for clause in ("earlier attempt", "also failing on 2 of 9", "failed on 1 of"):
        assert body.count(clause) == 1, clause
