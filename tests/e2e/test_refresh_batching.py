"""A webhook refresh asks what a failing head needs in batches, as a cycle does (issue 19: the
webhook benchmark's 200-PR refresh sent one CheckRunAnnotations query per failing head)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from github.Requester import Requester
from support import REPO, bot_comments, repo_world, write_config

from bot.app import build_clients, make_cycle
from bot.service.webhooks.inbox import Inbox
from bot.service.webhooks.refresh import refresh
from bot.settings import load_settings
from bot.state.store import Store
from bot_sandbox import Sandbox

HOUR_AGO = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
ASSERT = {"path": "tests/test_parser.py", "start_line": 42, "end_line": 42,
          "message": "AssertionError: assert 'é' == 'e'"}  # fmt: skip


def test_a_refresh_asks_the_failing_runs_annotations_in_one_batched_query(tmp_path: Path) -> None:
    """Twelve marked pull requests, each with a failing run: one annotations query, not 12."""
    world = repo_world()
    numbers = list(range(1, 13))
    for number in numbers:
        sha = f"{number:07x}" + "d" * 33
        world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=sha)
        world.add_check_run(REPO, sha, name="tests", workflow="ci", conclusion="failure",
                            started_at=HOUR_AGO, completed_at=HOUR_AGO,
                            annotations=[ASSERT])  # fmt: skip
    with Sandbox(world) as sandbox:
        settings = load_settings(write_config(tmp_path, sandbox))
        clients = build_clients(settings, settings.repos)
        try:
            with Store.open(tmp_path / "state.sqlite3") as store:
                cycle = make_cycle(settings, clients, store, dry_run=False, out=None)
                cycle.sleep = lambda _s: None
                summary = refresh(cycle, {REPO: numbers}, {REPO: settings.repos[0]}, inbox=Inbox())
        finally:
            clients.close()
            Requester.resetConnectionClasses()  # the bot's guard was installed process-wide
        queries = [r for r in sandbox.requests if b"query CheckRunAnnotations" in r.body]
    assert summary.created == len(numbers), summary.line()
    assert len(queries) == 1, f"{len(queries)} annotation queries for {len(numbers)} heads"
    assert all("`tests/test_parser.py:42`" in bot_comments(world, n)[0]["body"] for n in numbers)
