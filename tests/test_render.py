"""Tests of the markdown comment, its filters and the JSON report (golden files, no mocks)."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jinja2
import pytest
from test_reconcile import (
    BUILD_URL,
    DOCS,
    NOW,
    PR_URL,
    SHA,
    at,
    build,
    lookup,
    run,
    seed_report,
    snapshot,
    status,
)

from bot.model import MARKER, Policy, Report, Verdict
from bot.reconcile import NO_SIGNALS_NOTE, reconcile
from bot.render import (
    COMMENT_LIMIT,
    Renderer,
    facts_key,
    facts_stamp,
    format_utc,
    md,
    parse_facts_stamp,
    report_dict,
    report_json,
    safe_url,
    short_sha,
)

GOLDEN = Path(__file__).parent / "golden"
LAST_LINE = "This bot reads CI state and retriggers nothing."
HOSTILE = "@everyone <img src=x> [x](javascript:alert(1)) <!-- ci-status-bot:v1 --> #1 `code`"
ALLOWED_TAGS = re.compile(r"</?(code|details|summary)>")


def golden(name: str, text: str) -> str:
    """The golden file's text; rewritten first when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


def render(*signals: object, **kwargs: object) -> str:
    """The comment for a pull request carrying the given signals."""
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW, **kwargs)  # type: ignore[arg-type]
    return Renderer().markdown(report)


def links(body: str) -> list[str]:
    """Every markdown link target in the body."""
    return re.findall(r"\]\(([^)\s]*)\)", body)


# --- the seed case -------------------------------------------------------------------------


def test_seed_case_matches_golden() -> None:
    body = Renderer().markdown(seed_report())
    assert body == golden("seed_case.md", body)


def test_seed_case_json_matches_golden() -> None:
    text = report_json(seed_report())
    assert text == golden("seed_case.json", text)


def test_seed_case_comment_reads_like_the_contract() -> None:
    body = Renderer().markdown(seed_report())
    lines = body.splitlines()
    assert lines[0] == MARKER
    assert lines.pop(1) == facts_stamp(seed_report())  # hidden: read back when adopting
    assert lines[1] == (
        f"Observed 2026-10-05 14:03 UTC on head [`eb46d06`]({PR_URL}/commits/{SHA}) (draft)."
    )
    assert lines[-1] == LAST_LINE
    text = html.unescape(body).replace("\\", "")
    assert "**Verdict: incomplete.**" in text
    assert "Passing (4): <code>build-wheel (3.11)</code>, <code>build-wheel (3.12)</code>, " in text
    assert "<code>docs/readthedocs.org:omni-docs</code>" in text
    assert "GitHub reports pending since 2026-10-05 09:12 UTC." in text
    assert "build 34894885 for this exact commit as cancelled (success: false)" in text
    assert "so no newer build exists" in text
    assert "build:user:cancelled" in text
    assert "No other cause is stated by any source." in text
    assert f"[RTD build 34894885]({BUILD_URL})" in body
    assert body.index("**Incomplete (1)**") < body.index("<details>")


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
    assert "No other cause is stated by any source." in rec["finding"]
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


def test_hostile_name_is_inert() -> None:
    body = render(run(HOSTILE, "failure", url="javascript:alert(1)"), run(HOSTILE, "success"))
    decoded = html.unescape(body)
    assert body.count(MARKER) == 1 and body.startswith(MARKER + "\n")
    assert "<!--" not in body.split("\n", 2)[2]  # after the marker and the facts stamp
    assert re.search(r"@\w", decoded) is None
    assert re.search(r"#\d", decoded) is None
    assert "<" not in ALLOWED_TAGS.sub("", body.split("\n", 2)[2])
    assert links(body) == [f"{PR_URL}/commits/{SHA}"]
    assert "javascript" not in "".join(links(body))
    assert "\\`code\\`" in body


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
def test_md_filter(raw: object, escaped: str) -> None:
    assert md(raw) == escaped


def test_md_filter_caps_length() -> None:
    assert md("a" * 500) == "a" * 199 + "…"
    assert md("a" * 200) == "a" * 200
    assert md("a" * 500, 50) == "a" * 49 + "…"


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


@pytest.mark.parametrize(("sha", "short"), [(SHA, "eb46d06"), ("eb4<x>", "eb4")])
def test_short_filter(sha: str, short: str) -> None:
    assert short_sha(sha) == short


# --- content rules -------------------------------------------------------------------------


def test_no_signals_says_so_and_never_pending() -> None:
    body = render()
    assert "**Verdict: incomplete.**" in body
    assert md(NO_SIGNALS_NOTE) in body
    assert "pending" not in body.lower()


def test_stale_row_is_dated_absolutely() -> None:
    body = render(status("ci/x", "pending", created_at=at(9, 12)))
    assert "**Stale (1)**" in body
    assert "since 2026\\-10\\-05 09&#58;12 UTC, longer than the 120\\-minute limit" in body
    assert " hours" not in body and " ago" not in body


def test_groups_in_attention_order() -> None:
    body = render(
        run("p", "queued", started_at=NOW),
        status("s", "pending", created_at=at(9, 0)),
        run("c", "cancelled"),
        run("f", "failure"),
        run("ok", "success"),
    )
    heads = re.findall(r"^\*\*(\w+) \(\d+\)\*\*$", body, flags=re.M)
    assert heads == ["Failing", "Incomplete", "Stale", "Pending"]
    assert body.index("**Pending (1)**") < body.index("<details><summary>Passing (1)</summary>")


def test_passing_states_other_than_success_are_labelled() -> None:
    body = render(run("a", "skipped"), run("b", "neutral"), run("c", "success"))
    assert (
        "Passing (3): <code>a</code> (skipped), <code>b</code> (neutral), <code>c</code>." in body
    )
    assert "**Verdict: passing.**" in body


def test_signal_and_build_links_pass_the_url_filter() -> None:
    rtd = lookup(build("finished", False, url="https://readthedocs.org/b/(1)"))
    signal = status(DOCS, "pending", url="javascript:alert(1)")
    report = reconcile(snapshot(signal), {DOCS: rtd}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert links(body) == [f"{PR_URL}/commits/{SHA}", "https://readthedocs.org/b/%281%29"]


def test_verdict_sentences() -> None:
    assert "1 of 2 signals is failure, action_required or timed_out." in render(
        run("a", "failure"), run("b", "success")
    )
    assert "2 of 3 signals are pending; none is failing." in render(
        run("a", "queued", started_at=NOW), run("b", "queued", started_at=NOW), run("c", "success")
    )


def test_first_seen_is_labelled_as_the_bots_own() -> None:
    signal = run("j", "queued", started_at=None)
    body = render(signal, first_seen={signal.key: at(13, 0)})
    assert "GitHub reports queued, first seen by this bot at 2026-10-05 13:00 UTC." in body


# --- size ----------------------------------------------------------------------------------


def many(count: int, raw: str) -> tuple[object, ...]:
    """Many check runs with long names and descriptions."""
    return tuple(
        run(f"matrix-job-{i:05d}-" + "x" * 60, raw, description="d" * 150) for i in range(count)
    )


def test_five_thousand_failing_signals_fit() -> None:
    body = render(*many(5000, "failure"))
    assert len(body) <= COMMENT_LIMIT
    hidden = re.search(r"^(\d+) more signals are not shown \(comment size limit\)\.$", body, re.M)
    assert hidden is not None
    shown = body.count("\n- <code>")
    assert shown > 0 and shown + int(hidden.group(1)) == 5000
    assert "**Failing (5000)**" in body
    assert body.splitlines()[-1] == LAST_LINE


def test_many_passing_signals_collapse_to_a_count() -> None:
    body = render(*many(1200, "success"), run("broken", "failure"))
    assert len(body) <= COMMENT_LIMIT
    assert "Passing (1200); their names are not shown (comment size limit)." in body
    assert "<code>broken</code>" in body
    assert "more signals are not shown" not in body


def test_small_report_is_not_shrunk() -> None:
    body = render(*many(20, "success"))
    assert "Passing (20): <code>" in body


# --- templates -----------------------------------------------------------------------------


def test_user_template_folder_is_searched_first(tmp_path: Path) -> None:
    (tmp_path / "status_comment.md.j2").write_text(
        "{{ marker }}\nPR {{ report.number }}: {{ report.title|md }}\n", encoding="utf-8"
    )
    body = Renderer(tmp_path).markdown(seed_report())
    assert body == f"{MARKER}\n{facts_stamp(seed_report())}\nPR 7430: Add the omni docs\n"


def test_empty_user_folder_falls_back_to_packaged(tmp_path: Path) -> None:
    assert Renderer(tmp_path).markdown(seed_report()) == Renderer().markdown(seed_report())


def test_undefined_names_fail_loudly(tmp_path: Path) -> None:
    (tmp_path / "status_comment.md.j2").write_text("{{ nothing }}", encoding="utf-8")
    with pytest.raises(jinja2.UndefinedError):
        Renderer(tmp_path).markdown(seed_report())


def test_observed_at_replacement_changes_only_the_date_line() -> None:
    report = seed_report()
    later: Report = dataclasses.replace(report, observed_at=NOW + timedelta(days=1))
    first, second = Renderer().markdown(report), Renderer().markdown(later)
    diff = [a for a, b in zip(first.splitlines(), second.splitlines(), strict=True) if a != b]
    assert len(diff) == 2 and diff[1].startswith("Observed 2026-10-05 14:03 UTC")
    assert parse_facts_stamp(second) == (facts_key(later), later.observed_at)
    assert later.verdict is Verdict.INCOMPLETE


def test_fingerprint_follows_the_templates_in_use(tmp_path: Path) -> None:
    packaged = Renderer().fingerprint
    assert packaged == Renderer().fingerprint
    assert Renderer(tmp_path).fingerprint == packaged
    (tmp_path / "status_comment.md.j2").write_text("{{ marker }}\n", encoding="utf-8")
    assert Renderer(tmp_path).fingerprint != packaged


def test_passing_row_that_differs_from_github_is_shown_in_full() -> None:
    rtd = lookup(build("finished", True, finished=at(13, 30)))
    signal = status(DOCS, "pending", created_at=at(13, 0))
    others = (run("lint", "success"),)
    report = reconcile(snapshot(signal, *others), {DOCS: rtd}, Policy(), now=NOW)
    body = Renderer().markdown(report)
    assert "**Differs from GitHub (1)**" in body
    assert "— success. GitHub reports pending since 2026-10-05 13:00 UTC." in body
    assert "Passing (1): <code>lint</code>." in body
    assert "**Verdict: passing.**" in body
