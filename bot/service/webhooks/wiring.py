"""What the webhooks run on, typed: the service's scheduler, clients, state, worker and stop."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from apscheduler.schedulers.background import BackgroundScheduler

from bot.app import Clients, Cycle
from bot.service.replicas import Replicas
from bot.settings import Settings
from bot.state.leases import Leases
from bot.state.ports import CycleState
from bot.state.store import Store


class MakeCycle(Protocol):
    """How a refresh gets its Cycle (`bot.app.make_cycle`)."""

    def __call__(
        self,
        settings: Settings,
        clients: Clients,
        store: CycleState,
        *,
        dry_run: bool,
        leases: Leases | None = None,
    ) -> Cycle:
        """A Cycle wired from settings and clients on `store`."""


def inline(body: Callable[[], None]) -> None:
    """Run `body` in the caller's thread (the demo's refreshes)."""
    body()


@dataclass(frozen=True, slots=True)
class Wiring:
    """The service's parts the webhooks use.

    `run(body)` runs a refresh on the service's worker (so a stop never waits for it);
    `state()` is the open state (StoreError while it is unusable); with several replicas
    (`sharing`) a delivery's marks go into the state, and each replica takes those of the
    repositories it holds the lease of.
    """

    scheduler: BackgroundScheduler
    clients: Clients
    make_cycle: MakeCycle
    stop: threading.Event
    state: Callable[[], Store]
    run: Callable[[Callable[[], None]], None] = inline
    sharing: Replicas | None = None
