"""Issue 31: a failing run's earlier attempts on its head travel with the bot's comment.

A rerun makes a new check run (a new id, which the pull-request read sees), so what came
before a failing run on its head never changes once every attempt read had settled: the
carried line holds it by run id, and a run with no state asks no `CheckAttempts` for a run its
trusted comment carries. What it says is what a run with a state says. An attempt still
running is not final: nothing is carried for that run, and it is asked again.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from support import LOGIN, REPO, Env, bot_comments, repo_world, writes

from bot.cli import main
from bot.render.stamp import parse_carried
from bot_sandbox import World

world = pytest.fixture(repo_world, name="world")

SHA = "3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
BASE = "b" * 40


def stateless(env: Env) -> None:
    """The config with no state at all (`state.path = ""`)."""
    text = env.config.read_text()
    changed = text.replace(f'path = "{env.tmp / "state.sqlite3"}"', 'path = ""')
    assert changed != text
    env.config.write_text(changed)


def check(env: Env, name: str, conclusion: str | None, hours: float, **kw: object) -> None:
    at = env.now - timedelta(hours=hours)
    done = at if conclusion is not None else None
    env.world.add_check_run(
        REPO, SHA, name=name, workflow="ci", conclusion=conclusion, started_at=at,
        completed_at=done, **kw,
    )  # fmt: skip


def rerun_head(env: Env, *, running: bool = False) -> None:
    """Pull request 1: `tests` passed on attempt 1 and failed on attempt 2 of the same head
    (`running`: an attempt started between them is still in progress); `lint` failed on its
    only attempt."""
    env.world.add_user(login=LOGIN, token="t")
    env.world.add_pull(REPO, 1, title="PR 1", author="alice", head_sha=SHA)
    env.world.set_merge_base(REPO, "main", SHA, BASE)
    check(env, "tests", "success", 3)
    if running:
        check(env, "tests", None, 2.5, status="in_progress")
    check(env, "tests", "failure", 2)
    check(env, "lint", "failure", 2)


def once(env: Env) -> None:
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0


def attempts_asked(env: Env) -> int:
    """How many CheckAttempts queries the last run sent (and forgets them)."""
    found = sum(1 for r in env.sandbox.requests if b"query CheckAttempts" in r.body)
    env.sandbox.clear_requests()
    return found


def row(body: str, name: str) -> str:
    """The comment's row of one check, with its continued lines (its history clause)."""
    rows, lines = [], body.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("- ") and f"[`{name}`]" in line:
            more = [t for t in lines[k + 1 :] if t.startswith("  ")]
            rows.append("\n".join([line, *more[: len(more)]]))
    assert len(rows) == 1, body
    return rows[0]


def body_of(env: Env) -> str:
    return str(bot_comments(env.world, 1)[0]["body"])


def test_a_stateless_run_after_a_stateful_one_asks_no_attempts_and_says_the_same(
    env: Env, world: World
) -> None:
    rerun_head(env)
    once(env)  # with a state: asked once, kept, and carried
    assert attempts_asked(env) == 1
    first = body_of(env)
    assert "passed on an earlier attempt of this commit ([attempt 1](" in row(first, "tests")
    carried = parse_carried(first)
    assert carried is not None and len(carried.attempts) == 2  # lint's too: () read, none
    stateless(env)
    once(env)
    assert attempts_asked(env) == 0  # the comment carried both runs' attempts
    assert writes(env.sandbox) == [] and body_of(env) == first
    check(env, "build", "success", 1)  # a new fact: the comment is written again
    once(env)
    assert attempts_asked(env) == 0
    edited = body_of(env)
    assert edited != first and row(edited, "tests") == row(first, "tests")  # the same clause


def test_a_stateless_runs_second_pass_asks_no_attempts_for_a_run_it_carries(env: Env) -> None:
    stateless(env)
    rerun_head(env)
    once(env)
    assert attempts_asked(env) == 1
    first = body_of(env)
    once(env)
    assert attempts_asked(env) == 0
    assert writes(env.sandbox) == [] and body_of(env) == first
    check(env, "tests", "failure", 1)  # a rerun: a new check run, its attempts asked once
    once(env)
    assert attempts_asked(env) == 1
    again = row(body_of(env), "tests")
    assert again != row(first, "tests")  # the new run's row
    assert "passed on an earlier attempt of this commit ([attempt 1](" in again
    once(env)
    assert attempts_asked(env) == 0


def test_an_attempt_still_running_is_not_carried_and_asked_again(env: Env) -> None:
    stateless(env)
    rerun_head(env, running=True)
    once(env)
    assert attempts_asked(env) == 1
    carried = parse_carried(body_of(env))
    assert carried is not None and len(carried.attempts) == 1  # lint's only: tests' may change
    once(env)
    assert attempts_asked(env) == 1  # tests' attempts read again
    once(env)
    assert attempts_asked(env) == 1


def test_a_foreign_edit_carries_no_attempts(env: Env) -> None:
    stateless(env)
    rerun_head(env)
    once(env)
    assert attempts_asked(env) == 1
    first = bot_comments(env.world, 1)[0]
    env.world.edit_comment(int(str(first["id"])), str(first["body"]), editor="mallory")
    once(env)
    assert attempts_asked(env) == 1  # nothing of the comment trusted: read again
    assert "passed on an earlier attempt of this commit" in row(body_of(env), "tests")
    once(env)  # restored by the bot: trusted again
    assert attempts_asked(env) == 0
