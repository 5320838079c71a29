"""Shared pytest fixtures: an empty sandbox World and a running loopback Sandbox over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.sandbox import Sandbox, World


@pytest.fixture
def world() -> World:
    """An empty World."""
    return World()


@pytest.fixture
def sandbox(world: World) -> Iterator[Sandbox]:
    """A running Sandbox serving `world`."""
    with Sandbox(world) as sb:
        yield sb
