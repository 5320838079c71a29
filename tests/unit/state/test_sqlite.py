"""Tests of the SQLite state: round trips, first-seen times, write pacing, migrations, kill -9."""

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
from support import ROOT

from bot.state.sqlite import (
    _MIGRATIONS,
    SCHEMA_VERSION,
    AuditRow,
    RtdRead,
    Store,
    StoredComment,
    StoreError,
)

T0 = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
SHA_A = "a" * 40
SHA_B = "b" * 40


@pytest.fixture
def store() -> Iterator[Store]:
    """An in-memory store."""
    with Store.open(":memory:") as opened:
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
        assert store.schema_version == SCHEMA_VERSION == 10
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
    with pytest.raises(StoreError, match="newer"):
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


def test_rtd_reads_are_keyed_by_host_project_and_commit(store: Store) -> None:
    assert store.get_rtd_read("org", "proj", SHA_A) is None
    store.put_rtd_read("org", "proj", SHA_A, payload='{"builds": [1]}', now=T0)
    store.put_rtd_read("org", "proj", SHA_A, payload='{"builds": [2]}', now=T0)
    assert store.get_rtd_read("org", "proj", SHA_A) == RtdRead('{"builds": [2]}', T0, None)
    assert store.get_rtd_read("com", "proj", SHA_A) is None
    assert store.get_rtd_read("org", "other", SHA_A) is None


def test_a_failing_rtd_read_keeps_the_last_good_answer_and_the_first_failure(store: Store) -> None:
    store.rtd_read_failed("org", "proj", SHA_A, now=T0, failure="HTTP 502")
    assert store.get_rtd_read("org", "proj", SHA_A) == RtdRead(None, None, T0, "HTTP 502")
    store.put_rtd_read("org", "proj", SHA_A, payload="{}", now=T0 + timedelta(minutes=1))
    later = T0 + timedelta(minutes=2)
    store.rtd_read_failed("org", "proj", SHA_A, now=later, failure="HTTP 429")
    store.rtd_read_failed("org", "proj", SHA_A, now=later + timedelta(minutes=5), failure="x")
    expected = RtdRead("{}", T0 + timedelta(minutes=1), later, "HTTP 429")
    assert store.get_rtd_read("org", "proj", SHA_A) == expected


def test_open_readonly_reads_a_copy_and_never_writes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with Store.open(path) as store:
        store.set_facts("owner/repo", 1, facts_key="k", observed_at=T0)
    before = path.read_bytes()
    with Store.open_readonly(path) as copy:
        assert copy.get_facts("owner/repo", 1) == ("k", T0)
        copy.set_facts("owner/repo", 1, facts_key="k2", observed_at=T0)
    assert path.read_bytes() == before
    with Store.open(path) as store:
        assert store.get_facts("owner/repo", 1) == ("k", T0)


def test_open_readonly_migrates_an_older_state_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        for version, statements in enumerate(_MIGRATIONS[:2], start=1):
            for statement in statements:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version}")
    with Store.open_readonly(path) as copy:
        assert copy.schema_version == SCHEMA_VERSION
        assert copy.get_rtd_read("org", "proj", SHA_A) is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2


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
        with pytest.raises(sqlite3.IntegrityError, match="boom"):
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
    from bot.state.sqlite import Store

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
    path = tmp_path / "v1.sqlite3"
    db = sqlite3.connect(path)
    for statement in _MIGRATIONS[0]:
        db.execute(statement)
    db.execute(
        "INSERT INTO comments VALUES ('o/r', 1, 42, 'h', 'k', ?, 'sha', ?)",
        ("2026-10-05T14:03:00.000000Z", "2026-10-05T14:03:00.000000Z"),
    )
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        kept = store.get_comment("o/r", 1)
        assert kept is not None and kept.comment_id == 42 and kept.node_id == ""
