"""Shared pytest fixtures: an empty sandbox World and a running loopback Sandbox over it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from bot_sandbox import Sandbox, World

# CI runs the property tests with a fixed seed, so a landing never hangs on a new random draw;
# developers' runs keep exploring (a failure they find becomes an @example).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def world() -> World:
    """An empty World."""
    return World()


@pytest.fixture
def sandbox(world: World) -> Iterator[Sandbox]:
    """A running Sandbox serving `world`."""
    with Sandbox(world) as sb:
        yield sb
