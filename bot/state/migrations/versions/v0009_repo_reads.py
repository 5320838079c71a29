"""9: repositories whose last read failed (renamed, access removed, an error).

Since when and why, so the triage view marks their rows as last read instead of "as of now".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The repo_reads table."""
    op.create_table(
        "repo_reads",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("failing_since", sa.Text, nullable=False),
        sa.Column("failure", sa.Text, nullable=False),
    )
