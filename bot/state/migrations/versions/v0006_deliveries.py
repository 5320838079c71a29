"""6: webhook deliveries already handled (X-GitHub-Delivery), kept for a day."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The deliveries table."""
    op.create_table(
        "deliveries",
        sa.Column("delivery_id", sa.Text, primary_key=True),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("received_at", sa.Text, nullable=False),
    )
    op.create_index("deliveries_received_at", "deliveries", ["received_at"])
