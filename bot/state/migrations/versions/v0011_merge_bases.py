"""11: the merge base of a head and its base branch (it never changes for the pair), and what
GitHub reported on a merge-base commit once every signal there settled (issue 16)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The merge_bases and base_contexts tables."""
    op.create_table(
        "merge_bases",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("base", sa.Text, primary_key=True),
        sa.Column("head_sha", sa.Text, primary_key=True),
        sa.Column("merge_base", sa.Text, nullable=False),
        sa.Column("read_at", sa.Text, nullable=False),
    )
    op.create_table(
        "base_contexts",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("commit_sha", sa.Text, primary_key=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("read_at", sa.Text, nullable=False),
    )
