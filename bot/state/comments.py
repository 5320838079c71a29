"""The cycle's record of its comments: comments, listings that found none, facts, first
sightings and the write audit (the ports `CommentState`, `FactsState`, `PacingState`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Final

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy import insert as sa_insert

from bot.state import schema as t
from bot.state.db import Database, from_text, reads, records, to_text
from bot.state.ports import Action, AuditRow, PullRecord, StoredComment

_WRITE_ACTIONS = ("created", "edited")
_ESCAPED: Final = re.compile(r"\\[0\\]")  # a NUL or a backslash, as `_key_out` escapes


class Comments(Database):
    """The bot's comments and what it observed of each pull request."""

    @reads("comments")
    def get_comment(self, repo: str, number: int) -> StoredComment | None:
        """The bot's comment on this pull request, if one is recorded."""
        c = t.comments.c
        columns = comment_columns(checked=self.current)
        query = select(*columns).where(c.repo == repo, c.number == number)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else stored_comment(repo, number, row)

    @records(None)
    def mark_checked(self, comments: Iterable[tuple[str, int]], *, now: datetime) -> None:
        """These (repo, number) comments were re-read and found as the bot wrote them."""
        c, at = t.comments.c, to_text(now)
        rows = [{"r": repo, "n": number, "at": at} for repo, number in comments]
        if not rows:
            return
        query = update(t.comments).where(c.repo == bindparam("r"), c.number == bindparam("n"))
        with self._write() as conn:
            conn.execute(query.values(checked_at=bindparam("at")), rows)

    @records(None)
    def record_write(
        self,
        repo: str,
        number: int,
        *,
        comment_id: int,
        body_hash: str,
        facts_key: str,
        observed_at: datetime,
        head_sha: str,
        action: Action,
        now: datetime,
        node_id: str = "",
    ) -> None:
        """Upsert the pull request's comment row and append an audit row, atomically."""
        if action not in ("created", "edited", "adopted"):
            raise ValueError(f"unknown action {action!r}")
        at = to_text(now)
        values = {
            "comment_id": comment_id,
            "body_hash": body_hash,
            "facts_key": facts_key,
            "observed_at": to_text(observed_at),
            "head_sha": head_sha,
            "updated_at": at,
            "node_id": node_id,
        }
        upsert = self.insert(t.comments).values(repo=repo, number=number, **values)
        upsert = upsert.on_conflict_do_update(index_elements=["repo", "number"], set_=values)
        nc = t.no_comment.c
        with self._write() as conn:
            conn.execute(upsert)
            conn.execute(delete(t.no_comment).where(nc.repo == repo, nc.number == number))
            conn.execute(
                sa_insert(t.audit).values(
                    at=at, repo=repo, number=number, comment_id=comment_id, action=action
                )
            )

    @records(None)
    def note_no_comment(self, repo: str, number: int, *, now: datetime) -> None:
        """The pull request's comments were listed: none is the bot's own."""
        at = to_text(now)
        upsert = self.insert(t.no_comment).values(repo=repo, number=number, looked_at=at)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"], set_={"looked_at": at}
        )
        with self._write() as conn:
            conn.execute(upsert)

    @reads("no_comment", absent=bool)
    def known_without_comment(self, repo: str, number: int) -> bool:
        """Whether a listing found no comment of the bot's own (and it wrote none since)."""
        nc = t.no_comment.c
        with self._read() as conn:
            row = conn.execute(
                select(nc.number).where(nc.repo == repo, nc.number == number)
            ).first()
        return row is not None

    def pull_records(self, repo: str, numbers: Iterable[int]) -> dict[int, PullRecord]:
        """`get_comment`, `known_without_comment` and `get_facts` of many pull requests: three
        queries per RECORDS_BATCH numbers instead of three per pull request (a table the state
        lacks reads as empty); every number asked has its record."""
        wanted, c, nc, f = sorted(set(numbers)), t.comments.c, t.no_comment.c, t.facts.c
        columns = comment_columns(checked=self.current)
        comments = {
            r.number: stored_comment(repo, r.number, r)
            for r in self._rows(
                "comments",
                wanted,
                lambda batch: select(c.number, *columns).where(c.repo == repo, c.number.in_(batch)),
            )
        }
        without = {
            r.number
            for r in self._rows(
                "no_comment",
                wanted,
                lambda batch: select(nc.number).where(nc.repo == repo, nc.number.in_(batch)),
            )
        }
        facts = {
            r.number: (r.facts_key, from_text(r.observed_at))
            for r in self._rows(
                "facts",
                wanted,
                lambda batch: select(f.number, f.facts_key, f.observed_at).where(
                    f.repo == repo, f.number.in_(batch)
                ),
            )
        }
        return {n: PullRecord(comments.get(n), n in without, facts.get(n)) for n in wanted}

    @records(None)
    def forget_comment(self, repo: str, number: int) -> None:
        """Drop the recorded comment (it was deleted on GitHub); the audit is kept."""
        c = t.comments.c
        with self._write() as conn:
            conn.execute(delete(t.comments).where(c.repo == repo, c.number == number))

    # -- facts and first-seen times ------------------------------------------------------

    @reads("facts")
    def get_facts(self, repo: str, number: int) -> tuple[str, datetime] | None:
        """The last observed facts key and when those facts were first observed."""
        f = t.facts.c
        with self._read() as conn:
            row = conn.execute(
                select(f.facts_key, f.observed_at).where(f.repo == repo, f.number == number)
            ).first()
        return None if row is None else (row.facts_key, from_text(row.observed_at))

    @records(None)
    def set_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record an observation; `observed_at` stays that of the first sighting of these facts."""
        self._put_facts(repo, number, facts_key, observed_at, keep_same=True)

    @records(None)
    def set_facts_many(self, repo: str, facts: Sequence[tuple[int, str, datetime]]) -> None:
        """`set_facts` of many pull requests (number, facts key, observed at), in one
        transaction: all of them recorded, or none."""
        if not facts:
            return
        upsert = self.insert(t.facts)
        excluded = upsert.excluded
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"],
            set_={"facts_key": excluded.facts_key, "observed_at": excluded.observed_at},
            where=t.facts.c.facts_key != excluded.facts_key,
        )
        rows = [
            {"repo": repo, "number": number, "facts_key": key, "observed_at": to_text(at)}
            for number, key, at in facts
        ]
        with self._write() as conn:
            conn.execute(upsert, rows)

    @records(None)
    def adopt_facts(self, repo: str, number: int, *, facts_key: str, observed_at: datetime) -> None:
        """Record these facts as first observed at `observed_at` (taken from an adopted comment)."""
        self._put_facts(repo, number, facts_key, observed_at, keep_same=False)

    def _put_facts(
        self, repo: str, number: int, key: str, observed_at: datetime, *, keep_same: bool
    ) -> None:
        values = {"facts_key": key, "observed_at": to_text(observed_at)}
        upsert = self.insert(t.facts).values(repo=repo, number=number, **values)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "number"],
            set_=values,
            where=(t.facts.c.facts_key != upsert.excluded.facts_key) if keep_same else None,
        )
        with self._write() as conn:
            conn.execute(upsert)

    @reads("first_seen", absent=dict)
    def first_seen(self, repo: str, number: int, head_sha: str) -> dict[str, datetime]:
        """When each signal key was first seen on this head commit."""
        s = t.first_seen.c
        query = select(s.key, s.seen_at).where(
            s.repo == repo, s.number == number, s.head_sha == head_sha
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {self._key_in(row.key): from_text(row.seen_at) for row in rows}

    def _key_out(self, key: str) -> str:
        """A signal key as stored: PostgreSQL's text holds no NUL, so it is escaped there."""
        if self.dialect != "postgresql":
            return key
        return key.replace("\\", "\\\\").replace("\0", "\\0")

    def _key_in(self, stored: str) -> str:
        """A stored signal key as the bot knows it (the inverse of `_key_out`)."""
        if self.dialect != "postgresql":
            return stored
        return _ESCAPED.sub(lambda m: "\0" if m[0] == "\\0" else "\\", stored)

    @records(None)
    def mark_seen(
        self, repo: str, number: int, head_sha: str, keys: Iterable[str], *, now: datetime
    ) -> None:
        """Record `now` for keys not yet seen on this head; forget the PR's other heads."""
        at, s = to_text(now), t.first_seen.c
        rows = [
            {
                "repo": repo,
                "number": number,
                "head_sha": head_sha,
                "key": self._key_out(k),
                "seen_at": at,
            }
            for k in dict.fromkeys(keys)
        ]
        with self._write() as conn:
            conn.execute(
                delete(t.first_seen).where(
                    s.repo == repo, s.number == number, s.head_sha != head_sha
                )
            )
            if rows:
                conn.execute(self.insert(t.first_seen).on_conflict_do_nothing(), rows)

    @reads("audit", absent=int)
    def writes_since(self, since: datetime) -> int:
        """How many comments were created or edited on GitHub at or after `since`."""
        a = t.audit.c
        query = select(func.count()).where(a.at >= to_text(since), a.action.in_(_WRITE_ACTIONS))
        with self._read() as conn:
            return int(conn.execute(query).scalar_one())

    @reads("audit")
    def last_write_at(self) -> datetime | None:
        """When a comment was last created or edited on GitHub, if ever."""
        a = t.audit.c
        with self._read() as conn:
            last = conn.execute(
                select(func.max(a.at)).where(a.action.in_(_WRITE_ACTIONS))
            ).scalar_one()
        return None if last is None else from_text(last)

    def audit(self, limit: int = 100) -> list[AuditRow]:
        """The newest `limit` audit rows, newest first."""
        a = t.audit.c
        query = select(a.at, a.repo, a.number, a.comment_id, a.action)
        with self._read() as conn:
            rows = conn.execute(query.order_by(a.id.desc()).limit(limit)).all()
        return [
            AuditRow(from_text(r.at), r.repo, r.number, comment_id=r.comment_id, action=r.action)
            for r in rows
        ]


def comment_columns(*, checked: bool = True) -> list[Any]:
    """The comments columns a StoredComment is made of (`checked`: with `checked_at`, which
    a state from before schema version 8 lacks)."""
    c = t.comments.c
    columns = [
        c.comment_id, c.body_hash, c.facts_key, c.observed_at, c.head_sha, c.updated_at,
        c.node_id,
    ]  # fmt: skip
    return [*columns, c.checked_at] if checked else columns


def stored_comment(repo: str, number: int, row: Any) -> StoredComment:
    """The StoredComment of a row selected with `comment_columns` (a row without
    `checked_at`: not checked since written)."""
    checked_at = row._mapping.get("checked_at")
    return StoredComment(
        repo=repo,
        number=number,
        comment_id=row.comment_id,
        body_hash=row.body_hash,
        facts_key=row.facts_key,
        observed_at=from_text(row.observed_at),
        head_sha=row.head_sha,
        updated_at=from_text(row.updated_at),
        node_id=row.node_id,
        checked_at=None if checked_at is None else from_text(checked_at),
    )
