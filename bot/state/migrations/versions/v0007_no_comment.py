"""7: pull requests whose comments were listed and held none of the bot's own.

A comment of ours can appear there only through our own write, so they are not listed
again each cycle while their create waits for the write budget.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The no_comment table."""
    op.create_table(
        "no_comment",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("looked_at", sa.Text, nullable=False),
    )
