"""18: Read the Docs' reads join every other source's in source_reads (issue 32).

Each rtd_reads row (site, project, commit) becomes the source_reads row of the source
"readthedocs" under the key a comment's carried line already names it by: the compact JSON
array of site, project and commit (`["org","proj","<sha>"]`). Its payload, read time and
failing run (since when, and what failed) are copied as they are; then rtd_reads goes. The
rows are copied a batch at a time, in key order, so a large table is never held at once.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

SOURCE = "readthedocs"  # Read the Docs' source name
BATCH = 500
_KEPT = ("payload", "read_at", "failing_since", "failure")

rtd_reads = sa.table(
    "rtd_reads",
    *(sa.column(name, sa.Text) for name in ("host", "project", "commit_sha", *_KEPT)),
)
source_reads = sa.table(
    "source_reads",
    *(sa.column(name, sa.Text) for name in ("source", "record_key", *_KEPT)),
)


def record_key(host: str, project: str, commit: str) -> str:
    """The key of a Read the Docs read: compact JSON of site, project and commit."""
    return json.dumps([host, project, commit], separators=(",", ":"))


def upgrade() -> None:
    """Copy every rtd_reads row into source_reads, then drop rtd_reads."""
    conn = op.get_bind()
    # no bot wrote Read the Docs' reads here before this revision; none may shadow a copied one
    conn.execute(sa.delete(source_reads).where(source_reads.c.source == SOURCE))
    r = rtd_reads.c
    order = (r.host, r.project, r.commit_sha)
    after: tuple[Any, ...] | None = None
    while True:
        query = sa.select(rtd_reads).order_by(*order).limit(BATCH)
        if after is not None:
            query = query.where(sa.tuple_(*order) > sa.tuple_(*after))
        rows = conn.execute(query).all()
        if not rows:
            break
        copies = [
            {
                "source": SOURCE,
                "record_key": record_key(row.host, row.project, row.commit_sha),
                **{name: getattr(row, name) for name in _KEPT},
            }
            for row in rows
        ]
        conn.execute(sa.insert(source_reads), copies)
        after = (rows[-1].host, rows[-1].project, rows[-1].commit_sha)
    op.drop_table("rtd_reads")
