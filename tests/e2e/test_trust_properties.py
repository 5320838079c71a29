"""Never two comments, and the text is the bot's, whatever raced (issue 24, property tests).

Hypothesis draws an interleaving of two writers of the bot's comment on one pull request (two
stateless runs at once, a run whose create answer was lost: each may have created a comment,
in any order, with any of the bot's bodies) and foreign edits of any of them (a false green, a
forged generation, the marker removed, the stamp garbled), plus marked comments another login
wrote. After the next stateless run at most one comment of the bot's (marker AND its login)
is left, it says what the pull request's checks say, the foreign comments are untouched, and a
run after it writes nothing. Each example is a real `once` against a fresh sandbox.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import LOGIN, REPO, Waits, bot_comments, cli, seed_case, write_config, writes

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

RUNS = settings(
    max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
EDITS = ("false_green", "forged_generation", "marker_removed", "garbled_stamp", "none")
# one writer's comment: which body it wrote (an earlier one, the current one) and what a
# foreign login then did to it
WRITE = st.tuples(st.sampled_from(("old", "current")), st.sampled_from(EDITS))
STORY = st.tuples(
    st.lists(WRITE, min_size=1, max_size=3),  # the writers' comments, oldest first
    st.lists(st.booleans(), max_size=2),  # foreign marked comments, and where they go
)


def _world() -> World:
    now = datetime.now(UTC)
    world = World()
    seed_case(world, now=now)
    sha = world.repo(REPO).pulls[7430].head_sha
    done = now - timedelta(hours=1)
    world.add_check_run(REPO, sha, name="unit", workflow="ci", conclusion="failure",
                        started_at=done, completed_at=done)  # fmt: skip
    world.add_user(login="mallory")
    return world


def _edited(body: str, edit: str) -> str:
    lines = body.split("\n")
    head = next(i for i, ln in enumerate(lines) if not ln.startswith("<!--"))  # the headline
    if edit == "false_green":
        lines[head] = "### ✅ Passing · 5 passing"
    elif edit == "forged_generation":
        from test_trust import forged_stamp

        lines[1] = forged_stamp(lines[1], generation=2**63 - 1)
        lines[head] = "### ✅ Passing · 5 passing"
    elif edit == "marker_removed":
        return "\n".join(lines[1:]).replace("Failing", "Passing")
    elif edit == "garbled_stamp":
        lines[1] = "<!-- ci-status-bot:stamp v2 " + "A" * 60_000 + " -->"
    return "\n".join(lines)


def _once(config: Path, run_dir: Path) -> str:
    result = cli("once", "--config", str(config), cwd=run_dir, sleep=Waits())
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


@RUNS
@given(STORY)
def test_after_any_race_and_any_foreign_edit_one_comment_of_the_bots_says_the_truth(
    story: tuple[list[tuple[str, str]], list[bool]],
) -> None:
    writers, foreign = story
    world = _world()
    with tempfile.TemporaryDirectory() as tmp, Sandbox(world) as sandbox:
        folder = Path(tmp)
        config = write_config(folder, sandbox)
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace(f'path = "{folder / "state.sqlite3"}"', 'path = ""'))
        run_dir = folder / "runner"
        run_dir.mkdir()
        _once(config, run_dir)  # what a writer writes now
        [current] = bot_comments(world, 7430)
        world.delete_comment(int(str(current["id"])))
        old = str(current["body"]).replace("### ❌ Failing", "### ✅ Passing", 1)
        foreigners = []
        for index, (which, edit) in enumerate(writers):
            if index < len(foreign):
                body = f"{MARKER}\nmallory's {index}"
                foreigners.append(world.add_comment(REPO, 7430, author="mallory", body=body))
            body = str(current["body"]) if which == "current" else old
            made = world.add_comment(REPO, 7430, author=LOGIN, body=body)
            if edit != "none":
                world.edit_comment(int(str(made["id"])), _edited(body, edit), editor="mallory")
        _once(config, run_dir)
        mine = bot_comments(world, 7430)
        assert len(mine) == 1, [c["body"][:80] for c in mine]
        body = str(mine[0]["body"])
        head = next(ln for ln in body.split("\n") if not ln.startswith("<!--"))
        assert head.startswith("### ❌ Failing"), body
        assert "Passing ·" not in head
        left = {c["id"]: c for c in world.comments(REPO, 7430)}
        assert all(left.get(c["id"]) == c for c in foreigners)  # never touched
        sandbox.clear_requests()
        _once(config, run_dir)
        assert writes(sandbox) == []
