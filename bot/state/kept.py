"""Answers kept so they are not asked again: every second source's reads (the last good
answer and a failing run), merge bases and their contexts, failing runs' annotations, what a
failure's history was read from (the ports `SourceReads`, `BaseKeeper`, `AnnotationKeeper`,
`HistoryKeeper`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, func, null, select

from bot.state import schema as t
from bot.state.db import Database, from_text, reads, records, to_text
from bot.state.ports import KeptBase, SourceRead


class Kept(Database):
    """Reads kept by key: each a row of payload and read time (a failing run where it fails)."""

    # -- every second source's reads (bot.sources.cache, Read the Docs' evidence) ----------

    @reads("source_reads")
    def get_source_read(self, source: str, key: str) -> SourceRead | None:
        """The last good answer of one record of a source, and since when reading it fails."""
        r = t.source_reads.c
        query = select(r.payload, r.read_at, r.failing_since, r.failure).where(
            r.source == source, r.record_key == key
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return SourceRead(
            payload=row.payload,
            read_at=None if row.read_at is None else from_text(row.read_at),
            failing_since=None if row.failing_since is None else from_text(row.failing_since),
            failure=row.failure,
        )

    @records(None)
    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Keep a good answer read at `now`; reading no longer fails."""
        values = {"payload": payload, "read_at": to_text(now)}
        upsert = self.insert(t.source_reads).values(source=source, record_key=key, **values)
        upsert = upsert.on_conflict_do_update(
            index_elements=["source", "record_key"],
            set_={**values, "failing_since": None, "failure": None},
        )
        with self._write() as conn:
            conn.execute(upsert)

    @records(None)
    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Note a failed read; the first failure of a run of them (its time, its text) is kept."""
        r = t.source_reads.c
        upsert = self.insert(t.source_reads).values(
            source=source, record_key=key, failing_since=to_text(now), failure=failure
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["source", "record_key"],
            set_={
                "failure": func.coalesce(r.failure, upsert.excluded.failure),
                "failing_since": func.coalesce(r.failing_since, upsert.excluded.failing_since),
            },
        )
        with self._write() as conn:
            conn.execute(upsert)

    # -- merge bases (issue 16) ------------------------------------------------------------

    @reads("merge_bases")
    def get_merge_base(self, repo: str, base: str, head_sha: str) -> str | None:
        """The merge base of `head_sha` and branch `base` as GitHub gave it, if it was asked."""
        m = t.merge_bases.c
        query = select(m.merge_base).where(m.repo == repo, m.base == base, m.head_sha == head_sha)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else str(row.merge_base)

    def merge_bases(
        self, repo: str, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], KeptBase]:
        """The kept merge bases of many (base branch, head) pairs, RECORDS_BATCH heads a query
        (a state older than this bot kept no tip: None)."""
        wanted, m = set(pairs), t.merge_bases.c
        tip = m.tip if self.current else null().label("tip")
        rows = self._rows("merge_bases", (head for _, head in wanted), lambda heads: select(
            m.base, m.head_sha, m.merge_base, m.read_at, tip
        ).where(m.repo == repo, m.head_sha.in_(heads)))  # fmt: skip
        return {
            (r.base, r.head_sha): KeptBase(str(r.merge_base), r.tip, from_text(r.read_at))
            for r in rows
            if (r.base, r.head_sha) in wanted
        }

    @records(None)
    def put_merge_base(
        self,
        repo: str,
        base: str,
        head_sha: str,
        merge_base: str,
        *,
        now: datetime,
        tip: str | None = None,
    ) -> None:
        """Keep the merge base GitHub gave for a head and a base branch, asked at `now` with
        the branch's commit `tip` (None: not known)."""
        values = {"merge_base": merge_base, "read_at": to_text(now), "tip": tip}
        upsert = self.insert(t.merge_bases).values(
            repo=repo, base=base, head_sha=head_sha, **values
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "base", "head_sha"], set_=values
        )
        with self._write() as conn:
            conn.execute(upsert)

    @reads("base_contexts")
    def get_base_contexts(self, repo: str, commit: str) -> str | None:
        """The kept final answer (payload) of a merge-base commit's contexts, if any."""
        b = t.base_contexts.c
        query = select(b.payload).where(b.repo == repo, b.commit_sha == commit)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else str(row.payload)

    @records(None)
    def put_base_contexts(self, repo: str, commit: str, *, payload: str, now: datetime) -> None:
        """Keep a merge-base commit's contexts once every one of them has settled."""
        values = {"payload": payload, "read_at": to_text(now)}
        upsert = self.insert(t.base_contexts).values(repo=repo, commit_sha=commit, **values)
        upsert = upsert.on_conflict_do_update(index_elements=["repo", "commit_sha"], set_=values)
        with self._write() as conn:
            conn.execute(upsert)

    # -- failing check runs' annotations (issue 16) ----------------------------------------

    def get_annotations(self, repo: str, run_ids: Iterable[int]) -> dict[int, str]:
        """The kept annotations (payload) of those of these check runs that were read."""
        a = t.run_annotations.c
        rows = self._rows("run_annotations", run_ids, lambda ids: select(a.run_id, a.payload).where(
            a.repo == repo, a.run_id.in_(ids)
        ))  # fmt: skip
        return {int(r.run_id): str(r.payload) for r in rows}

    @records(None)
    def put_annotations(
        self, repo: str, runs: Mapping[int, tuple[str, str]], *, now: datetime
    ) -> None:
        """Keep check runs' annotations: run id -> (head commit, payload)."""
        rows = [{"run_id": run, "head_sha": head, "payload": payload} for run, (head, payload)
                in runs.items()]  # fmt: skip
        self._keep_payloads(t.run_annotations, repo, rows, index=("run_id",), now=now)

    # -- what a failure's history was read from (issue 27) ---------------------------------

    def get_history(self, repo: str, keys: Iterable[str]) -> dict[str, tuple[str, datetime]]:
        """The kept payloads of those of these keys that were read, with when."""
        h = t.history_reads.c
        rows = self._rows("history_reads", keys, lambda batch: select(
            h.key, h.payload, h.read_at
        ).where(h.repo == repo, h.key.in_(batch)))  # fmt: skip
        return {str(r.key): (str(r.payload), from_text(str(r.read_at))) for r in rows}

    @records(None)
    def put_history(self, repo: str, rows: Mapping[str, tuple[str, str]], *, now: datetime) -> None:
        """Keep history reads: key -> (head commit, or "" for a branch; payload)."""
        values = [{"key": key, "head_sha": head, "payload": payload} for key, (head, payload)
                  in rows.items()]  # fmt: skip
        self._keep_payloads(t.history_reads, repo, values, index=("key",), now=now)

    def _keep_payloads(
        self,
        table: Table,
        repo: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        index: tuple[str, ...],
        now: datetime,
    ) -> None:
        """Upsert a repository's rows of payloads read at `now` (keyed by repo and `index`)."""
        if not rows:
            return
        at = to_text(now)
        upsert = self.insert(table)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", *index],
            set_={"payload": upsert.excluded.payload, "read_at": upsert.excluded.read_at},
        )
        with self._write() as conn:
            conn.execute(upsert, [{"repo": repo, **row, "read_at": at} for row in rows])
