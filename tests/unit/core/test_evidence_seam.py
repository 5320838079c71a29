"""The docs-provider seam from the core's side: any provider's evidence becomes a row or a note.

A stand-in second provider (a deploy preview) is written here in a few lines, against
bot.core.evidence only: the core reconciles it without knowing who answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.core.evidence import HEAD_KEY, Judge, Since
from bot.core.model import (
    Kind,
    Policy,
    PullSnapshot,
    Reconciliation,
    Row,
    Signal,
    State,
    Verdict,
)
from bot.core.reconcile import reconcile

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
CONTEXT = "deploy/preview"


@dataclass(frozen=True)
class Preview:
    """A second provider's evidence: whether the preview of the head was deployed."""

    deployed: bool

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        state = State.SUCCESS if self.deployed else judge.aged(State.PENDING, since.at)
        finding = f"The preview of #{number} is {'up' if self.deployed else 'not up yet'}."
        rec = Reconciliation("preview", "site", None, None, self.deployed, None, True, finding)
        return Row(signal, state, since.at, since.source, rec)

    def note(self, *, number: int, judge: Judge) -> str:
        return f"The preview site knows pull request {number}."


def snapshot(*signals: Signal) -> PullSnapshot:
    return PullSnapshot(repo="o/r", number=12, title="t", author="a", draft=False,
                        head_sha="a" * 40, url="https://github.com/o/r/pull/12",
                        signals=signals)  # fmt: skip


def test_a_status_the_evidence_names_is_settled_by_it() -> None:
    status = Signal(CONTEXT, Kind.STATUS, "pending", created_at=NOW - timedelta(minutes=3))
    report = reconcile(snapshot(status), {CONTEXT: Preview(True)}, Policy(), now=NOW)
    (row,) = report.rows
    assert (row.state, report.verdict) == (State.SUCCESS, Verdict.PASSING)
    assert row.reconciliation is not None and row.reconciliation.provider == "preview"
    assert row.reconciliation.finding == "The preview of #12 is up."


def test_the_judge_ages_what_the_evidence_leaves_pending() -> None:
    status = Signal(CONTEXT, Kind.STATUS, "pending", created_at=NOW - timedelta(hours=3))
    report = reconcile(snapshot(status), {CONTEXT: Preview(False)}, Policy(), now=NOW)
    assert report.rows[0].state is State.STALE


def test_evidence_never_settles_a_check_run_of_the_same_name() -> None:
    run = Signal(CONTEXT, Kind.CHECK_RUN, "failure", app="ci", completed_at=NOW)
    report = reconcile(snapshot(run), {CONTEXT: Preview(True)}, Policy(), now=NOW)
    assert (report.rows[0].state, report.rows[0].reconciliation) == (State.FAILURE, None)


def test_evidence_about_the_head_is_a_note_not_a_row() -> None:
    status = Signal("ci/x", Kind.STATUS, "success", created_at=NOW)
    docs = {HEAD_KEY + "preview": Preview(True)}
    report = reconcile(snapshot(status), docs, Policy(), now=NOW)
    assert [r.signal.name for r in report.rows] == ["ci/x"]
    assert report.notes == ("The preview site knows pull request 12.",)
