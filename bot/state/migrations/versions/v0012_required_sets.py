"""12: what a base branch requires (branch protection and rulesets), as read (issue 15).

Per repository and base branch: the required set changes rarely; it is read again after an
hour, or sooner when a `branch_protection_rule` or `repository_ruleset` webhook drops it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The required_sets table."""
    op.create_table(
        "required_sets",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("base", sa.Text, primary_key=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("read_at", sa.Text, nullable=False),
    )
