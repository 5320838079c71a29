"""The triage view's rows the cycle keeps, and the repositories whose last read failed (the
ports `TriageState` and `TriageRows`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, select, update

from bot.state import schema as t
from bot.state.db import Database, batches, from_text, reads, records, to_text
from bot.state.ports import StoredTriage, TriageValues


class Triage(Database):
    """One row per open pull request, as last reconciled; repositories that failed to read."""

    @records(None)
    def put_triage(
        self,
        repo: str,
        number: int,
        *,
        title: str,
        author: str | None,
        draft: bool,
        head_sha: str,
        verdict: str,
        url: str,
        details: str,
        observed_at: datetime,
        now: datetime,
    ) -> None:
        """Keep one pull request's last reconciled report for the triage view."""
        values = (title, author, draft, head_sha, verdict, url, details, observed_at)
        self.put_triage_many(repo, [(number, values)], now=now)

    @records(None)
    def put_triage_many(
        self, repo: str, rows: Sequence[tuple[int, TriageValues]], *, now: datetime
    ) -> None:
        """`put_triage` of many pull requests (number, values), in one transaction."""
        if not rows:
            return
        upsert = self.insert(t.triage)
        names = ("title", "author", "draft", "head_sha", "verdict", "url", "details",
                 "observed_at", "updated_at")  # fmt: skip
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"],
            set_={name: getattr(upsert.excluded, name) for name in names},
        )
        at = to_text(now)
        params = [
            {"repo": repo, "number": number, "title": title, "author": author,
             "draft": int(draft), "head_sha": head_sha, "verdict": verdict, "url": url,
             "details": details, "observed_at": to_text(observed_at), "updated_at": at}
            for number, (title, author, draft, head_sha, verdict, url, details, observed_at)
            in rows
        ]  # fmt: skip
        with self._write() as conn:
            conn.execute(upsert, params)

    @records(None)
    def touch_triage(self, repo: str, numbers: Iterable[int], *, now: datetime) -> None:
        """These rows were read again and found as they are: only their read time is new."""
        wanted, tr, at = batches(numbers), t.triage.c, to_text(now)
        if not wanted:
            return
        with self._write() as conn:
            for chunk in wanted:
                conn.execute(
                    update(t.triage)
                    .where(tr.repo == repo, tr.number.in_(chunk))
                    .values(updated_at=at)
                )

    @records(0)
    def prune_triage(self, repo: str, *, keep: Iterable[int]) -> int:
        """Drop the repository's triage rows except `keep` (pull requests still open)."""
        kept, tr = set(keep), t.triage.c
        with self._write() as conn:
            numbers = conn.execute(select(tr.number).where(tr.repo == repo)).scalars().all()
            gone = [n for n in numbers if n not in kept]
            if gone:
                conn.execute(delete(t.triage).where(tr.repo == repo, tr.number.in_(gone)))
        return len(gone)

    @reads("triage", absent=list)
    def triage_rows(self) -> list[StoredTriage]:
        """Every triage row, with the bot's comment id where one is recorded."""
        with self._read() as conn:
            return _triage_rows(conn)

    # -- repositories whose last read failed -------------------------------------------

    @records(None)
    def repo_read_failed(self, repo: str, *, now: datetime, failure: str) -> None:
        """Note that `repo` could not be read: the first failure's time stands, the text is new."""
        upsert = self.insert(t.repo_reads).values(
            repo=repo, failing_since=to_text(now), failure=failure
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo"], set_={"failure": upsert.excluded.failure}
        )
        with self._write() as conn:
            conn.execute(upsert)

    @records(None)
    def repo_read_ok(self, repo: str) -> None:
        """`repo` was read completely: it no longer fails."""
        with self._write() as conn:
            conn.execute(delete(t.repo_reads).where(t.repo_reads.c.repo == repo))

    @reads("repo_reads", absent=dict)
    def unread_repos(self) -> dict[str, tuple[datetime, str]]:
        """Repositories whose last read failed: since when, and what failed."""
        r = t.repo_reads.c
        with self._read() as conn:
            rows = conn.execute(select(r.repo, r.failing_since, r.failure)).all()
        return {row.repo: (from_text(row.failing_since), row.failure) for row in rows}


def _triage_rows(conn: Connection) -> list[StoredTriage]:
    """Every triage row on `conn`, with the bot's comment id where one is recorded."""
    tr, c = t.triage.c, t.comments.c
    query = select(t.triage, c.comment_id).select_from(
        t.triage.outerjoin(t.comments, (c.repo == tr.repo) & (c.number == tr.number))
    )
    return [
        StoredTriage(
            repo=r.repo,
            number=r.number,
            title=r.title,
            author=r.author,
            draft=bool(r.draft),
            head_sha=r.head_sha,
            verdict=r.verdict,
            url=r.url,
            details=r.details,
            observed_at=from_text(r.observed_at),
            updated_at=from_text(r.updated_at),
            comment_id=r.comment_id,
        )
        for r in conn.execute(query).all()
    ]
