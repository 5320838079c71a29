"""A merge base is a fact of a (base branch tip, head) pair: when the base branch moves under
the same head (the lower of two stacked pull requests merged with a merge commit; a force
push), the comparison is asked again, at most once per `merge_base_recheck_minutes` per head.

Each test drives real cycles in process against the sandbox, on the cycle's own clock (as
tests/e2e/test_once_reuse.py does), with a state (SQLite) and with none at all (each cycle
a fresh process with only its memory, its comments' stamps its only record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import build_clients, make_cycle
from bot.cli import main
from bot.core.model import MergeBaseOf
from bot.core.summary import Summary
from bot.render.comment import AUTHORS_MOVE, NOT_HERE
from bot.render.stamp import parse_stamp, stamp_line
from bot.settings import Settings, load_settings
from bot.state.store import Store
from bot_sandbox import Sandbox, World
from tests.support import REPO, bot_comments, repo_world, write_config

NOW = datetime.now(UTC).replace(microsecond=0)
DAY_AGO = NOW - timedelta(days=1)


def sha(name: str) -> str:
    return (name.encode().hex() + "0" * 40)[:40]


M0, M1, LOWER, UPPER, MERGE = (sha(n) for n in ("m0", "m1", "lower", "upper", "merge"))


def ci_run(world: World, commit: str, conclusion: str, *, event: str = "pull_request") -> None:
    world.add_check_run(
        REPO, commit, name="tests", workflow="ci", conclusion=conclusion, event=event,
        started_at=DAY_AGO, completed_at=DAY_AGO,
    )  # fmt: skip


def stacked() -> World:
    """main at M0, where `tests` failed; the lower pull request (1) on M0, `tests` passed; the
    upper (2) on the lower's head, `tests` failed: its merge base with main is M0."""
    world = repo_world()
    world.push_branch_commit(REPO, "main", M0, date=DAY_AGO)
    ci_run(world, M0, "failure", event="push")
    world.add_commit(REPO, LOWER, parents=(M0,), date=DAY_AGO)
    world.add_commit(REPO, UPPER, parents=(LOWER,), date=DAY_AGO)
    world.add_pull(REPO, 1, title="lower", author="alice", head_sha=LOWER, head_ref="lower")
    world.add_pull(REPO, 2, title="upper", author="alice", head_sha=UPPER, head_ref="upper")
    ci_run(world, LOWER, "success")
    ci_run(world, UPPER, "failure")
    return world


def merge_lower(world: World) -> None:
    """The lower pull request merged with a merge commit: the upper head's first commit is on
    main now, so its merge base with main is the lower head, where `tests` passed."""
    world.merge_into(REPO, "main", MERGE, merged=LOWER)
    world.close_pull(REPO, 1)


class Bot:
    """Cycles as separate processes (`once`) over one state, or over none at all."""

    def __init__(self, world: World, sandbox: Sandbox, settings: Settings) -> None:
        self.world, self.sandbox, self.settings = world, sandbox, settings

    def cycle(self, at: datetime) -> Summary:
        self.sandbox.clear_requests()
        clients = build_clients(self.settings, self.settings.repos)
        try:
            with Store.open(self.settings.state.location) as store:
                cycle = make_cycle(self.settings, clients, store, dry_run=False, out=None)
                cycle.clock, cycle.sleep = (lambda: at), (lambda _s: None)
                summary = cycle.run(self.settings.repos)
        finally:
            clients.close()
        assert summary.failed == {}, summary.line()
        return summary

    def compares(self) -> int:
        return sum(1 for r in self.sandbox.requests if "/compare/" in r.path)

    def tips_asked(self) -> int:
        return sum(1 for r in self.sandbox.requests if b"query BranchTips" in r.body)

    def body(self, number: int) -> str:
        [comment] = bot_comments(self.world, number)
        return str(comment["body"])


@contextmanager
def bot(world: World, tmp: Path, state: str, **policy: object) -> Iterator[Bot]:
    """The bot over `world`, with a state or none; a failure's history is off: the base
    branch's record of a check moves with it too, and is not what these tests are about."""
    with Sandbox(world) as sandbox:
        config = write_config(tmp, sandbox, history=False, **policy)
        if state == "none":
            text = config.read_text()
            config.write_text(text.replace(f'path = "{tmp / "state.sqlite3"}"', 'path = ""'))
        yield Bot(world, sandbox, load_settings(config))


def link(commit: str) -> str:
    return f"[`{commit[:7]}`](https://github.com/{REPO}/commit/{commit})"


STATES = ["sqlite", "none"]


@pytest.mark.parametrize("state", STATES)
def test_the_stacked_case_says_the_truth_once_the_base_moved_within_the_bound(
    tmp_path: Path, state: str
) -> None:
    world = stacked()
    with bot(world, tmp_path, state) as b:
        b.cycle(NOW)
        assert b.compares() == 1  # the upper head only: the lower one fails nothing
        before = b.body(2)
        assert f"**{NOT_HERE}:** it also failed on the merge base {link(M0)}" in before
        assert "failed (also on the merge base)" in before
        merge_lower(world)
        b.cycle(NOW + timedelta(minutes=10))
        assert b.compares() == 0  # the bound: what GitHub said at its read stands
        assert b.body(2) == before
        summary = b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 1 and summary.edited == 1, summary.line()
        after = b.body(2)
        assert f"**{AUTHORS_MOVE}:** it passed on the merge base {link(LOWER)}" in after
        assert "merge base " + link(M0) not in after and "also on the merge base" not in after
        summary = b.cycle(NOW + timedelta(minutes=62))
        assert (b.compares(), summary.edited, summary.created) == (0, 0, 0), summary.line()
        assert b.body(2) == after


@pytest.mark.parametrize("state", STATES)
def test_a_warm_pass_with_an_unmoved_base_asks_no_compare(tmp_path: Path, state: str) -> None:
    """Past the bound too: the default branch's tip comes with the listing, no query of its
    own, and it is the tip the merge base was asked with."""
    world = stacked()
    with bot(world, tmp_path, state) as b:
        b.cycle(NOW)
        assert b.compares() == 1
        for later in (timedelta(minutes=5), timedelta(hours=3)):
            summary = b.cycle(NOW + later)
            assert (b.compares(), b.tips_asked()) == (0, 0)
            assert (summary.edited, summary.created) == (0, 0), summary.line()


def three_on_m0() -> World:
    """Three failing heads on M0 (main's tip), where `tests` failed too."""
    world = repo_world()
    world.push_branch_commit(REPO, "main", M0, date=DAY_AGO)
    ci_run(world, M0, "failure", event="push")
    for number in (1, 2, 3):
        head = sha(f"h{number}")
        world.add_commit(REPO, head, parents=(M0,), date=DAY_AGO)
        world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=head)
        ci_run(world, head, "failure")
    return world


@pytest.mark.parametrize("state", STATES)
def test_a_moved_base_is_asked_again_only_past_the_bound_once_per_failing_head(
    tmp_path: Path, state: str
) -> None:
    world = three_on_m0()
    with bot(world, tmp_path, state) as b:
        b.cycle(NOW)
        assert b.compares() == 3
        bodies = [b.body(n) for n in (1, 2, 3)]
        world.push_branch_commit(REPO, "main", M1)  # unrelated to the heads: same merge base
        b.cycle(NOW + timedelta(minutes=59))
        assert b.compares() == 0
        summary = b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 3  # one per failing head, asked with main's new tip
        asked = {r.path.rsplit("/", 1)[1].split("...")[0] for r in b.sandbox.requests
                 if "/compare/" in r.path}  # fmt: skip
        assert asked == {M1}
        assert (summary.edited, summary.created) == (0, 0), summary.line()  # no new fact
        assert [b.body(n) for n in (1, 2, 3)] == bodies
        b.cycle(NOW + timedelta(minutes=62))
        # With a state the answer is kept with the tip it was asked with. With none, the
        # comment is the only record and a confirmation alone is never written: each run
        # asks again until the comment is next written (docs/comment.md).
        assert b.compares() == (0 if state == "sqlite" else 3)


def test_the_recheck_bound_is_a_setting(tmp_path: Path) -> None:
    world = three_on_m0()
    with bot(world, tmp_path, "sqlite", merge_base_recheck_minutes=5) as b:
        b.cycle(NOW)
        world.push_branch_commit(REPO, "main", M1)
        b.cycle(NOW + timedelta(minutes=4))
        assert b.compares() == 0
        b.cycle(NOW + timedelta(minutes=5))
        assert b.compares() == 3


def test_a_force_pushed_base_is_asked_again_past_the_bound(tmp_path: Path) -> None:
    """main M0 <- M1 (`tests` failed on M1, passed on M0), the head on M1; main force-pushed
    back to M0: the merge base is M0 now."""
    world = repo_world()
    world.push_branch_commit(REPO, "main", M0, date=DAY_AGO)
    world.push_branch_commit(REPO, "main", M1, date=DAY_AGO)
    ci_run(world, M0, "success", event="push")
    ci_run(world, M1, "failure", event="push")
    world.add_commit(REPO, UPPER, parents=(M1,), date=DAY_AGO)
    world.add_pull(REPO, 2, title="on M1", author="alice", head_sha=UPPER)
    ci_run(world, UPPER, "failure")
    with bot(world, tmp_path, "sqlite") as b:
        b.cycle(NOW)
        assert f"it also failed on the merge base {link(M1)}" in b.body(2)
        world.force_push(REPO, "main", M0)
        b.cycle(NOW + timedelta(minutes=30))
        assert b.compares() == 0 and link(M1) in b.body(2)
        b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 1
        assert f"**{AUTHORS_MOVE}:** it passed on the merge base {link(M0)}" in b.body(2)


def test_a_stamp_without_a_tip_is_read_and_asked_again_once_past_the_bound(
    tmp_path: Path,
) -> None:
    """A comment an older bot stamped (its merge base without the tip it was asked with, nor
    when): read, never an exception; the tip is unknown, so it is asked again past the bound
    (counted from when the stamp's facts were first observed), and the same answer writes
    nothing."""
    world = stacked()
    with bot(world, tmp_path, "none") as b:
        b.cycle(NOW)
        [comment] = bot_comments(world, 2)
        body = str(comment["body"])
        stamp = parse_stamp(body)
        assert stamp is not None and stamp.merge_base is not None
        assert stamp.merge_base == MergeBaseOf("main", M0, M0, NOW)
        old = replace(stamp, merge_base=MergeBaseOf("main", M0))
        first, _, rest = body.split("\n", 2)
        older = f"{first}\n{stamp_line(old)}\n{rest}"
        assert parse_stamp(older) == old
        world.edit_comment(int(comment["id"]), older)  # as its author: the bot
        summary = b.cycle(NOW + timedelta(minutes=30))
        assert b.compares() == 0 and summary.edited == 0, summary.line()
        summary = b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 1 and summary.edited == 0, summary.line()
        assert b.body(2) == older  # a confirmation alone is no write


@pytest.mark.parametrize("state", STATES)
def test_a_base_tip_that_cannot_be_read_keeps_what_is_kept_and_says_nothing_new(
    tmp_path: Path, state: str
) -> None:
    world = stacked()
    with bot(world, tmp_path, state) as b:
        b.cycle(NOW)
        before = b.body(2)
        merge_lower(world)
        world.refuse_tip(REPO, "main", "Resource not accessible by integration")
        summary = b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 0 and (summary.edited, summary.created) == (0, 0)
        assert b.body(2) == before
        del world.repo(REPO).tip_errors["main"]
        b.cycle(NOW + timedelta(minutes=62))
        assert b.compares() == 1
        assert f"it passed on the merge base {link(LOWER)}" in b.body(2)


def test_a_new_head_on_a_base_whose_tip_cannot_be_read_is_compared_by_its_name(
    tmp_path: Path,
) -> None:
    """Nothing kept to keep: GitHub's compare of the branch, as it answers it, is no guess;
    kept without a tip (asked again past the bound once the tip can be read)."""
    world = stacked()
    world.refuse_tip(REPO, "main", "Resource not accessible by integration")
    with bot(world, tmp_path, "sqlite") as b:
        b.cycle(NOW)
        assert [r.path.rsplit("/", 1)[1] for r in b.sandbox.requests if "/compare/" in r.path] == [
            f"main...{UPPER}"
        ]
        assert f"it also failed on the merge base {link(M0)}" in b.body(2)
        del world.repo(REPO).tip_errors["main"]
        b.cycle(NOW + timedelta(minutes=30))
        assert b.compares() == 0
        b.cycle(NOW + timedelta(minutes=61))
        assert b.compares() == 1


@pytest.mark.parametrize("state", STATES)
def test_another_base_branchs_tip_is_read_with_the_listing_once_it_was_seen(
    tmp_path: Path, state: str
) -> None:
    """A pull request into `release`: the first pass reads that branch's newest commit in one
    BranchTips query; a process with a state reads it with the first page of the listing
    after that (the branches the kept listing saw), no query of its own. With no state
    nothing is kept, so a run that needs the tip asks it again."""
    world = repo_world()
    world.push_branch_commit(REPO, "release", M0, date=DAY_AGO)
    ci_run(world, M0, "failure", event="push")
    world.add_commit(REPO, UPPER, parents=(M0,), date=DAY_AGO)
    world.add_pull(REPO, 2, title="fix", author="alice", head_sha=UPPER, base_ref="release")
    ci_run(world, UPPER, "failure")
    with bot(world, tmp_path, state) as b:
        b.cycle(NOW)
        assert (b.compares(), b.tips_asked()) == (1, 1)
        b.cycle(NOW + timedelta(hours=2))  # past the bound: the tip is needed, and unmoved
        assert (b.compares(), b.tips_asked()) == (0, 0 if state == "sqlite" else 1)
        pages = [r for r in b.sandbox.requests if b"query PullPage" in r.body]
        assert (b"refs/heads/release" in pages[0].body) is (state == "sqlite")
        assert f"it also failed on the merge base {link(M0)}" in b.body(2)


def test_show_asks_the_compare_with_the_tip_its_pull_request_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` reads its pull request's base branch with it (`baseRef`): no query of its own."""
    world = stacked()
    merge_lower(world)
    with bot(world, tmp_path, "sqlite") as b:
        config = ["--config", str(tmp_path / "bot.toml")]
        assert main(["show", f"{REPO}#2", "--format", "json", *config]) == 0
        [row] = [s for s in json.loads(capsys.readouterr().out)["signals"] if s["base"]]
        assert row["base"]["commit"] == LOWER and row["base"]["state"] == "success"
        asked = [r.path.rsplit("/", 1)[1] for r in b.sandbox.requests if "/compare/" in r.path]
        assert asked == [f"{MERGE}...{UPPER}"] and b.tips_asked() == 0


def test_a_refreshs_read_of_named_pull_requests_reads_the_tips_with_them(tmp_path: Path) -> None:
    """A webhook refresh reads its pull requests by number: the default branch's newest commit
    (and those of the other base branches the last listing saw) come in that same query."""
    world = stacked()
    with bot(world, tmp_path, "sqlite") as b:
        clients = build_clients(b.settings, b.settings.repos)
        try:
            list(clients.github.open_pulls(REPO, now=NOW))
            merge_lower(world)
            b.sandbox.clear_requests()
            clients.github.pulls_by_number(REPO, [2], now=NOW)
            assert clients.github.branch_tips(REPO, ["main"]) == {"main": MERGE}
        finally:
            clients.close()
        [query] = [r for r in b.sandbox.requests if b"query PullsByNumber" in r.body]
        assert b"defaultBranchRef" in query.body and b.tips_asked() == 0
