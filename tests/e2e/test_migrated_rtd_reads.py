"""Migration 18 (issue 32) with the real CLI against the sandbox: a state that migration 17's bot
left, holding the final Read the Docs read of the seed case in rtd_reads, is migrated by the
next `once`, which asks Read the Docs nothing and posts the comment a state of this bot would
have given it. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import Env, bot_comments, cli, seed_case, state_at_revision, write_config

from bot.core.remedies import READTHEDOCS
from bot.sources.readthedocs.evidence import record_key
from bot.state.readonly import open_read_only
from bot_sandbox import World


@pytest.fixture
def world(now: datetime) -> World:
    world = World()
    seed_case(world, now=now)
    return world


def once(config: Path) -> None:
    result = cli("once", "--config", str(config))
    assert result.returncode == 0, result.stderr


def visible(body: str) -> str:
    """The comment as read: without its hidden lines (the stamp dates the facts' observation),
    and without when this head was first observed (each run here is its own first sight, by the
    wall clock: two runs a minute apart say two minutes)."""
    shown = "\n".join(line for line in body.splitlines() if not line.startswith("<!--"))
    return re.sub(r"first observed \S+ \d\d:\d\d UTC", "first observed (when)", shown)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_final_read_kept_in_rtd_reads_is_migrated_and_not_asked_again(
    env: Env, database: str, request: pytest.FixtureRequest
) -> None:
    # what this bot keeps of the seed case's cancelled build: one run on a scratch state
    scratch = env.tmp / "scratch"
    scratch.mkdir()
    once(write_config(scratch, env.sandbox))
    [posted] = bot_comments(env.world, 7430)
    with sqlite3.connect(scratch / "state.sqlite3") as db:
        [(key, payload, read_at)] = db.execute(
            "SELECT record_key, payload, read_at FROM source_reads WHERE source = ?",
            (READTHEDOCS,),
        ).fetchall()
    # gone with its carried line: nothing but the state can give the read to the next run
    env.world.delete_comment(posted["id"])

    # the state migration 17's bot left: that read in rtd_reads
    where, config = str(env.state), env.config
    if database == "postgresql":
        where = request.getfixturevalue("postgres_url")
        config = env.tmp / "pg.toml"
        config.write_text(
            env.config.read_text().replace("[state]\n", f'[state]\nurl = "{where}"\n', 1)
        )
    state_at_revision(where, 17)
    url = where if database == "postgresql" else f"sqlite:///{where}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO rtd_reads VALUES (:h, :p, :c, :payload, :at, NULL, NULL)"),
            dict(zip(("h", "p", "c"), json.loads(key), strict=True), payload=payload, at=read_at),
        )
    engine.dispose()

    env.sandbox.clear_requests()
    once(config)
    assert [r.path for r in env.sandbox.requests if r.service == "rtd"] == []  # not asked
    [again] = bot_comments(env.world, 7430)
    assert visible(again["body"]) == visible(posted["body"])  # what the kept read says
    assert "34894885" in again["body"] and "build:user:cancelled" in again["body"]
    with open_read_only(where) as state:
        assert state.schema_version == 19
        kept = state.get_source_read(READTHEDOCS, key)
        assert kept is not None and kept.payload == payload and kept.failing_since is None
    assert key == record_key(*json.loads(key))
