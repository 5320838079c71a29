"""2: the comment's GraphQL node id, so edits can be re-read in batches."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """comments.node_id."""
    op.add_column("comments", sa.Column("node_id", sa.Text, nullable=False, server_default=""))
