"""Shared helpers for the end-to-end tests: seed worlds, write configs, run the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bot.core.model import MARKER
from bot.guard import Guard
from bot_sandbox import Recorded, Sandbox, World

REPO = "octo/omni"
RTD = "omni-docs"
TOKEN = "test-token"
LOGIN = "ci-status-bot"
SEED_SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
CONTEXT = f"docs/readthedocs.org:{RTD}"


def seed_case(world: World, *, now: datetime, number: int = 7430, sha: str = SEED_SHA) -> str:
    """The core issue's seed case: four green runs, RTD status pending, build cancelled on RTD."""
    world.add_user(login=LOGIN, token=TOKEN)
    if REPO not in world.repos:
        world.add_repo(REPO)
    world.add_pull(
        REPO, number, title="Add the omni resolver", author="alice", head_sha=sha, draft=True
    )
    done = now - timedelta(hours=5)
    world.add_check_run(REPO, sha, name="DCO", app_slug="dco", started_at=done, completed_at=done)
    for name in ("build-wheel (3.11)", "build-wheel (3.12)"):
        world.add_check_run(
            REPO, sha, name=name, app_slug="github-actions", workflow="wheels",
            started_at=done, completed_at=done + timedelta(minutes=4),
        )  # fmt: skip
    world.add_check_run(
        REPO, sha, name="pre-commit", app_slug="pre-commit-ci", started_at=done, completed_at=done
    )
    world.add_status(
        REPO, sha, context=CONTEXT, state="pending",
        description="Read the Docs build is in progress!",
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/34894885/",
        created_at=now - timedelta(hours=5),
    )  # fmt: skip
    world.add_rtd_build(
        RTD, id=34894885, commit=sha, version=str(number), state="cancelled", success=False,
        created=now - timedelta(hours=5), finished=None, duration=0,
    )  # fmt: skip
    world.add_rtd_notification(RTD, 34894885, "build:user:cancelled")
    return sha


def write_config(tmp: Path, sandbox: Sandbox, **policy: Any) -> Path:
    """A config file pointing at the sandbox; returns its path."""
    lines = [
        "[github]",
        f'api_url = "{sandbox.github_url}"',
        f'token = "{TOKEN}"',
        "[readthedocs]",
        f'api_url = "{sandbox.rtd_url}"',
        f'business_api_url = "{sandbox.rtd_url}"',
        "max_retries = 1",
        "[state]",
        f'path = "{tmp / "state.sqlite3"}"',
        "[schedule]",
        "interval_seconds = 30",
        "jitter_seconds = 0",
        "[server]",
        "port = 0",  # no HTTP server unless a test asks for one (tests run side by side)
        "[policy]",
        *(f"{k} = {_toml(v)}" for k, v in policy.items()),
        "[[repos]]",
        f'name = "{REPO}"',
    ]
    path = tmp / "bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return repr(value)


def clean_env() -> dict[str, str]:
    """The environment without any CI_STATUS_BOT_* variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CI_STATUS_BOT_")}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real command line as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
        check=False,
    )


def bot_comments(world: World, number: int, *, login: str = LOGIN) -> list[dict[str, Any]]:
    """The bot's own comments on a pull request (marker AND author)."""
    return [
        c
        for c in world.comments(REPO, number)
        if c["user"]["login"] == login and c["body"].startswith(MARKER)
    ]


def writes(sandbox: Sandbox) -> list[Recorded]:
    """Every GitHub request that writes (GraphQL queries excluded)."""
    return [
        r
        for r in sandbox.requests
        if r.service == "github" and r.method in {"POST", "PATCH", "PUT", "DELETE"}
        and r.graphql_operation is None
    ]  # fmt: skip


@dataclass(frozen=True)
class Refused:
    """A recorded request that the allowlist would refuse."""

    request: Recorded
    reason: str


def outside_allowlist(sandbox: Sandbox) -> list[Refused]:
    """Recorded requests that the bot's own allowlist does not permit."""
    guard = Guard.for_urls(sandbox.github_url, (sandbox.rtd_url,))
    refused: list[Refused] = []
    for r in sandbox.requests:
        try:
            if r.service == "github" and r.graphql_operation is not None:
                guard.check_github(r.method, sandbox.graphql_url, r.body)
            elif r.service == "github":
                guard.check_github(r.method, sandbox.github_url + r.path)
            else:
                guard.check_rtd(r.method, sandbox.rtd_url + r.path)
        except Exception as exc:
            refused.append(Refused(r, str(exc)))
    return refused
