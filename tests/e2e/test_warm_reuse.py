"""A warm cycle reuses the last report of a pull request that did not change (issue 19), and
still changes it exactly when a limit is crossed (a pending signal turning stale)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import event

from bot.app import Clients, build_clients, make_cycle
from bot.core.model import PullSnapshot, Report, State
from bot.core.summary import Summary
from bot.settings import Settings, load_settings
from bot.state.store import Store
from bot_sandbox import Sandbox, World
from tests.support import LOGIN, REPO, TOKEN, bot_comments, write_config

SHA = "a" * 40
STARTED = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)
STALE_AFTER = timedelta(minutes=120)  # the default `stale_after_minutes`


class Seen:
    """The snapshots and reports a cycle handed to its observers."""

    def __init__(self) -> None:
        self.pulls: list[tuple[PullSnapshot, Report]] = []

    def pull_done(self, snapshot: PullSnapshot, report: Report, key: str) -> None:
        self.pulls.append((snapshot, report))

    def pulls_done(self) -> None:
        pass

    def repo_done(self, repo: str, seen: Iterable[int]) -> None:
        pass

    def repo_failed(self, repo: str, reason: str) -> None:
        pass


def pending_world() -> World:
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    world.add_pull(REPO, 5, title="slow build", author="alice", head_sha=SHA)
    world.add_check_run(REPO, SHA, name="lint", started_at=STARTED, completed_at=STARTED)
    world.add_check_run(
        REPO, SHA, name="integration", status="in_progress", conclusion=None, started_at=STARTED
    )
    return world


class Bot:
    """Cycles of one process (one Clients: what `run` keeps between its cycles)."""

    def __init__(self, settings: Settings, clients: Clients, store: Store) -> None:
        self.settings, self.clients, self.store = settings, clients, store

    def cycle(self, at: datetime) -> tuple[Summary, Seen]:
        seen = Seen()
        cycle = make_cycle(self.settings, self.clients, self.store, dry_run=False, out=None)
        cycle.clock, cycle.sleep = (lambda: at), (lambda _s: None)
        cycle.observers = (*cycle.observers, seen)
        return cycle.run(self.settings.repos), seen


@contextmanager
def bot(world: World, tmp: Path) -> Iterator[Bot]:
    with Sandbox(world) as sandbox:
        settings = load_settings(write_config(tmp, sandbox))
        clients = build_clients(settings, settings.repos)
        try:
            with Store.open(tmp / "state.sqlite3") as store:
                yield Bot(settings, clients, store)
        finally:
            clients.close()


def integration(report: Report) -> State:
    return next(row.state for row in report.rows if row.signal.name == "integration")


def test_a_pending_check_turns_stale_between_two_warm_cycles_exactly_at_its_limit(
    tmp_path: Path,
) -> None:
    world = pending_world()
    with bot(world, tmp_path) as b:
        first, _ = b.cycle(STARTED + STALE_AFTER - timedelta(minutes=1))
        assert first.created == 1, first.line()
        at_limit, seen = b.cycle(STARTED + STALE_AFTER)  # not older than the limit yet
        assert (at_limit.edited, at_limit.left) == (0, 1), at_limit.line()
        assert integration(seen.pulls[0][1]) is State.PENDING
        past, seen = b.cycle(STARTED + STALE_AFTER + timedelta(microseconds=1))
        assert past.edited == 1, past.line()
        assert integration(seen.pulls[0][1]) is State.STALE
    [comment] = bot_comments(world, 5)
    assert "longer than the 120-minute limit" in comment["body"]


def test_a_warm_cycle_reuses_what_did_not_change_and_rebuilds_what_did(tmp_path: Path) -> None:
    world = pending_world()
    world.add_pull(REPO, 6, title="done", author="bob", head_sha="b" * 40)
    world.add_check_run(REPO, "b" * 40, name="lint", started_at=STARTED, completed_at=STARTED)
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)
        _, cold = b.cycle(now + timedelta(minutes=1))
        _, warm = b.cycle(now + timedelta(minutes=2))
        for (snap_a, report_a), (snap_b, report_b) in zip(cold.pulls, warm.pulls, strict=True):
            assert report_b is report_a  # not reconciled again
            assert snap_b.signals is snap_a.signals  # not parsed again
        world.add_status(REPO, SHA, context="ci/extra", state="failure", created_at=now)
        summary, changed = b.cycle(now + timedelta(minutes=3))
        assert summary.edited == 1, summary.line()
        reports = {report.number: report for _, report in changed.pulls}
        assert reports[5] is not warm.pulls[0][1]
        assert "ci/extra" in {row.signal.name for row in reports[5].rows}
        assert reports[6] is {r.number: r for _, r in warm.pulls}[6]
    assert "ci/extra" in bot_comments(world, 5)[0]["body"]


def many_world(count: int) -> World:
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    for number in range(1, count + 1):
        head = f"{number:040x}"
        world.add_pull(REPO, number, title=f"change {number}", author="alice", head_sha=head)
        world.add_check_run(REPO, head, name="lint", started_at=STARTED, completed_at=STARTED)
    return world


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """The SQL statements the state runs inside (observed on its engine, nothing replaced)."""
    seen: list[str] = []

    def note(_conn: object, _cursor: object, text: str, *_args: object) -> None:
        seen.append(" ".join(text.split()).upper())

    engine = store._engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def test_a_warm_cycle_reads_the_state_in_batches_and_rewrites_no_unchanged_triage_row(
    tmp_path: Path,
) -> None:
    count = 60
    world = many_world(count)
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)  # creates the comments
        b.cycle(now + timedelta(minutes=1))
        before = {row.number: row.updated_at for row in b.store.triage_rows()}
        with statements(b.store) as seen:
            summary, _ = b.cycle(now + timedelta(minutes=2))
        assert (summary.left, summary.edited, summary.created) == (count, 0, 0), summary.line()
        # a pull request's comment, listing and facts: a few queries per chunk, not per PR
        for table in ("FROM COMMENTS", "FROM NO_COMMENT", "FROM FACTS"):
            reads = [s for s in seen if s.startswith("SELECT") and table in s]
            assert 1 <= len(reads) <= 2, (table, len(reads))  # 0: counting the wrong thing
        assert not [s for s in seen if s.startswith("INSERT INTO TRIAGE")]
        rows = b.store.triage_rows()
    assert len(rows) == count
    assert all(row.updated_at > before[row.number] for row in rows)  # read again: dated


def test_a_triage_row_is_written_again_when_its_report_changes(tmp_path: Path) -> None:
    world = many_world(3)
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)
        b.cycle(now + timedelta(minutes=1))
        world.add_status(REPO, f"{2:040x}", context="ci/extra", state="failure", created_at=now)
        summary, _ = b.cycle(now + timedelta(minutes=2))
        assert summary.edited == 1, summary.line()
        rows = {row.number: row for row in b.store.triage_rows()}
    assert rows[2].verdict == "failing"
    assert "ci/extra" in rows[2].details
    assert rows[1].verdict == rows[3].verdict == "passing"


def test_a_cycle_records_the_new_facts_and_rows_of_many_pull_requests_in_few_statements(
    tmp_path: Path,
) -> None:
    """Issue 31's changed cycle: where most reports change (a failure's count elsewhere moves
    with a few heads), their facts and triage rows are written a chunk at a time (one
    statement each), not one transaction per pull request; every one of them recorded."""
    count = 60
    world = many_world(count)
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)
        b.cycle(now + timedelta(minutes=1))
        before = {n: b.store.get_facts(REPO, n) for n in range(1, count + 1)}
        for number in range(1, count + 1):
            world.add_status(
                REPO, f"{number:040x}", context="ci/extra", state="failure", created_at=now
            )
        later = now + timedelta(minutes=2)
        with statements(b.store) as seen:
            summary, _ = b.cycle(later)
        assert summary.edited + summary.deferred == count, summary.line()  # paced writes
        for table in ("INSERT INTO FACTS", "INSERT INTO TRIAGE"):
            writes = [s for s in seen if s.startswith(table)]
            assert 1 <= len(writes) <= 2, (table, len(writes))  # was one per pull request
        after = {n: b.store.get_facts(REPO, n) for n in range(1, count + 1)}
        rows = {row.number: row for row in b.store.triage_rows()}
    for number in range(1, count + 1):
        old, new = before[number], after[number]
        assert old is not None and new is not None and new[0] != old[0]
        assert new[1] == later
        assert rows[number].verdict == "failing" and rows[number].observed_at == later
        assert "ci/extra" in rows[number].details


def test_the_readers_of_a_cycle_tell_time_by_its_clock(tmp_path: Path) -> None:
    """The merge-base and annotations readers ask the cycle's clock when they read, so what
    they keep is dated by it (a cycle whose clock is set after it was made included)."""
    import sqlite3

    from bot.state.store import to_text

    world = pending_world()
    world.add_check_run(REPO, SHA, name="tests", conclusion="failure",
                        started_at=STARTED, completed_at=STARTED)  # fmt: skip
    world.set_merge_base(REPO, "main", SHA, "b" * 40)
    at = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(at)
    with sqlite3.connect(tmp_path / "state.sqlite3") as db:
        kept = {row[0] for row in db.execute("SELECT read_at FROM merge_bases")}
        noted = {row[0] for row in db.execute("SELECT read_at FROM run_annotations")}
    assert kept == {to_text(at)}
    assert noted == {to_text(at)}


def elsewhere(report: Report, name: str) -> tuple[int, int] | None:
    """(heads, of) of the row's 'also failing on' (None: not said)."""
    row = next(row for row in report.rows if row.signal.name == name)
    found = row.history.elsewhere if row.history is not None else None
    return None if found is None else (found.heads, found.of)


def test_another_pull_requests_changed_check_moves_an_unchanged_ones_elsewhere(
    tmp_path: Path,
) -> None:
    """What a warm cycle keeps of a head's signals (its failing checks in the index of a
    failure's `elsewhere`) is of those very signals: a check of pull request 2 that stops
    failing moves the count on pull request 1, whose own head did not change."""
    world = many_world(3)
    runs = {
        number: world.add_check_run(REPO, f"{number:040x}", name="tests", conclusion="failure",
                                    started_at=STARTED, completed_at=STARTED)["id"]
        for number in (1, 2)
    }  # fmt: skip
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)
        _, warm = b.cycle(now + timedelta(minutes=1))
        one = {r.number: r for _, r in warm.pulls}[1]
        assert elsewhere(one, "tests") == (1, 2)
        world.update_check_run(REPO, runs[2], conclusion="success")
        _, changed = b.cycle(now + timedelta(minutes=2))
        snapshots = {s.number: s for s, _ in changed.pulls}
        assert snapshots[1].signals is {s.number: s for s, _ in warm.pulls}[1].signals
        assert elsewhere({r.number: r for _, r in changed.pulls}[1], "tests") is None
    assert "also failing on" not in bot_comments(world, 1)[0]["body"]


def test_a_provider_record_that_changes_changes_an_unchanged_pull_requests_report(
    tmp_path: Path,
) -> None:
    """Read the Docs finishing a build in flight changes the report of a pull request whose
    GitHub side did not change, in the next warm cycle of the same process."""
    rtd, context = "docs-project", "docs/readthedocs.org:docs-project"
    world = pending_world()
    world.add_status(REPO, SHA, context=context, state="pending", created_at=STARTED,
                     target_url=f"https://readthedocs.org/projects/{rtd}/builds/71/")  # fmt: skip
    world.add_rtd_build(rtd, id=71, commit=SHA, version="5", state="building", success=None,
                        created=STARTED)  # fmt: skip
    now = STARTED + timedelta(minutes=5)
    with bot(world, tmp_path) as b:
        b.cycle(now)
        same, before = b.cycle(now + timedelta(minutes=1))
        assert same.edited == 0, same.line()
        world.set_rtd_build(rtd, 71, state="finished", success=True,
                            finished=STARTED + timedelta(minutes=1))  # fmt: skip
        finished, after = b.cycle(now + timedelta(minutes=2))
        assert finished.edited == 1, finished.line()
        [(snap_a, _)], [(snap_b, report_b)] = before.pulls, after.pulls
        assert snap_b.signals is snap_a.signals  # the head's node was not parsed again
        docs = [r for r in report_b.rows if r.signal.name == context]
        assert [r.state for r in docs] == [State.SUCCESS], report_b.rows
