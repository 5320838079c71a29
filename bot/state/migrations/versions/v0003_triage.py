"""3: the triage view: each open pull request's last reconciled report (issue 10)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The triage table."""
    op.create_table(
        "triage",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("author", sa.Text),
        sa.Column("draft", sa.Integer, nullable=False),
        sa.Column("head_sha", sa.Text, nullable=False),
        sa.Column("verdict", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("details", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        if_not_exists=True,
    )
