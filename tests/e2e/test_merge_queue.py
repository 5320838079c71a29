"""Issue 26: a pull request in GitHub's merge queue, end to end through the CLI and the sandbox.

The sandbox answers `isInMergeQueue`, `mergeQueueEntry`, `mergeQueue(branch:)` and the
merge-group commits' `object(oid:)` from the real schema; the bot reads the merge groups of a
repository in one query per cycle, and nothing for a repository with no queued pull request.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import REPO, Env, bot_comments, repo_world
from test_webhook_service import SECRET, Service, body_of, service, wait_for

from bot.cli import main
from bot_sandbox import World
from bot_sandbox.webhook_sender import WebhookSender

__all__ = ["service"]  # the fixture of the real service with webhooks (test_webhook_service)

NOW = datetime.now(UTC).replace(microsecond=0)
RTD = "docs/readthedocs.org:omni-docs"


def head(n: int) -> str:
    return f"{n:07x}" + "a" * 33


def group(n: int) -> str:
    return f"{n:07x}" + "c" * 33


world = pytest.fixture(repo_world, name="world")


def green_pull(env: Env, number: int) -> str:
    """A pull request whose head passes tests, DCO and Read the Docs."""
    sha = head(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=sha)
    at = NOW - timedelta(hours=1)
    env.world.add_check_run(REPO, sha, name="tests", workflow="ci", conclusion="success",
                            started_at=at, completed_at=at)  # fmt: skip
    env.world.add_check_run(REPO, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at)
    env.world.add_status(REPO, sha, context=RTD, state="success", created_at=at,
                         description="Read the Docs build succeeded!")  # fmt: skip
    return sha


def queue(env: Env, number: int, *, checks: tuple[str, ...] = ("tests",)) -> str:
    """Queue the pull request; its merge-group commit carries `checks` (passed)."""
    sha = group(number)
    queued_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=41)  # not NOW:
    env.world.enqueue(REPO, number, group_sha=sha, enqueued_at=queued_at)  # a slow run ages it
    at = NOW - timedelta(minutes=30)
    for name in checks:
        env.world.add_check_run(REPO, sha, name=name, workflow="ci", conclusion="success",
                                started_at=at, completed_at=at, event="merge_group")  # fmt: skip
    return sha


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int) -> Any:
    args = ["show", f"{REPO}#{number}", "--format", "json", "--config", str(env.config)]
    code = main(args, sleep=env.waits)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def once(env: Env, capsys: pytest.CaptureFixture[str]) -> int:
    """One cycle; the GraphQL points its summary line says it spent."""
    code = main(["once", "--config", str(env.config)], sleep=env.waits)
    out = capsys.readouterr()  # what `once` printed is read here, not by the next command
    assert code == 0, out.err
    spent = re.search(r"\((\d+) GraphQL points\)", out.out)
    assert spent is not None, out.out
    return int(spent.group(1))


def commit_queries(env: Env) -> list[bytes]:
    return [r.body for r in env.sandbox.requests if b"query CommitContexts" in r.body]


@pytest.fixture
def queued_world(world: World) -> World:
    world.set_required_checks(REPO, ["tests", "DCO", RTD])
    world.set_merge_queue(REPO, timeout_minutes=60)
    return world


def test_rtd_and_dco_never_report_on_the_merge_group_commit(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    green_pull(env, 1)
    sha = queue(env, 1)
    report = show(env, capsys, 1)
    assert report["verdict"] == "passing"  # the head's own verdict
    queue_report = report["merge_queue"]
    assert queue_report["state"] == "AWAITING_CHECKS"
    queued_at = env.world.repo(REPO).queue_entries[1].enqueued_at
    assert queue_report["enqueued_at"] == queued_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert queue_report["commit"] == sha
    assert queue_report["timeout_minutes"] == 60
    assert queue_report["missing"] == ["DCO", RTD]
    assert queue_report["failing"] == [] and queue_report["verdict"] == "pending"

    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "⏳ **Merge queue**: awaiting checks, queued" in body
    assert "every required check passed" not in body
    rows = [line for line in body.splitlines() if "not reported on merge-group commit" in line]
    assert len(rows) == 2 and all(f"`{sha[:7]}`, queued 41 min ago as of" in r for r in rows)
    assert all("the queue gives up after 60 min" in r for r in rows)
    assert "opentdf/web-sdk#1036" in body and "readthedocs/readthedocs.org#10021" in body


def test_zero_checks_on_the_merge_group_commit_is_never_passing(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    green_pull(env, 1)
    queue(env, 1, checks=())
    report = show(env, capsys, 1)["merge_queue"]
    assert report["checks"] == 0
    assert report["missing"] == ["tests", "DCO", RTD] and report["verdict"] == "pending"


def test_one_failing_on_the_merge_group_commit(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    green_pull(env, 1)
    sha = queue(env, 1, checks=())
    at = NOW - timedelta(minutes=20)
    env.world.add_check_run(REPO, sha, name="tests", workflow="ci", conclusion="failure",
                            started_at=at, completed_at=at, event="merge_group")  # fmt: skip
    env.world.add_check_run(REPO, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at)
    env.world.add_status(REPO, sha, context=RTD, state="success", created_at=at)
    report = show(env, capsys, 1)["merge_queue"]
    assert (report["failing"], report["missing"], report["verdict"]) == (["tests"], [], "failing")


def test_a_configured_expected_context_counts_on_the_merge_group_commit(
    world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    world.set_required_checks(REPO, ["tests"])
    world.set_merge_queue(REPO)
    env.config.write_text(env.config.read_text() + 'expected = ["DCO"]\n')
    green_pull(env, 1)
    queue(env, 1)
    assert show(env, capsys, 1)["merge_queue"]["missing"] == ["DCO"]


def test_one_query_per_repository_and_nothing_without_a_queue(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        green_pull(env, number)
    queue(env, 1)
    queue(env, 2)
    once(env, capsys)
    asked = commit_queries(env)
    assert len(asked) == 1  # both merge groups and the queue's timeout, one query
    assert b"mergeQueue(branch:" in asked[0]
    for number in (1, 2):
        assert "not reported on merge-group commit" in bot_comments(env.world, number)[0]["body"]
    assert "Merge queue" not in bot_comments(env.world, 3)[0]["body"]
    queued = once(env, capsys)  # warm: nothing changed

    env.world.dequeue(REPO, 1, reason="merged")
    env.world.dequeue(REPO, 2)
    env.sandbox.clear_requests()
    once(env, capsys)
    assert commit_queries(env) == []  # no queued pull request: no extra request
    assert all("Merge queue" not in bot_comments(env.world, n)[0]["body"] for n in (1, 2))
    plain = once(env, capsys)  # warm again, nothing queued
    assert queued == plain + 1  # one base branch with a non-empty queue: one point more


def test_a_queue_configuration_that_cannot_be_read(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    green_pull(env, 1)
    queue(env, 1)
    green_pull(env, 2)
    env.world.refuse_merge_queue(REPO, "Resource not accessible by integration")
    report = show(env, capsys, 1)["merge_queue"]
    assert report["timeout_minutes"] is None
    assert report["missing"] == ["DCO", RTD]  # the rest is read
    assert report["errors"] == [
        "GitHub answered on the merge queue of main: Resource not accessible by integration"
    ]
    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    assert body.count("The queue's time limit is not known") == 1
    assert "gives up after" not in body
    assert bot_comments(env.world, 2)  # the other pull request is written as ever


def test_an_entry_github_refuses_is_said_once_and_the_pull_request_is_read(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    green_pull(env, 1)
    queue(env, 1)
    env.world.refuse_merge_queue(REPO, "Resource not accessible by integration", number=1)
    report = show(env, capsys, 1)
    assert report["verdict"] == "passing" and len(report["signals"]) == 3
    assert report["merge_queue"]["errors"] == [
        "GitHub answered an error on its merge-queue entry: Resource not accessible by integration"
    ]
    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "⚪ **Merge queue**" in body and body.count("what the queue tests is not known") == 1


def test_an_entry_that_vanished_between_two_reads(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pull request's read names merge-group commit X; by the time X's checks are asked
    it is gone (merged, removed): said once, not guessed, and the cycle goes on."""
    green_pull(env, 1)
    sha = queue(env, 1)
    green_pull(env, 2)

    def vanish(world: World, operation: str | None) -> None:
        if operation == "CommitContexts":
            world.repo(REPO).commits.pop(sha, None)

    env.world.on_graphql(vanish)
    once(env, capsys)
    body = bot_comments(env.world, 1)[0]["body"]
    assert "⚪ **Merge queue**" in body
    assert body.count("GitHub did not find the merge-group commit") == 1
    assert "not reported on merge-group commit" not in body
    assert bot_comments(env.world, 2)


def test_report_and_the_page_filter_those_stuck_in_the_merge_queue(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        green_pull(env, number)
    queue(env, 1)  # DCO and RTD never report there: stuck
    queue(env, 2, checks=("tests", "DCO"))
    env.world.add_status(REPO, group(2), context=RTD, state="success", created_at=NOW)  # passed
    once(env, capsys)
    args = ["report", "--config", str(env.config), "--format", "json"]
    assert main([*args, "--stuck-in-merge-queue"]) == 0
    pulls = json.loads(capsys.readouterr().out)["pulls"]
    assert [(p["number"], p["merge_queue_stuck"]) for p in pulls] == [(1, ["DCO", RTD])]
    assert main(args) == 0
    every = {p["number"]: p for p in json.loads(capsys.readouterr().out)["pulls"]}
    assert [every[n]["in_merge_queue"] for n in (1, 2, 3)] == [True, True, False]
    page = env.tmp / "triage.html"
    assert main(["report", "--config", str(env.config), "--format", "html",
                 "--output", str(page)]) == 0  # fmt: skip
    html = page.read_text(encoding="utf-8")
    assert 'data-value="queue-stuck"' in html and "stuck in the merge queue" in html
    assert html.count('data-queue-stuck="1"') == 1
    body = bot_comments(env.world, 2)[0]["body"]
    assert "✅ **Merge queue**" in body and "every required check passed there (3)" in body


def test_a_merge_group_delivery_refreshes_the_queued_pull_request(service: Service) -> None:
    """`run` with webhooks: GitHub's `merge_group` `checks_requested` (the sandbox's delivery,
    shaped as GitHub documents it) marks the pull request, refreshed within the debounce."""
    world = service.world
    world.set_required_checks(REPO, ["DCO"])
    world.set_merge_queue(REPO, timeout_minutes=45)
    service.start()
    assert "Merge queue" not in body_of(world)
    sender = WebhookSender(service.url, SECRET).attach(world)
    try:
        service.sandbox.clear_requests()
        world.enqueue(REPO, 7430, group_sha=group(7430))
        wait_for(lambda: "**Merge queue**" in body_of(world), 30, "the merge-queue section")
        assert sender.wait_idle()
    finally:
        sender.close()
    assert [(d.event, d.action, d.numbers, d.status) for d in sender.sent] == [
        ("merge_group", "checks_requested", (7430,), 202)
    ]
    body = body_of(world)
    assert f"`DCO` · required · not reported on merge-group commit `{group(7430)[:7]}`" in body
    assert "the queue gives up after 45 min" in body
    reads = [r.body for r in service.sandbox.requests if r.graphql_operation == "query"]
    assert sum(b"PullsByNumber" in r for r in reads) == 1  # the refresh, not a cycle
    assert sum(b"CommitContexts" in r for r in reads) == 1
    assert not [r for r in reads if b"PullPage" in r]
    err = service.stop()
    assert service.proc is not None and service.proc.returncode == 0, err


def test_without_a_state_a_second_run_writes_nothing(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with no state (the Action) tells the same story from the comment's stamp: the
    minutes since queued are said as of the facts' first observation, so nothing is edited."""
    stateless = env.config.read_text().replace(f'path = "{env.tmp / "state.sqlite3"}"', 'path = ""')
    assert stateless != env.config.read_text()
    env.config.write_text(stateless)
    green_pull(env, 1)
    queue(env, 1)
    once(env, capsys)
    first = bot_comments(env.world, 1)[0]["body"]
    assert "not reported on merge-group commit" in first
    env.sandbox.clear_requests()
    once(env, capsys)
    assert [r for r in env.sandbox.requests if r.method in ("POST", "PATCH", "DELETE")
            and "/comments" in r.path] == []  # fmt: skip
    assert bot_comments(env.world, 1)[0]["body"] == first


def test_report_live_reads_the_merge_groups_in_one_query(
    queued_world: World, env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in (1, 2, 3):
        green_pull(env, number)
    queue(env, 1)
    queue(env, 2, checks=("tests", "DCO"))
    args = ["report", "--config", str(env.config), "--live", "--format", "json"]
    assert main([*args, "--stuck-in-merge-queue"]) == 0
    pulls = json.loads(capsys.readouterr().out)["pulls"]
    assert [(p["number"], p["merge_queue_stuck"]) for p in pulls] == [(1, ["DCO", RTD]),
                                                                       (2, [RTD])]  # fmt: skip
    assert len(commit_queries(env)) == 1
    assert bot_comments(env.world, 1) == []  # --live writes nothing
