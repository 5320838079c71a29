"""Issue 16 item 2: what a failing check run said in GitHub's own words, end to end.

The sandbox serves `CheckRun.annotations` over GraphQL (`nodes(ids:)` by the run's node id) as
GitHub does; the bot asks only for failing check runs, batched, and keeps each run's
failure-level annotations in the state (a completed run's never change).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from github.Requester import Requester
from support import REPO, TESTS, Env, bot_comments, repo_world, write_config

from bot.app import build_clients, make_cycle
from bot.cli import main
from bot.core.model import Annotation
from bot.core.summary import Summary
from bot.cycle import Reports
from bot.settings import load_settings
from bot.state.store import Store
from bot_sandbox import Sandbox

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)
EXIT = {"path": ".github", "start_line": 278, "message": "Process completed with exit code 1."}
ASSERT = {
    "path": "tests/test_parser.py",
    "start_line": 42,
    "end_line": 42,
    "message": "AssertionError: assert 'é' == 'e'\n  - e\n  + é",
}


def head(n: int) -> str:
    return f"{n:07x}" + "c" * 33


world = pytest.fixture(repo_world, name="world")


def pull(env: Env, number: int) -> str:
    sha = head(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=sha)
    return sha


def check(env: Env, sha: str, name: str, conclusion: str, **kw: Any) -> None:
    env.world.add_check_run(
        REPO, sha, name=name, workflow="ci", conclusion=conclusion,
        started_at=HOUR_AGO, completed_at=HOUR_AGO, **kw,
    )  # fmt: skip


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int) -> Any:
    args = ["show", f"{REPO}#{number}", "--format", "json", "--config", str(env.configure())]
    code = main(args, sleep=env.waits)
    out = capsys.readouterr()
    assert code == 0, out.err
    return {s["name"]: s for s in json.loads(out.out)["signals"]}


def annotation_queries(env: Env) -> list[Any]:
    return [r for r in env.sandbox.requests if b"query CheckRunAnnotations" in r.body]


def once(env: Env) -> None:
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0


def test_a_failing_run_quotes_its_failure_annotations_and_drops_the_generic_one(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = pull(env, 1)
    warning = {"path": "setup.py", "annotation_level": "warning", "message": "deprecated"}
    check(env, sha, "tests", "failure", annotations=[warning, EXIT, ASSERT])
    check(env, sha, "lint", "success", annotations=[{**EXIT, "message": "not asked"}])
    signals = show(env, capsys, 1)
    assert signals["tests"]["annotations"] == [
        {
            "path": "tests/test_parser.py",
            "start_line": 42,
            "end_line": 42,
            "message": ASSERT["message"],
        }
    ]
    assert signals["lint"]["annotations"] is None  # passing: never asked
    once(env)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "  \n  `tests/test_parser.py:42`: `AssertionError: assert 'é' == 'e'`" in body
    assert "exit code" not in body and "deprecated" not in body


def test_only_the_generic_annotation_is_quoted_when_it_is_all_there_is(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    check(env, pull(env, 1), "build", "failure", annotations=[EXIT])
    once(env)
    assert (
        "`.github:278`: `Process completed with exit code 1.`"
        in (bot_comments(env.world, 1)[0]["body"])
    )


def test_annotations_are_asked_once_per_run_batched_and_only_for_failing_runs(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        check(env, pull(env, number), "tests", "failure", annotations=[ASSERT])
    check(env, pull(env, 4), "tests", "success", annotations=[ASSERT])
    for _ in range(2):
        once(env)
    queries = annotation_queries(env)
    assert len(queries) == 1  # three failing runs in one query; then kept in the state
    assert len(json.loads(queries[0].body)["variables"]["ids"]) == 3
    for number in (1, 2, 3):
        assert "`tests/test_parser.py:42`" in bot_comments(env.world, number)[0]["body"]
    assert "`tests/test_parser.py:42`" not in bot_comments(env.world, 4)[0]["body"]


def test_unreadable_annotations_quote_nothing_and_are_asked_again(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    check(env, pull(env, 1), "tests", "failure", annotations=[ASSERT])
    error = {"data": None, "errors": [{"message": "Something went wrong while executing"}]}
    env.sandbox.fail("POST", "/graphql", 200, body=error, when="CheckRunAnnotations")
    once(env)
    first = bot_comments(env.world, 1)[0]["body"]
    assert "tests/test_parser.py" not in first and "annotation" not in first.lower()
    once(env)  # read now: the comment is edited with the quote
    assert "`tests/test_parser.py:42`" in bot_comments(env.world, 1)[0]["body"]
    assert len(annotation_queries(env)) == 2  # once failed, once read
    once(env)  # kept now: not asked a third time
    assert len(annotation_queries(env)) == 2


def recorded_annotations() -> list[dict[str, Any]]:
    """The annotations of PyGithub's recording of GET .../check-runs/1280914700/annotations
    (tests/data/real/pygithub/CheckRun.testListCheckRunAnnotations.txt, its third exchange:
    the full list, REST's shape with null columns)."""
    lines = (TESTS / "data" / "real" / "pygithub" / RECORDING).read_text().split("\n")
    blocks = [lines[i : i + 10] for i in range(0, len(lines) - 10, 11)]
    path, status, body = blocks[2][4], blocks[2][7], blocks[2][9]
    assert path.endswith("/check-runs/1280914700/annotations") and status == "200"
    return [
        {k: v for k, v in a.items() if k != "blob_href"} for a in json.loads(body)
    ]  # fmt: skip


RECORDING = "CheckRun.testListCheckRunAnnotations.txt"


def test_recorded_warning_annotations_are_read_and_never_quoted(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded run's two annotations are warnings (a spell checker's): read, none quoted.
    The recorded run passed; here it fails, so the bot asks for its annotations."""
    recorded = recorded_annotations()
    assert [a["annotation_level"] for a in recorded] == ["warning", "warning"]
    check(env, pull(env, 1), "annotations", "failure", annotations=recorded)
    assert show(env, capsys, 1)["annotations"]["annotations"] == []
    assert len(annotation_queries(env)) == 1


def test_recorded_annotations_at_failure_level_are_quoted_as_github_gave_them(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same recorded annotations with their level set to failure (only the level is
    changed): path, line and message come through verbatim, in GitHub's order."""
    failing = [{**a, "annotation_level": "failure"} for a in recorded_annotations()]
    check(env, pull(env, 1), "annotations", "failure", annotations=failing)
    quoted = show(env, capsys, 1)["annotations"]["annotations"]
    assert quoted == [
        {"path": "README.md", "start_line": 2, "end_line": 2,
         "message": "Check your spelling for 'banaas'."},
        {"path": "README.md", "start_line": 4, "end_line": 4,
         "message": "Check your spelling for 'aples'"},
    ]  # fmt: skip
    once(env)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "`README.md:2`: `Check your spelling for 'banaas'.`" in body


def test_annotations_read_later_rebuild_a_reused_report(tmp_path: Path) -> None:
    """In one process (`run` keeps reports between cycles), a report reused because nothing
    else changed is rebuilt when its run's annotations are read at last, and edited once."""
    world = repo_world()
    sha = head(1)
    world.add_pull(REPO, 1, title="PR 1", author="alice", head_sha=sha)
    world.add_check_run(REPO, sha, name="tests", workflow="ci", conclusion="failure",
                        started_at=HOUR_AGO, completed_at=HOUR_AGO,
                        annotations=[ASSERT])  # fmt: skip
    error = {"data": None, "errors": [{"message": "Something went wrong while executing"}]}
    with Sandbox(world) as sandbox:
        settings = load_settings(write_config(tmp_path, sandbox))
        clients = build_clients(settings, settings.repos)
        sandbox.fail("POST", "/graphql", 200, body=error, when="CheckRunAnnotations", times=2)
        try:
            with Store.open(tmp_path / "state.sqlite3") as store:
                reports = Reports()

                def cycle() -> Summary:
                    run = make_cycle(settings, clients, store, dry_run=False, out=None)
                    run.reports, run.sleep = reports, (lambda _s: None)
                    return run.run(settings.repos)

                assert cycle().created == 1
                unread = reports.get(REPO, 1)
                left = cycle()  # still unread: the same report, nothing written
                assert left.left == 1 and reports.get(REPO, 1) is unread
                read = cycle()
                assert read.edited == 1, read.line()
                built = reports.get(REPO, 1)
                assert built is not None and built is not unread
                assert built.report.rows[0].annotations == (
                    Annotation(ASSERT["path"], 42, 42, ASSERT["message"]),
                )
        finally:
            clients.close()
            Requester.resetConnectionClasses()  # the bot's guard was installed process-wide
    assert "`tests/test_parser.py:42`" in bot_comments(world, 1)[0]["body"]


def test_a_repositorys_failing_runs_are_asked_together_not_per_50_pull_requests(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pull requests are planned 50 at a time; those whose failing runs' annotations are not
    kept wait for one batched read at the end of the repository (here 120 pull requests,
    one failing in every ten: 12 runs over three batches of 50, one query)."""
    for number in range(1, 121):
        check(env, pull(env, number), "tests", "failure" if number % 10 == 0 else "success",
              annotations=[ASSERT])  # fmt: skip
    assert main(["once", "--dry-run", "--config", str(env.config)], sleep=env.waits) == 0
    out = capsys.readouterr().out
    queries = annotation_queries(env)
    assert len(queries) == 1
    assert len(json.loads(queries[0].body)["variables"]["ids"]) == 12
    assert out.count("`tests/test_parser.py:42`") == 12  # each failing one's would-be comment
