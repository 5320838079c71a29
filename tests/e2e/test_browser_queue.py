"""The triage page's "stuck in the merge queue" filter in a real headless browser (issue 26)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import LOGIN, REPO, TOKEN, free_port, serve_config, start_run, stop, wait_ready
from test_browser import browser, click, pytestmark, visible

from bot_sandbox import Sandbox, World

__all__ = ["browser", "pytestmark"]  # the real browser (and its skip) of test_browser
NOW = datetime.now(UTC).replace(microsecond=0)


def seed(world: World) -> None:
    """Three green pull requests; #1 and #2 queued, #1's merge-group commit lacks `DCO`."""
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    world.set_required_checks(REPO, ["tests", "DCO"])
    world.set_merge_queue(REPO)
    for number in (1, 2, 3):
        sha = f"{number:040x}"
        world.add_pull(REPO, number, title=f"Change {number}", author="bob", head_sha=sha)
        for name, app in (("tests", "github-actions"), ("DCO", "dco")):
            world.add_check_run(REPO, sha, name=name, app_slug=app, started_at=NOW,
                                completed_at=NOW)  # fmt: skip
    for number, names in ((1, ("tests",)), (2, ("tests", "DCO"))):
        group = f"{number:07x}" + "c" * 33
        world.enqueue(REPO, number, group_sha=group, enqueued_at=NOW - timedelta(minutes=5))
        for name in names:
            world.add_check_run(REPO, group, name=name, started_at=NOW, completed_at=NOW,
                                app_slug="dco" if name == "DCO" else "github-actions")  # fmt: skip


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    world = World()
    seed(world)
    port = free_port()
    with Sandbox(world) as sandbox:
        proc = start_run(serve_config(tmp_path, sandbox, port))
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, proc)
            yield url
        finally:
            stop(proc)


def test_the_stuck_in_the_merge_queue_filter(base: str, browser: Any) -> None:
    browser.get(base + "/")
    assert len(visible(browser)) == 3
    summary = browser.find_element("id", "summary").text.replace("\n", " ")
    assert "1 stuck in the merge queue" in summary
    click(browser, "checks", "queue-stuck")
    assert visible(browser) == [f"{REPO}#1"]
    assert "stuck in the merge queue: DCO" in browser.find_element("css selector", "#rows").text
    click(browser, "checks", "queue-stuck")
    assert len(visible(browser)) == 3
