"""Several replicas: a delivery's marks left in the state, taken by the repository's holder."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from bot.service.replicas import Replicas
from bot.service.webhooks.events import Mark
from bot.service.webhooks.job import Refresher
from bot.state.ports import MarkRow, StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)

MARKS_POLL_S = 0.25  # how often each replica takes the marks of its repositories


class SharedMarks:
    """Several replicas: a delivery's marks left in the state for the repository's holder."""

    def __init__(self, state: Callable[[], Store]) -> None:
        """Write through `state`."""
        self.state = state

    def add(self, marks: Iterable[Mark], *, now: datetime) -> bool:
        """Leave the marks; False: the holder's own poll schedules its refresh."""
        rows = [MarkRow(m.repo, m.number, m.sha, m.closed, m.head_known, now) for m in marks]
        self.state().add_marks(rows)
        return False


def take_marks(sharing: Replicas, refresher: Refresher) -> None:
    """Until the stop, move the marks of the repositories held into the refresher's inbox."""
    wiring = refresher.wiring
    while not wiring.stop.wait(MARKS_POLL_S):
        held = sharing.held()
        try:
            rows = wiring.state().take_marks(held)
        except StoreError as exc:
            log.debug("could not take the webhook marks: %s", exc)
            continue
        for row in rows:
            mark = Mark(row.repo, row.number, row.sha, row.closed, row.head_known)
            if refresher.inbox.add([mark], now=row.marked_at):
                refresher.marked_at(row.marked_at)
