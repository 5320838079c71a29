"""19: a kept merge base names the base branch's commit it was asked with.

A head's merge base is a fact of two commits: the branch moves (a merge commit that takes in
part of the head, a force push), and its new tip may have another merge base with the same
head. merge_bases.tip is the branch's commit GitHub's compare was asked with; NULL in the rows
kept before this revision (not known: each is asked again once it is older than the recheck
bound, `[policy] merge_base_recheck_minutes`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """merge_bases.tip."""
    op.add_column("merge_bases", sa.Column("tip", sa.Text))
