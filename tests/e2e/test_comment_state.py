"""The comment stays true (issue 15 item 4) and carries the state (issue 20 item 1), end to end.

The real CLI as a subprocess against the loopback sandbox: a deleted comment comes back and an
edited one is restored whatever the facts; `once` with no state at all tells the same story as
with a state and writes nothing while nothing changed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import REPO, bot_comments, clean_env, seed_case, write_config, writes

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

QUEUED = "integration (queued)"
OTHER = 7431
OTHER_SHA = "a1" * 20


@dataclass
class Env:
    world: World
    sandbox: Sandbox
    config: Path
    tmp: Path
    run_dir: Path  # the working folder of every run (a fresh runner's checkout)


def _world(now: datetime) -> World:
    """The seed case plus a second pull request; both carry a check run GitHub gives no time."""
    world = World()
    seed_case(world, now=now)
    world.add_pull(REPO, OTHER, title="Second", author="bob", head_sha=OTHER_SHA)
    for number, sha in ((7430, None), (OTHER, OTHER_SHA)):
        head = sha or world.repo(REPO).pulls[number].head_sha
        world.add_check_run(
            REPO, head, name=QUEUED, app_slug="github-actions", workflow="integration",
            status="queued", conclusion=None,
        )  # fmt: skip
        done = now - timedelta(hours=1)
        world.add_check_run(REPO, head, name="unit", workflow="ci", started_at=done,
                            completed_at=done)  # fmt: skip
    return world


def _config(tmp: Path, sandbox: Sandbox, *, stateless: bool) -> Path:
    path = write_config(tmp, sandbox)
    if stateless:
        text = path.read_text(encoding="utf-8")
        old = f'path = "{tmp / "state.sqlite3"}"'
        assert old in text
        path.write_text(text.replace(old, 'path = ""'), encoding="utf-8")
    return path


@pytest.fixture(params=["stateful"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    world = _world(datetime.now(UTC))
    run_dir = tmp_path / "runner"
    run_dir.mkdir()
    with Sandbox(world) as sandbox:
        config = _config(tmp_path, sandbox, stateless=request.param == "stateless")
        yield Env(world, sandbox, config, tmp_path, run_dir)


def once(env: Env) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "once", "--config", str(env.config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        cwd=env.run_dir,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def own(env: Env, number: int = 7430) -> dict[str, object]:
    comments = bot_comments(env.world, number)
    assert len(comments) == 1, comments
    return comments[0]


# -- issue 15 item 4: the comment stays true ------------------------------------------------------


def test_a_deleted_comment_is_posted_again_within_two_cycles_with_unchanged_facts(env: Env) -> None:
    once(env)
    first = own(env)
    env.world.delete_comment(int(str(first["id"])))
    once(env)
    if not bot_comments(env.world, 7430):
        once(env)
    again = own(env)
    assert again["id"] != first["id"]
    assert again["body"] == first["body"]  # the same facts, first observed at the same time
    assert own(env, OTHER)  # the other pull request's comment is untouched and still one


def test_a_comment_someone_else_edited_is_restored_within_two_cycles(env: Env) -> None:
    once(env)
    first = own(env)
    env.world.add_user(login="mallory")
    env.world.edit_comment(
        int(str(first["id"])), f"{MARKER}\n### ✅ Passing · all green", editor="mallory"
    )
    once(env)
    if own(env)["body"] != first["body"]:
        once(env)
    restored = own(env)
    assert restored["id"] == first["id"]  # edited back in place, not posted again
    assert restored["body"] == first["body"]
    env.sandbox.clear_requests()
    once(env)  # restored: nothing more to write
    once(env)
    assert writes(env.sandbox) == []


def test_the_check_costs_one_graphql_query_per_100_comments(env: Env) -> None:
    once(env)
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []
    graphql = [r for r in env.sandbox.requests if r.graphql_operation is not None]
    reads = [r for r in graphql if b"IssueComment" in r.body]
    assert len(reads) == 1, [r.graphql_operation for r in graphql]
    rest = [r for r in env.sandbox.requests if r.graphql_operation is None]
    assert not [r for r in rest if r.path.endswith("/comments")]  # no REST listing per PR
