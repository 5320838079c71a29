"""8: when the comment was last re-read to see that it still exists and says what was written.

NULL: not since it was written; it is then as old as updated_at.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """comments.checked_at."""
    op.add_column("comments", sa.Column("checked_at", sa.Text))
