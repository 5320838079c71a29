"""4: Read the Docs reads keyed by host + project + commit.

The last good answer (cache and evidence that stands during an outage) and since when
reading it fails.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """rtd_final -> rtd_reads."""
    op.drop_table("rtd_final")
    op.create_table(
        "rtd_reads",
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("project", sa.Text, primary_key=True),
        sa.Column("commit_sha", sa.Text, primary_key=True),
        sa.Column("payload", sa.Text),
        sa.Column("read_at", sa.Text),
        sa.Column("failing_since", sa.Text),
        sa.Column("failure", sa.Text),
    )
