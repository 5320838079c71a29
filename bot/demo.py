"""`ci-status-bot demo`: real cycles of the bot against the loopback sandbox, offline."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from bot.cli import build_clients, make_cycle, now_utc
from bot.model import MARKER
from bot.sandbox import Sandbox, World
from bot.sandbox.seeds import seed_demo
from bot.settings import Settings
from bot.store import Store

DEMO_REPO = "octo/omni"
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})


def demo_settings(sandbox: Sandbox, state_path: Path) -> Settings:
    """Settings that point every client at the sandbox; no file and no environment are read."""
    return Settings.model_validate(
        {
            "github": {"api_url": sandbox.github_url, "token": "sandbox-token"},
            "readthedocs": {"api_url": sandbox.rtd_url, "business_api_url": sandbox.rtd_url},
            "state": {"path": str(state_path)},
            "repos": [{"name": DEMO_REPO}],
        }
    )


def _print_comments(world: World, out: Callable[[str], None], login: str) -> None:
    for number in sorted(world.repo(DEMO_REPO).pulls):
        for comment in world.comments(DEMO_REPO, number):
            if comment["user"]["login"] == login and comment["body"].startswith(MARKER):
                out(f"--- comment {comment['id']} on {DEMO_REPO}#{number} ---")
                out(comment["body"])


def run_demo(*, cycles: int = 2, out: Callable[[str], None] = print) -> int:
    """Seed the sandbox, run cycles of the bot, print what it posted; 0 when all went well."""
    world = World()
    seed_demo(world, now=now_utc() - timedelta(minutes=1))
    with Sandbox(world) as sandbox, tempfile.TemporaryDirectory() as tmp:
        settings = demo_settings(sandbox, Path(tmp) / "state.sqlite3")
        repos = list(settings.repos)
        clients = build_clients(settings, repos)
        out(f"sandbox GitHub at {sandbox.github_url}, Read the Docs at {sandbox.rtd_url}")
        failed = False
        with Store.open(settings.state.path) as store:
            cycle = make_cycle(settings, clients, store, dry_run=False)
            cycle.out = None
            for index in range(1, cycles + 1):
                summary = cycle.run(repos)
                out(f"[cycle {index}] {summary.line()}")
                failed = failed or bool(summary.failed)
                if index == 1:
                    _print_comments(world, out, clients.login)
            out("JSON verdicts: " + json.dumps(summary.verdicts, sort_keys=True))
        writes = [
            r for r in sandbox.requests if r.method in WRITE_METHODS and r.graphql_cost is None
        ]
        others = [r for r in writes if "/issues/" not in r.path or "/comments" not in r.path]
        out(
            f"requests to the sandbox: {len(sandbox.requests)}; writes: {len(writes)}, "
            f"of which {len(others)} were not issue comments. "
            "This bot reads CI state and retriggers nothing."
        )
        clients.close()
    return 1 if failed else 0
