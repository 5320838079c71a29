"""Tests of the status comment (golden files read through GitHub's own markdown engine),
its escaping filters, its templates, and the JSON report. No mocks.

Regenerate the golden files on purpose, then review them in the diff:
    UPDATE_GOLDEN=1 python -m pytest -q -n 0 tests/unit/render/test_comment.py \\
        tests/unit/sources/test_provider_goldens.py
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cmarkgfm
import jinja2
import pytest
from cmarkgfm.cmark import Options
from support import (
    BUILD_URL,
    DOCS,
    NOW,
    PR_URL,
    SHA,
    TESTS,
    at,
    build,
    cli,
    lookup,
    run,
    seed_case,
    seed_report,
    snapshot,
    status,
    write_config,
)

from bot.core.annotations import with_annotations
from bot.core.base import MergeBase, with_base
from bot.core.facts import facts_key
from bot.core.history import BranchHistory, HistoryInputs, with_history
from bot.core.merge_queue import QueueConfig, QueueRead, judge_queue
from bot.core.model import (
    BRANCH_PROTECTION,
    MARKER,
    Annotation,
    Attempt,
    Elsewhere,
    Policy,
    QueueEntry,
    QueueState,
    Report,
    RequiredChecks,
    RequiredContext,
    Rule,
    Signal,
    State,
    Verdict,
    format_utc,
)
from bot.core.queue_sources import documented_for
from bot.core.reconcile import NO_SIGNALS_NOTE, TRUNCATED_NOTE, reconcile
from bot.core.remedies import REMEDIES, remedy_for
from bot.render.comment import COMMENT_LIMIT, Renderer, TemplateInvalid, first_meaningful_line
from bot.render.escape import (
    NB_HYPHEN,
    NBSP,
    clean,
    code,
    md,
    prose,
    quoted,
    safe_url,
    short_sha,
    utc,
)
from bot.render.report import report_dict, report_json
from bot.render.stamp import parse_stamp, stamp_line, stamp_of
from bot.sources.readthedocs.rows import RtdLookup
from bot_sandbox import Sandbox, World

GOLDEN = TESTS / "golden"
MAIN_RULE = (Rule(BRANCH_PROTECTION, "main"),)
LAST_LINE = "This bot reads CI state and retriggers nothing."
HEADLINE = "### ⚪ Incomplete · `docs/readthedocs.org:omni-docs` cancelled · 4 passing"
DAY = "2026\u201110\u201105"  # 2026-10-05 with non-breaking hyphens
EMITTED_TAGS = frozenset({"h3", "p", "a", "code", "ul", "li", "br", "details", "summary", "strong"})
HOSTILE = "@everyone <img src=x> [x](javascript:alert(1)) <!-- ci-status-bot:v1 --> #1 `code`"
SCOTLAND = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # tag characters
EMOJI = f"deploy 👩\u200d💻 🏳️\u200d🌈 👍🏽 🇫🇷 {SCOTLAND}"  # ZWJ, skin tone, flags

# What GitHub links or converts in text after markdown (outside code and links).
LIVE_PATTERNS = {
    "mention": re.compile(r"(?<![\w`])@[A-Za-z0-9]"),
    "reference": re.compile(r"#\d|\bGH-\d", re.IGNORECASE),
    "emoji shortcode": re.compile(r":[a-z0-9_+-]+:"),
    "url": re.compile(r"https?://|www\.", re.IGNORECASE),
    "email": re.compile(r"\w@\w"),
    "sha": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    "html": re.compile(r"<[a-z!/]", re.IGNORECASE),
    "entity": re.compile(r"&#?\w+;"),
}


# --- the golden cases ----------------------------------------------------------------------


def failing_required_report() -> Report:
    """A required test job failed (a test id in its summary); an optional lint still runs."""
    tests = run(
        "tests (3.12)",
        "failure",
        workflow="tests",
        url="https://github.com/example/omni/actions/runs/11/job/22",
        description="1 failed, 212 passed in 41.20s",
        summary="## Failures\n\nFAILED tests/test_parser.py::test_unicode_escape - "
        "AssertionError: '\\\\u00e9' != 'é'\n\nMore lines that are not shown.",
        started_at=at(13, 40),
        completed_at=at(13, 52),
        required=True,
    )
    lint = run("lint", "in_progress", workflow="lint", started_at=at(13, 58), required=False)
    passing = [
        run(name, "success", workflow="tests", completed_at=at(13, 50), required=True)
        for name in ("tests (3.10)", "tests (3.11)", "tests (3.13)")
    ]
    dco = run("DCO", "success", app="dco", description="DCO", completed_at=at(13, 39))
    wheels = run("build-wheel (3.12)", "success", workflow="wheels", completed_at=at(13, 47))
    docs = status(DOCS, "success", url=BUILD_URL, description="Read the Docs build succeeded!")
    rtd = {DOCS: lookup(build("finished", True, finished=at(13, 45)))}
    signals = (tests, lint, *passing, dco, wheels, docs)
    return reconcile(snapshot(*signals), rtd, Policy(), now=NOW)


def every_state_report() -> Report:
    """One signal in every state the comment knows, with every kind of second-source finding."""
    rtd_build = "https://readthedocs.org/projects/omni-docs/builds/34894886/"
    signals = (
        run("unit", "failure", completed_at=at(12, 0), required=True),
        run("DCO", "action_required", app="dco", description="DCO", completed_at=at(9, 10),
            summary="There is one commit incorrectly signed off.\nCommit sha: 1a2b3c4, Author: A"),
        run("integration", "timed_out", completed_at=at(12, 30), required=False),
        status("docs/readthedocs.org:cancelled-docs", "failure", url=rtd_build,
               description="Read the Docs build failed!", created_at=at(11, 0)),
        run("e2e", "cancelled", completed_at=at(11, 30)),
        status("ci/jenkins", "pending", description="Build queued", created_at=at(9, 0)),
        run("old-check", "stale", completed_at=at(8, 0)),
        status("ci/expected", "expected", created_at=at(10, 0)),
        run("weird", "surprise", completed_at=at(12, 50)),
        status("docs/readthedocs.org:unread-docs", "pending", created_at=at(13, 50)),
        run("queued-no-time", "queued", started_at=None),
        run("slow", "in_progress", started_at=at(13, 55), required=True),
        status(DOCS, "pending", url=BUILD_URL, created_at=at(13, 0)),
        status("docs/readthedocs.org:slow-docs", "pending", created_at=at(9, 30)),
        run("skipped-job", "skipped", completed_at=at(12, 0)),
        run("neutral-job", "neutral", completed_at=at(12, 0)),
        run("ok", "success", completed_at=at(12, 0)),
    )  # fmt: skip
    cancelled = build("cancelled", False, id=34894886, url=rtd_build, created=at(11, 0))
    rtd: dict[str, RtdLookup] = {
        "docs/readthedocs.org:cancelled-docs": lookup(cancelled, notes=("build:user:cancelled",)),
        "docs/readthedocs.org:unread-docs": lookup(error="HTTP 503"),
        DOCS: lookup(build("finished", True, finished=at(13, 30))),
        "docs/readthedocs.org:slow-docs": lookup(
            build("triggered", None, id=34894887, created=at(9, 30), url=None)
        ),
    }
    first_seen = {signals[10].key: at(13, 1)}
    return reconcile(snapshot(*signals), rtd, Policy(), now=NOW, first_seen=first_seen)


HOSTILE_SIGNALS: tuple[Signal, ...] = (
    run(HOSTILE, "failure", url="javascript:alert(1)", description=HOSTILE, summary=HOSTILE),
    run("x``y` :tada: @octocat", "failure", description="see #12, GH-34 and octo/repo#56"),
    run("mail a@b.co www.evil.example https://evil.example/x", "cancelled",
        url="https://evil.example/a(b)c", description="eb46d06c1f3a cafe1234 :+1:"),
    run("**bold** _em_ ~~del~~ $x^2$ <details> &amp; &#64;", "failure",
        description="1. starts like a list"),
    run(EMOJI, "failure", description=EMOJI),
    status("ci/\u202eevil\u2060\u200b", "pending", created_at=at(13, 0),
           description="- a line\n# heading\n> quote\n---"),
    run("a](https://evil.example) [b", "failure", url="https://ci.example/1?a=(b)"),
    run("| a | b |", "success"),
    run("@everyone passing", "success"),
)  # fmt: skip


def hostile_report() -> Report:
    """Untrusted text everywhere: names, descriptions, summaries, URLs and the title."""
    report = reconcile(snapshot(*HOSTILE_SIGNALS), {}, Policy(), now=NOW)
    return dataclasses.replace(report, title=HOSTILE)


def many(count: int, raw: str) -> tuple[Signal, ...]:
    """Many check runs with long names and descriptions."""
    return tuple(
        run(f"matrix-job-{i:05d}-" + "x" * 60, raw, description="x" * 150) for i in range(count)
    )


def five_thousand_report() -> Report:
    """5,000 signals: 4,000 failing, 1,000 passing."""
    signals = many(4000, "failure") + tuple(
        run(f"passing-job-{i:04d}", "success") for i in range(1000)
    )
    return reconcile(snapshot(*signals), {}, Policy(), now=NOW)


MERGE_BASE = "5d41402abc4b2a76b9719d911017c592ae1f9c0e"


def with_merge_base(*signals: Signal, base: MergeBase) -> Report:
    """A pull request whose failing signals were compared with the merge base."""
    passing = (
        run("lint", "success", workflow="lint", completed_at=at(13, 30), required=False),
        run("DCO", "success", app="dco", description="DCO", completed_at=at(13, 1)),
    )
    report = reconcile(snapshot(*signals, *passing), {}, Policy(), now=NOW)
    return with_base(report, base)


def failing_tests() -> Signal:
    return run(
        "tests (3.12)", "failure", workflow="tests", event="pull_request",
        url="https://github.com/example/omni/actions/runs/11/job/22",
        description="1 failed, 212 passed in 41.20s", started_at=at(13, 40),
        completed_at=at(13, 52), required=True,
    )  # fmt: skip


def base_tests(conclusion: str) -> Signal:
    return run(
        "tests (3.12)", conclusion, workflow="tests", event="push",
        url="https://github.com/example/omni/actions/runs/9/job/10",
        started_at=at(8, 0), completed_at=at(8, 12),
    )  # fmt: skip


def new_failure_report() -> Report:
    """A test job fails on the head and passed on the merge base: this pull request broke it."""
    return with_merge_base(failing_tests(), base=MergeBase(MERGE_BASE, (base_tests("success"),)))


def also_on_merge_base_report() -> Report:
    """Two failures, one of them failing on the merge base too (broken before the PR)."""
    lint = run("typecheck", "failure", workflow="lint", completed_at=at(13, 50), required=False)
    on_base = (base_tests("failure"), run("typecheck", "success", workflow="lint"))
    return with_merge_base(failing_tests(), lint, base=MergeBase(MERGE_BASE, on_base))


def not_run_on_merge_base_report() -> Report:
    """The failing job did not run on the merge base, where its workflow ran (a new job)."""
    other = run("tests (3.11)", "success", workflow="tests", event="push", completed_at=at(8, 9))
    return with_merge_base(failing_tests(), base=MergeBase(MERGE_BASE, (other,)))


def unreadable_merge_base_report() -> Report:
    """GitHub's compare failed: the row says so, and guesses nothing."""
    base = MergeBase(None, error="GitHub's compare of main and the head failed: HTTP 502")
    return with_merge_base(failing_tests(), base=base)


def real_dco_summary() -> str:
    """The DCO app's own action_required summary (its Jest snapshot, dcoapp/app
    test/__snapshots__/index.test.js.snap, copied verbatim into tests/data/real/dco)."""
    text = (TESTS / "data" / "real" / "dco" / "index.test.js.snap").read_text(encoding="utf-8")
    block = text.split("exports[`dco pull_request event creates a failing check 1`] = `", 1)[1]
    found = re.search(r'"summary": "(.*?)",\n    "title"', block, flags=re.S)
    assert found is not None
    return found.group(1).replace("\\`", "`").replace('\\\\"', '"')


def dco_action_required_report() -> Report:
    """The DCO app asks the author to sign off (it does not run on the base branch's pushes)."""
    dco = run(
        "DCO", "action_required", app="dco", description="DCO", completed_at=at(13, 1),
        url="https://github.com/example/omni/runs/33", summary=real_dco_summary(),
    )  # fmt: skip
    tests = run("tests (3.12)", "success", workflow="tests", completed_at=at(13, 52))
    report = reconcile(snapshot(dco, tests), {}, Policy(), now=NOW)
    return with_base(report, MergeBase(MERGE_BASE, (base_tests("success"),)))


def annotated_failure_report() -> Report:
    """A failing test job quoting GitHub's annotations: Actions' generic exit-code one is left
    out; untrusted text in them (a mention, a link, backticks, a second line) stays inert."""
    tests = failing_tests()._replace(node_id="CR_kwDOA1b2c84AAAAAEnq0aQ", database_id=22)
    report = with_merge_base(tests, base=MergeBase(MERGE_BASE, (base_tests("success"),)))
    return with_annotations(
        report,
        {
            22: (
                Annotation(".github", 278, 278, "Process completed with exit code 1."),
                Annotation(
                    "tests/test_parser.py", 88, 88,
                    "AssertionError: assert '\\u00e9' == 'é'\n  - é\n  + \\u00e9",
                ),
                Annotation(
                    "tests/test_cli.py", 12, 14,
                    "@octocat see https://evil.example/x and `x``y` [a](b) <!-- ci-status-bot -->",
                ),
            )
        },
    )  # fmt: skip


def never_reported_report() -> Report:
    """A required check nothing reported (GitHub: "Expected — Waiting for status to be
    reported"), the head first known a while before its facts were first observed."""
    rules = (Rule("branch protection", "main"),)
    checks = RequiredChecks(
        "main", read=True, contexts=(RequiredContext("tests (3.12)", rules),
                                     RequiredContext("lint", rules))
    )  # fmt: skip
    lint = run("lint", "success", workflow="lint", completed_at=at(13, 30), required=True)
    dco = run("DCO", "success", app="dco", description="DCO", completed_at=at(13, 1))
    snap = dataclasses.replace(snapshot(lint, dco), required_checks=checks)
    return reconcile(snap, {}, Policy(), now=NOW, first_seen={"\0head": at(13, 40)})


def history_report(**facts: object) -> Report:
    """A failing test job with these facts of its history (issue 27): earlier attempts on this
    head, the same job failing on other open pull requests, the base branch's record."""
    report = new_failure_report()
    return with_history(report, HistoryInputs(branch=None, **facts))  # type: ignore[arg-type]


ATTEMPT_URL = "https://github.com/example/omni/actions/runs/11/job/21"


def history_attempts_report() -> Report:
    """It passed on an earlier attempt of this very commit (a re-run then failed)."""
    attempts = (Attempt(State.SUCCESS, at(13, 20), ATTEMPT_URL),)
    return history_report(attempts={failing_tests().key: attempts})


def history_failed_attempts_report() -> Report:
    """It failed on both earlier attempts of this commit too."""
    attempts = (Attempt(State.FAILURE, at(13, 0), None), Attempt(State.FAILURE, at(13, 20), None))
    return history_report(attempts={failing_tests().key: attempts})


def history_elsewhere_report() -> Report:
    """The same job fails on 7 of the 41 other open pull requests, the earliest since 10:02."""
    return history_report(elsewhere={failing_tests().key: Elsewhere(7, 41, at(10, 2))})


def history_base_branch_report() -> Report:
    """The same job failed on 3 of the base branch's last 20 commits."""
    commits = tuple(MergeBase(f"{n:02d}" + "c" * 38, (base_tests("failure" if n in (1, 4, 9)
                    else "success"),)) for n in range(20))  # fmt: skip
    report = new_failure_report()
    return with_history(report, HistoryInputs(branch=BranchHistory("main", commits)))


CASES: dict[str, Callable[[], Report]] = {
    "seed_case": seed_report,
    "new_failure": new_failure_report,
    "also_on_merge_base": also_on_merge_base_report,
    "not_run_on_merge_base": not_run_on_merge_base_report,
    "unreadable_merge_base": unreadable_merge_base_report,
    "dco_action_required": dco_action_required_report,
    "annotated_failure": annotated_failure_report,
    "never_reported": never_reported_report,
    "failing_required": failing_required_report,
    "every_state": every_state_report,
    "hostile": hostile_report,
    "five_thousand": five_thousand_report,
    "history_attempts": history_attempts_report,
    "history_failed_attempts": history_failed_attempts_report,
    "history_elsewhere": history_elsewhere_report,
    "history_base_branch": history_base_branch_report,
}


def headline(body: str) -> str:
    """The comment's first visible line (after the marker and any hidden line)."""
    return next(line for line in body.splitlines() if not line.startswith("<!--"))


def visible(body: str) -> str:
    """The body without hidden lines after the marker (the facts stamp, where there is one)."""
    first, _, rest = body.partition("\n")
    lines = rest.split("\n")
    while lines and lines[0].startswith("<!-- ci-status-bot:"):
        lines.pop(0)
    return "\n".join([first, *lines])


def golden(name: str, text: str) -> str:
    """The golden file's text; rewritten first when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


# --- GitHub's markdown engine --------------------------------------------------------------


def to_html(body: str) -> str:
    """The body as GitHub renders it: cmark-gfm with table, strikethrough, autolink, tagfilter
    and tasklist. Raw HTML is let through (UNSAFE) so any that leaked would show as a tag."""
    return cmarkgfm.github_flavored_markdown_to_html(body, options=Options.CMARK_OPT_UNSAFE)


def code_texts(page: str) -> list[str]:
    """The text of every <code> element."""
    return [html.unescape(t) for t in re.findall(r"<code>(.*?)</code>", page, flags=re.S)]


def text_outside_code(page: str) -> str:
    """The visible text with code elements (and tags and HTML comments) removed."""
    without = re.sub(r"<code>.*?</code>", " ", page, flags=re.S)
    without = re.sub(r"<!--.*?-->", " ", without, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", without))


def own_links(report: Report) -> set[str]:
    """The bot's own link targets: the head, details pages, RTD builds, merge bases and the
    sources of the documented remedies the rows quote (escaped as HTML)."""
    urls = {safe_url(report.commit_url)}
    for row in report.rows:
        urls.add(safe_url(row.signal.url))
        remedy = remedy_for(row)
        if remedy is not None:
            urls.add(safe_url(remedy.source))
        if row.reconciliation is not None:
            urls.add(safe_url(row.reconciliation.build_url))
        if row.base is not None and row.base.commit is not None:
            urls.add(safe_url(f"{report.url.rpartition('/pull/')[0]}/commit/{row.base.commit}"))
        if row.history is not None:  # the earlier attempts' pages, the base branch's commits
            urls |= {safe_url(a.url) for a in row.history.attempts}
            if row.history.base_branch is not None:
                branch = row.history.base_branch.branch
                urls.add(safe_url(f"{report.url.rpartition('/pull/')[0]}/commits/{branch}"))
    return {html.escape(u) for u in urls if u}


def check_html(report: Report, body: str) -> str:
    """Assert what GitHub would show; returns the HTML."""
    page = to_html(body)
    assert page.startswith(f"{MARKER}\n")
    visible = re.sub(r"^(<!--[^\n]*-->\n)+", "", page)  # the marker (and hidden lines) first
    assert visible.startswith("<h3>"), page[:200]  # then the headline is the first element
    assert len(body) <= COMMENT_LIMIT
    assert body.count(MARKER) == 1 and "<!--" not in body[body.index("\n### ") :]
    tags = {t.lower() for t in re.findall(r"<(?:/)?([a-zA-Z][a-zA-Z0-9]*)", page)}
    assert tags <= EMITTED_TAGS, tags - EMITTED_TAGS
    hrefs = re.findall(r'<a href="([^"]*)"', page)
    assert hrefs and set(hrefs) <= own_links(report)
    assert page.count("<a ") == len(hrefs)
    outside = text_outside_code(page)
    for what, pattern in LIVE_PATTERNS.items():
        assert pattern.search(outside) is None, (what, pattern.search(outside))
    codes = set(code_texts(page))
    hidden = re.search(r"(\d+) more rows? (?:is|are) not shown", outside)
    shown = [row for row in report.rows if clean(row.signal.name) in codes]
    if hidden is None and "names not shown" not in outside:
        assert len(shown) == len(report.rows)  # every signal's name, verbatim
    return page


@pytest.mark.parametrize("case", list(CASES))
def test_golden_comment(case: str) -> None:
    report = CASES[case]()
    body = Renderer().markdown(report)
    assert body == golden(f"{case}.md", body)
    check_html(report, body)


def test_seed_case_json_matches_golden() -> None:
    text = report_json(seed_report())
    assert text == golden("seed_case.json", text)


# --- the seed case -------------------------------------------------------------------------


def test_seed_case_reads_like_the_contract() -> None:
    body = Renderer().markdown(seed_report())
    assert body.splitlines()[0] == MARKER
    lines = body.splitlines()[body.splitlines().index(HEADLINE) - 1 :]  # room for a hidden line
    assert lines[1] == HEADLINE
    observed = f"{DAY}{NBSP}14:03{NBSP}UTC"
    assert (
        lines[2] == f"Head [`eb46d06`]({PR_URL}/commits/{SHA}) (draft) · first observed {observed}"
    )
    since = f"{DAY}{NBSP}09:12{NBSP}UTC"
    assert lines[4] == (
        f"- ⚪ [`{DOCS}`]({BUILD_URL}) · cancelled — GitHub still shows pending · since {since}  "
    )
    rtd = next(r for r in REMEDIES if r.provider == "readthedocs")
    assert lines[5].startswith(
        f"  **{rtd.who}:** {rtd.words} ([{rtd.source_name}]({rtd.source})). Read the Docs reports "
        "build 34894885 for this exact commit as cancelled;"
    )
    assert "`build:user:cancelled`" in lines[5]
    assert "No other cause" not in lines[5]
    assert "in progress" not in body  # GitHub's description is what the row's state corrects
    assert lines[7:15] == [
        "<details><summary>✅ 4 passing</summary>",
        "",
        "- `build-wheel (3.11)`",
        "- `build-wheel (3.12)`",
        "- `DCO`",
        "- `pre-commit`",
        "",
        "</details>",
    ]
    assert lines[-2:] == [
        "Edited in place when the facts change; a notification shows the first version.",
        LAST_LINE,
    ]


def test_seed_case_plain_text_reads_cleanly() -> None:
    body = Renderer().markdown(seed_report())
    assert "&#" not in body and "&" not in body
    assert "\\" not in body  # no backslash escape anywhere, none inside names
    assert "\u2060" not in body and "\u200b" not in body
    for name in (DOCS, "build-wheel (3.11)", "DCO", "pre-commit"):
        assert f"`{name}`" in body  # copyable exactly as GitHub names it


def test_seed_case_fits_a_phone_screen() -> None:
    page = to_html(Renderer().markdown(seed_report()))
    visible = re.sub(r"<details>.*?</summary>.*?</details>", "✅ 4 passing", page, flags=re.S)
    blocks = [html.unescape(re.sub(r"<[^>]+>", "", b)).strip() for b in visible.split("\n")]
    lines = [line for b in blocks if b for line in textwrap.wrap(b, 40)]
    assert len(lines) <= 22, "\n".join(lines)  # a phone shows about 40 characters x 22 lines


def test_seed_case_json() -> None:
    data = json.loads(report_json(seed_report()))
    assert data["schema"] == "ci-status-bot.report/v1"
    assert (data["repo"], data["number"], data["head_sha"], data["draft"]) == (
        "example/omni",
        7430,
        SHA,
        True,
    )
    assert data["observed_at"] == "2026-10-05T14:03:00Z"
    assert data["verdict"] == "incomplete"
    docs = data["signals"][0]
    assert docs["name"] == DOCS
    assert (docs["kind"], docs["app"], docs["github_state"], docs["state"]) == (
        "status",
        None,
        "pending",
        "cancelled",
    )
    assert (docs["required"], docs["url"], docs["since"]) == (
        None,
        BUILD_URL,
        "2026-10-05T09:12:00Z",
    )
    rec = docs["reconciliation"]
    assert {k: rec[k] for k in list(rec)[:7]} == {
        "provider": "readthedocs",
        "project": "omni-docs",
        "build_id": 34894885,
        "build_state": "cancelled",
        "success": False,
        "builds_for_commit": 1,
        "divergent": True,
    }
    assert "no newer build exists" in rec["finding"]
    assert "No other cause" not in rec["finding"] and "(success:" not in rec["finding"]
    assert rec["notification"] == "build:user:cancelled"
    passing = data["signals"][1:]
    assert [(s["name"], s["state"], s["reconciliation"]) for s in passing] == [
        ("build-wheel (3.11)", "success", None),
        ("build-wheel (3.12)", "success", None),
        ("DCO", "success", None),
        ("pre-commit", "success", None),
    ]
    assert passing[2]["app"] == "dco"
    assert passing[0]["app"] == "github-actions"


def test_json_keeps_raw_text() -> None:
    report = reconcile(snapshot(run(HOSTILE, "failure")), {}, Policy(), now=NOW)
    data = report_dict(report)
    assert data["signals"][0]["name"] == HOSTILE


def test_json_reports_unreadable_rtd() -> None:
    signal = status(DOCS, "pending")
    report = reconcile(snapshot(signal), {DOCS: lookup(error="HTTP 403")}, Policy(), now=NOW)
    rec = report_dict(report)["signals"][0]["reconciliation"]
    assert (rec["build_id"], rec["builds_for_commit"]) == (None, None)
    assert rec["finding"] == "Could not verify with Read the Docs: HTTP 403."


# --- escaping ------------------------------------------------------------------------------


def render(*signals: Signal, **kwargs: object) -> str:
    """The comment for a pull request carrying the given signals."""
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW, **kwargs)  # type: ignore[arg-type]
    return Renderer().markdown(report)


def links(body: str) -> list[str]:
    """Every markdown link target in the body."""
    return re.findall(r"\]\(([^)\s]*)\)", body)


def test_hostile_text_is_inert_and_verbatim() -> None:
    report = hostile_report()
    body = Renderer().markdown(report)
    page = check_html(report, body)
    codes = code_texts(page)
    assert "x``y` :tada: @octocat" in codes  # a longer fence, no escapes inside
    assert "**bold** _em_ ~~del~~ $x^2$ <details> &amp; &#64;" in codes
    assert EMOJI in codes  # ZWJ sequences, skin tones, flags survive whole
    assert "ci/evil" in codes  # bidi override, word joiner, zero-width space dropped
    assert "| a | b |" in codes and "@everyone passing" in codes
    linked = '<a href="https://ci.example/1?a=%28b%29"><code>a](https://evil.example) [b</code></a>'
    assert linked in page  # link syntax inside a linked name stays inside its code span
    marker_name = clean(HOSTILE)
    assert marker_name == HOSTILE.replace("<!--", "<!\u2011\u2011")  # the one change, visible
    assert "javascript" not in "".join(re.findall(r'href="([^"]*)"', page))
    assert HOSTILE not in body  # the title is never printed by the built-in template


@pytest.mark.parametrize(
    "raw",
    [
        "Read the Docs build is in progress!",
        "@everyone please look",
        "fixes #12, GH-34 and octo/repo#56 (see owner/name@eb46d06)",
        "mail a@b.co or visit www.example.org or https://example.org/x?y=1",
        "build eb46d06c1f3a9b25 and cafe1234 :tada: :+1: ok",
        "<img src=x onerror=alert(1)> <!-- ci-status-bot:v1 --> &amp; &#64; &copy;",
        "**bold** _em_ ~~del~~ `code` ``two`` [x](y) ![i](j) $x^2$ a|b \\ end",
        "1. looks like a list",
        "- looks like a bullet",
        "FAILED tests/test_parser.py::test_unicode_escape - AssertionError",
        EMOJI,
        "JIRA-123 and ABC-9 are custom autolinks; GHSA-abcd-efgh-ijkl is an advisory",
    ],
)
def test_prose_is_verbatim_and_inert(raw: str) -> None:
    page = to_html(f"x {prose(raw, 500)}")  # mid-line, as the template places it
    shown = html.unescape(re.sub(r"<[^>]+>", "", page)).strip()
    assert shown == "x " + " ".join(clean(raw, 500).split())
    outside = text_outside_code(page)
    for what, pattern in LIVE_PATTERNS.items():
        assert pattern.search(outside) is None, (what, raw)
    alone = to_html(str(prose(raw, 500)))  # at the start of a line, too
    assert alone.startswith("<p>") and html.unescape(re.sub(r"<[^>]+>", "", alone)).strip() == (
        " ".join(clean(raw, 500).split())
    )


@pytest.mark.parametrize(
    ("raw", "markdown"),
    [
        ("Read the Docs build is in progress!", "Read the Docs build is in progress!"),
        ("build-wheel (3.11) ok.", "build-wheel (3.11) ok."),
        ("@user and #12.", "`@user` and `#12`."),
        ("see (tests/test_x.py::test_y).", "see (`tests/test_x.py::test_y`)."),
        ("a <b> c", "a `<b>` c"),
        ("09:12 UTC, success: false", "09:12 UTC, success: false"),
        ("build:user:cancelled.", "`build:user:cancelled`."),
        # punctuation after a URL is the sentence's, not the URL's: outside the span
        ("(see https://x.example):", "(see `https://x.example`):"),
        ("https://x.example/a(b): ok", "`https://x.example/a(b)`: ok"),
        ("at https://x.example;", "at `https://x.example`;"),
        ("1. item", "1\\. item"),
        ("- item", "\\- item"),
        ("a\nb\tc", "a b c"),
        (None, ""),
        (34894885, "34894885"),
    ],
)
def test_prose_filter(raw: object, markdown: str) -> None:
    assert prose(raw) == markdown


@pytest.mark.parametrize(
    ("raw", "markdown"),
    [
        ("build-wheel (3.11)", "`build-wheel (3.11)`"),
        ("a`b", "``a`b``"),
        ("`a`", "`` `a` ``"),
        ("x ``` y", "````x ``` y````"),
        (" a ", "`  a  `"),
        ("a\nb", "`a b`"),
        ("x\x00\x07\u202e\u2060\u200by", "`xy`"),
        ("👩\u200d💻", "`👩\u200d💻`"),
        ("a\u200db", "`ab`"),
        ("<!-- ci-status-bot:v1 -->", "`<!\u2011\u2011 ci-status-bot:v1 -->`"),
    ],
)
def test_code_filter(raw: str, markdown: str) -> None:
    assert code(raw) == markdown
    inner = code_texts(to_html(f"x {code(raw)}"))
    assert inner == [clean(raw) or " "]


# Default_Ignorable_Code_Point, Unicode 14.0 (Python's unicodedata), from
# https://www.unicode.org/Public/14.0.0/ucd/DerivedCoreProperties.txt (checked against perl's
# \p{Default_Ignorable_Code_Point}): nothing a reader sees; the comment shows none of them.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip


def test_default_ignorable_characters_never_reach_a_code_span() -> None:
    # "DCO" + U+034F looked exactly like "DCO" (adversarial review, adv/c5.py)
    for low, high in DEFAULT_IGNORABLE:
        for point in range(low, high + 1):
            assert code(f"DCO{chr(point)}x") == "`DCOx`", hex(point)
            assert prose(f"a{chr(point)}b") == "ab", hex(point)


@pytest.mark.parametrize(
    "kept",
    [
        "❤\ufe0f",  # VS16 after an emoji
        "#\ufe0f\u20e3",  # a keycap
        "❤\ufe0f\u200d🔥",  # ZWJ after VS16
        "👩🏽\u200d💻",  # ZWJ after a skin tone
        SCOTLAND,  # tag characters of a flag
        "\u845b\U000e0100",  # an ideographic variation sequence (葛 + VS17)
        "\u2229\ufe00",  # a standardized variation sequence of a math symbol (∩ + VS1)
        "\u1000\ufe00",  # and of a Myanmar letter
        "\u1820\u180b",  # a Mongolian free variation selector after a Mongolian letter
        "e\u0301",  # a combining accent is visible
        "a\u2800b",  # the braille blank has a width: kept inside a name
    ],
)
def test_characters_that_belong_to_a_sequence_survive(kept: str) -> None:
    assert code(kept) == f"`{kept}`"


@pytest.mark.parametrize(
    "raw",
    [
        "DC\u041e\ufe00",  # a variation selector after a Cyrillic look-alike: no sequence
        "DC\u041e\U000e0100",  # an ideographic selector after a letter that is no ideograph
        "\u0627\u180b",  # a Mongolian selector after an Arabic letter
        "1\ufe0f",  # VS16 after a digit that is no keycap
    ],
)
def test_selectors_outside_their_sequences_are_dropped(raw: str) -> None:
    assert code(raw) == f"`{raw[:-1]}`"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("", "(empty)"),
        ("   ", "(blank: U+0020)"),
        ("\u3164", "(blank: U+3164)"),  # Hangul filler
        ("\u2062\u00ad", "(blank: U+2062 U+00AD)"),  # only format characters
        ("\u2800", "(blank: U+2800)"),  # braille blank
        ("\u3000\u200a", "(blank: U+3000 U+200A)"),
        ("\ufe0f", "(blank: U+FE0F)"),
        ("\u200b\u200c\u200d\u2060\ufeff", "(blank: U+200B U+200C U+200D …)"),
    ],
)
def test_a_blank_name_is_said_never_an_empty_looking_span(raw: str, shown: str) -> None:
    assert code(raw) == shown
    assert code_texts(to_html(f"x {code(raw)}")) == []  # no code span at all


@pytest.mark.parametrize(
    ("raw", "cut"),
    [
        ("a" * 197 + "👩\u200d💻xx", "a" * 197 + "…"),  # never a dangling ZWJ
        ("a" * 198 + "👩\u200d💻", "a" * 198 + "…"),  # never half a ZWJ sequence
        ("a" * 198 + "🇫🇷x", "a" * 198 + "…"),  # never half a flag
        ("a" * 197 + "🇫🇷🇩🇪", "a" * 197 + "🇫🇷…"),
        ("a" * 198 + "e\u0301x", "a" * 198 + "…"),  # never a letter without its accent
        ("a" * 198 + "👍🏽x", "a" * 198 + "…"),  # never a hand without its skin tone
        ("a" * 198 + "\u1100\u1161x", "a" * 198 + "…"),  # never half a Hangul syllable
        ("a" * 198 + "bcd", "a" * 198 + "b…"),
    ],
)
def test_a_cut_falls_between_graphemes(raw: str, cut: str) -> None:
    assert clean(raw) == cut
    assert code(raw) == f"`{cut}`"


def test_annotations_quote_their_first_visible_line_and_no_empty_path() -> None:
    # adv/c11.py: a first line of only U+200B quoted an empty span and hid the message; an
    # empty path rendered "` `: `boom`"
    tests = run("tests", "failure", node_id="N1", database_id=1)
    report = reconcile(snapshot(tests), {}, Policy(), now=NOW)
    first = with_annotations(
        report,
        {1: (Annotation("src/a.py", 3, 3, "\u200b\n\u3164\nAssertionError: expected 1"),
             Annotation("", None, None, "boom"),
             Annotation("\u200b", 7, 7, "bang"))},
    )  # fmt: skip
    body = Renderer().markdown(first)
    assert "\n  `src/a.py:3`: `AssertionError: expected 1`  \n" in body
    assert "\n  `boom`  \n" in body
    assert "\n  line 7: `bang`\n" in body
    assert "` `" not in body
    second = with_annotations(report, {1: (Annotation("src/b.py", 9, 9, "\u200b"),)})
    body = Renderer().markdown(second)
    assert "\n  `src/b.py:9`\n" in body and "` `" not in body


def test_a_summary_line_blank_after_cleaning_is_not_its_first_meaningful_line() -> None:
    assert first_meaningful_line("\u3164\n\u200b\u2060\nreal words") == "real words"
    assert first_meaningful_line("\u3164 \u115f") is None
    body = render(run("lint", "failure", description="\u200b\u3164", summary="\u3164\nE501"))
    row = body.split("\n- ❌ ", 1)[1].split("\n\n", 1)[0]
    assert "“”" not in row and " —  — " not in row and "E501" in row, row


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain", "plain"),
        ("build-wheel (3.11)", "build\\-wheel \\(3\\.11\\)"),
        ("a\nb\tc\r\nd", "a b c  d"),
        ("x\x00\x07\u202ey", "xy"),
        ("[x](y)", "\\[x\\]\\(y\\)"),
        ("<b>&", "&lt;b&gt;&amp;"),
        ("\"'", "&quot;&#39;"),
        ("@user", "&#64;&#8288;user"),
        ("#12", "&#35;&#8288;12"),
        ("https://x.org", "https&#58;//x\\.org"),
        ("*_`~|!{}+\\", "\\*\\_\\`\\~\\|\\!\\{\\}\\+\\\\"),
        (None, ""),
        (34894885, "34894885"),
    ],
)
def test_md_escapes_table_cells(raw: object, escaped: str) -> None:
    assert md(raw) == escaped  # the triage view's tables; the comment never uses it


def test_text_is_capped() -> None:
    assert code("x" * 500) == "`" + "x" * 199 + "…`"
    assert prose("x" * 200) == "x" * 200
    assert prose("x" * 500, 50) == "x" * 49 + "…"


def test_quoted_source_text() -> None:
    assert quoted("Build queued") == "“Build queued”"
    assert quoted("tests/test_x.py::test_y") == "`tests/test_x.py::test_y`"
    assert quoted("") == ""
    assert quoted("1. first") == "“1. first”"  # not at a line's start: nothing to escape
    assert prose("at 2026-10-05 13:30 UTC.") == f"at {DAY}{NBSP}13:30{NBSP}UTC."


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        (BUILD_URL, BUILD_URL),
        ("https://x.org/a(b)", "https://x.org/a%28b%29"),
        ("https://x.org/a b\"<>'", "https://x.org/a%20b%22%3C%3E%27"),
        ("https://x.org/?q=1&r=2#frag", "https://x.org/?q=1&r=2#frag"),
        ("https://x.org/%41", "https://x.org/%41"),
        ("  HTTP://x.org/  ", "HTTP://x.org/"),
        ("https://x.org/[a]\\`", "https://x.org/%5Ba%5D%5C%60"),
        ("javascript:alert(1)", None),
        ("JavaScript://x.org/%0Aalert(1)", None),
        ("data:text/html,<b>x</b>", None),
        ("//evil.example/x", None),
        ("/relative/path", None),
        ("http:///no-host", None),
        ("https://[::1", None),
        ("", None),
        (None, None),
    ],
)
def test_url_filter(raw: str | None, safe: str | None) -> None:
    assert safe_url(raw) == safe


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 10, 5, 9, 12, 59, tzinfo=UTC), "2026-10-05 09:12 UTC"),
        (datetime(2026, 10, 5, 11, 12, tzinfo=UTC).astimezone(), "2026-10-05 11:12 UTC"),
        (datetime(2026, 10, 5, 9, 12), "2026-10-05 09:12 UTC"),
    ],
)
def test_utc_filter(value: datetime, text: str) -> None:
    assert format_utc(value) == text
    assert utc(value) == text.replace(" ", NBSP).replace("-", NB_HYPHEN)  # never wraps inside


@pytest.mark.parametrize(("sha", "short"), [(SHA, "eb46d06"), ("eb4<x>", "eb4")])
def test_short_filter(sha: str, short: str) -> None:
    assert short_sha(sha) == short


# --- content rules -------------------------------------------------------------------------


def test_no_signals_says_so_and_never_pending() -> None:
    body = render()
    assert headline(body) == "### ⚪ Incomplete · nothing reported"  # more may come
    assert NO_SIGNALS_NOTE in body
    assert "pending" not in body.lower()


def test_truncated_read_is_said() -> None:
    report = reconcile(snapshot(run("a", "success"), truncated=True), {}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert headline(body) == "### ⚪ Incomplete · 1 passing"  # the unread may be running
    assert TRUNCATED_NOTE in body


def test_a_row_says_its_own_since_whatever_else_shows_the_same_minute() -> None:
    # the merge base failing in the same minute, or a title quoting that time, is not the
    # row's since: the row keeps it (adversarial review, adv/c7.py)
    tests = run("tests", "failure", workflow="ci", completed_at=at(13, 52), required=True)
    on_base = run("tests", "failure", workflow="ci", event="push", completed_at=at(13, 52))
    report = with_base(
        reconcile(snapshot(tests), {}, Policy(), now=NOW), MergeBase(MERGE_BASE, (on_base,))
    )
    body = Renderer().markdown(report)
    row = next(line for line in body.splitlines() if line.startswith("- ❌ `tests`"))
    assert row.endswith(f"· since {DAY}{NBSP}13:52{NBSP}UTC  "), row
    lint = run("lint", "failure", completed_at=at(13, 52),
               description="flake8 run of 2026-10-05 13:52 UTC")  # fmt: skip
    row = next(line for line in render(lint).splitlines() if line.startswith("- ❌ `lint`"))
    assert row.endswith(f"· since {DAY}{NBSP}13:52{NBSP}UTC  "), row


def test_a_running_build_rtd_dates_gives_the_rows_since_once() -> None:
    # the bot's own finding states the build's start as the row's since: said once, there
    running = lookup(build("building", None, created=at(13, 52), url=None))
    signal = status(DOCS, "pending", created_at=at(13, 52))
    body = Renderer().markdown(reconcile(snapshot(signal), {DOCS: running}, Policy(), now=NOW))
    assert f"as building since {DAY}{NBSP}13:52{NBSP}UTC" in body
    assert body.count("13:52") == 1


def test_stale_row_is_dated_absolutely_once() -> None:
    body = render(status("ci/x", "pending", created_at=at(9, 12)))
    row = next(line for line in body.splitlines() if line.startswith("- ⚪ `ci/x`"))
    assert row == (
        f"- ⚪ `ci/x` · stale — GitHub still shows pending, longer than the 120-minute limit · "
        f"since "
        f"{DAY}{NBSP}09:12{NBSP}UTC"
    )
    assert body.count("09:12") == 1
    assert " hours" not in body and " ago" not in body


def test_a_build_stuck_on_rtd_says_its_time_and_the_limit_once() -> None:
    stuck = lookup(build("triggered", None, created=at(9, 30), url=None))
    signal = status(DOCS, "pending", created_at=at(9, 30))
    body = Renderer().markdown(reconcile(snapshot(signal), {DOCS: stuck}, Policy(), now=NOW))
    assert f"- ⚪ `{DOCS}` · stale — GitHub still shows pending  \n" in body
    assert body.count("09:30") == 1 and body.count("120-minute limit") == 1


def test_a_stale_signal_rtd_cannot_settle_still_says_the_limit() -> None:
    odd = lookup(build("weird-state", None, created=at(9, 30), url=None))
    signal = status(DOCS, "pending", created_at=at(9, 30))
    body = Renderer().markdown(reconcile(snapshot(signal), {DOCS: odd}, Policy(), now=NOW))
    shows = "GitHub still shows pending, longer than the 120-minute limit"
    assert f"`{DOCS}` · stale — {shows} · since" in body
    assert body.count("120-minute limit") == 1


def test_rows_in_attention_order_required_first() -> None:
    body = render(
        run("p", "queued", started_at=NOW),
        status("s", "pending", created_at=at(9, 0)),
        run("c", "cancelled"),
        run("f-optional", "failure", required=False),
        run("f-unsaid", "failure"),
        run("f-required", "failure", required=True),
        status("u", "expected"),
        run("t", "timed_out"),
        run("ok", "success"),
    )
    names = re.findall(r"^- \S+ `([^`]+)`", body, flags=re.M)
    assert names == ["f-required", "f-unsaid", "t", "f-optional", "c", "s", "u", "p"]
    assert headline(body) == (
        "### ❌ Failing · 4 failing (1 required) · 1 cancelled · 1 stale · 1 unknown · "
        "1 pending · 1 passing"
    )
    assert "`f-required` · failed · required ·" in body
    assert "`f-optional` · failed · since" in body  # optional rows are not marked
    assert "· optional" not in body
    assert "`f-unsaid` · failed · since" in body  # GitHub did not say: nothing claimed


def test_headline_counts_like_the_contract() -> None:
    body = render(
        run("a", "failure", required=True),
        run("b", "queued", started_at=NOW),
        *(run(f"ok{i}", "success") for i in range(6)),
    )
    assert headline(body) == "### ❌ Failing · `a` failed (required) · 1 pending · 6 passing"
    assert "failure, action_required or timed_out" not in body
    three = render(
        *(run(n, "failure", required=n == "a") for n in "abc"),
        run("p", "queued", started_at=NOW),
        *(run(f"ok{i}", "success") for i in range(6)),
    )
    assert headline(three) == "### ❌ Failing · 3 failing (1 required) · 1 pending · 6 passing"
    pending = render(run("a", "queued", started_at=NOW), run("b", "success"))
    assert headline(pending) == "### ⏳ Pending · 1 pending · 1 passing"
    passing = render(run("a", "success"))
    assert headline(passing) == "### ✅ Passing · 1 passing"


def test_passing_states_other_than_success_are_labelled() -> None:
    body = render(run("a", "skipped"), run("b", "neutral"), run("c", "success"))
    assert "- `a` (skipped)\n- `b` (neutral)\n- `c`\n" in body
    assert "<details><summary>✅ 3 passing</summary>" in body


def test_signal_and_build_links_pass_the_url_filter() -> None:
    rtd = lookup(build("finished", False, url="https://readthedocs.org/b/(1)"))
    signal = status(DOCS, "pending", url="javascript:alert(1)")
    report = reconcile(snapshot(signal), {DOCS: rtd}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert links(body) == [f"{PR_URL}/commits/{SHA}", "https://readthedocs.org/b/%281%29"]


def test_a_separate_build_page_is_linked_after_the_finding() -> None:
    rtd = lookup(build("finished", False, url="https://readthedocs.org/b/2/"))
    signal = status(DOCS, "failure", url="https://ci.example/details")
    report = reconcile(snapshot(signal), {DOCS: rtd}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert links(body)[1:] == ["https://ci.example/details", "https://readthedocs.org/b/2/"]
    assert "[RTD build](https://readthedocs.org/b/2/)" in body


def test_first_seen_is_labelled_as_the_bots_own() -> None:
    signal = run("j", "queued", started_at=None)
    body = render(signal, first_seen={signal.key: at(13, 0)})
    assert f"`j` · pending · first seen by this bot {DAY}{NBSP}13:00{NBSP}UTC" in body


def test_a_signal_without_time_says_github_gives_none_and_invents_none() -> None:
    body = render(run("j", "queued", started_at=None))
    assert "\n- ⏳ `j` · pending · GitHub gives no time for it\n" in body  # issue 15, item 10


def test_nothing_is_said_twice() -> None:
    dco = run("DCO", "action_required", app="dco", description="DCO",
              summary="DCO\n\nThere is one commit incorrectly signed off.")  # fmt: skip
    body = render(dco, run("b", "failure"), run("c", "failure"))  # counted: the row quotes it
    row = body.split("\n- ❌ `DCO`", 1)[1].split("\n- ", 1)[0]
    assert row.count("`DCO`") == 0 and "“There is one commit incorrectly signed off.”" in row
    assert body.count("incorrectly signed off") == 1
    named = render(dco)  # named: the headline quotes it, the row does not again
    assert named.count("incorrectly signed off") == 1 and "signed off.”" in headline(named)
    assert "”." not in body and "!”" not in body  # no doubled punctuation after a quote
    cancelled = lookup(build("cancelled", False), notes=("build:user:cancelled",))
    failed = status(DOCS, "failure", description="Read the Docs build failed!")
    body = Renderer().markdown(reconcile(snapshot(failed), {DOCS: cancelled}, Policy(), now=NOW))
    assert "cancelled — GitHub shows failure" in body
    assert body.count("failure") == 1  # "GitHub's status says failure." is not repeated


def test_check_summary_first_meaningful_line_with_test_id_in_code() -> None:
    body = Renderer().markdown(failing_required_report())
    assert (
        "“1 failed, 212 passed in 41.20s” — “FAILED `tests/test_parser.py::test_unicode_escape` "
        "- AssertionError: '`\\\\u00e9`' != 'é'”"
    ) in body
    assert "Failures" not in body and "More lines" not in body


@pytest.mark.parametrize(
    ("summary", "line"),
    [
        ("## Results\n\n**3 tests failed**\n\nmore", "3 tests failed"),
        ("* first item\n* second", "first item"),
        ("<details>\n\n| a | b |\n|---|---|\n\nText here", "Text here"),
        ("```\ncode\n```\nAfter", "code"),
        ("Title\n=====\n\nBody", "Body"),
        ("## Only a heading", "Only a heading"),
        ("DCO\nreal line", "real line"),
        ("", None),
        (None, None),
    ],
)
def test_first_meaningful_summary_line(summary: str | None, line: str | None) -> None:
    assert first_meaningful_line(summary, said=frozenset({"dco"})) == line


def test_passing_row_that_differs_from_github_is_shown_in_full() -> None:
    rtd = lookup(build("finished", True, finished=at(13, 30)))
    signal = status(DOCS, "pending", created_at=at(13, 0))
    others = (run("lint", "success"),)
    report = reconcile(snapshot(signal, *others), {DOCS: rtd}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert f"- ✅ [`{DOCS}`]({BUILD_URL}) · passed — GitHub still shows pending · since" in body
    assert "<details><summary>✅ 1 more passing</summary>\n\n- `lint`\n" in body
    assert headline(body) == "### ✅ Passing · 2 passing"


# --- size ----------------------------------------------------------------------------------


def test_five_thousand_failing_signals_fit() -> None:
    body = render(*many(5000, "failure"))
    assert len(body) <= COMMENT_LIMIT
    hidden = re.search(r"^(\d+) more rows are not shown \(comment size limit\)\.$", body, re.M)
    assert hidden is not None
    shown = body.count("\n- ❌ ")
    assert shown > 100 and shown + int(hidden.group(1)) == 5000
    assert headline(body) == "### ❌ Failing · 5000 failing"
    assert body.splitlines()[-1] == LAST_LINE


def test_five_thousand_mixed_collapse_passing_first_then_cut_rows() -> None:
    body = Renderer().markdown(five_thousand_report())
    assert len(body) <= COMMENT_LIMIT
    assert "✅ 1000 passing (names not shown: comment size limit)" in body
    assert "<details>" not in body
    assert re.search(r"^\d+ more rows are not shown", body, re.M)


def test_huge_urls_and_texts_are_not_linked_or_quoted_whole() -> None:
    huge = "https://ci.example/" + "a" * 70_000
    signals = [
        run(f"job {i}", "failure", url=huge, description="d " * 40_000, summary=huge)
        for i in range(6)
    ]
    body = render(*signals)
    assert len(body) < 6_000 and body.count("\n- ❌ `job ") == 6
    assert "ci.example" not in "".join(links(body))


def test_many_passing_signals_collapse_to_a_count() -> None:
    body = render(*many(1200, "success"), run("broken", "failure"))
    assert len(body) <= COMMENT_LIMIT
    assert "✅ 1200 passing (names not shown: comment size limit)" in body
    assert "`broken`" in body
    assert "not shown (comment size limit)" not in body


def test_small_report_is_not_shrunk() -> None:
    body = render(*many(20, "success"))
    assert "<details><summary>✅ 20 passing</summary>" in body
    assert body.count("\n- `matrix-job-") == 20


# --- templates -----------------------------------------------------------------------------


def user_template(tmp_path: Path, text: str) -> Renderer:
    """A renderer over a user folder holding the given status-comment template."""
    (tmp_path / "status_comment.md.j2").write_text(text, encoding="utf-8")
    return Renderer(tmp_path)


def test_user_template_folder_is_searched_first(tmp_path: Path) -> None:
    renderer = user_template(tmp_path, "{{ marker }}\nPR {{ report.number }}: {{ report.title }}\n")
    renderer.validate()
    assert visible(renderer.markdown(seed_report())) == f"{MARKER}\nPR 7430: Add the omni docs\n"


def test_a_naive_user_template_gets_only_escaped_text(tmp_path: Path) -> None:
    renderer = user_template(
        tmp_path,
        "{{ marker }}\n{{ report.title }} / {{ report.rows[0].signal.name }} / "
        "{{ report.title|safe }} / {{ report.title ~ '' }}\n",
    )
    report = dataclasses.replace(hostile_report(), title="@everyone see #1 <b>x</b> :tada:")
    body = renderer.markdown(report)
    assert "`@everyone` see `#1 <b>x</b> :tada:`" in body
    assert body.count("`@everyone` see `#1 <b>x</b> :tada:`") == 3  # safe is no way out
    outside = text_outside_code(to_html(body))
    for what, pattern in LIVE_PATTERNS.items():
        assert pattern.search(outside) is None, what


def test_a_template_printing_text_piece_by_piece_stays_inert(tmp_path: Path) -> None:
    renderer = user_template(
        tmp_path, "{{ marker }}\n{% for c in report.title %}{{ c }}{% endfor %}\n"
    )
    report = dataclasses.replace(seed_report(), title="@everyone #1 :tada:")
    outside = text_outside_code(to_html(renderer.markdown(report)))
    for what in ("mention", "reference", "emoji shortcode"):
        assert LIVE_PATTERNS[what].search(outside) is None, what


def test_the_marker_is_the_first_line_whatever_the_template_does(tmp_path: Path) -> None:
    renderer = user_template(tmp_path, "Hello\n{{ marker }}\nbye {{ marker }}\n")
    body = renderer.markdown(seed_report())
    assert visible(body).startswith(f"{MARKER}\nHello\n") and body.count(MARKER) == 1
    with pytest.raises(TemplateInvalid, match="first line must be the marker"):
        renderer.validate()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no marker at all\n", "first line must be the marker"),
        ("{{ nothing }}", "UndefinedError"),
        ("{{ marker }\n", "TemplateSyntaxError"),
    ],
)
def test_unusable_user_templates_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(TemplateInvalid, match=problem):
        user_template(tmp_path, text).validate()


def test_a_missing_template_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TemplateInvalid, match="is not a folder"):
        Renderer(tmp_path / "absent").validate()


def test_the_packaged_template_is_valid(tmp_path: Path) -> None:
    Renderer().validate()
    Renderer(tmp_path).validate()  # an empty user folder falls back to the packaged one


def test_undefined_names_fail_loudly(tmp_path: Path) -> None:
    with pytest.raises(jinja2.UndefinedError):
        user_template(tmp_path, "{{ nothing }}").markdown(seed_report())


def test_empty_user_folder_falls_back_to_packaged(tmp_path: Path) -> None:
    assert Renderer(tmp_path).markdown(seed_report()) == Renderer().markdown(seed_report())


def test_observed_at_replacement_changes_only_the_head_line() -> None:
    report = seed_report()
    later: Report = dataclasses.replace(report, observed_at=NOW + timedelta(days=1))
    first, second = visible(Renderer().markdown(report)), visible(Renderer().markdown(later))
    diff = [a for a, b in zip(first.splitlines(), second.splitlines(), strict=True) if a != b]
    assert len(diff) == 1 and diff[0].startswith("Head [`eb46d06`]")
    assert f"first observed {DAY}{NBSP}14:03{NBSP}UTC" in diff[0]
    assert later.verdict is Verdict.INCOMPLETE


def test_fingerprint_follows_the_templates_in_use(tmp_path: Path) -> None:
    packaged = Renderer().fingerprint
    assert packaged == Renderer().fingerprint
    assert Renderer(tmp_path).fingerprint == packaged
    (tmp_path / "status_comment.md.j2").write_text("{{ marker }}\n", encoding="utf-8")
    assert Renderer(tmp_path).fingerprint != packaged


@pytest.mark.parametrize("command", ["check-config", "once", "run"])
def test_cli_refuses_a_template_without_the_marker(tmp_path: Path, command: str) -> None:
    world = World()
    seed_case(world, now=datetime.now(UTC))
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "status_comment.md.j2").write_text("Status: {{ report.title }}\n", encoding="utf-8")
    with Sandbox(world) as sandbox:
        config = write_config(tmp_path, sandbox)
        config.write_text(
            config.read_text(encoding="utf-8") + f'[render]\ntemplate_dir = "{folder}"\n',
            encoding="utf-8",
        )
        result = cli(command, "--config", str(config), timeout=30)
        assert [r for r in sandbox.requests if r.service == "github"] == []
    assert result.returncode == 2, result.stdout + result.stderr
    assert "render.template_dir:" in result.stderr
    assert "first line must be the marker <!-- ci-status-bot:v1 -->" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_facts_stamp_follows_the_marker_and_reads_back() -> None:
    report = seed_report()
    later: Report = dataclasses.replace(report, observed_at=NOW + timedelta(days=1))
    first, second = Renderer().markdown(report), Renderer().markdown(later)
    assert first.splitlines()[1] == stamp_line(stamp_of(report))  # hidden: read back
    assert parse_stamp(first) == stamp_of(report)
    assert parse_stamp(second) == stamp_of(later)
    assert (stamp_of(later).facts_key, stamp_of(later).observed_at) == (
        facts_key(later),
        later.observed_at,
    )
    diff = [a for a, b in zip(first.splitlines(), second.splitlines(), strict=True) if a != b]
    assert len(diff) == 2  # the stamp and the visible "first observed" line, nothing else


# --- a pull request in the merge queue -----------------------------------------------------

GROUP_SHA = "9c1e5a7d3b8f2e4a6c0d1b3f5e7a9c2d4f6b8e0a"
QUEUED_AT = at(13, 22)


def queued_report(
    group: tuple[Signal, ...] | None,
    *,
    required: tuple[str, ...],
    expected: tuple[str, ...] = (),
    timeout: int | None = 60,
) -> Report:
    """The pull request's head passes everything; GitHub's merge queue holds it since 13:22 and
    its merge-group commit carries `group` (None: no merge queue)."""
    checks = RequiredChecks("main", True, tuple(RequiredContext(n, MAIN_RULE) for n in required))
    head = (
        run("tests", "success", workflow="ci", completed_at=at(13, 10), required=True),
        run("DCO", "success", app="dco", description="DCO", completed_at=at(13, 1)),
        status(DOCS, "success", description="Read the Docs build succeeded!",
               created_at=at(13, 5)),
    )  # fmt: skip
    entry = None
    if group is not None:
        entry = QueueEntry(QueueState.AWAITING_CHECKS, "AWAITING_CHECKS", 1, QUEUED_AT,
                           GROUP_SHA, "b" * 40)  # fmt: skip
    snap = dataclasses.replace(snapshot(*head), required_checks=checks, base="main", queue=entry)
    report = reconcile(snap, {}, Policy(), now=NOW, expected=expected)
    if entry is None:
        return report
    read = QueueRead(MergeBase(GROUP_SHA, group), QueueConfig(timeout))
    return dataclasses.replace(report, merge_queue=judge_queue(entry, read, checks, expected))


def rtd_and_dco_missing_report() -> Report:
    """Read the Docs and the DCO app never reported on the merge-group commit."""
    tests = run("tests", "success", workflow="ci", completed_at=at(13, 30), event="merge_group")
    return queued_report((tests,), required=("tests", "DCO", DOCS))


def no_checks_in_queue_report() -> Report:
    """Nothing at all reported on the merge-group commit (a `[[repos]] expected` name too)."""
    return queued_report((), required=("tests",), expected=("DCO",))


def one_failing_in_queue_report() -> Report:
    """One required check failed on the merge-group commit (it passed on the head)."""
    tests = run("tests", "failure", workflow="ci", completed_at=at(13, 40), event="merge_group",
                url="https://github.com/example/omni/actions/runs/77/job/88",
                description="2 failed, 210 passed")  # fmt: skip
    dco = run("DCO", "success", app="dco", completed_at=at(13, 23))
    return queued_report((tests, dco), required=("tests", "DCO"))


def not_queued_report() -> Report:
    return queued_report(None, required=("tests",))


QUEUE_CASES: dict[str, Callable[[], Report]] = {
    "queue_rtd_and_dco_missing": rtd_and_dco_missing_report,
    "queue_no_checks": no_checks_in_queue_report,
    "queue_one_failing": one_failing_in_queue_report,
    "queue_not_queued": not_queued_report,
}


def queue_links(report: Report) -> set[str]:
    """The merge-queue section's link targets: the merge-group commit, the failing checks'
    details pages, and the sources of the documented behaviours it quotes."""
    found = report.merge_queue
    if found is None:
        return set()
    urls = {safe_url(f"{report.url.rpartition('/pull/')[0]}/commit/{found.entry.commit}")}
    urls |= {safe_url(s.url) for s in found.failing}
    urls |= {safe_url(d.source) for s in found.missing if (d := documented_for(s)) is not None}
    return {html.escape(u) for u in urls if u}


@pytest.mark.parametrize("case", list(QUEUE_CASES))
def test_golden_merge_queue_comment(case: str) -> None:
    report = QUEUE_CASES[case]()
    body = Renderer().markdown(report)
    assert body == golden(f"{case}.md", body)
    page = to_html(body)
    hrefs = set(re.findall(r'<a href="([^"]*)"', page))
    assert hrefs <= own_links(report) | queue_links(report)
    outside = text_outside_code(page)
    for what, pattern in LIVE_PATTERNS.items():
        assert pattern.search(outside) is None, (what, pattern.search(outside))
    json_text = report_json(report)
    assert json_text == golden(f"{case}.json", json_text)


def test_the_queue_entry_is_never_passing_while_a_required_context_is_missing() -> None:
    for make in (rtd_and_dco_missing_report, no_checks_in_queue_report):
        body = Renderer().markdown(make())
        section = next(line for line in body.splitlines() if "**Merge queue**" in line)
        assert section.startswith("⏳ **Merge queue**: awaiting checks, queued 2026")
        assert "passed" not in section and "✅" not in section
    body = Renderer().markdown(rtd_and_dco_missing_report())
    rows = [line for line in body.splitlines() if "not reported on merge-group commit" in line]
    assert [r.split("`")[1] for r in rows] == ["DCO", DOCS]  # one row per missing context
    minutes = "queued 41 min ago as of 2026\u201110\u201105\u00a014:03\u00a0UTC"
    assert all(minutes in r and r.endswith("the queue gives up after 60 min  ") for r in rows)
    assert "[`readthedocs/readthedocs.org#10021`](https://github.com/readthedocs/" in body
    assert "[`opentdf/web-sdk#1036`](https://github.com/opentdf/web-sdk/pull/1036)" in body


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (rtd_and_dco_missing_report, " · merge queue: 2 not reported on the merge-group commit"),
        (no_checks_in_queue_report, " · merge queue: 2 not reported on the merge-group commit"),
        (one_failing_in_queue_report, " · merge queue: 1 failing on the merge-group commit"),
        (not_queued_report, ""),
    ],
)
def test_the_headline_never_reads_passing_alone_while_the_queue_entry_is_stuck(
    make: Callable[[], Report], said: str
) -> None:
    """The head passes, but the queue waits on (or failed) the merge-group commit: the first
    line says so, so "✅ Passing" is never the whole headline of a stuck queued pull request."""
    first = headline(Renderer().markdown(make()))
    assert first.startswith("### ✅ Passing · ")
    assert first.endswith(said) if said else "merge queue" not in first


def test_merge_queue_json() -> None:
    data = report_dict(rtd_and_dco_missing_report())["merge_queue"]
    assert data == {
        "state": "AWAITING_CHECKS",
        "position": 1,
        "enqueued_at": "2026-10-05T13:22:00Z",
        "commit": GROUP_SHA,
        "base_commit": "b" * 40,
        "timeout_minutes": 60,
        "verdict": "pending",
        "checks": 1,
        "missing": ["DCO", DOCS],
        "failing": [],
        "pending": [],
        "errors": [],
    }
    assert report_dict(not_queued_report())["merge_queue"] is None
    failing = report_dict(one_failing_in_queue_report())["merge_queue"]
    said = (failing["failing"], failing["missing"], failing["verdict"])
    assert said == (["tests"], [], "failing")


def test_the_merge_queue_is_in_the_facts_key_only_when_queued() -> None:
    plain = queued_report(None, required=("tests", "DCO", DOCS))
    queued = rtd_and_dco_missing_report()
    assert facts_key(plain) == facts_key(dataclasses.replace(queued, merge_queue=None))
    assert facts_key(queued) != facts_key(plain)
    later = dataclasses.replace(queued, observed_at=NOW + timedelta(minutes=30))
    assert facts_key(later) == facts_key(queued)  # the minutes are said as of observed_at
