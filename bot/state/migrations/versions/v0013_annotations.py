"""13: the failure-level annotations of failing check runs, kept per run id (issue 16).

A completed check run's annotations do not change: each is asked once and kept here; the head
it belongs to is kept with it, so rows of heads no open pull request has are pruned.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """The run_annotations table."""
    op.create_table(
        "run_annotations",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("run_id", ID, primary_key=True),
        sa.Column("head_sha", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("read_at", sa.Text, nullable=False),
    )
