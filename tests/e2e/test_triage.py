"""The triage view as a person uses it: a real `once` against the sandbox, then `report`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import (
    REPO,
    TESTS,
    Env,
    bot_comments,
    clean_env,
    cli,
    sandbox_env,
    seed_case,
    write_config,
    writes,
)

from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC).replace(microsecond=0)
HOSTILE = "Fix <script>alert(1)</script> | [x](javascript:alert(1)) @admin *bold* `tick`"
LONG = " and a very long tail that cannot fit in any terminal column at all, really"
PULL_KEYS = {
    "repo", "number", "title", "author", "draft", "head_sha", "verdict", "counts",
    "required_failing", "oldest_unsettled", "observed_at", "comment_url", "read_at", "not_read",
    "failing", "never_reported", "required_never_reported", "failing_on_base", "in_merge_queue",
    "merge_queue_stuck", "incomplete", "pending",
}  # fmt: skip
ORDER = [101, 104, 7430, 102, 103]  # then the passing 105 and 106, in either order


def _sha(number: int) -> str:
    return hashlib.sha1(str(number).encode()).hexdigest()


def _pull(world: World, number: int, *, title: str = "", draft: bool = False) -> str:
    sha = _sha(number)
    world.add_pull(REPO, number, title=title or f"pull {number}", author=f"user{number}",
                   head_sha=sha, draft=draft)  # fmt: skip
    done = NOW - timedelta(hours=1)
    world.add_check_run(REPO, sha, name="lint", app_slug="github-actions", workflow="ci",
                        started_at=done, completed_at=done)  # fmt: skip
    return sha


def _running(world: World, sha: str, *, started: datetime) -> None:
    world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                        status="in_progress", started_at=started)  # fmt: skip


def seed_triage(world: World) -> None:
    """Seven pull requests, one per place in the contract's order."""
    seed_case(world, now=NOW)  # 7430: draft, RTD build cancelled -> incomplete, docs stuck
    sha = _pull(world, 101, title=HOSTILE + LONG)
    world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                        conclusion="failure", started_at=NOW, completed_at=NOW)  # fmt: skip
    _running(world, _pull(world, 102), started=NOW - timedelta(minutes=30))
    _running(world, _pull(world, 103), started=NOW - timedelta(minutes=10))
    _running(world, _pull(world, 104), started=NOW - timedelta(hours=5))  # stale after 120 min
    _pull(world, 105)
    _pull(world, 106, draft=True)


def _once(env: Env) -> Env:
    result = cli("once", "--config", str(env.config), sleep=env.waits)
    assert result.returncode == 0, result.stderr
    return env


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One world after one real `once`, for the tests that only read."""
    world = World()
    seed_triage(world)
    with sandbox_env(world, tmp_path_factory.mktemp("triage"), datetime.now(UTC)) as env:
        yield _once(env)


@pytest.fixture
def env(env: Env) -> Env:
    """A world of its own after one real `once`, for tests that change it."""
    seed_triage(env.world)
    return _once(env)


def report(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("report", "--config", str(env.config), *args)


def numbers(document: dict[str, object]) -> list[int]:
    pulls = document["pulls"]
    assert isinstance(pulls, list)
    return [p["number"] for p in pulls]


def test_json_follows_the_schema_in_the_contract_order(shared: Env) -> None:
    result = report(shared, "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"schema", "generated_at", "pulls"}
    assert doc["schema"] == "ci-status-bot.triage/v1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["generated_at"])
    assert numbers(doc)[:5] == ORDER and sorted(numbers(doc)[5:]) == [105, 106]
    by_number = {p["number"]: p for p in doc["pulls"]}
    for pull in doc["pulls"]:
        assert set(pull) == PULL_KEYS
        assert set(pull["counts"]) == {"failing", "pending", "incomplete", "passing"}
        comment = bot_comments(shared.world, pull["number"])[0]
        assert pull["comment_url"] == (
            f"https://github.com/{REPO}/pull/{pull['number']}#issuecomment-{comment['id']}"
        )
    failing = by_number[101]
    assert failing["title"] == HOSTILE + LONG  # raw source text in JSON
    assert failing["verdict"] == "failing" and failing["author"] == "user101"
    assert failing["counts"] == {"failing": 1, "pending": 0, "incomplete": 0, "passing": 1}
    assert failing["head_sha"] == _sha(101) and failing["draft"] is False
    stale = by_number[104]
    assert stale["verdict"] == "incomplete"
    assert stale["oldest_unsettled"]["name"] == "tests"
    assert stale["oldest_unsettled"]["state"] == "stale"
    since = datetime.fromisoformat(stale["oldest_unsettled"]["since"])
    assert abs(since - (NOW - timedelta(hours=5))) < timedelta(seconds=2)
    assert by_number[102]["oldest_unsettled"]["state"] == "pending"
    assert by_number[7430]["counts"]["incomplete"] == 1 and by_number[7430]["draft"] is True
    assert by_number[7430]["oldest_unsettled"] is None  # cancelled is settled: nothing waits
    # ... but the row names it (issue 28): the stuck docs build, with its state word
    assert [(n["name"], n["state"]) for n in by_number[7430]["incomplete"]] == [
        ("docs/readthedocs.org:omni-docs", "cancelled")
    ]
    assert [(n["name"], n["state"]) for n in stale["incomplete"]] == [("tests", "stale")]
    assert [(n["name"], n["state"]) for n in by_number[102]["pending"]] == [("tests", "pending")]
    assert by_number[105]["verdict"] == "passing" and by_number[105]["oldest_unsettled"] is None


def test_report_makes_no_request_and_writes_nothing(shared: Env) -> None:
    before = hashlib.sha256(shared.state.read_bytes()).hexdigest()
    shared.sandbox.clear_requests()
    for fmt in ("table", "json", "markdown", "html"):
        assert report(shared, "--format", fmt).returncode == 0
    assert shared.sandbox.requests == []
    assert hashlib.sha256(shared.state.read_bytes()).hexdigest() == before


def test_the_table_fits_80_columns_cuts_titles_not_states(shared: Env) -> None:
    result = report(shared)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "\x1b[" not in result.stdout  # not a terminal: no colour
    assert lines[0].split()[:2] == ["VERDICT", "PULL"]
    rows = [line for line in lines[1:] if re.search(r"octo/omni#\d+", line)]
    assert all(len(line) <= 80 for line in lines), [len(x) for x in lines]
    assert [int(re.search(r"#(\d+)", r)[1]) for r in rows][:5] == ORDER  # type: ignore[index]
    failing = next(r for r in rows if "#101" in r)
    assert failing.startswith("failing") and "…" in failing and LONG.strip() not in failing
    text = result.stdout
    assert re.search(r"\n    stale since \d\d-\d\d \d\d:\d\d: tests\n", text)  # under #104
    assert re.search(r"\n    pending since \d\d-\d\d \d\d:\d\d: tests\n", text)  # #102
    assert "\n    cancelled: docs/readthedocs.org:omni-docs\n" in text  # under #7430
    assert "7 open pull requests: 1 failing, 2 incomplete, 2 pending, 2 passing." in text
    assert "1 docs build cancelled, stale or unknown" in text


def _on_a_terminal(shared: Env, columns: int, *args: str) -> str:
    """`report` run on a pseudo-terminal `columns` wide: what it printed."""
    import pty

    main, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "report", "--config", str(shared.config), *args],
        stdout=secondary, stderr=subprocess.PIPE,
        env={**clean_env(), "COLUMNS": str(columns)}, timeout=60, check=False,
    )  # fmt: skip
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.returncode == 0, proc.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", out.decode("utf-8")).replace("\r\n", "\n")


def test_report_on_an_80_column_terminal_has_no_wider_line(shared: Env) -> None:
    text = _on_a_terminal(shared, 80)
    assert "octo/omni#7430" in text
    wider = [line for line in text.splitlines() if len(line) > 80]
    assert wider == []
    wide = _on_a_terminal(shared, 80, "--wide")
    assert HOSTILE + LONG in wide  # the full table: nothing cut
    assert _sha(101)[:7] in wide


def test_the_table_is_coloured_on_a_terminal(shared: Env) -> None:
    import pty

    main, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "report", "--config", str(shared.config)],
        stdout=secondary, stderr=subprocess.PIPE, env={**clean_env(), "COLUMNS": "100"},
        timeout=60, check=False,
    )  # fmt: skip
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b[31mfailing" in out


def test_markdown_pastes_into_an_issue_with_titles_escaped(shared: Env) -> None:
    result = report(shared, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 7  # header and one row per pull request
    header_cells = table[0].count(" | ")
    assert all(row.count(" | ") == header_cells for row in table)  # no stray pipes
    assert "<script>" not in text and "](javascript:" not in text and "@admin" not in text
    assert "&lt;script&gt;" in text
    assert f"[octo/omni#7430](https://github.com/{REPO}/pull/7430)" in text
    assert text.index("#101]") < text.index("#104]") < text.index("#7430]") < text.index("#102]")


class _Page(HTMLParser):
    """Collects what a browser would load from the network and the table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.rows: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in {"script", "img", "iframe"} and found.get("src"):
            self.loads.append(f"{tag} {found['src']}")
        if tag == "link":
            self.loads.append(f"link {found.get('href')}")
        if tag == "tr" and "data-verdict" in found:
            self.rows.append(found)


def test_html_is_one_self_contained_page(shared: Env, tmp_path: Path) -> None:
    out = tmp_path / "triage.html"
    result = report(shared, "--format", "html", "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert str(out) in result.stdout
    html = out.read_text(encoding="utf-8")
    page = _Page()
    page.feed(html)
    assert page.loads == []
    assert "@import" not in html and "url(" not in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    assert [int(str(r["data-pull"]).split("#")[1]) for r in page.rows][:5] == ORDER
    assert {r["data-verdict"] for r in page.rows} == {"failing", "incomplete", "pending", "passing"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--verdict", "failing"], [101]),
        (["--verdict", "pending,incomplete"], [104, 7430, 102, 103]),
        (["--drafts", "only"], [7430, 106]),
        (["--drafts", "exclude", "--verdict", "passing"], [105]),
        (["--repo", REPO, "--verdict", "failing"], [101]),
    ],
)
def test_filters(shared: Env, args: list[str], expected: list[int]) -> None:
    result = report(shared, "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    assert numbers(json.loads(result.stdout)) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["--verdict", "green"],
        ["--drafts", "maybe"],
        ["--repo", "not a repo"],
        ["--repo", "octo/other"],
    ],  # a repository not configured: an error, not an empty view
)
def test_bad_filters_exit_2(shared: Env, args: list[str]) -> None:
    result = report(shared, *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stderr.strip()


def test_closed_pull_requests_leave_the_view(env: Env) -> None:
    env.world.close_pull(REPO, 103)
    assert cli("once", "--config", str(env.config)).returncode == 0
    result = report(env, "--format", "json")
    assert 103 not in numbers(json.loads(result.stdout))
    assert len(numbers(json.loads(result.stdout))) == 6


def test_live_reads_github_first_and_writes_nothing(env: Env) -> None:
    sha = _sha(101)
    env.world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                            started_at=NOW, completed_at=NOW, new_suite=True)  # fmt: skip
    before = hashlib.sha256(env.state.read_bytes()).hexdigest()
    env.sandbox.clear_requests()
    live = report(env, "--live", "--format", "json", "--verdict", "failing,passing")
    assert live.returncode == 0, live.stderr
    doc = json.loads(live.stdout)
    pull = next(p for p in doc["pulls"] if p["number"] == 101)
    assert pull["verdict"] == "passing"
    assert pull["comment_url"].endswith(f"#issuecomment-{bot_comments(env.world, 101)[0]['id']}")
    assert any(r.service == "github" for r in env.sandbox.requests)
    assert writes(env.sandbox) == []
    assert hashlib.sha256(env.state.read_bytes()).hexdigest() == before
    stored = json.loads(report(env, "--format", "json", "--verdict", "failing").stdout)
    assert numbers(stored) == [101]  # the state still holds the last cycle's facts


def _read_only(paths: list[Path]) -> None:
    """Make paths read-only for this user; root ignores modes, so it gets the immutable flag."""
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"running as root and chattr +i is refused: {done.stderr!r}")


def _writable(paths: list[Path]) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True, check=False)
    for path in paths:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_report_works_on_a_read_only_state(shared: Env, tmp_path: Path) -> None:
    """The state file and its folder cannot be written by the user running `report`."""
    folder = tmp_path / "ro"
    folder.mkdir()
    state = folder / "state.sqlite3"
    shutil.copy(shared.state, state)
    config = tmp_path / "bot.toml"
    config.write_text(shared.config.read_text().replace(str(shared.state), str(state)))
    before = hashlib.sha256(state.read_bytes()).hexdigest()
    _read_only([state, folder])
    try:
        with pytest.raises(PermissionError):
            (folder / "probe").write_text("x")  # really read-only, also for root
        result = cli("report", "--config", str(config), "--format", "json")
        assert result.returncode == 0, result.stderr
        assert len(numbers(json.loads(result.stdout))) == 7
        assert sorted(p.name for p in folder.iterdir()) == ["state.sqlite3"]
    finally:
        _writable([state, folder])
    assert hashlib.sha256(state.read_bytes()).hexdigest() == before


def test_report_reads_while_a_writer_holds_the_state(shared: Env) -> None:
    """`run` writes in transactions; a reader is not blocked by one in progress (WAL)."""
    writer = sqlite3.connect(shared.state, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM triage")  # not committed: the reader still sees all rows
        result = report(shared, "--format", "json")
        assert result.returncode == 0, result.stderr
        assert len(numbers(json.loads(result.stdout))) == 7
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_report_without_a_state_says_so(tmp_path: Path, sandbox: Sandbox) -> None:
    config = write_config(tmp_path, sandbox)
    result = cli("report", "--config", str(config))
    assert result.returncode == 1
    assert "no state at" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state.sqlite3").exists()


def test_a_state_from_before_the_triage_view_reports_empty_then_fills(
    tmp_path: Path, sandbox: Sandbox, world: World
) -> None:
    """A version-2 state (no triage table): `report` reads it as is; the next cycle migrates."""
    seed_case(world, now=NOW)
    config = write_config(tmp_path, sandbox)
    state = tmp_path / "state.sqlite3"
    db = sqlite3.connect(state)  # as the hand-rolled migrations left it (see its PROVENANCE.md)
    db.executescript((TESTS / "data/legacy_state/v2.sql").read_text())
    db.close()
    before = hashlib.sha256(state.read_bytes()).hexdigest()
    empty = cli("report", "--config", str(config), "--format", "json")
    assert empty.returncode == 0, empty.stderr
    assert json.loads(empty.stdout)["pulls"] == []
    assert hashlib.sha256(state.read_bytes()).hexdigest() == before  # not migrated by a reader
    assert cli("once", "--config", str(config)).returncode == 0
    filled = json.loads(cli("report", "--config", str(config), "--format", "json").stdout)
    assert numbers(filled) == [7430]


def test_a_dry_run_leaves_the_view_and_a_policy_skip_removes_the_row(env: Env) -> None:
    env.world.add_check_run(
        REPO, _sha(101), name="tests", app_slug="github-actions", workflow="ci",
        started_at=NOW, completed_at=NOW, new_suite=True,
    )  # fmt: skip
    assert cli("once", "--config", str(env.config), "--dry-run").returncode == 0
    failing = json.loads(report(env, "--format", "json", "--verdict", "failing").stdout)
    assert numbers(failing) == [101]  # a dry run records nothing, the view included
    config = write_config(env.config.parent, env.sandbox, skip_authors=["user105"])
    assert cli("once", "--config", str(config)).returncode == 0
    after = numbers(json.loads(report(env, "--format", "json").stdout))
    assert 105 not in after and 101 in after and len(after) == 6
    assert numbers(json.loads(report(env, "--format", "json", "--verdict", "failing").stdout)) == []
