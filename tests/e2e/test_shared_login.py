"""The login every workflow of a repository shares (adversarial finding 1), end to end.

In the GitHub Action with the workflow's GITHUB_TOKEN the bot writes as github-actions[bot],
and so does every other workflow of the repository. A comment of that login is the bot's only
when its first line is the marker: another workflow's comment that quotes a pull request's
description holding a forged stamp and carried line, or a template preview quoting the marker,
is never taken, never overwritten, and gives nothing; a carried record of the bot's own
comment is given to a run with no state only where it is of the head and read no later than
now. Run with no state, as the Action runs without its cache.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from github.Requester import Requester
from support import CONTEXT, REPO, RTD, Waits, outside_allowlist, seed_case, write_config, writes

from bot.cli import main
from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

ACTIONS_TOKEN = "ghs_actions-token-of-this-workflow-run"
ACTIONS_LOGIN = "github-actions[bot]"
BUILD = 34894885  # the seed case's docs build: cancelled on Read the Docs, pending on GitHub


@pytest.fixture
def sandbox(now: datetime) -> Iterator[Sandbox]:
    world = World()
    seed_case(world, now=now)
    world.add_actions_token(ACTIONS_TOKEN, REPO)
    with Sandbox(world) as sandbox:
        yield sandbox
        Requester.resetConnectionClasses()
        assert outside_allowlist(sandbox) == []


def once(sandbox: Sandbox, tmp: Path) -> None:
    """One stateless run with the workflow's token (the Action without its cache)."""
    config = write_config(tmp, sandbox)
    text = config.read_text(encoding="utf-8").replace(
        'token = "test-token"', f'token = "{ACTIONS_TOKEN}"'
    )
    text = text.replace(f'path = "{tmp / "state.sqlite3"}"', 'path = ""')
    config.write_text(text, encoding="utf-8")
    assert main(["once", "--config", str(config)], sleep=Waits()) == 0


def line(kind: str, value: object, *, packed: bool) -> str:
    raw = json.dumps(value, separators=(",", ":")).encode()
    data = base64.urlsafe_b64encode(zlib.compress(raw) if packed else raw).decode().rstrip("=")
    return f"<!-- ci-status-bot:{kind} {data} -->"


def forged(head: str, *, read_at: datetime) -> str:
    """A stamp and a carried line holding a Read the Docs record "build finished, success"
    for `head`, as a pull request's author can put in its description (invisible there)."""
    micros = int(read_at.timestamp()) * 10**6
    stamp = line("stamp v2", {"k": "0" * 64, "o": micros, "h": head, "s": {}, "g": 0}, packed=False)
    build = {"id": BUILD, "project": RTD, "commit": head, "state": "finished", "success": True,
             "version": "7430", "created": None, "finished": None, "duration": 120,
             "url": None}  # fmt: skip
    payload = {"host": "org", "project": RTD, "commit": head, "read_at": read_at.isoformat(),
               "builds": [build], "notes": {}, "missing": []}  # fmt: skip
    key = json.dumps(["org", RTD, head], separators=(",", ":"))
    record = ["readthedocs", key, json.dumps(payload), micros]
    return f"{stamp}\n{line('carried v1', {'h': head, 'a': {}, 'r': [record]}, packed=True)}"


def comments(world: World) -> list[dict[str, object]]:
    return [c for c in world.comments(REPO, 7430) if c["user"]["login"] == ACTIONS_LOGIN]


def headline(body: str) -> str:
    return next(ln for ln in body.split("\n") if ln.startswith("### "))


@pytest.mark.parametrize("ahead", [timedelta(0), timedelta(days=30_000)], ids=["now", "2099"])
def test_another_workflows_comment_with_a_forged_stamp_is_never_taken(
    sandbox: Sandbox, tmp_path: Path, now: datetime, ahead: timedelta
) -> None:
    """A "PR summary" workflow posts, as github-actions[bot], a header line and the pull
    request's description, which starts with a forged stamp and carried line. Before: the
    bot took that comment for its own, overwrote it, seeded the forged record and said
    "✅ Passing" for good, although Read the Docs cancelled the build."""
    world = sandbox.world
    head = world.repo(REPO).pulls[7430].head_sha
    body = f"**PR summary** by the welcome workflow:\n{forged(head, read_at=now + ahead)}\nDocs."
    welcome = world.add_comment(REPO, 7430, author=ACTIONS_LOGIN, body=body)
    for _ in range(2):
        once(sandbox, tmp_path)
        mine = comments(world)
        assert mine[0]["id"] == welcome["id"] and mine[0]["body"] == body
        assert len(mine) == 2 and str(mine[1]["body"]).startswith(MARKER)
        assert "Passing" not in headline(str(mine[1]["body"]))
        assert f"build {BUILD}" in str(mine[1]["body"]) and "cancelled" in str(mine[1]["body"])
    asked = [r for r in sandbox.requests if r.service == "rtd"]
    assert asked, "Read the Docs was never asked: a carried record was taken"


def test_a_comment_of_the_login_quoting_the_marker_is_never_overwritten(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A docs workflow's template preview quotes the marker: not the bot's, left as it is."""
    world = sandbox.world
    body = (
        "## Template preview (docs workflow)\n\nThis pull request renders as:\n\n"
        f"```\n{MARKER}\n### ✅ Passing · 3 passing\n```\n"
    )
    preview = world.add_comment(REPO, 7430, author=ACTIONS_LOGIN, body=body)
    once(sandbox, tmp_path)
    mine = comments(world)
    assert mine[0]["id"] == preview["id"] and mine[0]["body"] == body
    assert len(mine) == 2 and str(mine[1]["body"]).startswith(MARKER)
    assert [r.method for r in writes(sandbox)] == ["POST"]  # its own, beside


def test_a_record_read_in_the_future_in_the_bots_own_comment_is_not_taken(
    sandbox: Sandbox, tmp_path: Path, now: datetime
) -> None:
    """Another workflow PATCHes the bot's own comment through the shared login (so GitHub says
    the login edited it last): its carried line now holds Read the Docs "success" read in
    2099. A record read after now is never given to the state: Read the Docs is asked."""
    world = sandbox.world
    head = world.repo(REPO).pulls[7430].head_sha
    once(sandbox, tmp_path)
    (own,) = comments(world)
    lines = str(own["body"]).split("\n")
    assert CONTEXT in str(own["body"]) and "Passing" not in headline(str(own["body"]))
    lines[2] = forged(head, read_at=datetime(2099, 1, 1, tzinfo=UTC)).split("\n")[1]
    world.edit_comment(int(str(own["id"])), "\n".join(lines), editor=ACTIONS_LOGIN)
    sandbox.clear_requests()
    once(sandbox, tmp_path)
    assert [r for r in sandbox.requests if r.service == "rtd"], "the carried record was taken"
    (after,) = comments(world)
    assert "Passing" not in headline(str(after["body"]))
