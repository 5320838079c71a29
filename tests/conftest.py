"""Shared pytest fixtures: a World, a running loopback Sandbox over it, and `env` (both plus a
config and a clock). A test module seeds `env` by overriding the `world` fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings
from support import Env, sandbox_env

from bot_sandbox import Sandbox, World

# CI runs the property tests with a fixed seed, so a landing never hangs on a new random draw;
# developers' runs keep exploring (a failure they find becomes an @example).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
