"""The PostgreSQL state against a real server (issue 18): schema, read-only, bad input, a cycle.

Each test gets its own database (the `postgres_url` fixture in conftest.py creates and drops
it); without CISB_TEST_POSTGRES_URL these are skipped, and in CI that fails the run.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from support import REPO, bot_comments, cli, seed_case, write_config

from bot.state.readonly import open_read_only
from bot.state.store import SCHEMA_VERSION, Store, StoreError
from bot_sandbox import Sandbox, World

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)


def pg_config(tmp: Path, sandbox: Sandbox, url: str) -> Path:
    """The sandbox config with the state on PostgreSQL."""
    path = write_config(tmp, sandbox)
    text = path.read_text().replace("[state]\n", f'[state]\nurl = "{url}"\n', 1)
    path.write_text(text)
    return path


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_migrations_build_exactly_the_schema_the_code_uses(postgres_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from bot.state.schema import metadata

    with Store.open(postgres_url) as store:
        assert store.schema_version == SCHEMA_VERSION
    engine = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
        kinds = {
            r[0]: r[1]
            for r in conn.exec_driver_sql(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'comments'"
            )
        }
    engine.dispose()
    assert diff == []
    assert kinds["comment_id"] == "bigint"  # GitHub's ids outgrow 32 bits


def test_a_comment_id_beyond_32_bits_round_trips(postgres_url: str) -> None:
    with Store.open(postgres_url) as store:
        store.record_write(
            REPO, 1, comment_id=3_456_789_012, body_hash="h", facts_key="k", observed_at=NOW,
            head_sha="a" * 40, action="created", now=NOW,
        )  # fmt: skip
        stored = store.get_comment(REPO, 1)
    assert stored is not None and stored.comment_id == 3_456_789_012


def test_first_seen_keys_with_a_nul_byte_round_trip(postgres_url: str) -> None:
    # "\0head" is the head's own key (bot.core.required); a check name may hold a NUL too
    keys = ["\0head", "ci\0x", "back\\0slash", "plain"]
    with Store.open(postgres_url) as store:
        store.mark_seen(REPO, 1, "a" * 40, keys, now=NOW)
        assert store.first_seen(REPO, 1, "a" * 40) == dict.fromkeys(keys, NOW)


def test_a_newer_schema_on_the_server_is_refused_naming_both_versions(postgres_url: str) -> None:
    Store.open(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("UPDATE alembic_version SET version_num = %s", (f"{SCHEMA_VERSION + 3:04d}",))
    for opener in (Store.open, open_read_only):
        with pytest.raises(StoreError) as caught:
            opener(postgres_url)
        text = str(caught.value)
        assert f"is {SCHEMA_VERSION + 3}" in text and f"up to {SCHEMA_VERSION}" in text


def test_the_read_only_state_reads_the_server_and_the_server_refuses_its_writes(
    postgres_url: str,
) -> None:
    from bot.state.store import pg_engine

    with Store.open(postgres_url) as store:
        store.set_facts(REPO, 1, facts_key="k", observed_at=NOW)
    with open_read_only(postgres_url) as reader:
        assert reader.get_facts(REPO, 1) == ("k", NOW)
        reader.set_facts(REPO, 1, facts_key="other", observed_at=NOW)  # dropped
    reads = Store(pg_engine(postgres_url, read_only=True), postgres_url)
    with reads, pytest.raises(StoreError, match="read-only transaction"):
        reads.set_facts(REPO, 1, facts_key="other", observed_at=NOW)
    with Store.open(postgres_url) as store:
        assert store.get_facts(REPO, 1) == ("k", NOW)


def test_two_processes_migrating_one_new_database_at_once_both_succeed(postgres_url: str) -> None:
    import subprocess
    import sys

    code = "import sys; from bot.state.store import Store; Store.open(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, postgres_url], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    with Store.open(postgres_url) as store:
        assert store.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://u@h/db", "postgresql://"),
        ("postgresql://u@h:notaport/db", "port"),
        ("postgresql://u@h:5432/", "no database"),
        ("postgresql:///db", "no host"),
    ],
)
def test_a_malformed_url_exits_2_naming_the_key(tmp_path: Path, url: str, why: str) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(f'[state]\nurl = "{url}"\n[[repos]]\nname = "{REPO}"\n')
    result = cli("check-config", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "state.url" in result.stderr and why in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_server_at_start_exits_1_naming_the_host(
    tmp_path: Path, world: World
) -> None:
    port = closed_port()
    seed_case(world, now=NOW)
    with Sandbox(world) as sandbox:
        config = pg_config(tmp_path, sandbox, f"postgresql://u:hunter2@127.0.0.1:{port}/db")
        for command in (("run",), ("once",), ("report",)):
            result = cli(*command, "--config", str(config), timeout=60)
            assert result.returncode == 1, (command, result.stderr)
            assert f"127.0.0.1:{port}" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
    assert not bot_comments(world, 7430)


def test_once_on_postgresql_comments_once_and_report_reads_it_back(
    tmp_path: Path, world: World, postgres_url: str
) -> None:
    seed_case(world, now=NOW)
    with Sandbox(world) as sandbox:
        config = pg_config(tmp_path, sandbox, postgres_url)
        first = cli("once", "--config", str(config))
        assert first.returncode == 0, first.stderr
        assert "comments created 1" in first.stdout
        second = cli("once", "--config", str(config))
        assert "comments created 0, edited 0, left 1" in second.stdout, second.stdout
        dry = cli("once", "--config", str(config), "--dry-run")
        assert dry.returncode == 0 and "would leave" in dry.stdout
        report = cli("report", "--config", str(config), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert [p["number"] for p in json.loads(report.stdout)["pulls"]] == [7430]
    assert len(bot_comments(world, 7430)) == 1
    assert not (tmp_path / "state.sqlite3").exists()  # nothing went to the SQLite path


def test_once_on_a_shared_state_works_only_what_no_replica_holds_and_fences_its_writes(
    tmp_path: Path, world: World, postgres_url: str
) -> None:
    """`once` beside `run` replicas on one PostgreSQL: it takes the free leases (never a held
    one), stamps its writes with their generation, names what it left and gives them up."""
    from support import LOGIN

    from bot.render.stamp import generation_of
    from bot.state.leases import UNHELD, Leases, all_leases

    seed_case(world, now=NOW)
    other = "octo/other"
    world.add_repo(other)
    world.add_pull(other, 1, title="t", author="alice", head_sha="c" * 40)
    with Sandbox(world) as sandbox:
        config = pg_config(tmp_path, sandbox, postgres_url)
        config.write_text(config.read_text() + f'[[repos]]\nname = "{other}"\n')
        with Store.open(postgres_url) as store:
            replica = Leases(store, lease_seconds=600, holder="replica-a")
            assert replica.claim([other]) == {other: 1}  # a live `run` replica works it
            result = cli("once", "--config", str(config))
            leases = {lease.repo: lease for lease in all_leases(store)}
    assert result.returncode == 1
    assert f"{other}: its lease is held by another process" in result.stderr, result.stderr
    assert world.comments(other, 1) == []  # never written past a replica's lease
    [comment] = bot_comments(world, 7430)
    assert generation_of(comment["body"]) == leases[REPO].generation >= 1
    assert comment["user"]["login"] == LOGIN
    assert leases[REPO].holder == UNHELD  # given up at the end
    assert leases[other].holder == "replica-a" and leases[other].generation == 1
