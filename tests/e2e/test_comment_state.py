"""The comment stays true (issue 15 item 4) and carries the state (issue 20 item 1), end to end.

The real CLI as a subprocess against the loopback sandbox: a deleted comment comes back and an
edited one is restored whatever the facts; `once` with no state at all tells the same story as
with a state and writes nothing while nothing changed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import LOGIN, REPO, Waits, bot_comments, cli, seed_case, write_config, writes

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

QUEUED = "integration (queued)"
OTHER = 7431
OTHER_SHA = "a1" * 20


@dataclass
class Env:
    world: World
    sandbox: Sandbox
    config: Path
    tmp: Path
    run_dir: Path  # the working folder of every run (a fresh runner's checkout)
    stateless: bool = False


def _world(now: datetime) -> World:
    """The seed case plus a second pull request; both carry a check run GitHub gives no time."""
    world = World()
    seed_case(world, now=now)
    world.add_pull(REPO, OTHER, title="Second", author="bob", head_sha=OTHER_SHA)
    for number, sha in ((7430, None), (OTHER, OTHER_SHA)):
        head = sha or world.repo(REPO).pulls[number].head_sha
        world.add_check_run(
            REPO, head, name=QUEUED, app_slug="github-actions", workflow="integration",
            status="queued", conclusion=None,
        )  # fmt: skip
        done = now - timedelta(hours=1)
        world.add_check_run(REPO, head, name="unit", workflow="ci", started_at=done,
                            completed_at=done)  # fmt: skip
    return world


def _config(tmp: Path, sandbox: Sandbox, *, stateless: bool) -> Path:
    path = write_config(tmp, sandbox)
    if stateless:
        text = path.read_text(encoding="utf-8")
        old = f'path = "{tmp / "state.sqlite3"}"'
        assert old in text
        path.write_text(text.replace(old, 'path = ""'), encoding="utf-8")
    return path


@pytest.fixture(params=["stateful", "stateless"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    world = _world(datetime.now(UTC))
    run_dir = tmp_path / "runner"
    run_dir.mkdir()
    with Sandbox(world) as sandbox:
        bare = request.param == "stateless"
        yield Env(
            world, sandbox, _config(tmp_path, sandbox, stateless=bare), tmp_path, run_dir, bare
        )


@pytest.fixture
def stateless(tmp_path: Path) -> Iterator[Env]:
    world = _world(datetime.now(UTC))
    run_dir = tmp_path / "runner"
    run_dir.mkdir()
    with Sandbox(world) as sandbox:
        yield Env(
            world, sandbox, _config(tmp_path, sandbox, stateless=True), tmp_path, run_dir, True
        )


def once(env: Env) -> subprocess.CompletedProcess[str]:
    result = cli("once", "--config", str(env.config), cwd=env.run_dir, sleep=Waits())
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def own(env: Env, number: int = 7430) -> dict[str, object]:
    comments = bot_comments(env.world, number)
    assert len(comments) == 1, comments
    return comments[0]


def headline(comment: dict[str, object]) -> str:
    """The verdict line of a comment (its first line that is not the marker or hidden)."""
    return next(ln for ln in str(comment["body"]).split("\n") if not ln.startswith("<!--"))


# -- issue 15 item 4: the comment stays true ------------------------------------------------------


def test_a_deleted_comment_is_posted_again_within_two_cycles_with_unchanged_facts(env: Env) -> None:
    once(env)
    first = own(env)
    env.world.delete_comment(int(str(first["id"])))
    once(env)
    if not bot_comments(env.world, 7430):
        once(env)
    again = own(env)
    assert again["id"] != first["id"]
    if env.stateless:  # the comment that carried the times is gone: the same facts, re-dated
        assert headline(again) == headline(first)
    else:  # the same facts, first observed at the same time
        assert again["body"] == first["body"]
    assert own(env, OTHER)  # the other pull request's comment is untouched and still one


def test_a_comment_someone_else_edited_is_restored_within_two_cycles(env: Env) -> None:
    once(env)
    first = own(env)
    env.world.add_user(login="mallory")
    env.world.edit_comment(
        int(str(first["id"])), f"{MARKER}\n### ✅ Passing · all green", editor="mallory"
    )
    once(env)
    if "all green" in str(own(env)["body"]):
        once(env)
    restored = own(env)
    assert restored["id"] == first["id"]  # edited back in place, not posted again
    if env.stateless:  # a stamp someone else edited last is not trusted: the facts re-dated
        assert headline(restored) == headline(first)
    else:
        assert restored["body"] == first["body"]
    env.sandbox.clear_requests()
    once(env)  # restored: nothing more to write
    once(env)
    assert writes(env.sandbox) == []


def test_the_check_costs_one_graphql_query_per_100_comments(env: Env) -> None:
    once(env)
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []
    graphql = [r for r in env.sandbox.requests if r.graphql_operation is not None]
    reads = [r for r in graphql if b"Comments(" in r.body]  # the check, or the listing
    # with no state the comments come with the pull requests' page (issue 31): no query
    assert len(reads) == (0 if env.stateless else 1), [r.graphql_operation for r in graphql]
    rest = [r for r in env.sandbox.requests if r.graphql_operation is None]
    assert not [r for r in rest if r.path.endswith("/comments")]  # no REST listing per PR


# -- issue 20 item 1: no state at all --------------------------------------------------------


def test_three_stateless_runs_write_nothing_and_keep_the_times_then_one_red_check_edits_one(
    stateless: Env,
) -> None:
    env = stateless
    once(env)
    bodies = {n: own(env, n)["body"] for n in (7430, OTHER)}
    assert all("integration (queued)" in str(b) for b in bodies.values())
    for _ in range(2):
        env.sandbox.clear_requests()
        result = once(env)
        assert writes(env.sandbox) == [], result.stdout
        assert {n: own(env, n)["body"] for n in (7430, OTHER)} == bodies  # the same times
    assert list(env.run_dir.iterdir()) == []  # no state file, no lock, nothing
    assert not (env.tmp / "state.sqlite3").exists()

    now = datetime.now(UTC)
    env.world.add_check_run(
        REPO, OTHER_SHA, name="unit", workflow="ci", conclusion="failure",
        started_at=now, completed_at=now, new_suite=True,
    )  # fmt: skip
    env.sandbox.clear_requests()
    once(env)
    made = writes(env.sandbox)
    assert [(w.method, w.path) for w in made] == [
        ("PATCH", f"/repos/{REPO}/issues/comments/{own(env, OTHER)['id']}")
    ]
    assert "### ❌ Failing" in str(own(env, OTHER)["body"])
    assert own(env)["body"] == bodies[7430]


def test_a_stateless_run_finds_its_comment_by_marker_and_author(stateless: Env) -> None:
    env = stateless
    env.world.add_user(login="mallory")
    forged = env.world.add_comment(REPO, 7430, author="mallory", body=f"{MARKER}\nall green")
    once(env)
    once(env)
    assert len(bot_comments(env.world, 7430)) == 1
    mine = [c for c in env.world.comments(REPO, 7430) if c["user"]["login"] == "mallory"]
    assert [c["body"] for c in mine] == [forged["body"]]


def _with_stamp_line(body: str, line: str) -> str:
    """The body with its hidden stamp line (the second) replaced."""
    first, _, rest = body.partition("\n")
    return f"{first}\n{line}\n{rest.partition(chr(10))[2]}"


@pytest.mark.parametrize(
    "line",
    [
        "<!-- ci-status-bot:stamp v2 !!!not-base64!!! -->",
        "<!-- ci-status-bot:stamp v2 eyJ2IjogMn0= -->",  # {"v": 2}: nothing in it
        "<!-- ci-status-bot:stamp v9 e30= -->",  # a version this bot does not know
        "<!-- ci-status-bot:stamp v2 WzEsMiwzXQ== -->",  # [1,2,3]: not an object
        "<!-- ci-status-bot:facts=zz observed=yesterday -->",
    ],
)
def test_a_garbled_stamp_is_ignored_never_trusted(stateless: Env, line: str) -> None:
    env = stateless
    once(env)
    first = own(env)
    garbled = _with_stamp_line(str(first["body"]), line)
    env.world.edit_comment(int(str(first["id"])), garbled, editor=LOGIN)
    once(env)
    after = own(env)
    assert after["id"] == first["id"]
    assert after["body"] != garbled  # rewritten with a stamp the bot can read
    assert "ci-status-bot:stamp v2 " in str(after["body"]).split("\n")[1]
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []


def test_a_stamp_someone_else_wrote_is_not_trusted(stateless: Env) -> None:
    """A maintainer's edit can forge the stamp (an old first-observed time): it is not adopted."""
    env = stateless
    once(env)
    first = own(env)
    body = str(first["body"])
    forged = body.replace(
        body.split("\n")[1], _forged_line(body.split("\n")[1], observed_year=2001)
    )
    env.world.add_user(login="mallory")
    env.world.edit_comment(int(str(first["id"])), forged, editor="mallory")
    once(env)
    after = str(own(env)["body"])
    assert "2001-" not in after
    assert after.split("\n")[1] != forged.split("\n")[1]


def _forged_line(line: str, *, observed_year: int) -> str:
    """The stamp line with its first-observed time moved to `observed_year` (same facts)."""
    from bot.render.stamp import Stamp, parse_stamp, stamp_line

    stamp = parse_stamp(f"{MARKER}\n{line}\n")
    assert isinstance(stamp, Stamp)
    moved = stamp.observed_at.replace(year=observed_year)
    return stamp_line(Stamp(stamp.facts_key, moved, stamp.head_sha, stamp.first_seen, 0))


def test_an_old_v1_stamp_is_adopted_not_re_dated(stateless: Env) -> None:
    from bot.render.stamp import parse_stamp

    env = stateless
    env.world.add_pull(REPO, 7432, title="Third", author="carol", head_sha="b2" * 20)
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    env.world.add_check_run(REPO, "b2" * 20, name="unit", workflow="ci", started_at=long_ago,
                            completed_at=long_ago)  # fmt: skip
    once(env)
    first = own(env, 7432)
    body = str(first["body"])
    stamp = parse_stamp(body)
    assert stamp is not None
    observed = stamp.observed_at.replace(year=stamp.observed_at.year - 1)  # an older comment
    at = observed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    v1 = f"<!-- ci-status-bot:facts={stamp.facts_key} observed={at} -->"
    year = f"first observed {observed.year}"
    old = _with_stamp_line(body, v1).replace(f"first observed {stamp.observed_at.year}", year)
    assert year in old
    env.world.edit_comment(int(str(first["id"])), old, editor=LOGIN)  # what an older bot wrote
    once(env)
    after = own(env, 7432)
    assert after["id"] == first["id"]
    assert year in str(after["body"])  # adopted: the first-observed time it states is kept
    adopted = parse_stamp(str(after["body"]))
    assert adopted is not None and adopted.observed_at == observed
    assert "ci-status-bot:stamp v2 " in str(after["body"])  # and the stamp upgraded
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []


def test_a_stateless_run_finds_its_comments_in_the_pull_requests_page(stateless: Env) -> None:
    """Issue 31: with no state the first comments come with the page of open pull requests, so
    a run whose comments are among them sends no second pass (no PullComments query, no REST
    listing), and the page still costs one point (fewer pull requests a page)."""
    env = stateless
    env.world.add_user(login="carol")
    for i in range(3):  # others' comments before and after: the bot's is among the first ten
        env.world.add_comment(REPO, OTHER, author="carol", body=f"comment {i}")
    once(env)
    first = own(env)
    env.sandbox.clear_requests()
    env.sandbox.reset_stats()
    once(env)
    assert writes(env.sandbox) == [] and own(env)["id"] == first["id"]
    graphql = [r for r in env.sandbox.requests if r.graphql_operation is not None]
    assert not [r for r in graphql if b"PullComments" in r.body]
    assert not [r for r in env.sandbox.requests if r.path.endswith("/comments")]
    pages = [r for r in graphql if b"query PullPage" in r.body]
    assert len(pages) == 1 and b"comments(first: 10)" in pages[0].body
    assert env.sandbox.stats()["graphql_points"] == len(graphql)  # each query one point


def test_a_stateless_run_finds_its_comment_past_the_first_hundred(stateless: Env) -> None:
    env = stateless
    env.world.add_user(login="carol")
    for i in range(150):  # a busy thread: the bot's comment is on the second page
        env.world.add_comment(REPO, 7430, author="carol", body=f"comment {i}")
    once(env)
    first = own(env)
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == []
    assert own(env)["id"] == first["id"]
    listings = [r for r in env.sandbox.requests if b"PullComments" in r.body]
    # the first comments come with the pull requests' page (issue 31); 7430's are paged on
    # from there: comments 11-110, then 111 on (its own is the 151st)
    assert len(listings) == 2
    assert not [r for r in env.sandbox.requests if r.path.endswith("/comments")]


@pytest.mark.parametrize("env", ["stateful"], indirect=True)  # a recorded comment: a state's
def test_a_write_that_finds_its_comment_over_rest_asks_no_editor(env: Env) -> None:
    """The recorded comment is gone and another of the bot's is there: the write finds that one
    (REST) and edits it; it trusts no stamp, so it asks GraphQL for no editor (only the check's
    one nodes(ids:) read)."""
    assert not env.stateless
    once(env)
    first = own(env)
    second = env.world.add_comment(REPO, 7430, author=LOGIN, body=f"{MARKER}\nan older one")
    env.world.delete_comment(int(str(first["id"])))
    env.sandbox.clear_requests()
    once(env)
    assert own(env)["id"] == second["id"]  # edited in place, not posted again
    assert str(own(env)["body"]) == str(first["body"])
    graphql = [r for r in env.sandbox.requests if r.graphql_operation is not None]
    reads = [r for r in graphql if b"nodes(ids:" in r.body and b"Comments(" in r.body]
    assert len(reads) == 1, [r.graphql_operation for r in graphql]
