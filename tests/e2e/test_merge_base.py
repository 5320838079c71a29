"""Issue 16 item 1: each failing signal against the merge base, end to end through the CLI.

The sandbox answers REST compare (`merge_base_commit`) and `object(oid:)` commits with their
rollup; the bot asks the merge base once per head and keeps final answers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import REPO, TESTS, Env, bot_comments, repo_world

from bot.cli import main
from bot.github.commits import merge_base_of
from bot.github.errors import MalformedAnswer

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)
DAY_AGO = NOW - timedelta(days=1)
BASE = "b" * 40  # the merge-base commit


def head(n: int) -> str:
    return f"{n:07x}" + "a" * 33


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


def by_name(report: Any) -> dict[str, Any]:
    return {s["name"]: s for s in report["signals"]}


def requests_to(env: Env, fragment: str) -> int:
    return sum(1 for r in env.sandbox.requests if fragment in r.path)


def test_each_failing_signal_says_what_it_did_on_the_merge_base(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    for name in ("lint", "tests", "docs"):
        check(env, sha, name, "failure", HOUR_AGO)
    check(env, sha, "build", "success", HOUR_AGO)
    check(env, BASE, "lint", "failure", DAY_AGO, event="push")  # broken before the PR
    check(env, BASE, "tests", "success", DAY_AGO, event="push")  # broken by the PR
    # docs did not run on the merge base; build passes on the head and is not looked up
    signals = by_name(show(env, capsys, 1))
    assert signals["lint"]["base"] == {
        "commit": BASE,
        "state": "failure",
        "url": signals["lint"]["base"]["url"],
        "since": DAY_AGO.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert signals["tests"]["base"]["state"] == "success"
    assert signals["docs"]["base"] == {"commit": BASE, "state": None, "url": None, "since": None}
    assert signals["build"]["base"] is None

    code = main(["once", "--config", str(env.config)], sleep=env.waits)
    assert code == 0, capsys.readouterr().err
    body = bot_comments(env.world, 1)[0]["body"]
    assert "### ❌ Failing · 3 failing (1 also on the merge base) · 1 passing" in body
    short = f"[`{BASE[:7]}`](https://github.com/{REPO}/commit/{BASE})"
    assert f"also failed on the merge base {short} since" in body
    assert f"passed on the merge base {short}" in body
    assert f"not run on the merge base {short}" in body


def test_the_merge_base_is_asked_once_per_head_and_final_answers_are_kept(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        check(env, pull(env, number), "tests", "failure", HOUR_AGO)
    check(env, BASE, "tests", "failure", DAY_AGO)
    for _ in range(2):
        assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0
    assert requests_to(env, "/compare/") == 3  # once per head, then kept in the state
    commit_queries = [r for r in env.sandbox.requests if b"query CommitContexts" in r.body]
    assert len(commit_queries) == 1  # the three heads share one merge base, read in one query
    for number in (1, 2, 3):
        body = bot_comments(env.world, number)[0]["body"]
        assert "\n### ❌ Failing · `tests` failed (also on the merge base)\n" in body, body


def test_without_a_state_the_comment_stamp_keeps_the_merge_base(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with no state (the Action without a cache) reads the merge base from the stamp of
    its own comment: the compare is asked on the first run only, the comment is unchanged."""
    stateless = env.config.read_text().replace(f'path = "{env.tmp / "state.sqlite3"}"', 'path = ""')
    assert stateless != env.config.read_text()
    env.config.write_text(stateless)
    for number in (1, 2):
        check(env, pull(env, number), "tests", "failure", HOUR_AGO)
    check(env, BASE, "tests", "failure", DAY_AGO)
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0
    assert requests_to(env, "/compare/") == 2
    first = [bot_comments(env.world, n)[0]["body"] for n in (1, 2)]
    assert all("`tests` failed (also on the merge base)" in body for body in first)
    env.sandbox.clear_requests()
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0
    assert requests_to(env, "/compare/") == 0  # the stamp said it
    assert [bot_comments(env.world, n)[0]["body"] for n in (1, 2)] == first
    env.world.set_merge_base(REPO, "develop", head(1), "c" * 40)  # another base: asked again
    env.world.set_base(REPO, 1, "develop")
    env.sandbox.clear_requests()
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0
    assert requests_to(env, "/compare/") == 1


def test_a_passing_pull_request_costs_nothing_new(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    check(env, pull(env, 1), "tests", "success", HOUR_AGO)
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0
    assert requests_to(env, "/compare/") == 0
    assert not any(b"query CommitContexts" in r.body for r in env.sandbox.requests)


def test_an_unreadable_merge_base_is_said_never_guessed(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    check(env, sha, "tests", "failure", HOUR_AGO)
    env.sandbox.fail("GET", f"/repos/{REPO}/compare/.*", status=500, times=10)
    signal = by_name(show(env, capsys, 1))["tests"]
    assert signal["base"] is None
    assert "Not compared with the merge base" in signal["finding"]
    assert "compare of main and the head failed" in signal["finding"]


def test_the_real_compare_answer_gives_its_merge_base() -> None:
    """GitHub's compare payload (the DCO app's recorded test data) parsed by the client's rule."""
    data = json.loads((TESTS / "data" / "real" / "dco" / "compare.json").read_text())
    assert merge_base_of(data) == "607c64cd8e37eb2db939f99a17bee5c7d1a90a31"
    with pytest.raises(MalformedAnswer):
        merge_base_of({"merge_base_commit": None})
