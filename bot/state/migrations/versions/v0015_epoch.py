"""15: the state's identity, its epoch (issue 24).

Lease generations are ordered only within the state that issued them: a new database (lost,
recreated, another deployment) starts them at 1 again. Every state gets a random epoch when it
is created (or migrated to this version); the bot writes it in every comment's stamp beside
the generation, and a stamp of another epoch is never "newer" than the current lease.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The state_identity table and its one row."""
    table = op.create_table(
        "state_identity",
        sa.Column("epoch", sa.Text, primary_key=True),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    op.bulk_insert(table, [{"epoch": secrets.token_hex(8), "created_at": now}])
