"""Shared pytest fixtures: a World, a running loopback Sandbox over it, and `env` (both plus a
config and a clock). A test module seeds `env` by overriding the `world` fixture."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings
from support import Env, clean_env, sandbox_env

from bot_sandbox import Sandbox, World

# The property tests' time is bounded by their example counts (max_examples), not by a
# per-example deadline, which a shared two-core machine running four workers misses at random.
# CI runs them with a fixed seed, so a landing never hangs on a new random draw; developers'
# runs keep exploring (a failure they find becomes an @example).
settings.register_profile("suite", deadline=None)
settings.register_profile("ci", parent=settings.get_profile("suite"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "suite")


@pytest.fixture
def now() -> datetime:
    """The test's "now" (UTC), the same for its world and its env."""
    return datetime.now(UTC)


@pytest.fixture
def world() -> World:
    """An empty World (modules override this fixture to seed one)."""
    return World()


@pytest.fixture
def sandbox(world: World) -> Iterator[Sandbox]:
    """A running Sandbox serving `world`."""
    with Sandbox(world) as sb:
        yield sb


@pytest.fixture
def env(world: World, tmp_path: Path, now: datetime) -> Iterator[Env]:
    """A Sandbox serving `world` and a config for it; checks the allowlist afterwards."""
    with sandbox_env(world, tmp_path, now) as env:
        yield env


@pytest.fixture(scope="session")
def demo() -> subprocess.CompletedProcess[str]:
    """`ci-status-bot demo` run once, as the installed console script (its exit code included)."""
    script = Path(sys.executable).with_name("ci-status-bot")
    return subprocess.run(
        [str(script), "demo"], capture_output=True, text=True, timeout=180, env=clean_env()
    )
