"""A fresh process (`once`, a restart) reuses the reports the state kept of unchanged pull
requests as `run` reuses them from memory (issue 31), and builds them again exactly where
`run` would: the next limit crossing, a new head, a changed required set, a new provider
record; a payload of another version, or garbled, is ignored (built again)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.app import Clients, build_clients, make_cycle
from bot.core.model import State
from bot.core.summary import Summary
from bot.cycle.digests import version
from bot.settings import Settings, load_settings
from bot.state.store import Store
from bot_sandbox import Sandbox, World
from tests.e2e.test_warm_reuse import (
    REPO,
    SHA,
    STALE_AFTER,
    STARTED,
    Seen,
    integration,
    pending_world,
)
from tests.support import CONTEXT, RTD, write_config

UNTIL = STARTED + STALE_AFTER + timedelta(microseconds=1)  # the pending check turns stale


class Process:
    """Cycles over one state; `once` gives each its own clients (a fresh process), `run` one."""

    def __init__(self, settings: Settings, where: str, mode: str) -> None:
        self.settings, self.where, self.mode = settings, where, mode
        self._clients: Clients | None = None

    def cycle(self, at: datetime) -> tuple[Summary, State | None]:
        if self._clients is None or self.mode == "once":
            self.close()
            self._clients = build_clients(self.settings, self.settings.repos)
        seen = Seen()
        with Store.open(self.where) as store:
            cycle = make_cycle(self.settings, self._clients, store, dry_run=False, out=None)
            cycle.clock, cycle.sleep = (lambda: at), (lambda _s: None)
            cycle.observers = (*cycle.observers, seen)
            summary = cycle.run(self.settings.repos)
        [(_, report)] = seen.pulls
        return summary, integration(report) if report.rows else None

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()
            self._clients = None


@contextmanager
def process(world: World, tmp: Path, mode: str, where: str = "") -> Iterator[Process]:
    with Sandbox(world) as sandbox:
        settings = load_settings(write_config(tmp, sandbox))
        one = Process(settings, where or str(tmp / "state.sqlite3"), mode)
        try:
            yield one
        finally:
            one.close()


AROUND = [
    (UNTIL - timedelta(minutes=1), 1, State.PENDING),  # a minute before: reused
    (UNTIL - timedelta(microseconds=1), 1, State.PENDING),  # the limit itself: not past it
    (UNTIL, 0, State.STALE),  # the crossing: built again
    (UNTIL + timedelta(microseconds=1), 0, State.STALE),
]


def _crossing(
    world: World, tmp: Path, mode: str, where: str = ""
) -> list[tuple[int, State | None]]:
    """Each time of AROUND after the same first cycle: reused or not, and the check's state."""
    found = []
    for at, _, _ in AROUND:
        with process(world, tmp, mode, where) as bot:
            first, _ = bot.cycle(STARTED + timedelta(minutes=5))
            assert first.reused == 0, first.line()
            summary, state = bot.cycle(at)
            found.append((summary.reused, state))
        _drop(where or str(tmp / "state.sqlite3"))
    return found


def _drop(where: str) -> None:
    if where.startswith("postgresql"):
        with Store.open(where) as store, store.writing() as conn:
            for table in ("kept_reports", "comments", "facts", "first_seen", "triage", "audit"):
                conn.exec_driver_sql(f"DELETE FROM {table}")
    else:
        for path in Path(where).parent.glob("state.sqlite3*"):
            path.unlink()


@pytest.mark.parametrize("mode", ["run", "once"])
def test_reuse_crosses_the_stale_boundary_in_a_fresh_process_as_in_one(
    tmp_path: Path, mode: str
) -> None:
    found = _crossing(pending_world(), tmp_path, mode)
    assert found == [(reused, state) for _, reused, state in AROUND]


def test_reuse_crosses_the_stale_boundary_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    found = _crossing(pending_world(), tmp_path, "once", postgres_url)
    assert found == [(reused, state) for _, reused, state in AROUND]


def _kept(tmp: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(tmp / "state.sqlite3") as db:
        return db.execute("SELECT number, version FROM kept_reports").fetchall()


def test_a_payload_of_another_version_or_garbled_is_built_again(tmp_path: Path) -> None:
    world = pending_world()
    now = STARTED + timedelta(minutes=5)
    with process(world, tmp_path, "once") as bot:
        bot.cycle(now)
        assert _kept(tmp_path) == [(5, version())]
        with sqlite3.connect(tmp_path / "state.sqlite3") as db:  # an older bot's payload
            db.execute("UPDATE kept_reports SET version = '0.0.9/1/old/old'")
        summary, _ = bot.cycle(now + timedelta(minutes=1))
        assert summary.reused == 0, summary.line()
        assert _kept(tmp_path) == [(5, version())]  # kept again, in this version
        for garbled in (b"", b"not zlib", b"x\x01\x03\x00\x00\x00\x00\x01"):
            with sqlite3.connect(tmp_path / "state.sqlite3") as db:
                db.execute("UPDATE kept_reports SET payload = ?", (garbled,))
            summary, state = bot.cycle(now + timedelta(minutes=2))
            assert (summary.reused, summary.failed) == (0, {}), summary.line()
            assert state is State.PENDING
        summary, _ = bot.cycle(now + timedelta(minutes=3))
        assert summary.reused == 1, summary.line()  # the one kept after the garbled one


def _changed(world: World, tmp: Path, change: object) -> int:
    """Reports reused by a fresh process after `change(world)` (one kept before it)."""
    now = STARTED + timedelta(minutes=5)
    with process(world, tmp, "once") as bot:
        bot.cycle(now)
        same, _ = bot.cycle(now + timedelta(minutes=1))
        assert same.reused == 1, same.line()
        change(world)  # type: ignore[operator]
        summary, _ = bot.cycle(now + timedelta(minutes=2))
        return summary.reused


def test_a_new_head_is_built_again(tmp_path: Path) -> None:
    def push(world: World) -> None:
        world.set_head(REPO, 5, "c" * 40)

    assert _changed(pending_world(), tmp_path, push) == 0


def test_a_changed_required_set_is_built_again(tmp_path: Path) -> None:
    def protect(world: World) -> None:
        world.set_required_checks(REPO, ["integration"])
        with Store.open(tmp_path / "state.sqlite3") as store:
            store.forget_required(REPO)  # as its webhook does: read again by the next cycle

    assert _changed(pending_world(), tmp_path, protect) == 0


def test_a_new_provider_record_is_built_again(tmp_path: Path) -> None:
    world = pending_world()
    world.add_status(REPO, SHA, context=CONTEXT, state="pending", created_at=STARTED,
                     target_url=f"https://readthedocs.org/projects/{RTD}/builds/71/")  # fmt: skip
    world.add_rtd_build(RTD, id=71, commit=SHA, version="5", state="building", success=None,
                        created=STARTED)  # fmt: skip
    now = STARTED + timedelta(minutes=5)
    with process(world, tmp_path, "once") as bot:
        bot.cycle(now)
        world.set_rtd_build(RTD, 71, state="finished", success=True,
                            finished=STARTED + timedelta(minutes=1))  # fmt: skip
        finished, _ = bot.cycle(now + timedelta(minutes=1))
        assert (finished.reused, finished.edited) == (0, 1), finished.line()
        final, _ = bot.cycle(now + timedelta(minutes=2))  # a final record: kept, not re-read
        assert (final.reused, final.rtd_requests) == (1, 0), final.line()


def big_world() -> tuple[World, int]:
    """One pull request whose head carries more contexts than a page of GitHub's rollup holds
    (100): its listing node is not whole, so its snapshot is read on in further pages each pass
    (the brief's busy projects carry 50-150 checks a head). And the id of its last check run
    (on the last page)."""
    world = pending_world()
    for k in range(120):
        last = world.add_check_run(REPO, SHA, name=f"job-{k:03d}", started_at=STARTED,
                                   completed_at=STARTED)  # fmt: skip
    return world, int(last["id"])


@pytest.mark.parametrize("mode", ["run", "once"])
def test_a_head_read_over_several_pages_is_reused_by_a_fresh_process_as_by_one(
    tmp_path: Path, mode: str
) -> None:
    now = STARTED + timedelta(minutes=5)
    world, _ = big_world()
    with process(world, tmp_path, mode) as bot:
        first, state = bot.cycle(now)
        assert (first.reused, state) == (0, State.PENDING), first.line()
        same, state = bot.cycle(now + timedelta(minutes=1))
        assert (same.reused, state) == (1, State.PENDING), same.line()
        past, state = bot.cycle(UNTIL)  # its pending check turns stale: built again
        assert (past.reused, state) == (0, State.STALE), past.line()


@pytest.mark.parametrize("mode", ["run", "once"])
def test_a_change_on_a_later_page_of_contexts_is_built_again_by_either(
    tmp_path: Path, mode: str
) -> None:
    """The first page of the head's contexts is as it was; only the last one changed."""
    now = STARTED + timedelta(minutes=5)
    world, last = big_world()
    with process(world, tmp_path, mode) as bot:
        bot.cycle(now)
        world.update_check_run(REPO, last, conclusion="failure")
        changed, _ = bot.cycle(now + timedelta(minutes=1))
        assert (changed.reused, changed.edited) == (0, 1), changed.line()
