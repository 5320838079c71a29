"""Tests of the state (SQLite here; the same against PostgreSQL, and e2e/test_postgres.py): round
trips, first-seen times, write pacing, migrations from the hand-rolled era, the read-only
state, kill -9."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from support import ROOT, TESTS, state_at_revision

from bot.core.remedies import READTHEDOCS
from bot.sources.readthedocs.evidence import record_key
from bot.state.ports import AuditRow, KeptBase, PullRecord, SourceRead, StoredComment
from bot.state.readonly import open_or_empty, open_read_only
from bot.state.store import RECORDS_BATCH, SCHEMA_VERSION, Store, StoreError, to_text

LEGACY = TESTS / "data" / "legacy_state"  # states the hand-rolled migrations wrote


def legacy_state(path: Path, version: int) -> Path:
    """A SQLite state as the hand-rolled migrations left it at `version` (see PROVENANCE.md)."""
    db = sqlite3.connect(path)
    db.executescript((LEGACY / f"v{version}.sql").read_text())
    db.close()
    return path


T0 = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
SHA_A = "a" * 40
SHA_B = "b" * 40


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """An in-memory SQLite store, and one on a fresh PostgreSQL database: same schema, same code."""
    where = ":memory:" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with Store.open(where) as opened:
        yield opened


def write(store: Store, number: int, *, action: str = "created", at: datetime = T0) -> None:
    """Record one comment write for owner/repo#number."""
    store.record_write(
        "owner/repo",
        number,
        comment_id=1000 + number,
        body_hash=f"hash-{number}",
        facts_key=f"facts-{number}",
        observed_at=at - timedelta(minutes=5),
        head_sha=SHA_A,
        action=action,  # type: ignore[arg-type]
        now=at,
    )


def test_open_creates_parent_dirs_and_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deep" / "bot.sqlite3"
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 19
    assert path.is_file()


def test_file_settings_wal_and_version_recorded(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    Store.open(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_reopen_keeps_data_and_does_not_remigrate(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    with Store.open(path) as store:
        write(store, 1)
    with Store.open(path) as store:
        assert store.get_comment("owner/repo", 1) is not None
        assert store.schema_version == SCHEMA_VERSION


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer") as caught:
        Store.open(path)
    assert f"schema version is {SCHEMA_VERSION + 1}" in str(caught.value)
    assert f"knows up to {SCHEMA_VERSION}" in str(caught.value)
    with pytest.raises(StoreError, match="newer"):
        open_read_only(path)


def test_an_alembic_revision_unknown_to_this_bot_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    Store.open(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = 'f00d1e'")
    with pytest.raises(StoreError, match="'f00d1e', unknown to this bot"):
        Store.open(path)


def test_comment_round_trip_and_upsert(store: Store) -> None:
    assert store.get_comment("owner/repo", 7) is None
    write(store, 7)
    assert store.get_comment("owner/repo", 7) == StoredComment(
        repo="owner/repo",
        number=7,
        comment_id=1007,
        body_hash="hash-7",
        facts_key="facts-7",
        observed_at=T0 - timedelta(minutes=5),
        head_sha=SHA_A,
        updated_at=T0,
    )
    store.record_write(
        "owner/repo",
        7,
        comment_id=1007,
        body_hash="hash-new",
        facts_key="facts-new",
        observed_at=T0,
        head_sha=SHA_B,
        action="edited",
        now=T0 + timedelta(minutes=1),
    )
    stored = store.get_comment("owner/repo", 7)
    assert stored is not None
    assert (stored.body_hash, stored.head_sha, stored.updated_at) == (
        "hash-new",
        SHA_B,
        T0 + timedelta(minutes=1),
    )
    assert [row.action for row in store.audit()] == ["edited", "created"]


def test_datetimes_come_back_aware_utc(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    write(store, 1, at=datetime(2026, 10, 5, 16, 3, 4, 5, tzinfo=plus_two))
    stored = store.get_comment("owner/repo", 1)
    assert stored is not None
    assert stored.updated_at == datetime(2026, 10, 5, 14, 3, 4, 5, tzinfo=UTC)
    assert stored.updated_at.tzinfo == UTC


def test_naive_datetimes_are_rejected(store: Store) -> None:
    with pytest.raises(ValueError, match="naive"):
        write(store, 1, at=datetime(2026, 10, 5, 14, 3))
    assert store.audit() == []


def test_forget_comment_keeps_audit(store: Store) -> None:
    write(store, 3)
    store.forget_comment("owner/repo", 3)
    assert store.get_comment("owner/repo", 3) is None
    assert len(store.audit()) == 1


def test_facts_keep_first_observation_while_unchanged(store: Store) -> None:
    assert store.get_facts("owner/repo", 1) is None
    store.set_facts("owner/repo", 1, facts_key="k1", observed_at=T0)
    store.set_facts("owner/repo", 1, facts_key="k1", observed_at=T0 + timedelta(minutes=5))
    assert store.get_facts("owner/repo", 1) == ("k1", T0)
    store.set_facts("owner/repo", 1, facts_key="k2", observed_at=T0 + timedelta(minutes=10))
    assert store.get_facts("owner/repo", 1) == ("k2", T0 + timedelta(minutes=10))
    assert store.get_facts("owner/repo", 2) is None


def test_facts_of_many_pull_requests_are_recorded_as_one_at_a_time_would(store: Store) -> None:
    """set_facts_many (the cycle's facts of a chunk, one transaction): each pull request's
    first observation stays while its facts do, a new key takes its own time, a number not
    recorded before is added; on SQLite and PostgreSQL alike."""
    later = T0 + timedelta(minutes=5)
    store.set_facts("owner/repo", 1, facts_key="k1", observed_at=T0)
    store.set_facts("owner/repo", 2, facts_key="k2", observed_at=T0)
    store.set_facts_many("owner/repo", [(1, "k1", later), (2, "k2-new", later), (3, "k3", later)])
    assert store.get_facts("owner/repo", 1) == ("k1", T0)  # the same facts: first sighting
    assert store.get_facts("owner/repo", 2) == ("k2-new", later)
    assert store.get_facts("owner/repo", 3) == ("k3", later)
    assert store.get_facts("other/repo", 1) is None
    store.set_facts_many("owner/repo", [])  # nothing to record: no statement


def test_triage_rows_of_many_pull_requests_are_written_as_one_at_a_time_would(
    store: Store,
) -> None:
    """put_triage_many writes every row as put_triage would (an existing row replaced)."""
    store.put_triage("o/r", 1, title="old", author="a", draft=True, head_sha=SHA_A,
                     verdict="pending", url="u1", details="{}", observed_at=T0, now=T0)  # fmt: skip
    later = T0 + timedelta(minutes=5)
    store.put_triage_many(
        "o/r",
        [(1, ("t1", None, False, SHA_B, "failing", "u1", '{"x":1}', later)),
         (2, ("t2", "b", True, SHA_A, "passing", "u2", "{}", T0))],
        now=later,
    )  # fmt: skip
    rows = {row.number: row for row in store.triage_rows()}
    assert sorted(rows) == [1, 2]
    one, two = rows[1], rows[2]
    assert (one.title, one.author, one.draft, one.head_sha, one.verdict, one.details) == (
        "t1", None, False, SHA_B, "failing", '{"x":1}'
    )  # fmt: skip
    assert (one.observed_at, one.updated_at) == (later, later)
    assert (two.title, two.author, two.draft, two.url) == ("t2", "b", True, "u2")
    assert two.observed_at == T0


def test_first_seen_first_wins_and_old_heads_are_pruned(store: Store) -> None:
    store.mark_seen("owner/repo", 1, SHA_A, ["ci", "docs"], now=T0)
    store.mark_seen("owner/repo", 1, SHA_A, ["ci", "lint"], now=T0 + timedelta(minutes=1))
    assert store.first_seen("owner/repo", 1, SHA_A) == {
        "ci": T0,
        "docs": T0,
        "lint": T0 + timedelta(minutes=1),
    }
    store.mark_seen("owner/repo", 2, SHA_A, ["ci"], now=T0)
    store.mark_seen("owner/repo", 1, SHA_B, ["ci"], now=T0 + timedelta(minutes=2))
    assert store.first_seen("owner/repo", 1, SHA_A) == {}
    assert store.first_seen("owner/repo", 1, SHA_B) == {"ci": T0 + timedelta(minutes=2)}
    assert store.first_seen("owner/repo", 2, SHA_A) == {"ci": T0}


def test_source_reads_are_keyed_by_source_and_record_key(store: Store) -> None:
    key = record_key("org", "proj", SHA_A)
    assert store.get_source_read(READTHEDOCS, key) is None
    store.put_source_read(READTHEDOCS, key, payload='{"builds": [1]}', now=T0)
    store.put_source_read(READTHEDOCS, key, payload='{"builds": [2]}', now=T0)
    assert store.get_source_read(READTHEDOCS, key) == SourceRead('{"builds": [2]}', T0, None)
    assert store.get_source_read(READTHEDOCS, record_key("com", "proj", SHA_A)) is None
    assert store.get_source_read(READTHEDOCS, record_key("org", "other", SHA_A)) is None
    assert store.get_source_read("codecov", key) is None  # another source's


def test_a_failing_source_read_keeps_the_last_good_answer_and_the_first_failure(
    store: Store,
) -> None:
    key = record_key("org", "proj", SHA_A)
    store.source_read_failed(READTHEDOCS, key, now=T0, failure="HTTP 502")
    assert store.get_source_read(READTHEDOCS, key) == SourceRead(None, None, T0, "HTTP 502")
    store.put_source_read(READTHEDOCS, key, payload="{}", now=T0 + timedelta(minutes=1))
    later = T0 + timedelta(minutes=2)
    store.source_read_failed(READTHEDOCS, key, now=later, failure="HTTP 429")
    store.source_read_failed(READTHEDOCS, key, now=later + timedelta(minutes=5), failure="x")
    expected = SourceRead("{}", T0 + timedelta(minutes=1), later, "HTTP 429")
    assert store.get_source_read(READTHEDOCS, key) == expected


def test_the_read_only_state_reads_in_place_and_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with Store.open(path) as store:
        store.set_facts("owner/repo", 1, facts_key="k", observed_at=T0)
    with open_read_only(path) as reader:
        assert reader.get_facts("owner/repo", 1) == ("k", T0)
        reader.set_facts("owner/repo", 1, facts_key="k2", observed_at=T0)  # dropped
        assert reader.get_facts("owner/repo", 1) == ("k", T0)
        with Store.open(path) as store:  # it reads the file itself, not a copy
            store.set_facts("owner/repo", 2, facts_key="new", observed_at=T0)
        assert reader.get_facts("owner/repo", 2) == ("new", T0)
    with Store.open(path) as store:
        assert store.get_facts("owner/repo", 1) == ("k", T0)


def test_the_database_itself_refuses_a_write_on_the_read_only_connection(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    Store.open(path).close()
    from bot.state.store import sqlite_engine

    reads = Store(sqlite_engine(str(path), read_only=True), str(path))
    with reads, pytest.raises(StoreError, match="readonly"):
        reads.set_facts("owner/repo", 1, facts_key="k", observed_at=T0)
    with Store.open(path) as store:
        assert store.get_facts("owner/repo", 1) is None


def test_the_read_only_state_reads_an_older_state_as_it_is(tmp_path: Path) -> None:
    path = legacy_state(tmp_path / "old.sqlite3", 2)
    before = path.read_bytes()
    with open_read_only(path) as reader:
        assert reader.schema_version == 2  # not migrated by a reader
        key = record_key("org", "proj", SHA_A)
        assert reader.get_source_read(READTHEDOCS, key) is None  # no such table yet: empty
        assert reader.triage_rows() == []
        comment = reader.get_comment("o/r", 1)
        assert comment is not None and comment.comment_id == 42
    assert path.read_bytes() == before


def test_the_read_only_state_reads_an_older_states_records_in_one_batch(tmp_path: Path) -> None:
    path = legacy_state(tmp_path / "old.sqlite3", 2)
    with open_read_only(path) as reader:
        records = reader.pull_records("o/r", [2, 1, 2])
        assert sorted(records) == [1, 2]
        comment = records[1].comment
        assert comment is not None and comment.comment_id == 42 and comment.checked_at is None
        assert (records[2].comment, records[2].without_comment) == (None, False)
        assert reader.merge_bases("o/r", [("main", SHA_A)]) == {}  # no such table yet
        assert reader.get_history("o/r", ["k"]) == {} and reader.epoch == ""


def test_a_merge_base_kept_before_the_tip_was_has_no_tip(tmp_path: Path) -> None:
    """A state of revision 18 kept merge bases without the base branch's commit they were
    asked with: read as it is (a reader) and migrated (19), each row has no tip."""
    path = tmp_path / "18.sqlite3"
    state_at_revision(str(path), 18)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO merge_bases VALUES ('o/r', 'main', ?, ?, ?)", (SHA_A, SHA_B, to_text(T0))
        )
    with open_read_only(path) as reader:
        assert reader.schema_version == 18
        assert reader.merge_bases("o/r", [("main", SHA_A)]) == {
            ("main", SHA_A): KeptBase(SHA_B, None, T0)
        }
    with Store.open(path) as store:
        assert store.schema_version == 19
        assert store.merge_bases("o/r", [("main", SHA_A)]) == {
            ("main", SHA_A): KeptBase(SHA_B, None, T0)
        }


def test_no_state_yet_is_said_and_never_created_by_a_reader(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no state at"):
        open_read_only(tmp_path / "none.sqlite3")
    with open_or_empty(tmp_path / "none.sqlite3") as empty:
        assert empty.triage_rows() == [] and empty.get_comment("o/r", 1) is None
    assert not (tmp_path / "none.sqlite3").exists()


def test_writes_since_and_last_write_exclude_adopted(store: Store) -> None:
    assert store.writes_since(T0) == 0
    assert store.last_write_at() is None
    write(store, 1, action="created", at=T0)
    write(store, 2, action="edited", at=T0 + timedelta(seconds=30))
    write(store, 3, action="adopted", at=T0 + timedelta(seconds=50))
    assert store.writes_since(T0) == 2
    assert store.writes_since(T0 + timedelta(seconds=1)) == 1
    assert store.writes_since(T0 + timedelta(seconds=31)) == 0
    assert store.last_write_at() == T0 + timedelta(seconds=30)


def test_audit_newest_first_with_limit(store: Store) -> None:
    for number in range(1, 5):
        write(store, number, at=T0 + timedelta(seconds=number))
    rows = store.audit(limit=2)
    assert rows == [
        AuditRow(T0 + timedelta(seconds=4), "owner/repo", 4, comment_id=1004, action="created"),
        AuditRow(T0 + timedelta(seconds=3), "owner/repo", 3, comment_id=1003, action="created"),
    ]


def test_write_is_atomic_comment_row_rolls_back_with_audit(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    Store.open(path).close()
    db = sqlite3.connect(path)
    db.execute("CREATE TRIGGER boom BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'boom'); END")
    db.commit()
    db.close()
    with Store.open(path) as store:
        with pytest.raises(StoreError, match="boom"):
            write(store, 1)
        assert store.get_comment("owner/repo", 1) is None
        store.set_facts("owner/repo", 1, facts_key="k", observed_at=T0)  # usable afterwards
        assert store.get_facts("owner/repo", 1) == ("k", T0)


def test_invalid_action_writes_nothing(store: Store) -> None:
    with pytest.raises(ValueError, match="action"):
        write(store, 1, action="posted")
    assert store.get_comment("owner/repo", 1) is None
    assert store.audit() == []


CHILD = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from bot.state.store import Store

    store = Store.open(sys.argv[1])
    number = 0
    while True:
        number += 1
        store.record_write(
            "owner/repo", number % 50, comment_id=number, body_hash="h" * 64,
            facts_key="f" * 64, observed_at=datetime.now(UTC), head_sha="a" * 40,
            action="edited", now=datetime.now(UTC),
        )
        store.mark_seen("owner/repo", number % 50, str(number), ["x", "y"], now=datetime.now(UTC))
        if number == 200:
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
    """
)


@pytest.mark.parametrize("extra_writes_seconds", [0.0, 0.05, 0.2])
def test_survives_kill_9(tmp_path: Path, extra_writes_seconds: float) -> None:
    path = tmp_path / "state" / "bot.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        time.sleep(extra_writes_seconds)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    with Store.open(path) as store:
        audit = store.audit(limit=1_000_000)
        assert len(audit) >= 200
        latest: dict[int, int] = {}
        for row in reversed(audit):
            latest[row.number] = row.comment_id
        for number, comment_id in latest.items():
            stored = store.get_comment("owner/repo", number)
            assert stored is not None
            assert stored.comment_id == comment_id


def test_a_version_1_file_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = legacy_state(tmp_path / "v1.sqlite3", 1)
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        kept = store.get_comment("o/r", 1)
        assert kept is not None and kept.comment_id == 42 and kept.node_id == ""


def test_a_version_6_file_is_upgraded_in_place_and_keeps_every_row(tmp_path: Path) -> None:
    path = legacy_state(tmp_path / "v6.sqlite3", 6)
    at = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        kept = store.get_comment("o/r", 1)
        assert kept is not None and (kept.comment_id, kept.node_id) == (42, "IC_kwDOA1")
        assert store.get_facts("o/r", 1) == ("facts", at)
        assert store.first_seen("o/r", 1, SHA_A) == {"status:dco": at}
        assert [r.title for r in store.triage_rows()] == ["Fix it"]
        key = record_key("org", "proj", SHA_A)  # rtd_reads' row, in source_reads (0018)
        assert store.get_source_read(READTHEDOCS, key) == SourceRead("{}", at, None)
        assert store.required_known("o/r", ["main"], now=at) == {("main", "tests"): True}
        assert not store.note_delivery("d-1", "check_run", now=at)  # still known
        assert store.audit() == [AuditRow(at, "o/r", 1, comment_id=42, action="created")]
        assert not store.known_without_comment("o/r", 1)  # migration 7's table is there
        store.note_no_comment("o/r", 2, now=at)
        assert store.known_without_comment("o/r", 2)
    with sqlite3.connect(path) as db:  # an older bot reads this counter and refuses the state
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT version_num FROM alembic_version").fetchone()[0] == (
            f"{SCHEMA_VERSION:04d}"
        )


def test_the_migrations_build_exactly_the_schema_the_code_uses(tmp_path: Path) -> None:
    """Alembic's own comparison: the migrated state and bot/state/schema.py do not differ."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from bot.state.schema import metadata

    for state in (tmp_path / "fresh.sqlite3", legacy_state(tmp_path / "v1.sqlite3", 1)):
        Store.open(state).close()
        engine = create_engine(f"sqlite:///{state}")
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        engine.dispose()
        # The hand-rolled `id INTEGER PRIMARY KEY` reflects as nullable; SQLite's rowid alias
        # is never NULL, so that one difference is none.
        rowid = ("modify_nullable", None, "audit", "id")
        assert [d for d in diff if not (isinstance(d, list) and d[0][:4] == rowid)] == []


def test_prune_drops_what_is_past_its_retention_and_keeps_the_rest(tmp_path: Path) -> None:
    from bot.state.store import RETENTION

    now = datetime.now(UTC)
    old, recent = now - timedelta(days=40), now - timedelta(minutes=5)
    with Store.open(tmp_path / "s.sqlite3") as store:
        for when, tag in ((old, "old"), (recent, "new")):
            store.note_delivery(f"d-{tag}", "status", now=when)
            store.record_write(
                "o/r",
                1,
                comment_id=1,
                body_hash="h",
                facts_key="k",
                observed_at=when,
                head_sha="a" * 40,
                action="edited",
                now=when,
            )
        for number, when in ((1, recent), (2, old)):
            store.put_triage("o/r", number, title="t", author="a", draft=False,
                             head_sha=f"{number:040x}", verdict="passing", url="u", details="{}",
                             observed_at=when, now=when)  # fmt: skip
            store.mark_seen("o/r", number, f"{number:040x}", ["k"], now=old)
        dropped = store.prune(now=now)
        assert dropped["deliveries"] == 1 and dropped["audit"] == 1 and dropped["triage"] == 1
        assert dropped["first_seen"] == 1  # PR 2's: closed long ago; PR 1's head is current
        assert [row.number for row in store.triage_rows()] == [1]
        assert store.first_seen("o/r", 1, f"{1:040x}")
        assert not store.note_delivery("d-new", "status", now=now)  # still remembered
        assert store.writes_since(now - timedelta(hours=1)) == 1
    assert RETENTION["deliveries"] == timedelta(days=1)


def test_merge_bases_and_annotations_of_heads_no_open_pull_request_has_are_pruned(
    store: Store,
) -> None:
    """Issue 16's caches are dropped with the pull requests: a head no triage row has (closed,
    or pushed over) loses its merge base and its runs' annotations once read over an hour
    ago, and a merge base's contexts go when no kept merge base names that commit."""
    now = T0 + timedelta(days=1)
    old, recent = now - timedelta(hours=2), now - timedelta(minutes=5)
    open_head, closed_head, new_head = SHA_A, SHA_B, "c" * 40
    store.put_triage("o/r", 1, title="t", author="a", draft=False, head_sha=open_head,
                     verdict="failing", url="u", details="{}", observed_at=old,
                     now=old)  # fmt: skip
    base_kept, base_gone = "d" * 40, "e" * 40
    store.put_merge_base("o/r", "main", open_head, base_kept, now=old)
    store.put_merge_base("o/r", "main", closed_head, base_gone, now=old)
    store.put_merge_base("o/r", "main", new_head, base_gone, now=recent)  # read just now
    store.put_merge_base("x/y", "main", open_head, base_gone, now=old)  # another repo's
    for commit in (base_kept, base_gone, "f" * 40):
        store.put_base_contexts("o/r", commit, payload="{}", now=old)
    runs = {11: (open_head, "[]"), 12: (closed_head, "[]")}
    store.put_annotations("o/r", runs, now=old)
    store.put_annotations("o/r", {13: (new_head, "[]")}, now=recent)

    dropped = store.prune(now=now)

    assert (dropped["merge_bases"], dropped["base_contexts"], dropped["run_annotations"]) == (
        2, 1, 1
    )  # fmt: skip
    assert store.get_merge_base("o/r", "main", open_head) == base_kept
    assert store.get_merge_base("o/r", "main", closed_head) is None
    assert store.get_merge_base("o/r", "main", new_head) == base_gone
    assert store.get_merge_base("x/y", "main", open_head) is None
    assert store.get_base_contexts("o/r", base_kept) == "{}"
    assert store.get_base_contexts("o/r", base_gone) == "{}"  # the new head still names it
    assert store.get_base_contexts("o/r", "f" * 40) is None
    assert store.get_annotations("o/r", [11, 12, 13]) == {11: "[]", 13: "[]"}


def test_batched_reads_and_touches_span_more_than_one_statement(store: Store) -> None:
    """pull_records, merge_bases and touch_triage answer for every item asked, also past the
    RECORDS_BATCH items one statement takes (the items are split across statements)."""
    last = RECORDS_BATCH + 5  # in the second batch
    for number in (1, last):
        write(store, number)
        store.put_triage(
            "owner/repo", number, title="t", author=None, draft=False, head_sha=SHA_A,
            verdict="passing", url="u", details="{}", observed_at=T0, now=T0,
        )  # fmt: skip
    store.note_no_comment("owner/repo", last - 1, now=T0)
    store.set_facts("owner/repo", last + 1, facts_key="k", observed_at=T0)
    records = store.pull_records("owner/repo", range(1, last + 3))
    assert sorted(records) == list(range(1, last + 3))
    assert records[1].comment == store.get_comment("owner/repo", 1) is not None
    assert records[last].comment == store.get_comment("owner/repo", last) is not None
    assert records[last - 1] == PullRecord(None, True, None)
    assert records[last + 1] == PullRecord(None, False, ("k", T0))
    assert sum(r.comment is not None for r in records.values()) == 2

    heads = [f"{i:040x}" for i in range(RECORDS_BATCH + 2)]
    for head in heads:
        store.put_merge_base("owner/repo", "main", head, SHA_B, now=T0)
    store.put_merge_base("owner/repo", "main", heads[-1], SHA_B, now=T0, tip=SHA_A)  # asked again
    found = store.merge_bases("owner/repo", [*(("main", h) for h in heads), ("dev", heads[-1])])
    assert (
        found
        == {  # ("dev", …) was never kept
            **{("main", h): KeptBase(SHA_B, None, T0) for h in heads[:-1]},
            ("main", heads[-1]): KeptBase(SHA_B, SHA_A, T0),
        }
    )

    later = T0 + timedelta(minutes=1)
    store.touch_triage("owner/repo", range(1, last + 3), now=later)
    assert [(r.number, r.updated_at) for r in store.triage_rows()] == [(1, later), (last, later)]


def test_every_state_has_its_own_epoch_kept_across_opens(tmp_path: Path) -> None:
    """Issue 24 item 2: a state's identity, made once (a new state is another epoch)."""
    with Store.open(tmp_path / "a.sqlite3") as one:
        epoch = one.epoch
    with Store.open(tmp_path / "a.sqlite3") as again, Store.open(tmp_path / "b.sqlite3") as other:
        assert again.epoch == epoch and len(epoch) == 16
        assert other.epoch != epoch
    with Store.open(":memory:") as memory:  # no state kept: no epoch
        assert memory.epoch == ""
