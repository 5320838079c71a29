"""Leases: which replica works which repository of a shared (PostgreSQL) state.

A lease row per repository says who works it (`holder`), until when (`expires_at`) and its
`generation`, one more at every take: the fencing token each comment write stamps. A replica
renews its leases every third of `lease_seconds` and claims at the start of every cycle:
it beats its heartbeat, renews what it holds, gives up what it holds beyond its fair share
(ceil(repositories / live replicas), live = a heartbeat within `lease_seconds`), and takes
unheld or expired leases while it holds fewer. A lease is a row with an expiry, never a
session advisory lock (those break behind PgBouncer in transaction mode).
"""

from __future__ import annotations

import logging
import math
import os
import random
import secrets
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select, update

from bot.state import schema as t
from bot.state.db import from_text, to_text
from bot.state.ports import StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)

UNHELD = ""  # the holder of a lease given up (taking it is no takeover)


@dataclass(frozen=True, slots=True)
class Lease:
    """One repository's lease row."""

    repo: str
    holder: str
    generation: int
    expires_at: datetime


def new_holder() -> str:
    """This process's name as a lease holder: host, pid and a random tail (pids repeat)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _now() -> datetime:
    return datetime.now(UTC)


class Leases:
    """This replica's leases on a shared state."""

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: float,
        holder: str | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        """Hold nothing yet; `claim` takes a fair share."""
        self.store, self.clock = store, clock
        self.holder = holder or new_holder()
        self.lease = timedelta(seconds=lease_seconds)
        # a write needs this much of its lease left: a healthy replica renews every third
        self.margin = self.lease / 4
        self.takeovers = 0  # leases taken from another holder (expired without renewal)
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def held(self) -> dict[str, int]:
        """Repository -> generation, as of the last claim or renewal."""
        with self._lock:
            return dict(self._held)

    def generation(self, repo: str) -> int:
        """The generation a comment of `repo` is stamped with (0: not held)."""
        return self.held.get(repo, 0)

    def claim(self, repos: Sequence[str]) -> dict[str, int]:
        """Beat, renew, give up the surplus, take free leases up to the fair share."""
        now = self.clock()
        until = to_text(now + self.lease)
        lease = t.leases.c
        with self.store.writing() as conn:
            beat = self.store.insert(t.replicas).values(holder=self.holder, seen_at=to_text(now))
            conn.execute(
                beat.on_conflict_do_update(
                    index_elements=["holder"], set_={"seen_at": to_text(now)}
                )
            )
            since = to_text(now - self.lease)
            live = conn.execute(
                select(func.count()).where(t.replicas.c.seen_at > since)
            ).scalar_one()
            renewed = conn.execute(
                update(t.leases)
                .where(lease.holder == self.holder, lease.repo.in_(list(repos)))
                .where(lease.expires_at > to_text(now))
                .values(expires_at=until)
                .returning(lease.repo, lease.generation)
            ).all()
        mine = {row.repo: row.generation for row in renewed}
        fair = math.ceil(len(repos) / max(1, int(live)))
        for repo in sorted(mine)[fair:]:  # a replica joined: make room
            self._release(repo, now)
            del mine[repo]
        free = [r for r in repos if r not in mine]
        random.shuffle(free)  # replicas claiming at once spread over the repositories
        for repo in free:
            if len(mine) >= fair:
                break
            generation = self._take(repo, now)
            if generation is not None:
                mine[repo] = generation
        with self._lock:
            self._held = mine
        return dict(mine)

    def take_free(self, repos: Sequence[str]) -> dict[str, int]:
        """Take every one of `repos` whose lease is unheld or expired (what `once` works): no
        heartbeat and no fair share, so the `run` replicas' shares do not count this process."""
        now = self.clock()
        mine = {r: g for r in repos if (g := self._take(r, now)) is not None}
        with self._lock:
            self._held = mine
        return dict(mine)

    def _take(self, repo: str, now: datetime) -> int | None:
        """Take the repository's lease if it is unheld or expired: its new generation."""
        lease, until = t.leases.c, to_text(now + self.lease)
        with self.store.writing() as conn:
            row = conn.execute(
                select(lease.holder, lease.generation, lease.expires_at).where(lease.repo == repo)
            ).first()
            if row is None:
                fresh = self.store.insert(t.leases).values(
                    repo=repo, holder=self.holder, generation=1, expires_at=until,
                    taken_at=to_text(now),
                )  # fmt: skip
                made = conn.execute(fresh.on_conflict_do_nothing().returning(lease.generation))
                return _first(made.scalars().all())
            if from_text(row.expires_at) > now:
                return None
            taken = conn.execute(
                update(t.leases)
                .where(lease.repo == repo, lease.generation == row.generation)
                .values(
                    holder=self.holder,
                    generation=row.generation + 1,
                    expires_at=until,
                    taken_at=to_text(now),
                )
                .returning(lease.generation)
            )
            generation = _first(taken.scalars().all())
        if generation is not None and row.holder not in (self.holder, UNHELD):
            self.takeovers += 1
            log.info("lease of %s taken over from %s (generation %d)", repo, row.holder, generation)
        return generation

    def _release(self, repo: str, now: datetime) -> None:
        lease = t.leases.c
        with self.store.writing() as conn:
            conn.execute(
                update(t.leases)
                .where(lease.repo == repo, lease.holder == self.holder)
                .values(holder=UNHELD, expires_at=to_text(now))
            )
        log.info("lease of %s given up (more than a fair share)", repo)

    def renew(self) -> dict[str, int]:
        """Extend the leases still held (the timer's job); a lost one is dropped and logged."""
        now = self.clock()
        held = self.held
        if not held:
            return {}
        lease = t.leases.c
        try:
            with self.store.writing() as conn:
                kept = conn.execute(
                    update(t.leases)
                    .where(lease.holder == self.holder, lease.repo.in_(list(held)))
                    .where(lease.expires_at > to_text(now))
                    .values(expires_at=to_text(now + self.lease))
                    .returning(lease.repo, lease.generation)
                ).all()
        except StoreError as exc:
            log.warning("could not renew the leases: %s", exc)
            return held
        mine = {row.repo: row.generation for row in kept if held.get(row.repo) == row.generation}
        for repo in sorted(set(held) - set(mine)):
            log.warning("lease of %s lost (not renewed in time)", repo)
        with self._lock:
            self._held = {r: g for r, g in self._held.items() if mine.get(r) == g}
        return mine

    def valid(self, repo: str) -> int | None:
        """The generation to write under, if the lease is this replica's for a while yet.

        Read from the state before every comment write: a lease lost without knowing (a long
        pause, a partition) or a state that cannot be read means no write.
        """
        generation = self.held.get(repo)
        if generation is None:
            return None
        lease = t.leases.c
        try:
            with self.store.reading() as conn:
                row = conn.execute(
                    select(lease.holder, lease.generation, lease.expires_at).where(
                        lease.repo == repo
                    )
                ).first()
        except StoreError as exc:
            log.warning("no write to %s: the lease cannot be read: %s", repo, exc)
            return None
        ok = (
            row is not None
            and row.holder == self.holder
            and row.generation == generation
            and from_text(row.expires_at) > self.clock() + self.margin
        )
        if not ok:
            with self._lock:
                self._held.pop(repo, None)
            log.warning(
                "no write to %s: its lease (generation %d) is no longer held", repo, generation
            )
            return None
        return generation

    def release_all(self) -> None:
        """At a clean stop: give every lease up at once and leave the live replicas."""
        now = to_text(self.clock())
        lease = t.leases.c
        try:
            with self.store.writing() as conn:
                conn.execute(
                    update(t.leases)
                    .where(lease.holder == self.holder)
                    .values(holder=UNHELD, expires_at=now)
                )
                conn.execute(delete(t.replicas).where(t.replicas.c.holder == self.holder))
        except StoreError as exc:
            log.warning("could not give the leases up (they expire by themselves): %s", exc)
        with self._lock:
            self._held = {}


def all_leases(store: Store) -> list[Lease]:
    """Every lease row, by repository."""
    lease = t.leases.c
    with store.reading() as conn:
        rows = conn.execute(
            select(lease.repo, lease.holder, lease.generation, lease.expires_at).order_by(
                lease.repo
            )
        ).all()
    return [Lease(r.repo, r.holder, r.generation, from_text(r.expires_at)) for r in rows]


def _first(values: Sequence[int]) -> int | None:
    return int(values[0]) if values else None
