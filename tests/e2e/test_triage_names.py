"""Issue 16, item 5: every triage view names the checks (a real `once`, then `report`).

Each row names its failing checks (required first, then "+N" after three), the required checks
that never reported, and the oldest unsettled signal; the markdown shows names verbatim as
GitHub renders them (cmark-gfm), never with md()'s backslashes inside a code span.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from support import REPO, cli, seed_case, write_config

from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC)
SHA = "5" * 40
HOSTILE = "a|b @admin <x> `t` #1"
FAILING = ["build-wheel (3.11)", "lint", "DCO", HOSTILE, "tests"]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("names")
    world = World()
    seed_case(world, now=NOW)
    world.add_pull(REPO, 50, title="many failures", author="erin", head_sha=SHA)
    world.set_required_checks(REPO, ["build-wheel (3.11)"])
    done = NOW - timedelta(minutes=30)
    for name in FAILING:
        app = "dco" if name == "DCO" else "github-actions"
        conclusion = "action_required" if name == "DCO" else "failure"
        world.add_check_run(REPO, SHA, name=name, app_slug=app, conclusion=conclusion,
                            started_at=done, completed_at=done)  # fmt: skip
    world.add_check_run(REPO, SHA, name="slow", app_slug="github-actions", status="in_progress",
                        started_at=done)  # fmt: skip
    # a pull request into `release`, whose protection requires DCO: the DCO app never reported
    world.add_pull(REPO, 60, title="release fix", author="finn", head_sha="6" * 40,
                   base_ref="release")  # fmt: skip
    world.set_required_checks(REPO, ["DCO"], branch="release")
    world.add_check_run(REPO, "6" * 40, name="lint", app_slug="github-actions",
                        started_at=done, completed_at=done)  # fmt: skip
    with Sandbox(world) as sandbox:
        path = write_config(tmp, sandbox)
        result = cli("once", "--config", str(path))
        assert result.returncode == 0, result.stderr
        yield path


def report(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = cli("report", "--config", str(config), *args)
    assert result.returncode == 0, result.stderr
    return result


def test_json_names_every_failing_check_required_first(config: Path) -> None:
    doc = json.loads(report(config, "--format", "json").stdout)
    pull = next(p for p in doc["pulls"] if p["number"] == 50)
    assert pull["failing"][0] == "build-wheel (3.11)"  # the required one first
    assert sorted(pull["failing"]) == sorted(FAILING)  # every one, raw source text
    assert pull["required_failing"] == ["build-wheel (3.11)"]
    assert pull["never_reported"] == [] and pull["required_never_reported"] == []
    assert pull["oldest_unsettled"]["name"] == "slow"
    seed = next(p for p in doc["pulls"] if p["number"] == 7430)
    assert seed["failing"] == [] and seed["never_reported"] == []


def test_the_table_names_three_then_counts_the_rest(config: Path) -> None:
    lines = report(config).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "#50" in line)
    named, waiting = lines[at + 1], lines[at + 2]  # too long for one line: one line each
    assert named.strip().startswith("failing: build-wheel (3.11) (required), ")
    assert named.count(",") == 2 and named.endswith("+2")
    assert re.fullmatch(r"    pending since \d\d-\d\d \d\d:\d\d: slow", waiting), waiting
    assert all(len(line) <= 100 for line in lines)


def test_markdown_shows_names_verbatim_as_github_renders_them(config: Path) -> None:
    text = report(config, "--format", "markdown").stdout
    row = next(line for line in text.splitlines() if "#50]" in line)
    assert "\\(" not in row and "build\\-wheel" not in row  # no md() escapes in a code span
    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    cells = re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)
    cell = next(c for c in cells if "#50</a>" in c)
    codes = [html.unescape(t) for t in re.findall(r"<code>(.*?)</code>", cell, flags=re.S)]
    assert codes[0] == "build-wheel (3.11)" and "slow" in codes
    header = re.findall(r"<th(?:\s[^>]*)?>", page)
    assert len(re.findall(r"<td[^>]*>", cell)) == len(header)  # a `|` in a name splits nothing
    assert "+2" in cell and "(required)" in cell
    assert "<x>" not in page and "@admin" not in re.sub(r"<code>.*?</code>", "", page)


def test_the_page_filter_finds_a_check_by_name(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "triage.html"
    report(config, "--format", "html", "--output", str(out))
    page = out.read_text(encoding="utf-8")
    row = re.search(r'<tr [^>]*data-pull="octo/omni#50"[^>]*>', page)
    assert row is not None
    text = html.unescape(re.search(r'data-text="([^"]*)"', row.group(0))[1])  # type: ignore[index]
    assert "dco" in text and "build-wheel (3.11)" in text and "slow" in text
    assert HOSTILE.lower() in text  # all names, not only the three shown
    assert 'data-never-reported="0"' in row.group(0)
    assert "<x>" not in page and html.escape(HOSTILE, quote=False) in page


def test_a_required_check_that_never_reported_is_named_in_every_view(
    config: Path, tmp_path: Path
) -> None:
    doc = json.loads(report(config, "--format", "json").stdout)
    pull = next(p for p in doc["pulls"] if p["number"] == 60)
    assert pull["never_reported"] == ["DCO"] and pull["required_never_reported"] == ["DCO"]
    assert pull["failing"] == []
    table = report(config).stdout
    at = table.splitlines().index(next(x for x in table.splitlines() if "#60" in x))
    assert "never reported: DCO (required)" in table.splitlines()[at + 1]
    assert "1 with a required check never reported;" in table  # one label everywhere
    markdown = report(config, "--format", "markdown").stdout
    row = next(line for line in markdown.splitlines() if "#60]" in line)
    assert "`DCO` (required)" in row
    out = tmp_path / "triage.html"
    report(config, "--format", "html", "--output", str(out))
    page = out.read_text(encoding="utf-8")
    tr = re.search(r'<tr [^>]*data-pull="octo/omni#60"[^>]*>', page)
    assert tr is not None and 'data-never-reported="1"' in tr.group(0)
    assert "<b>1</b> with a required check never reported" in page
