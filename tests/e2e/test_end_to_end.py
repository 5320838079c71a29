"""The real CLI, as a subprocess, against the loopback sandbox: the service issue's checks."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from support import (
    CONTEXT,
    LOGIN,
    REPO,
    RTD,
    SEED_SHA,
    Env,
    bot_comments,
    clean_env,
    cli,
    seed_case,
    write_config,
    writes,
)

from bot.core.model import MARKER
from bot.state.store import Store
from bot_sandbox import World

COMMENTS_PATH = r"/repos/octo/omni/issues/\d+/comments"


@pytest.fixture
def world(now: datetime) -> World:
    world = World()
    seed_case(world, now=now)
    return world


def once(env: Env, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("once", "--config", str(env.config), *extra, sleep=env.waits)


def test_once_creates_one_comment_then_leaves_it_then_edits_it_on_change(env: Env) -> None:
    first = once(env)
    assert first.returncode == 0, first.stderr
    comments = bot_comments(env.world, 7430)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith(MARKER)
    assert "eb46d06" in body and "34894885" in body and "retriggers nothing" in body
    assert "comments created 1" in first.stdout

    env.sandbox.clear_requests()
    second = once(env)
    assert second.returncode == 0, second.stderr
    assert writes(env.sandbox) == []
    assert "left 1" in second.stdout
    assert bot_comments(env.world, 7430)[0]["body"] == body

    now = datetime.now(UTC)
    env.world.add_check_run(
        REPO, SEED_SHA, name="pre-commit", app_slug="pre-commit-ci", conclusion="failure",
        started_at=now, completed_at=now, new_suite=True,
    )  # fmt: skip
    env.sandbox.clear_requests()
    third = once(env)
    assert third.returncode == 0, third.stderr
    edits = [w for w in writes(env.sandbox) if w.method == "PATCH"]
    assert len(edits) == 1 and len(writes(env.sandbox)) == 1
    rereads = [r for r in env.sandbox.requests if b"query Comments(" in r.body]
    assert len(rereads) == 1 and rereads[0].at <= edits[0].at  # re-read before the edit
    after = bot_comments(env.world, 7430)
    assert [c["id"] for c in after] == [comments[0]["id"]]
    assert "\n### ❌ Failing · " in after[0]["body"]


def test_a_foreign_comment_with_the_marker_is_never_edited(env: Env) -> None:
    forged = env.world.add_comment(REPO, 7430, author="mallory", body=f"{MARKER}\nall green!")
    result = once(env)
    assert result.returncode == 0, result.stderr
    comments = env.world.comments(REPO, 7430)
    assert next(c for c in comments if c["id"] == forged["id"])["body"] == f"{MARKER}\nall green!"
    own = bot_comments(env.world, 7430)
    assert len(own) == 1 and own[0]["id"] != forged["id"]
    assert not [w for w in writes(env.sandbox) if w.method == "PATCH"]


def test_a_create_answered_502_after_storing_leaves_exactly_one_comment(env: Env) -> None:
    env.sandbox.fail("POST", COMMENTS_PATH, status=502, apply=True)
    result = once(env)
    assert result.returncode == 0, result.stderr
    assert len(bot_comments(env.world, 7430)) == 1
    again = once(env)
    assert again.returncode == 0, again.stderr
    assert len(bot_comments(env.world, 7430)) == 1
    posts = [w for w in writes(env.sandbox) if w.method == "POST"]
    assert len(posts) == 1


def test_killed_between_create_and_bookkeeping_leaves_exactly_one_comment(env: Env) -> None:
    env.sandbox.fail("POST", COMMENTS_PATH, status=201, apply=True, delay_s=30)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "once", "--config", str(env.config)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not bot_comments(env.world, 7430) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(bot_comments(env.world, 7430)) == 1
    proc.kill()
    proc.wait(timeout=10)
    env.sandbox.clear_failures()
    with Store.open(env.tmp / "state.sqlite3") as store:
        assert store.get_comment(REPO, 7430) is None  # the bookkeeping never happened
    result = once(env)
    assert result.returncode == 0, result.stderr
    comments = bot_comments(env.world, 7430)
    assert len(comments) == 1
    with Store.open(env.tmp / "state.sqlite3") as store:
        stored = store.get_comment(REPO, 7430)
        assert stored is not None and stored.comment_id == comments[0]["id"]


def test_a_deleted_comment_is_created_again(env: Env) -> None:
    assert once(env).returncode == 0
    first = bot_comments(env.world, 7430)[0]
    env.world.delete_comment(first["id"])
    now = datetime.now(UTC)
    env.world.add_check_run(
        REPO, SEED_SHA, name="lint", app_slug="github-actions", workflow="lint",
        conclusion="failure", started_at=now, completed_at=now,
    )  # fmt: skip
    result = once(env)
    assert result.returncode == 0, result.stderr
    comments = bot_comments(env.world, 7430)
    assert len(comments) == 1 and comments[0]["id"] != first["id"]


def test_dry_run_prints_the_body_and_writes_nothing(env: Env) -> None:
    result = once(env, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "octo/omni#7430: would create" in result.stdout
    assert MARKER in result.stdout
    assert writes(env.sandbox) == []
    assert env.world.comments(REPO, 7430) == []
    assert not (env.tmp / "state.sqlite3").exists()  # a dry run creates no state
    assert once(env).returncode == 0
    env.sandbox.clear_requests()
    now = datetime.now(UTC)
    env.world.add_check_run(REPO, SEED_SHA, name="lint", app_slug="github-actions",
                            workflow="lint", conclusion="failure", started_at=now,
                            completed_at=now)  # fmt: skip
    with Store.open(env.tmp / "state.sqlite3") as store:
        before = (store.get_facts(REPO, 7430), store.audit())
    again = once(env, "--dry-run")
    assert "octo/omni#7430: would edit" in again.stdout and writes(env.sandbox) == []
    with Store.open(env.tmp / "state.sqlite3") as store:
        assert (store.get_facts(REPO, 7430), store.audit()) == before


def test_policy_skips_drafts_labels_and_authors(env: Env) -> None:
    config = write_config(env.tmp, env.sandbox, include_drafts=False)
    result = cli("once", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "1 skipped by policy" in result.stdout
    assert env.world.comments(REPO, 7430) == []
    config = write_config(env.tmp, env.sandbox, skip_authors=["alice"])
    assert "1 skipped by policy" in cli("once", "--config", str(config)).stdout
    env.world.add_pull(REPO, 7501, title="deps", author="bot", head_sha="b" * 40, labels=("deps",))
    config = write_config(env.tmp, env.sandbox, skip_labels=["deps"])
    labelled = cli("once", "--config", str(config))
    assert "2 pull requests seen, 1 skipped by policy" in labelled.stdout, labelled.stderr
    assert env.world.comments(REPO, 7501) == [] and len(bot_comments(env.world, 7430)) == 1


def test_one_failing_pull_request_does_not_stop_the_others(env: Env) -> None:
    env.world.add_pull(REPO, 7500, title="other", author="bob", head_sha="a" * 40)
    env.sandbox.fail("GET", r"/repos/octo/omni/issues/7430/comments", status=500, times=-1)
    # the batched listing fails too: each pull request's comments are then listed over REST
    env.sandbox.fail("POST", r"/graphql", status=502, when="PullComments", times=-1)
    result = once(env)
    assert result.returncode == 1
    assert "octo/omni#7430" in result.stderr
    assert len(bot_comments(env.world, 7500)) == 1
    assert bot_comments(env.world, 7430) == []


def test_show_prints_the_seed_report_and_writes_nothing(env: Env) -> None:
    result = cli("show", f"{REPO}#7430", "--format", "json", "--config", str(env.config))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "incomplete" and report["draft"] is True
    docs = next(s for s in report["signals"] if s["name"] == CONTEXT)
    assert docs["github_state"] == "pending" and docs["state"] == "cancelled"
    assert docs["reconciliation"]["build_id"] == 34894885
    assert docs["reconciliation"]["builds_for_commit"] == 1
    assert docs["reconciliation"]["divergent"] is True
    passing = [s["name"] for s in report["signals"] if s["state"] == "success"]
    assert sorted(passing) == ["DCO", "build-wheel (3.11)", "build-wheel (3.12)", "pre-commit"]
    markdown = cli("show", f"{REPO}#7430", "--config", str(env.config))
    assert markdown.returncode == 0 and markdown.stdout.startswith(MARKER)
    assert writes(env.sandbox) == []
    assert all(r.method == "GET" for r in env.sandbox.requests if r.service == "rtd")


@pytest.mark.parametrize("target", ["octo/omni#9999", "octo/missing#1"])
def test_show_of_something_that_does_not_exist_exits_1(env: Env, target: str) -> None:
    result = cli("show", target, "--config", str(env.config))
    assert result.returncode == 1
    assert "not found" in result.stderr and "Traceback" not in result.stderr


def test_run_completes_a_cycle_and_stops_on_sigterm(env: Env) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(env.config)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not bot_comments(env.world, 7430) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert len(bot_comments(env.world, 7430)) == 1
    assert "cycle: 1 pull requests seen" in err and "stopped" in err


def test_the_rtd_answer_of_a_final_build_is_not_fetched_again(env: Env) -> None:
    assert once(env).returncode == 0
    env.sandbox.clear_requests()
    assert once(env).returncode == 0
    assert [r for r in env.sandbox.requests if r.service == "rtd"] == []


def test_a_new_rtd_status_after_the_cached_build_is_looked_up_again(env: Env) -> None:
    assert once(env).returncode == 0
    later = datetime.now(UTC) + timedelta(seconds=1)
    env.world.add_rtd_build(
        RTD, id=34894999, commit=SEED_SHA, version="7430", state="finished", success=True,
        created=later, finished=later, duration=60,
    )  # fmt: skip
    env.world.add_status(
        REPO, SEED_SHA, context=CONTEXT, state="success",
        description="Read the Docs build succeeded!", created_at=later,
    )  # fmt: skip
    env.sandbox.clear_requests()
    result = once(env)
    assert result.returncode == 0, result.stderr
    assert [r for r in env.sandbox.requests if r.service == "rtd"]
    body = bot_comments(env.world, 7430)[0]["body"]
    assert "\n### ✅ Passing · " in body
    assert bot_comments(env.world, 7430)[0]["user"]["login"] == LOGIN
