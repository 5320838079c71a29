"""Issue 27: a failure's history, stated as facts, end to end through the CLI and the sandbox.

The sandbox keeps every attempt of a check (returned only when asked for with `checkType: ALL`
or REST `filter=all`, as GitHub does), every state of a status, and branches' commits
(`Ref.target.history`); the bot reads them for failing checks only, batched, and keeps them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import REPO, Env, bot_comments, repo_world

from bot.cli import main

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)
TWO_HOURS_AGO = NOW - timedelta(hours=2)
DAY_AGO = NOW - timedelta(days=1)
BASE = "b" * 40


def head(n: int) -> str:
    return f"{n:07x}" + "a" * 33


def main_commit(n: int) -> str:
    return f"{n:07x}" + "c" * 33


world = pytest.fixture(repo_world, name="world")


def pull(env: Env, number: int) -> str:
    sha = head(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=sha)
    env.world.set_merge_base(REPO, "main", sha, BASE)
    return sha


def check(env: Env, sha: str, name: str, conclusion: str, at: datetime, **kw: Any) -> None:
    env.world.add_check_run(
        REPO, sha, name=name, workflow="ci", conclusion=conclusion,
        started_at=at, completed_at=at, **kw,
    )  # fmt: skip


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int) -> Any:
    args = ["show", f"{REPO}#{number}", "--format", "json", "--config", str(env.configure())]
    code = main(args, sleep=env.waits)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def once(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["once", "--config", str(env.configure())], sleep=env.waits)
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()


def by_name(report: Any) -> dict[str, Any]:
    return {s["name"]: s for s in report["signals"]}


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_failure_that_passed_on_an_earlier_attempt_says_so(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    check(env, sha, "tests", "success", TWO_HOURS_AGO)  # attempt 1
    check(env, sha, "tests", "failure", HOUR_AGO)  # attempt 2: a re-run in the same suite
    check(env, sha, "lint", "failure", HOUR_AGO)  # one attempt only
    report = show(env, capsys, 1)
    signals = by_name(report)
    assert report["verdict"] == "failing"  # history never makes a failing signal look passing
    assert signals["tests"]["state"] == "failure"
    attempts = signals["tests"]["history"]["attempts"]
    assert [(a["state"], a["at"]) for a in attempts] == [("success", iso(TWO_HOURS_AGO))]
    assert signals["lint"]["history"] is None or signals["lint"]["history"]["attempts"] == []

    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "passed on an earlier attempt of this commit ([attempt 1](" in body
    assert body.count("earlier attempt") == 1  # lint had none: nothing said
    assert "### ❌ Failing · `lint` failed · `tests` failed" in body  # the headline as ever
    assert "flaky" not in body.lower()


def test_earlier_attempts_are_asked_only_for_failing_checks_and_kept(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        sha = pull(env, number)
        check(env, sha, "tests", "failure", TWO_HOURS_AGO)
        check(env, sha, "tests", "failure", HOUR_AGO)
        check(env, sha, "build", "success", HOUR_AGO)
    pull(env, 4)  # passing: nothing asked for it
    check(env, head(4), "tests", "success", HOUR_AGO)
    once(env, capsys)
    once(env, capsys)
    queries = [r for r in env.sandbox.requests if b"query CheckAttempts" in r.body]
    assert len(queries) == 1  # the three failing heads in one batched query, then kept
    assert queries[0].body.count(b"checkType: ALL") == 3
    body = bot_comments(env.world, 1)[0]["body"]
    assert "also failed on an earlier attempt of this commit" in body


def test_a_check_renamed_between_runs_or_run_from_another_file_is_no_attempt(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    check(env, sha, "test", "success", TWO_HOURS_AGO)  # the job's earlier name
    check(env, sha, "tests", "failure", HOUR_AGO)
    check(env, sha, "docs", "success", TWO_HOURS_AGO, workflow_path=".github/workflows/old.yml")
    check(env, sha, "docs", "failure", HOUR_AGO, workflow_path=".github/workflows/ci.yml")
    signals = by_name(show(env, capsys, 1))
    for name in ("tests", "docs"):
        history = signals[name]["history"]
        assert history is None or history["attempts"] == [], name  # never guessed


def test_a_status_says_its_earlier_states(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    sha = pull(env, 1)
    for state, at in (("success", TWO_HOURS_AGO), ("failure", HOUR_AGO)):
        env.world.add_status(REPO, sha, context="ci/jenkins", state=state, created_at=at)
    signals = by_name(show(env, capsys, 1))
    attempts = signals["ci/jenkins"]["history"]["attempts"]
    assert [(a["state"], a["at"]) for a in attempts] == [("success", iso(TWO_HOURS_AGO))]


def test_the_same_check_failing_on_other_open_pull_requests(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in range(1, 6):
        sha = pull(env, number)
        failing = number <= 3
        at = NOW - timedelta(hours=number)
        check(env, sha, "tests", "failure" if failing else "success", at)
    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    since = (NOW - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M UTC").replace(" ", "\u00a0")
    assert "also failing on 2 of 4 open pull requests since " in body
    assert since.replace("-", "\u2011") in body
    assert "### ❌ Failing · `tests` failed\n" in body  # the headline is not changed by it
    assert bot_comments(env.world, 4)[0]["body"].count("also failing on") == 0  # passing


def test_the_base_branch_record_is_read_once_per_branch_and_kept(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(1, 6):  # oldest first: main_commit(5) is the tip
        sha = main_commit(n)
        env.world.push_branch_commit(REPO, "main", sha)
        check(env, sha, "tests", "failure" if n in (2, 4) else "success", DAY_AGO, event="push")
    env.world.push_branch_commit(REPO, "main", main_commit(6))  # tests did not run there
    for number in (1, 2):
        check(env, pull(env, number), "tests", "failure", HOUR_AGO)
    report = show(env, capsys, 1)
    record = by_name(report)["tests"]["history"]["base_branch"]
    assert record == {
        "branch": "main",
        "failed": 2,
        "of": 6,
        "commits": [main_commit(4), main_commit(2)],
    }
    once(env, capsys)
    once(env, capsys)
    queries = [r for r in env.sandbox.requests if b"query BranchHistory" in r.body]
    assert len(queries) == 2  # show (no state kept for it: a dry run), then once for good
    body = bot_comments(env.world, 1)[0]["body"]
    assert (
        f"failed on 2 of [the last 6 `main` commits](https://github.com/{REPO}/commits/main)"
        in body
    )


def test_history_off_asks_nothing_and_says_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    check(env, sha, "tests", "success", TWO_HOURS_AGO)
    check(env, sha, "tests", "failure", HOUR_AGO)
    config = env.configure(history=False)
    assert main(["once", "--config", str(config)], sleep=env.waits) == 0
    assert not [r for r in env.sandbox.requests if b"CheckAttempts" in r.body]
    assert "earlier attempt" not in bot_comments(env.world, 1)[0]["body"]


def test_report_by_check_groups_failures_with_the_count_of_pull_requests(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken base shows as one line, not forty: `report --by check`."""
    for number in (1, 2, 3):
        check(env, pull(env, number), "tests", "failure", HOUR_AGO)
    check(env, head(2), "lint", "failure", HOUR_AGO, workflow_path=".github/workflows/lint.yml")
    check(env, pull(env, 4), "tests", "success", HOUR_AGO)
    once(env, capsys)
    config = str(env.config)
    assert main(["report", "--config", config, "--by", "check", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "ci-status-bot.triage-checks/v1"
    assert [(c["name"], c["count"], sorted(c["pulls"])) for c in document["checks"]] == [
        ("tests", 3, [1, 2, 3]),
        ("lint", 1, [2]),
    ]
    assert main(["report", "--config", config, "--by", "check"]) == 0
    table = capsys.readouterr().out
    assert f"    3  {REPO}: tests" in table and "#1" in table and "#4" not in table
    assert "2 failing checks across 4 open pull requests" in table
    assert main(["report", "--config", config, "--by", "check", "--format", "markdown"]) == 0
    assert f"| `tests` | {REPO} | 3 |" in capsys.readouterr().out.replace("\\/", "/")
    assert main(["report", "--config", config, "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert 'data-filter="check"' in page and "<code>tests</code> · 3" in page
