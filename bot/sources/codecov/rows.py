"""How Codecov's record of the head becomes the row of a Codecov signal GitHub shows pending
(pure; the core calls CodecovLookup.row)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.core.evidence import Judge, Since
from bot.core.model import Reconciliation, Row, Signal, State
from bot.sources.codecov.rules import LABEL, NAME, CommitRecord
from bot.sources.rows import aged, as_last_read, clock, unverified_row

NOT_FOUND = 404


@dataclass(frozen=True, slots=True)
class CodecovLookup:
    """What Codecov answered about one repository's exact commit (the last good record)."""

    project: str  # owner/name as Codecov names it
    record: CommitRecord | None
    read_at: datetime | None
    failure: str | None = None
    failing_since: datetime | None = None
    status: int | None = None
    has_token: bool = False
    page: str | None = None  # Codecov's page for the commit, when its site is known

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        """The row of a Codecov status or check run of pull request `number`."""
        if self.record is None:
            return unverified_row(
                signal, since=since, judge=judge, provider=NAME, label=LABEL,
                project=self.project, failure=self._why(), failing_since=self.failing_since,
                fetched_at=self.read_at,
            )  # fmt: skip
        state, divergent, finding = _judged(self.record, signal, since, judge)
        finding += as_last_read(
            LABEL, failure=self.failure, failing_since=self.failing_since,
            read_at=self.read_at, judge=judge,
        )  # fmt: skip
        rec = Reconciliation(
            provider=NAME,
            project=self.project,
            build_id=None,
            build_state=self.record.state,
            success=None,
            builds_for_commit=self.record.upload_count,
            divergent=divergent,
            finding=finding,
            build_url=self.page,
            fetched_at=self.read_at,
            link_label="Codecov commit",
        )
        return Row(signal, state, since.at, since.source, rec, None)

    def note(self, *, number: int, judge: Judge) -> str:
        """Codecov gives no note about a head."""
        return ""

    def _why(self) -> str:
        failure = self.failure or "no answer"
        if self.status == NOT_FOUND and not self.has_token:
            return (
                "it shows no record of this commit without a token: no upload reached it, or "
                "the repository is private (set codecov.token)"
            )
        if self.status == NOT_FOUND:
            return "it has no record of this commit: no upload has reached it"
        return failure


def _uploads(record: CommitRecord) -> str:
    count = record.upload_count
    return f"{count} upload" if count == 1 else f"{count} uploads"


def _judged(
    record: CommitRecord, signal: Signal, since: Since, judge: Judge
) -> tuple[State, bool, str]:
    """The row's state, whether it diverges from GitHub, and what Codecov's record says."""
    if record.state == "complete":
        at = record.processed_at
        when = "" if at is None else f" at {clock(at)}"
        said = (
            f"Codecov processed this commit{when} ({_uploads(record)}); GitHub still shows pending."
        )
        return State.STALE, True, said
    if record.state == "pending":
        if record.upload_count == 0:
            said = "Codecov has received no upload for this commit yet."
        else:
            last = f", the last at {clock(record.last_upload)}" if record.last_upload else ""
            said = f"Codecov has not finished this commit: {_received(record)}{last}."
        return aged(signal, since, judge), False, said
    if record.state == "error":
        said = (
            f'Codecov reports its processing of this commit as "error" ({_uploads(record)}); '
            "GitHub still shows pending."
        )
        return State.STALE, True, said
    if record.state == "skipped":
        said = "Codecov skipped this commit; GitHub still shows pending."
        return State.SKIPPED, True, said
    said = f'Codecov reports this commit with state "{record.state}", which this bot does not map.'
    return aged(signal, since, judge), False, said


def _received(record: CommitRecord) -> str:
    return f"{_uploads(record)} received"
