"""Write pacing, priority, budget holds, problem logging and GitHub App authentication."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github.Requester import Requester
from support import (
    LOGIN,
    REPO,
    TOKEN,
    bot_comments,
    cli,
    outside_allowlist,
    seed_case,
    write_config,
    writes,
)

from bot.state.store import Store
from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC).replace(microsecond=0)


def green_pull(world: World, number: int) -> None:
    sha = f"{number:040x}"
    world.add_pull(REPO, number, title=f"pr {number}", author="bob", head_sha=sha)
    world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                        started_at=NOW, completed_at=NOW)  # fmt: skip


def failing_pull(world: World, number: int) -> None:
    sha = f"{number:040x}"
    world.add_pull(REPO, number, title=f"pr {number}", author="bob", head_sha=sha)
    world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                        conclusion="failure", started_at=NOW, completed_at=NOW)  # fmt: skip


@pytest.fixture
def world() -> World:
    w = World()
    w.add_user(login=LOGIN, token=TOKEN)
    w.add_repo(REPO)
    return w


def test_writes_are_paced_and_the_rest_carried_with_attention_first(
    world: World, tmp_path: Path
) -> None:
    for number in (1, 2, 3):
        green_pull(world, number)
    failing_pull(world, 4)
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox, max_writes_per_minute=2)
        first = cli("once", "--config", str(cfg))
        assert first.returncode == 0, first.stderr
        assert "comments created 2" in first.stdout and "deferred 2" in first.stdout
        assert "carried to the next cycle" in first.stdout
        posts = [w for w in writes(sandbox) if w.method == "POST"]
        assert len(posts) == 2
        assert posts[1].at - posts[0].at >= 0.99  # at least a second apart
        assert bot_comments(world, 4), "the failing pull request is written first"
        second = cli("once", "--config", str(cfg))
        assert "comments created 0" in second.stdout and "deferred 2" in second.stdout
        with Store.open(tmp_path / "state.sqlite3") as store:
            assert store.writes_since(NOW - timedelta(minutes=5)) == 2
            assert [row.action for row in store.audit()] == ["created", "created"]


def test_the_hourly_budget_is_kept_across_processes(world: World, tmp_path: Path) -> None:
    for number in (1, 2, 3):
        green_pull(world, number)
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox, max_writes_per_hour=1)
        assert "comments created 1" in cli("once", "--config", str(cfg)).stdout
        assert "comments created 0" in cli("once", "--config", str(cfg)).stdout
        assert len([w for w in writes(sandbox) if w.method == "POST"]) == 1


@pytest.fixture
def app_key(tmp_path: Path) -> Iterator[Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    path = tmp_path / "app.pem"
    path.write_bytes(pem)
    yield path
    Requester.resetConnectionClasses()


def test_github_app_authentication_finds_its_installation_and_comments_as_the_app(
    world: World, tmp_path: Path, app_key: Path
) -> None:
    seed_case(world, now=NOW)
    world.add_app(slug="ci-status-bot", app_id=1, installation_id=7, repos=[REPO])
    with Sandbox(world) as sandbox:
        lines = write_config(tmp_path, sandbox).read_text().replace(f'token = "{TOKEN}"', "")
        cfg = tmp_path / "app.toml"
        cfg.write_text(
            lines.replace("[github]", f'[github]\napp_id = 1\nprivate_key_path = "{app_key}"')
        )
        result = cli("once", "--config", str(cfg))
        assert result.returncode == 0, result.stderr
        own = bot_comments(world, 7430, login="ci-status-bot[bot]")
        assert len(own) == 1
        paths = [r.path for r in sandbox.requests]
        assert "/repos/octo/omni/installation" in paths
        assert "/app/installations/7/access_tokens" in paths
        assert outside_allowlist(sandbox) == []


def test_edits_of_existing_comments_go_before_new_comments(world: World, tmp_path: Path) -> None:
    green_pull(world, 1)
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox, max_writes_per_minute=1)
        assert "comments created 1" in cli("once", "--config", str(cfg)).stdout
        state = sqlite3.connect(tmp_path / "state.sqlite3")
        with state:  # age the audit so the next cycle has its one write again
            state.execute("UPDATE audit SET at = '2000-01-01T00:00:00.000000Z'")
        state.close()
        failing_pull(world, 2)
        now = datetime.now(UTC)
        world.add_check_run(REPO, f"{1:040x}", name="lint", app_slug="github-actions",
                            workflow="lint", started_at=now, completed_at=now)  # fmt: skip
        second = cli("once", "--config", str(cfg))
        assert "edited 1" in second.stdout and "deferred 1" in second.stdout
        assert bot_comments(world, 2) == []
        assert "lint" in bot_comments(world, 1)[0]["body"]
