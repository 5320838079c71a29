"""Issue 28, items 2 to 4: a required check that never reported named in the headline, whose
move it is said where the facts say it (and only there), and the noise the rows lost."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support import DOCS, NOW, TESTS, at, run, seed_report, snapshot, status

from bot.core.base import MergeBase, with_base
from bot.core.model import Policy, RequiredChecks, RequiredContext, Rule
from bot.core.reconcile import reconcile
from bot.render.comment import Renderer

MERGE_BASE = "5d41402abc4b2a76b9719d911017c592ae1f9c0e"
MAIN = Rule("branch protection", "main")
REAL_DCO = TESTS / "data" / "real" / "dco"
PASSING = (run("lint", "success", workflow="lint"), run("build", "success", workflow="ci"))


def headline(body: str) -> str:
    return next(line for line in body.splitlines() if not line.startswith("<!--"))


def row_of(body: str, name: str) -> str:
    """The row of `name`: its first line and the lines under it, up to the next row."""
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("- ") and f"`{name}`" in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), None)
    return "\n".join(lines[start:end])


def body_of(*signals: object, base: MergeBase | None = None, required: tuple[str, ...] = (),
            seen: object = None) -> str:  # fmt: skip
    snap = snapshot(*signals)  # type: ignore[arg-type]
    if required:
        contexts = tuple(RequiredContext(name, (MAIN,)) for name in required)
        snap = replace(snap, required_checks=RequiredChecks("main", read=True, contexts=contexts))
    first_seen = {"\0head": seen} if seen is not None else None
    report = reconcile(snap, {}, Policy(), now=NOW, first_seen=first_seen)  # type: ignore[arg-type]
    if base is not None:
        report = with_base(report, base)
    return Renderer().markdown(report)


def job(name: str, conclusion: str = "failure", **fields: object) -> object:
    fields.setdefault("workflow", "tests")
    fields.setdefault("workflow_path", ".github/workflows/tests.yml")
    return run(name, conclusion, **fields)


# --- item 2: a required check that never reported --------------------------------------


def test_a_required_check_never_reported_is_named_in_the_headline() -> None:
    body = body_of(*PASSING, required=("tests (3.12)",), seen=NOW)
    assert headline(body) == "### ⏳ Waiting · `tests (3.12)` (required) never reported · 2 passing"


def test_its_row_says_github_does_not_allow_merging_and_which_rule() -> None:
    body = body_of(*PASSING, required=("tests (3.12)",), seen=NOW)
    row = row_of(body, "tests (3.12)")
    assert "GitHub does not allow merging until it reports" in row
    assert "branch protection of `main`" in row
    # the head's time is on the head line; the row does not say it again
    assert row.count("14:03") == 0, row
    assert body.count("14:03") == 1


def test_a_head_known_earlier_than_its_facts_keeps_its_time_on_the_row() -> None:
    body = body_of(*PASSING, required=("DCO",), seen=at(13, 30))
    assert "13:30" in row_of(body, "DCO")


def test_a_never_reported_check_past_the_limit_is_named_too() -> None:
    body = body_of(*PASSING, required=("DCO",), seen=at(9, 0))
    assert headline(body) == "### ⚪ Incomplete · `DCO` (required) never reported · 2 passing"


def test_failing_checks_come_first_then_what_never_reported() -> None:
    body = body_of(job("unit"), *PASSING, required=("DCO",), seen=NOW)
    assert headline(body) == (
        "### ❌ Failing · `unit` failed · `DCO` (required) never reported · 2 passing"
    )
    three = body_of(job("a"), job("b"), *PASSING, required=("DCO",), seen=NOW)
    assert headline(three) == (
        "### ❌ Failing · `a` failed · `b` failed · 1 never reported · 2 passing"
    )


def test_stuck_signals_are_named_in_an_incomplete_headline() -> None:
    assert headline(Renderer().markdown(seed_report())) == (
        f"### ⚪ Incomplete · `{DOCS}` cancelled · 4 passing"
    )
    many = body_of(job("a", "cancelled"), job("b", "cancelled"), job("c", "cancelled"))
    assert headline(many) == "### ⚪ Incomplete — nothing will finish on its own · 3 cancelled"


# --- item 3: whose move, from facts only -------------------------------------------------


def test_a_failure_that_passed_on_the_merge_base_is_the_authors_move() -> None:
    base = MergeBase(MERGE_BASE, (job("unit", "success", event="push"),))
    body = body_of(job("unit", event="pull_request"), *PASSING, base=base)
    row = row_of(body, "unit")
    assert row.splitlines()[1].startswith("  **The author's move:** it passed on the merge base")
    assert "this change" in row
    assert row.count("merge base") == 1  # said once, not again as a clause


def test_every_failure_also_on_the_merge_base_is_nobodys_move_here() -> None:
    base = MergeBase(MERGE_BASE, (job("unit", event="push", completed_at=at(8, 12)),))
    body = body_of(job("unit", event="pull_request"), *PASSING, base=base)
    row = row_of(body, "unit")
    assert row.splitlines()[1].startswith(
        "  **Not this pull request's move:** it also failed on the merge base"
    )
    assert "08:12" in row


def test_a_missing_sign_off_quotes_the_dco_apps_documented_fix() -> None:
    text = (REAL_DCO / "index.test.js.snap").read_text(encoding="utf-8")
    block = text.split("exports[`dco pull_request event creates a failing check 1`] = `", 1)[1]
    summary = re.search(r'"summary": "(.*?)",\n    "title"', block, flags=re.S)
    assert summary is not None
    dco = run("DCO", "action_required", app="dco", description="DCO",
              summary=summary.group(1).replace("\\`", "`"))  # fmt: skip
    body = body_of(dco, *PASSING)
    row = row_of(body, "DCO")
    assert row.splitlines()[1].startswith("  **The author's move:** sign off the commits")
    assert "`git commit -s`" in row and "`git rebase HEAD~1 --signoff`" in row
    assert "(https://github.com/dcoapp/app/blob/main/index.js)" in row
    # the headline quotes the app's first sentence; the row does not say it again
    assert "incorrectly signed off" in headline(body)
    assert "incorrectly signed off" not in row


def test_a_cancelled_docs_build_nothing_restarts_names_who_can() -> None:
    body = Renderer().markdown(seed_report())
    row = row_of(body, DOCS)
    assert row.splitlines()[1].startswith("  **Someone who can push to this branch:**")
    assert "whenever a new commit is pushed" in row


def test_a_cancelled_actions_run_names_who_may_re_run_it() -> None:
    body = body_of(job("unit", "cancelled"), *PASSING)
    row = row_of(body, "unit")
    assert row.splitlines()[1].startswith("  **Someone with write access:**")
    assert "People with write permissions to a repository can re-run workflows" in row
    assert "docs.github.com" in row


@pytest.mark.parametrize(
    "signal",
    [
        job("unit"),  # no merge base read
        status("ci/jenkins", "failure"),  # nothing says who
        run("e2e", "cancelled", app="some-ci"),  # no source documents who restarts it
        job("slow", "in_progress", started_at=at(13, 50)),
    ],
)
def test_where_the_facts_do_not_say_nothing_is_said(signal: object) -> None:
    body = body_of(signal, *PASSING)
    assert "move:**" not in body and "**Someone" not in body


def test_a_failure_not_compared_is_no_ones_move_said() -> None:
    base = MergeBase(MERGE_BASE, (job("unit", event="push"),))
    body = body_of(job("unit"), job("other", workflow="other", workflow_path=None), base=base)
    assert "**" not in row_of(body, "other")


# --- item 4: noise cut ------------------------------------------------------------------


def test_not_run_on_the_merge_base_only_where_the_check_runs_on_the_base_branch() -> None:
    ran = MergeBase(MERGE_BASE, (job("unit (3.11)", "success", event="push"),))
    body = body_of(job("unit (3.12)"), *PASSING, base=ran)
    assert "not run on the merge base" in row_of(body, "unit (3.12)")
    never = MergeBase(MERGE_BASE, (job("unit (3.11)", "success", event="push"),))
    dco = run("DCO", "action_required", app="dco", summary="There is one commit unsigned.")
    assert "merge base" not in row_of(body_of(dco, base=never), "DCO")
    rtd = status(DOCS, "failure", description="Read the Docs build failed!")
    assert "merge base" not in row_of(body_of(rtd, base=never), DOCS)


def test_rows_say_what_happened_in_sentences() -> None:
    body = Renderer().markdown(seed_report())
    assert "No other cause is stated by any source." not in body
    assert "(success:" not in body
    assert "was cancelled" in row_of(body, DOCS) or "as cancelled" in row_of(body, DOCS)


def test_the_headline_names_at_most_two_signals() -> None:
    body = body_of(job("a"), job("b"), *PASSING, required=("DCO", "docs"), seen=NOW)
    assert headline(body).count("`") <= 4


def test_a_history_pointing_away_from_this_change_says_no_ones_move() -> None:
    from bot.core.model import Attempt, History, State

    base = MergeBase(MERGE_BASE, (job("unit", "success", event="push"),))
    snap = snapshot(job("unit", event="pull_request"), *PASSING)
    report = with_base(reconcile(snap, {}, Policy(), now=NOW), base)
    passed = History(attempts=(Attempt(State.SUCCESS, at(13, 0), None),))
    rows = tuple(r._replace(history=passed) if r.signal.name == "unit" else r for r in report.rows)
    body = Renderer().markdown(replace(report, rows=rows))
    row = row_of(body, "unit")
    assert "move:**" not in row and "passed on the merge base" in row  # the fact, no claim
