"""Each failing signal against the merge base (bot.core.base), and how the comment says it."""

from __future__ import annotations

from datetime import timedelta

from support import NOW, OLD, run, snapshot, status

from bot.core.base import (
    MergeBase,
    judged,
    merge_base_of_payload,
    merge_base_payload,
    with_base,
)
from bot.core.facts import facts_key
from bot.core.model import Policy, State
from bot.core.reconcile import reconcile
from bot.render.comment import Renderer, headline_counts
from bot.render.report import report_dict

BASE = "c" * 40


def report_of(*signals: object, merge: MergeBase) -> object:
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)  # type: ignore[arg-type]
    return with_base(report, merge)


def base_of(report: object, name: str) -> object:
    return next(r.base for r in report.rows if r.signal.name == name)  # type: ignore[attr-defined]


def test_the_same_signal_any_event_is_found_on_the_merge_base() -> None:
    head = (run("tests", "failure", workflow="ci", event="pull_request"), run("lint", "success"))
    on_base = (
        run("tests", "failure", workflow="ci", event="push", completed_at=OLD, url="u"),
        run("tests", "success", workflow="other"),  # another workflow: another signal
    )
    report = report_of(*head, merge=MergeBase(BASE, on_base))
    found = base_of(report, "tests")
    assert (found.commit, found.state, found.since, found.url) == (BASE, State.FAILURE, OLD, "u")
    assert base_of(report, "lint") is None  # a passing signal is not looked up
    assert "1 failing (1 also on the merge base)" in headline_counts(report.rows)


def test_a_workflow_file_of_the_same_name_is_another_signal() -> None:
    ci = ".github/workflows/ci.yml"
    head = run("tests", "failure", workflow="CI", workflow_path=ci)
    other = run("tests", "failure", workflow="CI", workflow_path=".github/workflows/nightly.yml")
    report = report_of(head, merge=MergeBase(BASE, (other,)))
    assert base_of(report, "tests").state is None  # not run there: nightly.yml is not ci.yml
    same = run("tests", "success", workflow="CI", workflow_path=ci, event="push")
    assert (
        base_of(report_of(head, merge=MergeBase(BASE, (other, same))), "tests").state
        is State.SUCCESS
    )


def test_the_newest_run_on_the_merge_base_speaks_for_it() -> None:
    on_base = (
        run("tests", "failure", started_at=OLD, completed_at=OLD),
        run("tests", "success", started_at=OLD + timedelta(minutes=5)),  # a re-run that passed
    )
    report = report_of(run("tests", "failure"), merge=MergeBase(BASE, on_base))
    assert base_of(report, "tests").state is State.SUCCESS
    assert "also on the merge base" not in headline_counts(report.rows)


def test_not_run_truncated_and_unreadable_are_told_apart() -> None:
    failing = status("ci/jenkins", "error")
    assert base_of(report_of(failing, merge=MergeBase(BASE)), "ci/jenkins").state is None
    truncated = base_of(report_of(failing, merge=MergeBase(BASE, truncated=True)), "ci/jenkins")
    assert truncated.error and "more checks" in truncated.error  # not "did not run": unknown
    unread = report_of(failing, merge=MergeBase(None, error="compare failed: 502"))
    signal = report_dict(unread)["signals"][0]
    assert signal["base"] is None
    assert signal["finding"] == "Not compared with the merge base: compare failed: 502."
    body = Renderer().markdown(unread)
    assert "Not compared with the merge base: compare failed: 502." in body


def test_the_facts_change_with_the_merge_base_finding() -> None:
    failing = run("tests", "failure")
    passed = report_of(failing, merge=MergeBase(BASE, (run("tests", "success"),)))
    failed = report_of(failing, merge=MergeBase(BASE, (run("tests", "failure"),)))
    assert facts_key(passed) != facts_key(failed)


def test_a_kept_merge_base_reads_back_the_same() -> None:
    merge = MergeBase(BASE, (run("tests", "failure", workflow="ci", event="push"),), truncated=True)
    assert merge_base_of_payload(BASE, merge_base_payload(merge)) == merge
    assert not MergeBase(BASE, (run("tests", "in_progress"),)).final  # pending: not kept


def test_a_failed_re_read_is_said_only_once_it_lasted_the_limit() -> None:
    on_base = (run("tests", "failure", event="push", completed_at=OLD),)
    since = NOW - timedelta(minutes=10)
    last = MergeBase(
        BASE,
        on_base,
        read_at=NOW - timedelta(minutes=11),
        failing_since=since,
        failure="GitHub answered 502",
    )
    limit = timedelta(minutes=30)
    shown, turns = judged(last, now=NOW, unverified_after=limit)
    assert turns == since + limit
    clean = report_of(run("tests", "failure"), merge=MergeBase(BASE, on_base))
    early = report_of(run("tests", "failure"), merge=shown)
    assert facts_key(early) == facts_key(clean)  # before the limit: no new fact
    shown, turns = judged(last, now=since + limit, unverified_after=limit)
    assert turns is None
    late = report_of(run("tests", "failure"), merge=shown)
    assert facts_key(late) != facts_key(clean)
    finding = report_dict(late)["signals"][0]["finding"]
    assert "could not be verified since" in finding and "GitHub answered 502" in finding
    # the kept payload carries the failure and round-trips it
    again = merge_base_of_payload(BASE, merge_base_payload(last))
    assert (again.failing_since, again.failure, again.read_at) == (
        since,
        "GitHub answered 502",
        last.read_at,
    )
