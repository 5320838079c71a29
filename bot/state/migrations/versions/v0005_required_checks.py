"""5: whether a check name is required on a base branch, as GitHub said (cached, expiring)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The required_checks table."""
    op.create_table(
        "required_checks",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("base", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("required", sa.Integer),  # NULL: GitHub did not say
        sa.Column("learned_at", sa.Text, nullable=False),
        sa.CheckConstraint("required IN (0, 1)", name="required_flag"),
    )
