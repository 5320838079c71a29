"""17: each open pull request's last report and what it was built from (issue 31).

A fresh process (`once`, a restart, the Action with its cache) reuses the report of a pull
request whose inputs did not change, as a long-running `run` keeps it in memory. One row per
pull request: an opaque payload of one `version` (the bot's version and the payload's shape:
a row of another version is never read), the head it was judged on, and when.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The kept_reports table."""
    op.create_table(
        "kept_reports",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("head_sha", sa.Text, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("judged_at", sa.Text, nullable=False),
    )
