"""Webhook deliveries already handled, and the marks a delivery leaves for the replica that
works its repository (the ports `DeliveryState` and `MarkState`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete
from sqlalchemy import insert as sa_insert

from bot.state import schema as t
from bot.state.db import Database, from_text, to_text
from bot.state.ports import MarkRow


class Deliveries(Database):
    """X-GitHub-Delivery ids seen, and marks left for a repository's lease holder."""

    def note_delivery(self, delivery_id: str, event: str, *, now: datetime) -> bool:
        """Record a webhook delivery; False when it was already recorded (a repeat)."""
        insert = self.insert(t.deliveries).values(
            delivery_id=delivery_id, event=event, received_at=to_text(now)
        )
        insert = insert.on_conflict_do_nothing().returning(t.deliveries.c.delivery_id)
        with self._write() as conn:
            return conn.execute(insert).first() is not None

    def forget_deliveries(self, before: datetime) -> int:
        """Drop deliveries received before `before`; returns how many were dropped."""
        d = t.deliveries.c
        gone = delete(t.deliveries).where(d.received_at < to_text(before)).returning(d.delivery_id)
        with self._write() as conn:
            return len(conn.execute(gone).all())

    # -- webhook marks for the repository's lease holder (several replicas) --------------

    def add_marks(self, marks: Iterable[MarkRow]) -> None:
        """Leave a delivery's marks for whichever replica works their repository."""
        rows = [
            {"repo": m.repo, "number": m.number, "sha": m.sha, "closed": int(m.closed),
             "head_known": int(m.head_known), "marked_at": to_text(m.marked_at)}
            for m in marks
        ]  # fmt: skip
        if rows:
            with self._write() as conn:
                conn.execute(sa_insert(t.marks), rows)

    def take_marks(self, repos: Iterable[str]) -> list[MarkRow]:
        """The marks left for these repositories, oldest first, taken out of the state."""
        wanted, m = sorted(set(repos)), t.marks.c
        if not wanted:
            return []
        taken = (
            delete(t.marks)
            .where(m.repo.in_(wanted))
            .returning(m.id, m.repo, m.number, m.sha, m.closed, m.head_known, m.marked_at)
        )
        with self._write() as conn:
            rows = sorted(conn.execute(taken).all(), key=lambda r: r.id)
        return [
            MarkRow(r.repo, r.number, r.sha, bool(r.closed), bool(r.head_known),
                    from_text(r.marked_at))
            for r in rows
        ]  # fmt: skip
