"""Issue 25: Codecov and Azure Pipelines reconciled like Read the Docs, end to end (the real
CLI against the sandbox's Codecov API v2 and Azure DevOps build API), faults included."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from typing import Any

import pytest
from support import LOGIN, REPO, TOKEN, Env, bot_comments, cli, repo_world

from bot_sandbox import World
from bot_sandbox.providers_api import SIGN_IN, add_azure_build, add_codecov_commit, providers

world = pytest.fixture(repo_world, name="world")

SHA = "5f0c6a8be2d94c1e7a3b9d8f6e2c4a1b0d9e8f7a"
OTHER = "1111111111111111111111111111111111111111"
ORG, PROJECT, BUILD = "octo-org", "omni", 20455
AZURE_URL = f"https://dev.azure.com/{ORG}/{PROJECT}/_build/results?buildId={BUILD}&view=results"


def pull(world: World, now: datetime, number: int = 41) -> None:
    world.add_pull(REPO, number, title="Cover the resolver", author="alice", head_sha=SHA)
    done = now - timedelta(hours=3)
    world.add_check_run(REPO, SHA, name="tests", started_at=done, completed_at=done)


def codecov_status(world: World, now: datetime, context: str = "codecov/patch") -> None:
    world.add_status(
        REPO,
        SHA,
        context=context,
        state="pending",
        creator="codecov[bot]",
        description="Waiting for status to be reported",
        target_url=f"https://app.codecov.io/gh/{REPO}/commit/{SHA}",
        created_at=now - timedelta(hours=3),
    )


def azure_check(world: World, now: datetime, status: str = "in_progress") -> None:
    world.add_check_run(
        REPO,
        SHA,
        name="omni (Linux)",
        app_slug="azure-pipelines",
        status=status,
        conclusion=None,
        started_at=now - timedelta(hours=2),
        completed_at=None,
        details_url=AZURE_URL,
    )


def show(env: Env, number: int = 41) -> dict[str, Any]:
    done = cli(
        "show", f"{REPO}#{number}", "--format", "json", "--config", str(env.config), sleep=env.waits
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def once(env: Env) -> subprocess.CompletedProcess[str]:
    done = cli("once", "--config", str(env.config), sleep=env.waits)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def row(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["signals"] if s["name"] == name)


def requests_to(env: Env, service: str) -> list[str]:
    return [r.path for r in env.sandbox.requests if r.service == service]


# --- Codecov --------------------------------------------------------------------------------


def test_codecov_complete_while_github_pending_is_divergent_and_read_once(
    env: Env, world: World, now: datetime
) -> None:
    pull(world, now)
    codecov_status(world, now)
    codecov_status(world, now, "codecov/project/backend")
    at = now - timedelta(hours=2, minutes=58)
    add_codecov_commit(
        world, REPO, SHA, state="complete", uploads=[("processed", at, at), ("processed", at, at)]
    )
    once(env)
    paths = requests_to(env, "codecov")
    assert paths == [
        f"/github/octo/repos/omni/commits/{SHA}/",
        f"/github/octo/repos/omni/commits/{SHA}/uploads/",
    ]
    report = show(env)
    rec = row(report, "codecov/patch")["reconciliation"]
    assert rec["provider"] == "codecov" and rec["divergent"] is True
    assert rec["build_state"] == "complete" and rec["builds_for_commit"] == 2
    assert rec["finding"].startswith("Codecov processed this commit at ")
    assert "(2 uploads); GitHub still shows pending." in rec["finding"]
    assert row(report, "codecov/patch")["state"] == "stale"
    assert row(report, "codecov/project/backend")["reconciliation"]["divergent"] is True
    body = bot_comments(world, 41)[0]["body"]
    assert "Codecov processed this commit" in body
    env.sandbox.clear_requests()
    once(env)  # a complete record is kept: never asked again
    assert requests_to(env, "codecov") == []


def test_codecov_pending_says_what_it_received(env: Env, world: World, now: datetime) -> None:
    pull(world, now)
    codecov_status(world, now)
    at = now - timedelta(minutes=20)
    add_codecov_commit(world, REPO, SHA, state="pending", uploads=[("uploaded", at, None)])
    report = show(env)
    rec = row(report, "codecov/patch")["reconciliation"]
    assert rec["divergent"] is False and rec["build_state"] == "pending"
    assert "1 upload received, the last at " in rec["finding"]


def test_codecov_outage_is_not_evidence_and_the_last_good_record_stands(
    env: Env, world: World, now: datetime
) -> None:
    pull(world, now)
    codecov_status(world, now)
    at = now - timedelta(minutes=20)
    add_codecov_commit(world, REPO, SHA, state="pending", uploads=[("uploaded", at, None)])
    once(env)
    env.sandbox.fail("GET", r"/codecov/api/v2/.*", 503, times=-1)
    once(env)
    rec = row(show(env), "codecov/patch")["reconciliation"]
    assert "1 upload received" in rec["finding"] and rec["divergent"] is False


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ({"status": 200, "body": "<html><body>Bad gateway</body></html>"}, "not JSON"),
        (
            {"status": 302, "body": "", "headers": {"Location": "https://evil.example/x"}},
            "HTTP 302 (a redirect, not followed)",
        ),
        (
            {"status": 200, "body": {"commitid": OTHER, "state": "complete"}},
            "record of commit 1111111, not this head",
        ),
        ({"status": 200, "body": {"commitid": SHA}}, "has no state"),
        ({"status": 200, "body": "[" + "1," * 1_200_000 + "1]"}, "more than"),
    ],
)
def test_codecov_bad_input_is_could_not_verify(
    env: Env, world: World, now: datetime, fault: dict[str, Any], said: str
) -> None:
    pull(world, now)
    codecov_status(world, now)
    add_codecov_commit(world, REPO, SHA, state="complete")
    env.sandbox.fail(
        "GET", rf"/codecov/api/v2/github/octo/repos/omni/commits/{SHA}/", **fault, times=-1
    )
    done = once(env)
    assert "Traceback" not in done.stderr
    got = row(show(env), "codecov/patch")
    assert got["state"] == "stale"  # aged by GitHub's own time, no conclusion from Codecov
    assert got["reconciliation"]["finding"].startswith("Could not verify with Codecov")
    assert said in got["reconciliation"]["finding"]
    assert not any("evil.example" in r.path for r in env.sandbox.requests)


def test_a_private_repository_without_a_token_says_so(
    env: Env, world: World, now: datetime
) -> None:
    pull(world, now)
    codecov_status(world, now)
    add_codecov_commit(world, REPO, SHA, state="complete", private=True)
    rec = row(show(env), "codecov/patch")["reconciliation"]
    assert "the repository is private (set codecov.token)" in rec["finding"]


# --- Azure Pipelines --------------------------------------------------------------------------


def test_azure_completed_while_github_in_progress_is_settled_by_its_result(
    env: Env, world: World, now: datetime
) -> None:
    pull(world, now)
    azure_check(world, now)
    add_azure_build(
        world,
        ORG,
        PROJECT,
        BUILD,
        commit=OTHER,
        pr_head=SHA,
        status="completed",
        result="succeeded",
        started=now - timedelta(hours=2),
        finished=now - timedelta(hours=1, minutes=40),
    )
    once(env)
    assert requests_to(env, "azure") == [f"/{ORG}/{PROJECT}/_apis/build/builds/{BUILD}"]
    got = row(show(env), "omni (Linux)")
    rec = got["reconciliation"]
    assert got["state"] == "success" and rec["provider"] == "azure-pipelines"
    assert rec["divergent"] is True and rec["build_id"] == BUILD
    assert rec["finding"].startswith(f"Azure Pipelines: build {BUILD} completed at ")
    assert rec["finding"].endswith("with result succeeded; GitHub still shows in progress.")
    env.sandbox.clear_requests()
    once(env)
    assert requests_to(env, "azure") == []  # completed: kept, never asked again


def test_azure_build_of_another_commit_never_settles(env: Env, world: World, now: datetime) -> None:
    pull(world, now)
    azure_check(world, now)
    add_azure_build(world, ORG, PROJECT, BUILD, commit=OTHER, status="completed", result="failed")
    got = row(show(env), "omni (Linux)")
    assert got["state"] in ("pending", "stale") and got["reconciliation"]["divergent"] is False
    assert "is of commit 1111111, not this head" in got["reconciliation"]["finding"]


def test_azure_private_project_without_a_token_and_an_outage(
    env: Env, world: World, now: datetime
) -> None:
    pull(world, now)
    azure_check(world, now)
    add_azure_build(
        world, ORG, PROJECT, BUILD, commit=SHA, status="completed", result="failed", private=True
    )
    rec = row(show(env), "omni (Linux)")["reconciliation"]
    assert "the project is private (set azure_pipelines.token)" in rec["finding"]
    assert "HTTP 203" in rec["finding"]
    providers(world).azure_private.clear()
    env.sandbox.fail("GET", r"/azure/.*", 500, times=-1)
    rec = row(show(env), "omni (Linux)")["reconciliation"]
    assert rec["finding"].startswith("Could not verify with Azure Pipelines")
    assert "HTTP 500 (a server error)" in rec["finding"]
    assert SIGN_IN.decode() not in rec["finding"]


def test_nothing_pending_asks_no_provider(env: Env, world: World, now: datetime) -> None:
    pull(world, now)
    world.add_status(
        REPO,
        SHA,
        context="codecov/patch",
        state="success",
        target_url=f"https://app.codecov.io/gh/{REPO}/commit/{SHA}",
    )
    azure_check(world, now, status="completed")
    once(env)
    assert requests_to(env, "codecov") == [] and requests_to(env, "azure") == []
    assert LOGIN and TOKEN  # the world's bot
