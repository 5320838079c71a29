"""What GitHub said is required, per base branch: the names it marked required, and the
sets its protection and rulesets require (the port `RequiredCache`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from bot.core.model import RequiredChecks
from bot.state import schema as t
from bot.state.db import reads, records, to_text
from bot.state.kept import Kept
from bot.state.ports import REQUIRED_SETS_TTL, REQUIRED_TTL, required_from_json, required_to_json


class Required(Kept):
    """Required-ness learned from GitHub's isRequired, and base branches' required sets."""

    @reads("required_checks", absent=dict)
    def required_known(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta | None = REQUIRED_TTL,
    ) -> dict[tuple[str, str], bool | None]:
        """(base, name) -> required (None: not said), learned within `max_age` (None: any age)."""
        wanted = sorted(set(bases))
        if not wanted:
            return {}
        rc = t.required_checks.c
        query = select(rc.base, rc.name, rc.required).where(rc.repo == repo, rc.base.in_(wanted))
        if max_age is not None:
            query = query.where(rc.learned_at > to_text(now - max_age))
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {(r.base, r.name): None if r.required is None else bool(r.required) for r in rows}

    @records(None)
    def remember_required(
        self, repo: str, learned: Mapping[tuple[str, str], bool | None], *, now: datetime
    ) -> None:
        """Record what GitHub said is required, per (base, name), at `now` (None: not said)."""
        if not learned:
            return
        at = to_text(now)
        rows = [
            {"repo": repo, "base": b, "name": n, "required": None if f is None else int(f),
             "learned_at": at}
            for (b, n), f in learned.items()
        ]  # fmt: skip
        upsert = self.insert(t.required_checks)
        upsert = upsert.on_conflict_do_update(
            index_elements=["repo", "base", "name"],
            set_={"required": upsert.excluded.required, "learned_at": upsert.excluded.learned_at},
        )
        with self._write() as conn:
            conn.execute(upsert, rows)

    @reads("required_sets", absent=dict)
    def required_sets(
        self,
        repo: str,
        bases: Iterable[str],
        *,
        now: datetime,
        max_age: timedelta = REQUIRED_SETS_TTL,
    ) -> dict[str, RequiredChecks]:
        """What these base branches require, as read within `max_age`."""
        wanted = sorted(set(bases))
        if not wanted:
            return {}
        rs = t.required_sets.c
        query = select(rs.base, rs.payload).where(
            rs.repo == repo, rs.base.in_(wanted), rs.read_at > to_text(now - max_age)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {r.base: required_from_json(r.base, r.payload) for r in rows}

    @records(None)
    def remember_required_sets(
        self, repo: str, sets: Mapping[str, RequiredChecks], *, now: datetime
    ) -> None:
        """Record what base branches require, read at `now`."""
        rows = [{"base": b, "payload": required_to_json(checks)} for b, checks in sets.items()]
        self._keep_payloads(t.required_sets, repo, rows, index=("base",), now=now)

    def forget_required(self, repo: str) -> int:
        """Drop what is known to be required in `repo` (its rules changed); rows dropped."""
        with self._write() as conn:
            dropped = conn.execute(delete(t.required_sets).where(t.required_sets.c.repo == repo))
            learned = conn.execute(
                delete(t.required_checks).where(t.required_checks.c.repo == repo)
            )
            return int(dropped.rowcount or 0) + int(learned.rowcount or 0)
