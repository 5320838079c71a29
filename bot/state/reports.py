"""Each open pull request's last report and what it was built from, kept across processes (the
port `ReportKeeper`): opaque payloads, each of one version (what one holds: bot.cycle.digests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import delete, select

from bot.state import schema as t
from bot.state.db import Database, batches, reads, records, to_text


class KeptReports(Database):
    """One row per open pull request: its payload, of one version, and the head it was judged on."""

    @property
    def keeps_reports(self) -> bool:
        """Whether what `keep_reports` records outlives this process (not a state of this run's
        memory only, nor a read-only one)."""
        return self.recording and self.where != ":memory:"

    @reads("kept_reports", absent=dict)
    def kept_reports(self, repo: str, *, version: str) -> dict[int, bytes]:
        """The payloads kept for the pull requests of `repo` in `version` (others never read)."""
        k = t.kept_reports.c
        query = select(k.number, k.payload).where(k.repo == repo, k.version == version)
        with self._read() as conn:
            return {int(r.number): bytes(r.payload) for r in conn.execute(query)}

    @records(None)
    def keep_reports(
        self, repo: str, payloads: Mapping[int, tuple[str, bytes]], *, version: str, now: datetime
    ) -> None:
        """Keep these pull requests' payloads (number -> head commit, payload) in `version`,
        judged at `now`, in place of what was kept for them."""
        if not payloads:
            return
        at = to_text(now)
        rows = [
            {"repo": repo, "number": number, "version": version, "head_sha": head,
             "payload": payload, "judged_at": at}
            for number, (head, payload) in payloads.items()
        ]  # fmt: skip
        upsert = self.insert(t.kept_reports)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"],
            set_={
                name: getattr(upsert.excluded, name)
                for name in ("version", "head_sha", "payload", "judged_at")
            },
        )
        with self._write() as conn:
            conn.execute(upsert, rows)

    @records(0)
    def forget_reports(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop what is kept for the pull requests of `repo` except `keep` (still open)."""
        kept, k = set(keep), t.kept_reports.c
        with self._read() as conn:  # most passes: nothing to drop, no write transaction
            numbers = conn.execute(select(k.number).where(k.repo == repo)).scalars().all()
        gone = [n for n in numbers if n not in kept]
        if gone:
            with self._write() as conn:
                for batch in batches(gone):
                    conn.execute(delete(t.kept_reports).where(k.repo == repo, k.number.in_(batch)))
        return len(gone)
