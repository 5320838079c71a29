"""`ci-status-bot demo`, the console script, run ONCE (the session's `demo` fixture) for every
test that reads a part of its output: the comments it posted, the triage table, the webhook."""

from __future__ import annotations

import subprocess

from bot.core.model import MARKER


def test_demo_runs_offline_and_prints_what_it_posted(
    demo: subprocess.CompletedProcess[str],
) -> None:
    result = demo
    assert result.returncode == 0, result.stderr
    # five created, #7431 edited in place, then #7430 edited after a webhook delivery
    assert result.stdout.count(MARKER) == 7
    assert "[cycle 2, nothing changed]" in result.stdout and "left 5" in result.stdout
    assert "edited 1, left 4" in result.stdout
    assert '"octo/omni#7430": "incomplete"' in result.stdout
    assert '"octo/omni#7431": "passing"' in result.stdout
    assert "0 were not issue comments" in result.stdout
    # the comments in the contract's shape: headline first, rows, passing collapsed
    assert (
        "\n### ⚪ Incomplete · `docs/readthedocs.org:omni-docs` cancelled · 4 passing\n"
        in result.stdout
    )
    assert "\n### ❌ Failing · `tests (3.12)` failed · 2 passing\n" in result.stdout  # 7431
    dco = "\n### ❌ Failing · `DCO` action required: “There is one commit incorrectly signed off.”"
    assert dco + " · 1 passing\n" in result.stdout  # 7433: not read like a failing test
    assert "\n### ✅ Passing · 3 passing\n" in result.stdout  # 7431 after the re-run
    assert "<details><summary>✅ 4 passing</summary>" in result.stdout
    assert "&#" not in result.stdout and "\u2060" not in result.stdout


def test_demo_ends_with_the_triage_table_and_where_the_page_is_served(
    demo: subprocess.CompletedProcess[str],
) -> None:
    result = demo
    assert result.returncode == 0, result.stderr
    tail = result.stdout[result.stdout.index("[triage]") :].splitlines()
    assert tail[1].split()[:2] == ["VERDICT", "PULL"]
    rows = [line.split()[1] for line in tail[2:] if line[:1].isalpha() and "#" in line]
    assert rows[:2] == ["octo/omni#7433", "octo/omni#7430"]  # names lines under rows skipped
    assert len(set(rows)) == 5
    # after the demo's webhook step, #7430 also carries a failed `linkcheck`
    assert "5 open pull requests: 2 failing, 0 incomplete, 0 pending, 3 passing." in tail
    assert "serves this view as a page at http://127.0.0.1:8080/" in tail[-1]


def test_the_demo_shows_a_comment_updated_by_a_webhook_within_seconds(
    demo: subprocess.CompletedProcess[str],
) -> None:
    result = demo
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("[webhook]"))
    assert "deliveries answered: check_run 202" in line
    seconds = float(line.split(" edited ")[1].split(" s ")[0])
    assert seconds <= 2 + 5
    assert "linkcheck" in result.stdout.split(line, 1)[1]
