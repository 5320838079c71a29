"""The stamp is the bot's claim, never an authority (issue 24), end to end.

The real CLI (`once`) against the loopback sandbox, on SQLite, on PostgreSQL (a shared state:
`once` takes the repository's lease and fences its writes) and with no state at all: a comment
someone else edited is restored in place whatever its stamp says (a forged generation never
freezes it), a comment of the bot's whose marker was removed is restored in place, never
posted beside.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import LOGIN, REPO, Waits, bot_comments, cli, seed_case, write_config, writes

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

FORGED_GENERATION = 2**63 - 1
FALSE_GREEN = "### ✅ Passing · 5 passing"


@dataclass
class Env:
    world: World
    sandbox: Sandbox
    config: Path
    mode: str  # "sqlite", "postgres" or "stateless"
    run_dir: Path


def _world(now: datetime) -> World:
    """The seed case with a failing check: a false green would be a lie."""
    world = World()
    seed_case(world, now=now)
    sha = world.repo(REPO).pulls[7430].head_sha
    done = now - timedelta(hours=1)
    world.add_check_run(
        REPO, sha, name="unit", workflow="ci", conclusion="failure", started_at=done,
        completed_at=done,
    )  # fmt: skip
    world.add_user(login="mallory")
    return world


def _config(tmp: Path, sandbox: Sandbox, mode: str, url: str | None) -> Path:
    path = write_config(tmp, sandbox)
    text = path.read_text(encoding="utf-8")
    old = f'path = "{tmp / "state.sqlite3"}"'
    if mode == "stateless":
        text = text.replace(old, 'path = ""')
    elif mode == "postgres":
        text = text.replace(old, f'url = "{url}"')
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(params=["sqlite", "postgres", "stateless"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    world = _world(datetime.now(UTC))
    run_dir = tmp_path / "runner"
    run_dir.mkdir()
    with Sandbox(world) as sandbox:
        yield Env(world, sandbox, _config(tmp_path, sandbox, request.param, url),
                  request.param, run_dir)  # fmt: skip


def once(env: Env, *args: str) -> str:
    result = cli("once", "--config", str(env.config), *args, cwd=env.run_dir, sleep=Waits())
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def the_one(env: Env, number: int = 7430) -> dict[str, object]:
    comments = bot_comments(env.world, number)
    assert len(comments) == 1, comments
    return comments[0]


def forged_stamp(line: str, *, generation: int) -> str:
    """The stamp line with its generation (and nothing else) replaced, as a maintainer who
    decoded it could."""
    prefix = "<!-- ci-status-bot:stamp v2 "
    assert line.startswith(prefix), line
    data = line[len(prefix) : -len(" -->")]
    value = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
    value["g"] = generation
    raw = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("ascii")
    return f"{prefix}{base64.urlsafe_b64encode(raw).decode('ascii').rstrip('=')} -->"


def _headline(body: str) -> str:
    """The comment's first visible line (after the marker and its hidden lines)."""
    return next(ln for ln in body.split("\n") if not ln.startswith("<!--"))


def test_a_forged_generation_and_a_false_green_are_restored_in_place(env: Env) -> None:
    """Issue 24 item 1: a maintainer's edit writes a false green and the largest generation into
    the stamp; the next run restores the comment in place (one PATCH), on every state."""
    once(env)
    first = the_one(env)
    body = str(first["body"])
    assert "Failing" in _headline(body)
    lines = body.split("\n")
    lines[1] = forged_stamp(lines[1], generation=FORGED_GENERATION)
    lines[lines.index(_headline(body))] = FALSE_GREEN
    env.world.edit_comment(int(str(first["id"])), "\n".join(lines), editor="mallory")
    env.sandbox.clear_requests()
    out = once(env)
    assert "LeaseLost" not in out and "newer than" not in out, out
    restored = the_one(env)
    assert restored["id"] == first["id"]
    assert FALSE_GREEN not in str(restored["body"])
    assert "Failing" in _headline(str(restored["body"]))
    assert str(FORGED_GENERATION) not in out
    made = writes(env.sandbox)
    assert [(r.method, r.path.split("?")[0]) for r in made] == [
        ("PATCH", f"/repos/{REPO}/issues/comments/{first['id']}")
    ]
    env.sandbox.clear_requests()
    once(env)  # restored: nothing more to write, whatever the forged stamp said
    assert writes(env.sandbox) == []


def test_a_comment_whose_marker_was_removed_is_restored_in_place(env: Env) -> None:
    """Issue 24 item 1: a maintainer rewrote the bot's comment to "✅ all green" (marker gone);
    a comment whose id the state knows and whose author is the bot is the bot's: restored in
    place, never posted beside. Without a state the comment is found by its stamp line."""
    once(env)
    first = the_one(env)
    body = str(first["body"])
    if env.mode == "stateless":  # what a stateless run can still recognise: the stamp line
        rewritten = body.split("\n")[1] + "\n✅ all green"
    else:
        rewritten = "✅ all green"
    env.world.edit_comment(int(str(first["id"])), rewritten, editor="mallory")
    env.sandbox.clear_requests()
    once(env)
    mine = [c for c in env.world.comments(REPO, 7430) if c["user"]["login"] == LOGIN]
    assert [c["id"] for c in mine] == [first["id"]], mine  # never a second comment
    assert str(mine[0]["body"]).startswith(MARKER)
    assert "all green" not in str(mine[0]["body"])
    assert [r.method for r in writes(env.sandbox)] == ["PATCH"]


# -- never two comments ---------------------------------------------------------------------------


def test_the_bots_later_comments_are_deleted_and_a_foreign_marked_one_never(env: Env) -> None:
    """Issue 24 item 3: the bot finds two comments of its own (a lost state, a race) beside an
    older marked comment another login wrote: it keeps its oldest, edits it, deletes its later
    one (one REST DELETE, of that id), and never touches the foreign one, although older."""
    foreign = env.world.add_comment(REPO, 7430, author="mallory", body=f"{MARKER}\nall green")
    older = env.world.add_comment(REPO, 7430, author=LOGIN, body=f"{MARKER}\nan older run's")
    later = env.world.add_comment(REPO, 7430, author=LOGIN, body=f"{MARKER}\na later run's")
    env.sandbox.clear_requests()
    out = once(env)
    mine = bot_comments(env.world, 7430)
    assert [c["id"] for c in mine] == [older["id"]], out
    assert "Failing" in _headline(str(mine[0]["body"]))
    assert [(r.method, r.path) for r in writes(env.sandbox) if r.method == "DELETE"] == [
        ("DELETE", f"/repos/{REPO}/issues/comments/{later['id']}")
    ]
    assert [c for c in env.world.comments(REPO, 7430) if c["id"] == foreign["id"]] == [foreign]
    assert "deleted 1 later comments of the bot's own" in out
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []
    assert [c["id"] for c in bot_comments(env.world, 7430)] == [older["id"]]


@pytest.mark.parametrize("env", ["stateless"], indirect=True)
def test_two_runs_creating_at_once_leave_one_by_the_next_run(env: Env) -> None:
    """Issue 24 item 3: two stateless runs at once both create (the sandbox answers the create
    as if another run made the same comment a moment before); the next run leaves one, the
    oldest, and it says what the pull request's checks say."""
    env.world.twin_creates = 1
    once(env)
    twins = bot_comments(env.world, 7430)
    assert len(twins) == 2
    once(env)
    assert [c["id"] for c in bot_comments(env.world, 7430)] == [twins[0]["id"]]
    sha = env.world.repo(REPO).pulls[7430].head_sha
    env.world.add_check_run(REPO, sha, name="lint", workflow="ci", conclusion="failure")
    once(env)
    [left] = bot_comments(env.world, 7430)
    assert "`lint`" in str(left["body"])


# -- an epoch per state ---------------------------------------------------------------------------


def restamped(body: str, **fields: object) -> str:
    """The body with its stamp's fields replaced (what an older or another state wrote)."""
    lines = body.split("\n")
    prefix = "<!-- ci-status-bot:stamp v2 "
    data = lines[1][len(prefix) : -len(" -->")]
    value = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
    value.update(fields)
    raw = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("ascii")
    lines[1] = f"{prefix}{base64.urlsafe_b64encode(raw).decode('ascii').rstrip('=')} -->"
    return "\n".join(lines)


def _stamp_of(comment: dict[str, object]) -> tuple[str, int]:
    from bot.render.stamp import parse_stamp

    stamp = parse_stamp(str(comment["body"]))
    assert stamp is not None
    return stamp.epoch, stamp.generation


@pytest.mark.parametrize("env", ["postgres"], indirect=True)
def test_a_stamp_of_another_epoch_is_never_newer(env: Env) -> None:
    """Issue 24 item 2: the bot's own comment stamped by a higher generation of another state
    (a recreated database: its generations started again at 1) is overwritten by the current
    lease holder; one of this state's epoch still fences (a newer lease of this state wrote it)."""
    once(env)
    first = the_one(env)
    epoch, generation = _stamp_of(first)
    assert len(epoch) == 16 and generation >= 1  # the state's epoch is in every stamp
    ident = int(str(first["id"]))
    body = str(first["body"])
    env.world.edit_comment(ident, restamped(body, g=generation + 50, e="ab" * 8), editor=LOGIN)
    sha = env.world.repo(REPO).pulls[7430].head_sha
    env.world.add_check_run(REPO, sha, name="lint", workflow="ci", conclusion="failure")
    out = once(env)
    after = the_one(env)
    assert "`lint`" in str(after["body"]), out
    assert _stamp_of(after)[0] == epoch
    # the same epoch and a newer generation: a newer lease of this very state wrote it
    env.world.edit_comment(ident, restamped(str(after["body"]), g=2**40), editor=LOGIN)
    env.world.add_check_run(REPO, sha, name="lint2", workflow="ci", conclusion="failure")
    result = cli("once", "--config", str(env.config), cwd=env.run_dir, sleep=Waits())
    assert result.returncode == 1
    assert "newer than" in result.stderr
    assert "`lint2`" not in str(the_one(env)["body"])


# -- a changed token ------------------------------------------------------------------------------


def test_a_changed_token_names_the_old_logins_comments_in_once_and_check_config(env: Env) -> None:
    """Issue 24 item 4: a new token (a new login) makes the old login's marked comment foreign:
    never edited nor deleted, and `once` and `check-config` say how many such comments which
    login wrote, so a maintainer can delete them."""
    from support import TOKEN

    env.world.add_user(login="old-bot", token="old-token")
    new = env.config.read_text(encoding="utf-8")
    env.config.write_text(new.replace(f'token = "{TOKEN}"', 'token = "old-token"'), "utf-8")
    once(env)
    [old] = bot_comments(env.world, 7430, login="old-bot")
    env.config.write_text(new, encoding="utf-8")
    out = once(env)
    assert "1 marked comments written by another login (old-bot: 1)" in out, out
    assert bot_comments(env.world, 7430, login="old-bot") == [old]  # never edited nor deleted
    assert len(bot_comments(env.world, 7430)) == 1  # the new login's own
    checked = cli("check-config", "--config", str(env.config), cwd=env.run_dir)
    assert "1 marked comments written by another login (old-bot: 1)" in checked.stdout, (
        checked.stdout + checked.stderr
    )
    assert f"this login is {LOGIN}" in checked.stdout
