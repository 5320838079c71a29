"""Migration 18 (issue 32): a state that kept Read the Docs' reads in their own table (rtd_reads,
up to migration 17) comes out with each of them in source_reads, under the key the comment's
carried line names it by, and the Read the Docs source reads them exactly as it reads a read it
kept itself: a final one is not asked again, a failing run keeps its first time and words. On
SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import inspect, text
from support import BUILD_URL, DOCS, NOW, SHA, build, snapshot, state_at_revision, status

from bot.app import request_guard
from bot.core.remedies import READTHEDOCS
from bot.settings import RepoSettings, Settings
from bot.sources.readthedocs.client import RtdApi
from bot.sources.readthedocs.evidence import CommitRead, _dump, record_key
from bot.sources.readthedocs.provider import ReadTheDocs, api_urls
from bot.sources.readthedocs.rows import RtdLookup
from bot.state.db import to_text
from bot.state.ports import SourceRead
from bot.state.store import SCHEMA_VERSION, Store

SHA_B, SHA_C = "b" * 40, "c" * 40
READ_AT = NOW - timedelta(hours=2)
FAILING_SINCE = NOW - timedelta(minutes=40)
FAILURE = "HTTP 503: Read the Docs is unavailable"
CANCELLED = build("cancelled", False, created=READ_AT - timedelta(hours=1), finished=None)
BUILDING = build("building", None, id=34894886, commit=SHA_B, url=BUILD_URL.replace("85/", "86/"))
FINAL = _dump(
    CommitRead(
        "org", "omni-docs", SHA, READ_AT, (CANCELLED,), {CANCELLED.id: ("build:user:cancelled",)}
    )
)
LAST_GOOD = _dump(CommitRead("org", "omni-docs", SHA_B, READ_AT, (BUILDING,)))
# site, project, commit -> payload, read_at, failing_since, failure: as migration 17's bot kept
ROWS: dict[tuple[str, str, str], tuple[str | None, Any, Any, str | None]] = {
    ("org", "omni-docs", SHA): (FINAL, READ_AT, None, None),  # final: never asked again
    ("org", "omni-docs", SHA_B): (LAST_GOOD, READ_AT, FAILING_SINCE, FAILURE),  # an outage
    ("com", "biz-docs", SHA_C): (None, None, FAILING_SINCE, FAILURE),  # never read well
    ("self", 'd\u00f3cs"x', SHA_C): ("{}", READ_AT, None, None),  # a key JSON escapes
}


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A state at migration 17 holding ROWS in rtd_reads and a Codecov read in source_reads."""
    if request.param == "sqlite":
        url, location = f"sqlite:///{tmp_path / 'state.sqlite3'}", str(tmp_path / "state.sqlite3")
    else:
        location = request.getfixturevalue("postgres_url")
        url = location.replace("postgresql://", "postgresql+psycopg://", 1)
    state_at_revision(location, 17)
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.begin() as conn:
        for (host, project, commit), (payload, read_at, since, failure) in ROWS.items():
            conn.execute(
                text("INSERT INTO rtd_reads VALUES (:h, :p, :c, :payload, :at, :since, :failure)"),
                {"h": host, "p": project, "c": commit, "payload": payload,
                 "at": read_at and to_text(read_at), "since": since and to_text(since),
                 "failure": failure},
            )  # fmt: skip
        conn.execute(
            text("INSERT INTO source_reads VALUES ('codecov', 'k', '{}', :at, NULL, NULL)"),
            {"at": to_text(READ_AT)},
        )
    engine.dispose()
    yield location


def test_every_rtd_read_is_in_source_reads_under_its_carried_key(where: str) -> None:
    with Store.open(where) as store:
        assert store.schema_version == SCHEMA_VERSION == 19
        with store.reading() as conn:
            assert "rtd_reads" not in inspect(conn).get_table_names()
            count = conn.execute(text("SELECT count(*) FROM source_reads")).scalar_one()
        assert count == len(ROWS) + 1  # each copied once; the Codecov read is as it was
        for (host, project, commit), row in ROWS.items():
            assert store.get_source_read(READTHEDOCS, record_key(host, project, commit)) == (
                SourceRead(*row)
            )
        assert store.get_source_read("codecov", "k") == SourceRead("{}", READ_AT, None)


def _evidence(store: Store, head: str, url: str) -> tuple[RtdLookup, list[str]]:
    """What the Read the Docs source says of a pending status of `head` naming `url`, over
    `store`, while Read the Docs answers 503 to everything; and what it asked."""
    asked: list[str] = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(503, json={"detail": "unavailable"})

    settings = Settings.model_validate({})
    api = RtdApi(
        api_urls=api_urls(settings), guard=request_guard(settings), max_retries=0,
        transport=httpx.MockTransport(unavailable), sleep=lambda _s: None,
    )  # fmt: skip
    signal = status(DOCS, "pending", url=url, created_at=READ_AT - timedelta(minutes=5))
    pull = dataclasses.replace(snapshot(signal), head_sha=head)
    found = ReadTheDocs(api, store).evidence(
        pull, RepoSettings(name="example/omni"), now=NOW, asked=(signal,)
    )
    lookup = found[DOCS]
    assert isinstance(lookup, RtdLookup)
    return lookup, asked


def test_the_source_reads_a_migrated_read_as_one_it_kept_itself(where: str) -> None:
    """The same evidence as from a state of this bot that kept those reads: the final one
    asks nothing; during an outage the last good one stands, failing since the first time."""
    with Store.open(":memory:") as kept_here:
        for (host, project, commit), (payload, read_at, since, failure) in ROWS.items():
            key = record_key(host, project, commit)
            if payload is not None:
                kept_here.put_source_read(READTHEDOCS, key, payload=payload, now=read_at)
            if since is not None and failure is not None:
                kept_here.source_read_failed(READTHEDOCS, key, now=since, failure=failure)
        with Store.open(where) as migrated:
            final, asked = _evidence(migrated, SHA, BUILD_URL)
            assert asked == []  # kept and final: Read the Docs is not asked
            assert (final.fetched_at, final.builds, final.notifications) == (
                READ_AT,
                (CANCELLED,),
                ("build:user:cancelled",),
            )
            assert _evidence(kept_here, SHA, BUILD_URL) == (final, [])
            outage, asked = _evidence(migrated, SHA_B, BUILDING.url)
            assert asked  # not final: asked, and it fails
            assert (outage.builds, outage.unverified_since, outage.failure) == (
                (BUILDING,),
                FAILING_SINCE,
                FAILURE,
            )  # the last good read stands, failing since the run's first failure, its words
            assert _evidence(kept_here, SHA_B, BUILDING.url) == (outage, asked)
