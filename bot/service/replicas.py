"""Several `run` replicas on one PostgreSQL state: this replica's leases, kept and balanced.

A thread claims every third of `state.lease_seconds` (heartbeat, renewal, fair share, free
leases taken); a repository taken from another replica is worked at once (the cycle job is
scheduled now), so a replica that died is replaced within `lease_seconds` plus a cycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from bot.state.leases import Leases, all_leases
from bot.state.ports import StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)


class Replicas:
    """This replica's side of the sharing: its leases, and the thread that keeps them."""

    def __init__(
        self,
        store: Callable[[], Store],
        repos: Sequence[str],
        *,
        lease_seconds: float,
        stop: threading.Event,
        on_taken: Callable[[], None],
    ) -> None:
        """Hold nothing yet; `start` begins claiming."""
        self.repos, self.stop, self.on_taken = list(repos), stop, on_taken
        self.store = store
        self.leases = Leases(store(), lease_seconds=lease_seconds)
        self.period = lease_seconds / 3
        self.problem: str | None = None  # why the leases cannot be kept now
        self._thread = threading.Thread(target=self._keep, name="leases", daemon=True)

    def epoch(self) -> str:
        """The shared state's identity ("" while it cannot be read)."""
        try:
            return self.leases.store.epoch
        except StoreError:
            return ""

    def start(self) -> Replicas:
        """Claim a first share and keep claiming in the background."""
        self.claim()
        self._thread.start()
        return self

    def claim(self) -> list[str]:
        """Claim a fair share now; the repositories held (none when the state cannot be used)."""
        before = set(self.leases.held)
        try:
            held = self.leases.claim(self.repos)
        except StoreError as exc:
            if self.problem is None:
                log.warning("problem started: leases: %s", exc)
            self.problem = str(exc)
            return []
        if self.problem is not None:
            log.info("problem resolved: leases (the state answers again)")
            self.problem = None
        if set(held) - before and before is not None:
            log.info("leases held: %s", ", ".join(sorted(held)) or "none")
        return sorted(held)

    def _keep(self) -> None:
        while not self.stop.wait(self.period):
            before = set(self.leases.held)
            held = set(self.claim())
            if held - before:  # taken (from a replica that died, or given up): work them now
                self.on_taken()

    def held(self) -> list[str]:
        """The repositories this replica holds, as of its last claim."""
        return sorted(self.leases.held)

    def readiness(self) -> str | None:
        """Why this replica is not ready (None: ready): the state, or no lease while another
        replica holds every repository."""
        if self.problem is not None:
            return f"leases cannot be kept: {self.problem}"
        if self.leases.held:
            return None
        try:
            others = {lease.repo for lease in all_leases(self.store()) if lease.holder}
        except StoreError as exc:
            return f"leases cannot be read: {exc}"
        if set(self.repos) <= others:
            return "holds no lease: other replicas hold every repository"
        return None

    def close(self) -> None:
        """Give every lease up at once (a clean stop: the others take over without waiting)."""
        self.leases.release_all()
