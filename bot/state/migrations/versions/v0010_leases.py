"""10: several replicas on one state: a lease per repository, replicas' heartbeats, webhook marks.

A lease row says which replica works a repository until when, and its generation (a fencing
token, one more at every take); a replica's heartbeat says it is alive (the leases balance
over the live ones); a webhook delivery any replica receives leaves its marks here for the
repository's lease holder.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The leases, replicas and marks tables."""
    op.create_table(
        "leases",
        sa.Column("repo", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("generation", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.Text, nullable=False),
        sa.Column("taken_at", sa.Text, nullable=False),
    )
    op.create_table(
        "replicas",
        sa.Column("holder", sa.Text, primary_key=True),
        sa.Column("seen_at", sa.Text, nullable=False),
    )
    op.create_table(
        "marks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("repo", sa.Text, nullable=False),
        sa.Column("number", sa.Integer),
        sa.Column("sha", sa.Text),
        sa.Column("closed", sa.Integer, nullable=False, server_default="0"),
        sa.Column("head_known", sa.Integer, nullable=False, server_default="0"),
        sa.Column("marked_at", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("marks_repo", "marks", ["repo"])
