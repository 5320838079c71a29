"""The comment's first lines (issue 16 items 3 and 4): whose move it is, the failing signals
named in the headline, `required` marks only, the short head line, the documented remedies."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from support import DOCS, NOW, TESTS, at, build, lookup, run, seed_report, snapshot, status

from bot.core.base import MergeBase, with_base
from bot.core.model import (
    MARKER,
    Policy,
    RequiredChecks,
    RequiredContext,
    Rule,
    State,
)
from bot.core.reconcile import reconcile
from bot.core.remedies import REMEDIES, remedy_for
from bot.render.comment import Renderer

REAL_DCO = TESTS / "data" / "real" / "dco"
MERGE_BASE = "5d41402abc4b2a76b9719d911017c592ae1f9c0e"
LAST_LINE = "This bot reads CI state and retriggers nothing."
LIVE = {
    "mention": re.compile(r"(?<![\w`])@[A-Za-z0-9]"),
    "reference": re.compile(r"#\d"),
    "url": re.compile(r"https?://|www\.", re.IGNORECASE),
    "html": re.compile(r"<[a-z!/]", re.IGNORECASE),
}


def dco_app_check(case: str) -> tuple[str, str, str]:
    """(conclusion, title, summary) of one check the DCO app creates, from its own Jest
    snapshot (dcoapp/app test/__snapshots__/index.test.js.snap, copied verbatim)."""
    text = (REAL_DCO / "index.test.js.snap").read_text(encoding="utf-8")
    block = text.split(f"exports[`dco {case} 1`] = `", 1)[1].split("\n`;\n", 1)[0]
    found = re.search(r'"summary": "(.*?)",\n    "title": "(.*?)",', block, flags=re.S)
    conclusion = re.search(r'"conclusion": "(\w+)"', block)
    assert found is not None and conclusion is not None
    summary = found.group(1).replace("\\`", "`").replace('\\\\"', '"')
    return conclusion.group(1), found.group(2), summary


def real_dco(**fields: object) -> object:
    conclusion, title, summary = dco_app_check("pull_request event creates a failing check")
    return run("DCO", conclusion, app="dco", description=title, summary=summary, **fields)


def body_of(*signals: object, base: MergeBase | None = None, **kwargs: object) -> str:
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW, **kwargs)  # type: ignore[arg-type]
    if base is not None:
        report = with_base(report, base)
    return Renderer().markdown(report)


def headline(body: str) -> str:
    return next(line for line in body.splitlines() if not line.startswith("<!--"))


def without_urls(line: str) -> str:
    """A raw line as an e-mail reader sees past its link targets."""
    return re.sub(r"\]\([^)]*\)", "]", line)


def rendered(line: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(line, options=Options.CMARK_OPT_UNSAFE)


def outside_code(page: str) -> str:
    without = re.sub(r"<code>.*?</code>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", without))


def job_312(conclusion: str = "failure", **fields: object) -> object:
    fields.setdefault("required", True)
    return run("tests (3.12)", conclusion, workflow="tests", **fields)


PASSING = (run("lint", "success"), run("build", "success"))


# --- item 3: the headline names one or two failing signals --------------------------------


def test_one_failing_signal_is_named_with_its_state() -> None:
    body = body_of(job_312(), *PASSING)
    assert headline(body) == "### ❌ Failing · `tests (3.12)` failed (required) · 2 passing"


def test_two_failing_signals_are_named_required_first_and_marked_on_the_merge_base() -> None:
    typecheck = run("typecheck", "failure", workflow="lint", required=False)
    on_base = (run("tests (3.12)", "failure", workflow="tests", event="push"),)
    body = body_of(typecheck, job_312(), *PASSING, base=MergeBase(MERGE_BASE, on_base))
    assert headline(body) == (
        "### ❌ Failing · `tests (3.12)` failed (required, also on the merge base) · "
        "`typecheck` failed · 2 passing"
    )


def test_three_failing_signals_are_counted_not_named() -> None:
    failing = [run(name, "failure", required=name == "a") for name in ("a", "b", "c")]
    on_base = (run("b", "failure"),)
    body = body_of(*failing, *PASSING, base=MergeBase(MERGE_BASE, on_base))
    assert headline(body) == (
        "### ❌ Failing · 3 failing (1 required, 1 also on the merge base) · 2 passing"
    )


def test_the_dco_apps_action_required_does_not_read_like_a_failing_test() -> None:
    # The DCO app's own check (its Jest snapshot): title "DCO" (the name again: it adds
    # nothing), so the headline quotes the first sentence of the app's summary instead.
    conclusion, title, summary = dco_app_check("pull_request event creates a failing check")
    assert (conclusion, title) == ("action_required", "DCO")
    assert summary.startswith("There is one commit incorrectly signed off.  This means")
    dco = headline(body_of(real_dco(), run("tests (3.12)", "success")))
    assert dco == (
        "### ❌ Failing · `DCO` action required: “There is one commit incorrectly signed off.” · "
        "1 passing"
    )
    test = headline(body_of(job_312(required=None), run("DCO", "success", app="dco")))
    assert test == "### ❌ Failing · `tests (3.12)` failed · 1 passing"


def test_the_dco_words_are_only_the_apps_whole_first_sentence() -> None:
    # dcoapp/app test/fixtures/check_run.rerequested.json (an older app's failure run)
    older = run("DCO", "failure", app="dco", description="DCO", summary="The sign-off is missing.")
    assert headline(body_of(older)) == "### ❌ Failing · `DCO` failed: “The sign-off is missing.”"
    long = "The DCO check could not be evaluated because GitHub returned no commits for this "
    long += "pull request.\n\nPlease retry by re-running the check or pushing a new commit."
    failed = run("DCO", "failure", app="dco", description="DCO", summary=long)
    assert headline(body_of(failed)) == "### ❌ Failing · `DCO` failed"  # too long: not cut
    other = run("DCO", "action_required", app="someone-else", summary="Sign it off.")
    assert headline(body_of(other)) == "### ❌ Failing · `DCO` action required"


def test_a_hostile_name_in_the_headline_is_inert_verbatim_and_cut() -> None:
    name = "@everyone #1 <img src=x> [x](https://evil.example) `tick` " + "y" * 500
    body = body_of(run(name, "failure"), run("ok", "success"))
    line = headline(body)
    assert "\n" not in line and len(line) <= 160, len(line)
    assert "…" in line  # the cut is stated
    page = rendered(line)
    assert page.startswith("<h3>") and page.count("<h3>") == 1
    assert "<a " not in page and "<img" not in page
    for what, pattern in LIVE.items():
        assert pattern.search(outside_code(page)) is None, what
    shown = re.findall(r"<code>(.*?)</code>", page)[0]
    assert name.startswith(html.unescape(shown).removesuffix("…"))  # verbatim up to the cut


def test_pending_and_incomplete_headlines_name_what_is_stuck() -> None:
    # issue 28: the stuck signal is named like a failing one, with its state word
    assert headline(Renderer().markdown(seed_report())) == (
        f"### ⚪ Incomplete · `{DOCS}` cancelled · 4 passing"
    )
    body = body_of(run("slow", "in_progress", started_at=NOW), *PASSING)
    assert headline(body) == "### ⏳ Pending · 1 pending · 2 passing"


# --- item 3: documented remedies, quoted with their source, never performed ----------------


def test_every_remedy_names_its_source() -> None:
    assert REMEDIES
    for remedy in REMEDIES:
        assert remedy.source.startswith("https://"), remedy
        assert remedy.words and remedy.source_name


def test_the_dco_row_quotes_the_apps_documented_recheck_in_a_code_span() -> None:
    # the app could not evaluate (its older failure): its README's recheck ends that state
    body = body_of(run("DCO", "failure", app="dco", url="https://github.com/example/omni/runs/33",
                       summary="The sign-off is missing."))  # fmt: skip
    row = body.split("\n- ❌ ", 1)[1].split("\n\n", 1)[0]
    assert "`@dcoapp recheck`" in row
    assert "(https://github.com/dcoapp/app/blob/main/README.md)" in row
    page = rendered(body)
    assert "@dcoapp" not in outside_code(page)  # no live mention: the app is never pinged
    assert "<code>@dcoapp recheck</code>" in page


def test_a_cancelled_read_the_docs_build_quotes_rtds_documented_rebuild() -> None:
    body = Renderer().markdown(seed_report())
    assert "whenever a new commit is pushed" in body
    assert "(https://docs.readthedocs.io/en/stable/pull-requests.html)" in body


FAILED_BUILD = {DOCS: lookup(build("finished", False, finished=at(13, 30)))}


@pytest.mark.parametrize(
    ("signal", "docs", "state"),
    [
        (run("tests", "failure"), {}, State.FAILURE),
        # a docs build that failed on RTD: its way out is a fix, which no source documents
        (status(DOCS, "failure"), FAILED_BUILD, State.FAILURE),
        (run("DCO", "action_required", app="other"), {}, State.ACTION_REQUIRED),
        (run("DCO", "neutral", app="dco"), {}, State.NEUTRAL),
    ],
)
def test_no_remedy_where_no_source_documents_one(
    signal: object, docs: dict[str, object], state: State
) -> None:
    report = reconcile(snapshot(signal), docs, Policy(), now=NOW)  # type: ignore[arg-type]
    assert report.rows[0].state is state
    if docs:
        assert report.rows[0].reconciliation is not None
    assert remedy_for(report.rows[0]) is None


def test_a_remedy_follows_the_rows_state_not_its_name() -> None:
    rtd = {DOCS: lookup(build("finished", True, finished=at(13, 30)))}
    passing = reconcile(snapshot(status(DOCS, "pending", created_at=at(13, 0))), rtd, Policy(),
                        now=NOW)  # fmt: skip
    assert remedy_for(passing.rows[0]) is None  # passed on RTD: nothing to end


# --- item 4: less boilerplate -------------------------------------------------------------


def test_required_rows_are_marked_and_optional_rows_are_not() -> None:
    body = body_of(
        run("must", "failure", required=True),
        run("may", "failure", required=False),
        run("unsaid", "failure"),
    )
    assert "`must` · failed · required ·" in body
    assert "`may` · failed · since" in body
    assert "optional" not in body


def test_the_head_line_is_short_and_the_edit_note_is_at_the_foot() -> None:
    body = Renderer().markdown(seed_report())
    lines = body.splitlines()
    head = lines[lines.index(headline(body)) + 1]
    assert head.startswith("Head [`eb46d06`](")
    assert head.endswith(") (draft) · first observed 2026\u201110\u201105\u00a014:03\u00a0UTC")
    assert "edited" not in head and len(without_urls(head)) < 70
    assert lines[-1] == LAST_LINE
    assert lines[-2] == (
        "Edited in place when the facts change; a notification shows the first version."
    )
    assert body.count("dited in place") == 1


def test_unread_rules_are_said_once_and_no_row_is_called_optional() -> None:
    checks = RequiredChecks("main", read=False, error="Resource not accessible by integration")
    signals = (run("a", "failure"), run("b", "failure", required=True),
               run("c", "failure", required=False))  # fmt: skip
    snap = replace(snapshot(*signals), required_checks=checks)
    report = reconcile(snap, {}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert body.count("could not be read") == 1
    assert "`b` · failed · required ·" in body and "optional" not in body


def test_an_expected_by_configuration_row_is_unmarked_and_says_why() -> None:
    rule = Rule("branch protection", "main")
    checks = RequiredChecks("main", read=True, contexts=(RequiredContext("tests", (rule,)),))
    snap = replace(snapshot(run("tests", "success")), required_checks=checks)
    report = reconcile(snap, {}, Policy(), now=NOW, expected=("DCO",))
    body = Renderer().markdown(report)
    row = next(line for line in body.splitlines() if line.startswith("- ") and "`DCO`" in line)
    assert "not reported on this commit" in row
    assert "required" not in row and "optional" not in row
    assert "Expected by this bot's configuration." in body


def test_the_raw_body_reads_as_plain_text() -> None:
    body = Renderer().markdown(seed_report())
    assert body.splitlines()[0] == MARKER
    visible = [line for line in body.splitlines() if not line.startswith("<!--")]
    assert max(len(without_urls(line)) for line in visible[:2]) < 80
    assert not Path(TESTS / "golden" / "seed_case.md").read_text().count("optional")


def test_two_failing_signals_of_one_name_are_told_apart_in_the_headline() -> None:
    push = run("CI", "failure", workflow="CI", event="push")
    pull = run("CI", "failure", workflow="CI", event="pull_request")
    line = headline(body_of(push, pull))
    assert line in (
        "### ❌ Failing · `CI` (`push`) failed · `CI` (`pull_request`) failed",
        "### ❌ Failing · `CI` (`pull_request`) failed · `CI` (`push`) failed",
    )
    long = "." * 300 + "/ci.yml"
    one = run("CI", "failure", workflow="CI", workflow_path=long)
    other = run("CI", "failure", workflow="CI", workflow_path=".github/workflows/ci.yml")
    assert len(headline(body_of(one, other))) < 200  # what tells them apart is cut too


# --- "nothing will finish on its own" is a claim: said only where the facts show it --------


def test_no_checks_reported_yet_is_not_said_to_be_final() -> None:
    # seconds after a push, before GitHub Actions creates its suites: more may come
    assert headline(body_of()) == "### ⚪ Incomplete · nothing reported"


def test_a_truncated_read_is_not_said_to_be_final() -> None:
    report = reconcile(snapshot(*PASSING, truncated=True), {}, Policy(), now=NOW)
    # the signals not read may be running
    assert headline(Renderer().markdown(report)) == "### ⚪ Incomplete · 2 passing"


def test_a_long_job_stale_by_age_is_not_said_to_be_final() -> None:
    long = run("integration (3h suite)", "in_progress", started_at=at(11, 50), required=True)
    body = body_of(long, run("ok", "success"))
    # it may yet finish: no "nothing will finish on its own"
    assert headline(body) == (
        "### ⚪ Incomplete · `integration (3h suite)` stale (required) · 1 passing"
    )
    row = next(line for line in body.splitlines() if line.startswith("- ⚪ `integration"))
    assert "GitHub still shows in progress" in row, row
    queued = body_of(run("deploy", "queued", started_at=at(11, 0)))
    row = next(line for line in queued.splitlines() if line.startswith("- ⚪ `deploy`"))
    assert "GitHub still shows queued" in row, row


def test_a_required_check_never_reported_is_not_said_to_be_final() -> None:
    # GitHub waits for it forever, but a workflow may yet report it: no claim either way
    rule = Rule("branch protection", "main")
    checks = RequiredChecks("main", read=True, contexts=(RequiredContext("DCO", (rule,)),))
    snap = replace(snapshot(run("tests", "success")), required_checks=checks)
    seen = {"\0head": at(9, 0)}
    report = reconcile(snap, {}, Policy(), now=NOW, first_seen=seen)
    assert report.rows[0].state is State.STALE
    assert headline(Renderer().markdown(report)) == (
        "### ⚪ Incomplete · `DCO` (required) never reported · 1 passing"
    )


def test_final_states_only_are_said_to_be_final() -> None:
    # counted, the claim is said; named, the state word says it (and the rows say who moves)
    cancelled = body_of(*(run(n, "cancelled") for n in "abc"), *PASSING)
    assert headline(cancelled) == (
        "### ⚪ Incomplete — nothing will finish on its own · 3 cancelled · 2 passing"
    )
    marked = body_of(*(run(n, "stale") for n in "abc"), *PASSING)  # GitHub's own final "stale"
    assert headline(marked) == (
        "### ⚪ Incomplete — nothing will finish on its own · 3 stale · 2 passing"
    )
    one = body_of(run("tests", "cancelled"), *PASSING)
    assert headline(one) == "### ⚪ Incomplete · `tests` cancelled · 2 passing"
    unmapped = body_of(*(run(n, "surprise") for n in "abc"), *PASSING)  # nobody says what it is
    assert headline(unmapped) == "### ⚪ Incomplete · 3 unknown · 2 passing"
    mixed = body_of(*(run(n, "cancelled") for n in "ab"),
                    run("c", "in_progress", started_at=at(9, 0)))  # fmt: skip
    assert headline(mixed) == "### ⚪ Incomplete · 2 cancelled · 1 stale"
