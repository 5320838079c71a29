"""The bot's state in SQLite (a file, the default) or PostgreSQL (`state.url`), one schema.

`Store` is the writable state: the tables' methods, each module one use (comments.py,
kept.py, required.py, triage.py, deliveries.py), over one `Database` (db.py: engines,
migrations, transactions), and the retention `prune` applies. It implements every port of
`bot.state.ports` (mypy checks it below); the read-only state (`bot.state.readonly`) is the
same class on a read-only connection, recording nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from bot.state import schema as t
from bot.state.comments import Comments
from bot.state.db import (
    HEAD,
    RECORDS_BATCH,
    SCHEMA_VERSION,
    describe,
    from_text,
    is_url,
    pg_engine,
    sqlite_engine,
    to_text,
)
from bot.state.deliveries import Deliveries
from bot.state.ports import REQUIRED_TTL, StoreError
from bot.state.reports import KeptReports
from bot.state.required import Required
from bot.state.triage import Triage

if TYPE_CHECKING:
    from bot.state.ports import ServiceState

__all__ = [
    "HEAD", "RECORDS_BATCH", "REQUIRED_TTL", "RETENTION", "SCHEMA_VERSION", "Store", "StoreError",
    "describe", "from_text", "is_url", "pg_engine", "sqlite_engine", "to_text",
]  # fmt: skip

# What `prune` keeps (issue 17): webhook deliveries (ids and body digests) a day, the write
# audit 30 days (the write budget looks back an hour), triage rows and first sightings of
# pull requests no cycle has seen for 7 days (closed, or their repository unconfigured),
# every second source's reads last read (or last failing) 30 days ago; and (issue 16) the
# merge bases and check-run annotations of heads no triage row has (no open pull request's
# head: the cycle drops closed pull requests' rows) read over an hour ago, with the merge-base
# contexts no kept merge base names any more; (issue 31) the kept reports of pull requests no
# triage row has.
RETENTION = {
    "deliveries": timedelta(days=1),
    "audit": timedelta(days=30),
    "triage": timedelta(days=7),
    "first_seen": timedelta(days=7),
    "source_reads": timedelta(days=30),
    "merge_bases": timedelta(hours=1),
    "base_contexts": timedelta(hours=1),
    "run_annotations": timedelta(hours=1),
    "history_reads": timedelta(hours=1),  # a base branch's row: a day (read again hourly)
}


class Store(Comments, Required, Triage, Deliveries, KeptReports):
    """The bot's state; every write is one transaction."""

    def prune(self, *, now: datetime) -> dict[str, int]:
        """Drop what is older than RETENTION; how many rows went, by table."""
        cut = {table: to_text(now - age) for table, age in RETENTION.items()}
        statements = {**_expired_records(cut), **_expired_reads(cut, now=now)}
        with self._write() as conn:
            return {table: conn.execute(sql).rowcount for table, sql in statements.items()}


def _expired_records(cut: dict[str, str]) -> dict[str, Any]:
    """prune's deletes of deliveries, the audit, triage rows, first sightings and (issue 31)
    the kept reports of pull requests no triage row has (closed, or their repository
    unconfigured: a pass drops its own closed ones itself), by table."""
    tr, fs, kr = t.triage.c, t.first_seen.c, t.kept_reports.c
    current_head = (
        select(tr.number)
        .where(tr.repo == fs.repo, tr.number == fs.number, tr.head_sha == fs.head_sha)
        .exists()
    )
    return {
        "deliveries": delete(t.deliveries).where(t.deliveries.c.received_at < cut["deliveries"]),
        "audit": delete(t.audit).where(t.audit.c.at < cut["audit"]),
        "triage": delete(t.triage).where(tr.updated_at < cut["triage"]),
        "first_seen": delete(t.first_seen).where(fs.seen_at < cut["first_seen"], ~current_head),
        "kept_reports": delete(t.kept_reports).where(
            ~select(tr.number).where(tr.repo == kr.repo, tr.number == kr.number).exists()
        ),
    }


def _expired_reads(cut: dict[str, str], *, now: datetime) -> dict[str, Any]:
    """prune's deletes of the kept reads (sources', merge bases', annotations', history's)."""
    tr, sr = t.triage.c, t.source_reads.c
    source_read = func.coalesce(sr.read_at, sr.failing_since, "")
    mb, bc, ra = t.merge_bases.c, t.base_contexts.c, t.run_annotations.c
    hr = t.history_reads.c

    def open_head(table: Any) -> Any:  # a triage row (an open pull request) has this head
        return select(tr.number).where(tr.repo == table.repo, tr.head_sha == table.head_sha)

    named = select(mb.head_sha).where(mb.repo == bc.repo, mb.merge_base == bc.commit_sha)
    return {
        "source_reads": delete(t.source_reads).where(
            source_read < cut["source_reads"],
            func.coalesce(sr.failing_since, "") < cut["source_reads"],
        ),
        "merge_bases": delete(t.merge_bases).where(
            mb.read_at < cut["merge_bases"], ~open_head(mb).exists()
        ),
        "base_contexts": delete(t.base_contexts).where(
            bc.read_at < cut["base_contexts"], ~named.exists()
        ),
        "run_annotations": delete(t.run_annotations).where(
            ra.read_at < cut["run_annotations"], ~open_head(ra).exists()
        ),
        "history_reads": delete(t.history_reads).where(
            hr.read_at < cut["history_reads"],
            ~open_head(hr).exists(),
            (hr.head_sha != "") | (hr.read_at < to_text(now - timedelta(days=1))),
        ),
    }


if TYPE_CHECKING:  # mypy: the writable state implements every port, as each use types it
    _: type[ServiceState] = Store
