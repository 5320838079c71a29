"""1: comments, their audit, observed facts, first-seen times, RTD reads."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """The first schema."""
    op.create_table(
        "comments",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("comment_id", ID, nullable=False),
        sa.Column("body_hash", sa.Text, nullable=False),
        sa.Column("facts_key", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Text, nullable=False),
        sa.Column("head_sha", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_table(
        "audit",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Text, nullable=False),
        sa.Column("repo", sa.Text, nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("comment_id", ID, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.CheckConstraint("action IN ('created', 'edited', 'adopted')", name="audit_action"),
        sqlite_autoincrement=True,
    )
    op.create_index("audit_at", "audit", ["at"])
    op.create_table(
        "facts",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("facts_key", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Text, nullable=False),
    )
    op.create_table(
        "first_seen",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("head_sha", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("seen_at", sa.Text, nullable=False),
    )
    op.create_table(
        "rtd_final",
        sa.Column("project", sa.Text, primary_key=True),
        sa.Column("commit_sha", sa.Text, primary_key=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("stored_at", sa.Text, nullable=False),
    )
