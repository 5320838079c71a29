"""The debounced refresh job on the service's worker: marks taken together after the debounce,
refreshes kept apart, within their share of GitHub's points, held back after a rate limit."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from bot.app import Cycle
from bot.core.summary import Summary
from bot.github.errors import RateLimited
from bot.service.webhooks.budget import WEBHOOK_POINTS_PER_HOUR, PointsBucket
from bot.service.webhooks.events import Mark
from bot.service.webhooks.inbox import Inbox
from bot.service.webhooks.refresh import refresh
from bot.service.webhooks.wiring import Wiring
from bot.settings import RepoSettings, Settings
from bot.state.store import Store

log = logging.getLogger(__name__)

MIN_REFRESH_GAP_S = 2.0  # refreshes start at least this far apart whatever the debounce
HELD_WAIT_S = 60.0  # writes deferred by the write budget: the marks wait this long


class Refresher:
    """Runs one refresh of the inbox's marks on the worker, `debounce_s` after the first."""

    def __init__(
        self, settings: Settings, repos: Iterable[RepoSettings], wiring: Wiring, *, inbox: Inbox
    ) -> None:
        """Nothing is scheduled until the first mark."""
        self.settings, self.wiring, self.inbox = settings, wiring, inbox
        self.repos = {r.name: r for r in repos}
        self.debounce_s = settings.webhooks.debounce_seconds
        self.bucket = PointsBucket()
        # told what each refresh wrote and asked, and its store (the service counts it in
        # /metrics and reloads the page's rows)
        self.observers: list[Callable[[Summary, Store], None]] = []
        self._last_refresh: float | None = None  # monotonic

    def first_mark(self) -> None:
        """The inbox was empty: refresh after the debounce."""
        self.schedule(self.debounce_s)

    def marked_at(self, when: datetime) -> None:
        """The inbox was empty and its first mark was made at `when` (by another replica)."""
        waited = (datetime.now(UTC) - when).total_seconds()
        self.schedule(max(0.0, self.debounce_s - waited))

    def schedule(self, delay_s: float) -> None:
        """Run one refresh on the cycles' worker `delay_s` from now (refreshes kept apart)."""
        if self.wiring.stop.is_set():
            return
        if self._last_refresh is not None:
            gap = MIN_REFRESH_GAP_S - (time.monotonic() - self._last_refresh)
            delay_s = max(delay_s, gap)
        when = datetime.now(UTC) + timedelta(seconds=delay_s)
        self.wiring.scheduler.add_job(lambda: self.wiring.run(self._run), "date", run_date=when)

    def _run(self) -> None:
        """The job: take the marks and refresh them, unless stopping or over the budget."""
        if self.wiring.stop.is_set():
            return
        batch = self.inbox.take()
        if not batch:
            return
        self._last_refresh = time.monotonic()
        if self.bucket.available() <= 0:
            waiting = sum(len(numbers) for numbers in batch.values())
            log.warning(
                "webhook refresh skipped: its share of GitHub's budget (%d GraphQL points an "
                "hour) is spent; %d marked pull requests wait for the next cycle",
                WEBHOOK_POINTS_PER_HOUR, waiting,
            )  # fmt: skip
            return
        try:
            self._refresh(batch)
        except Exception:
            if self.wiring.stop.is_set():  # a store closed under a refresh that outlived the stop
                return
            log.exception("the webhook refresh failed; the next cycle covers it")

    def _refresh(self, batch: Mapping[str, Sequence[int]]) -> None:
        """Refresh one batch; the marks come back when GitHub's limit held the writes."""
        store = self.wiring.state()
        cycle = self._cycle(store)
        remark = [Mark(repo, n) for repo, numbers in batch.items() for n in numbers]
        try:
            summary = refresh(cycle, batch, self.repos, inbox=self.inbox)
        except RateLimited as exc:
            self._hold(remark, exc.wait_s, f"GitHub answered with a rate limit: {exc}")
            return
        self.bucket.spend(summary.graphql_points)
        self._report(summary, store, observe=not self.wiring.stop.is_set())
        if self.wiring.stop.is_set():
            return
        if summary.rate_limited_s or summary.deferred:
            wait = summary.rate_limited_s or HELD_WAIT_S
            self._hold(remark, wait, "writes deferred (rate limit or write budget)")

    def _cycle(self, store: Store) -> Cycle:
        """A cycle on the service's state and leases that stops with the service."""
        sharing = self.wiring.sharing
        leases = None if sharing is None else sharing.leases
        cycle = self.wiring.make_cycle(
            self.settings, self.wiring.clients, store, dry_run=False, leases=leases
        )
        cycle.should_stop = self.wiring.stop.is_set
        return cycle

    def _report(self, summary: Summary, store: Store, *, observe: bool) -> None:
        """Tell the observers (not once stopping: the store is closing), and log the refresh's
        line (always: what it wrote is said even when SIGTERM came while it wrote)."""
        for observer in self.observers if observe else ():
            observer(summary, store)
        log.info(
            "webhook refresh: %s",
            summary.line().removeprefix("cycle: "),
            extra={"event": "refresh"},
        )

    def _hold(self, marks: Sequence[Mark], wait_s: float, why: str) -> None:
        """Put the marks back and refresh them once GitHub's limit allows."""
        self.inbox.add(marks, now=datetime.now(UTC))
        log.warning("webhook refresh held %.0f s: %s", wait_s, why)
        self.schedule(wait_s)
