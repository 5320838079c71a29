"""16: what a failure's history was read from (issue 27), kept by key.

`attempts:<signal key>@<run>`: a failing check's earlier attempts on its head (kept once every
run read was final); `branch:<name>`: a base branch's last commits and their checks (read
again at most hourly). The head is kept with an attempts row, so rows of heads no open pull
request has are pruned; a branch row carries no head ("").
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The history_reads table."""
    op.create_table(
        "history_reads",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("head_sha", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("read_at", sa.Text, nullable=False),
    )
