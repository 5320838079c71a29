"""The one schema of the state, for SQLite and PostgreSQL alike (SQLAlchemy Core).

Times are fixed-width ISO-8601 UTC text (they sort as time does, in both databases); the
migrations that build this schema are in `migrations/versions` (Alembic), one per change.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
)

# GitHub's ids outgrow 32 bits: BIGINT on PostgreSQL; SQLite's INTEGER is 64-bit already (and
# only an INTEGER PRIMARY KEY is its rowid, which the audit's AUTOINCREMENT needs).
ID = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

comments = Table(
    "comments",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("comment_id", ID, nullable=False),
    Column("body_hash", Text, nullable=False),
    Column("facts_key", Text, nullable=False),
    Column("observed_at", Text, nullable=False),
    Column("head_sha", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("node_id", Text, nullable=False, server_default=""),
    Column("checked_at", Text),  # last re-read that found it as written (NULL: not since)
)

audit = Table(
    "audit",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("at", Text, nullable=False),
    Column("repo", Text, nullable=False),
    Column("number", Integer, nullable=False),
    Column("comment_id", ID, nullable=False),
    Column("action", Text, nullable=False),
    CheckConstraint("action IN ('created', 'edited', 'adopted')", name="audit_action"),
    Index("audit_at", "at"),
    sqlite_autoincrement=True,
)

facts = Table(
    "facts",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("facts_key", Text, nullable=False),
    Column("observed_at", Text, nullable=False),
)

first_seen = Table(
    "first_seen",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("head_sha", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("seen_at", Text, nullable=False),
)

triage = Table(
    "triage",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("title", Text, nullable=False),
    Column("author", Text),
    Column("draft", Integer, nullable=False),
    Column("head_sha", Text, nullable=False),
    Column("verdict", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("details", Text, nullable=False),
    Column("observed_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
)

# Every second source's (issue 25; Read the Docs' too since issue 32): its last good record of
# one commit or build by its own key, and a failing run (since when, what failed)
source_reads = Table(
    "source_reads",
    metadata,
    Column("source", Text, primary_key=True),
    Column("record_key", Text, primary_key=True),
    Column("payload", Text),
    Column("read_at", Text),
    Column("failing_since", Text),
    Column("failure", Text),
)

required_checks = Table(
    "required_checks",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("base", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("required", Integer),  # NULL: GitHub did not say
    Column("learned_at", Text, nullable=False),
    CheckConstraint("required IN (0, 1)", name="required_flag"),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("delivery_id", Text, primary_key=True),
    Column("event", Text, nullable=False),
    Column("received_at", Text, nullable=False),
    Index("deliveries_received_at", "received_at"),
)

no_comment = Table(
    "no_comment",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("looked_at", Text, nullable=False),
)

# what a base branch requires (branch protection and rulesets), as read (JSON of its contexts)
required_sets = Table(
    "required_sets",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("base", Text, primary_key=True),
    Column("payload", Text, nullable=False),
    Column("read_at", Text, nullable=False),
)

repo_reads = Table(
    "repo_reads",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("failing_since", Text, nullable=False),
    Column("failure", Text, nullable=False),
)

# the merge base of a head and a base branch as GitHub's compare gave it, with the branch's
# commit it was asked with (`tip`; NULL: not known, kept before 19), and a merge base's final
# contexts
merge_bases = Table(
    "merge_bases",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("base", Text, primary_key=True),
    Column("head_sha", Text, primary_key=True),
    Column("merge_base", Text, nullable=False),
    Column("read_at", Text, nullable=False),
    Column("tip", Text),
)

base_contexts = Table(
    "base_contexts",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("commit_sha", Text, primary_key=True),
    Column("payload", Text, nullable=False),  # opaque JSON (bot.core.base.merge_base_payload)
    Column("read_at", Text, nullable=False),
)

# a failing check run's failure-level annotations (a completed run's never change), by run id;
# the head is kept to drop the rows of heads no open pull request has any more
run_annotations = Table(
    "run_annotations",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("run_id", ID, primary_key=True),
    Column("head_sha", Text, nullable=False),
    Column("payload", Text, nullable=False),  # JSON (bot.core.annotations.annotations_payload)
    Column("read_at", Text, nullable=False),
)

# what a failure's history was read from (issue 27): earlier attempts by signal and run,
# base branches' last commits by branch; the head (or "") prunes rows no open head has
history_reads = Table(
    "history_reads",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("head_sha", Text, nullable=False),
    Column("payload", Text, nullable=False),  # JSON (bot.core.history)
    Column("read_at", Text, nullable=False),
)

# each open pull request's last report and what it was built from (issue 31): a fresh process
# (`once`, a restart) reuses what did not change; a payload of another `version` (another bot,
# another shape) is never read
kept_reports = Table(
    "kept_reports",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("version", Text, nullable=False),
    Column("head_sha", Text, nullable=False),
    Column("payload", LargeBinary, nullable=False),  # opaque (bot.cycle.digests)
    Column("judged_at", Text, nullable=False),
)

# -- the state's identity: its epoch, written in every stamp beside the lease generation -------

state_identity = Table(
    "state_identity",
    metadata,
    Column("epoch", Text, primary_key=True),  # random, made when the state was created
    Column("created_at", Text, nullable=False),
)

# -- several replicas on one (PostgreSQL) state ----------------------------------------------

leases = Table(
    "leases",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("holder", Text, nullable=False),
    Column("generation", BigInteger, nullable=False),  # one more at every take: the fence
    Column("expires_at", Text, nullable=False),
    Column("taken_at", Text, nullable=False),
)

replicas = Table(
    "replicas",
    metadata,
    Column("holder", Text, primary_key=True),
    Column("seen_at", Text, nullable=False),  # the heartbeat: live while recent
)

marks = Table(
    "marks",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("repo", Text, nullable=False),
    Column("number", Integer),
    Column("sha", Text),
    Column("closed", Integer, nullable=False, server_default="0"),
    Column("head_known", Integer, nullable=False, server_default="0"),
    Column("marked_at", Text, nullable=False),
    Index("marks_repo", "repo"),
    sqlite_autoincrement=True,
)
