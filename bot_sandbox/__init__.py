"""Loopback sandbox: one shared fake of GitHub (REST + GraphQL) and Read the Docs API v3."""

from bot_sandbox.server import Recorded, Sandbox
from bot_sandbox.world import World

__all__ = ["Recorded", "Sandbox", "World"]
