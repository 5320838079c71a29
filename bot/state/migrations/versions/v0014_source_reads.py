"""14: one table for the reads of every second source but Read the Docs (issue 25).

A provider behind bot.sources (Codecov, Azure Pipelines, ...) keeps its last good record of
one commit or build here, by source name and its own record key, with a failing run's first
time and words: one table for all of them, not one per provider.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The source_reads table."""
    op.create_table(
        "source_reads",
        sa.Column("source", sa.Text, primary_key=True),
        sa.Column("record_key", sa.Text, primary_key=True),
        sa.Column("payload", sa.Text),
        sa.Column("read_at", sa.Text),
        sa.Column("failing_since", sa.Text),
        sa.Column("failure", sa.Text),
    )
