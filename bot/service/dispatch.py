"""`run` with a queue: it finds the repositories, keeps the schedule, turns webhook deliveries
into jobs and serves the page, /readyz and /metrics; `worker` processes do the work.

The schedule: each repository has its own second in the interval (a hash of its name), so its
reconcile job is queued once an interval and the repositories are spread over it, not all at
once. A delivery's marks become pull-request jobs at once (within the request). A job that
cannot be queued (the queue's database is away) waits in this process and is queued as soon
as the database answers; the schedule covers anything lost with the process.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot import app as wiring
from bot.core.summary import Summary, Usage
from bot.github.errors import GitHubError
from bot.github.installations import Directory
from bot.service.http import HttpServer, Monitor, serve
from bot.service.limits import Limits
from bot.service.queue import LATENCY_WINDOW_S, Job, JobQueue, QueueUnavailable, percentile
from bot.service.webhooks.events import Mark
from bot.service.webhooks.receiver import Receiver
from bot.service.webhooks.route import webhook_route
from bot.settings import Settings, require_queue
from bot.state.ports import StoreError

log = logging.getLogger(__name__)

TICK_S = 1.0
DISCOVER_EVERY_S = 3600.0  # the installations are found again hourly (and on their webhooks)
DISCOVER_RETRY_S = 60.0  # ... or every minute while none could be listed
PAGE_EVERY_S = 10.0  # the page's rows are read again from the shared state this often
READY_EVERY_S = 30.0  # a schedule pass that queued its jobs counts as the service's cycle
OUTBOX_MAX = 100_000  # jobs held while the queue is away (one per key)


def slot(repo: str, interval_s: int) -> int:
    """The second of the interval at which `repo`'s reconcile job is queued."""
    return zlib.crc32(repo.casefold().encode("utf-8")) % max(1, interval_s)


class Dispatcher:
    """The queue side of `run`: the directory of repositories, the schedule, the webhooks."""

    def __init__(
        self, settings: Settings, clients: wiring.Clients, stop: threading.Event, *, limits: Limits
    ) -> None:
        """Wire the parts; `start` discovers, serves and schedules (the server in `limits`)."""
        require_queue(settings)
        self.limits = limits
        self.settings, self.clients, self.stop = settings, clients, stop
        self.queue = JobQueue(settings.queue.url.get_secret_value())
        self.state = wiring.ServiceState(settings)
        self.interval = settings.schedule.interval_seconds
        self.repos: dict[str, int] = {}  # repository -> installation (0: the token's)
        self._by_slot: dict[int, list[str]] = {}
        self._outbox: dict[str, tuple[Job, datetime | None]] = {}
        self._lock = threading.Lock()
        self._discovering = threading.Lock()  # discoveries and installation events, in turn
        self._problem: str | None = None
        self.monitor = Monitor(
            state_path=settings.state.location, interval_s=self.interval,
            alive=lambda: not stop.is_set(),
        )  # fmt: skip
        self.monitor.checks.append(self.queue_problem)
        self.monitor.metrics.registry.register(QueueCollector(self))
        self.receiver = Receiver(
            secrets=[s.get_secret_value() for s in settings.webhooks.secrets],
            repos=(), inbox=self, note_delivery=self._note_delivery,
            on_first_mark=lambda: None, clock=lambda: datetime.now(UTC),
            on_installation=self.installation_event,
        )  # fmt: skip
        self.receiver.observers.append(self._observe_delivery)
        self.http: HttpServer | None = None
        self._threads: list[threading.Thread] = []

    # -- start and stop -------------------------------------------------------------------

    def start(self) -> None:
        """Open the state (an unreachable one: exit 1 naming it), create the queue's tables,
        find the repositories, serve, then tick."""
        self.state()  # migrated now, not under the first webhook delivery
        try:
            self.queue.ensure_schema()
        except QueueUnavailable as exc:
            self._queue_failed(exc)
        self.discover()
        cfg = self.settings.server
        if cfg.port:
            routes = [webhook_route(self.receiver)] if self.settings.webhooks.enabled else []
            self.http = serve(self.monitor, host=cfg.host, port=cfg.port, extra_routes=routes,
                              limits=self.limits)  # fmt: skip
        for target, name in ((self._tick_loop, "schedule"), (self._discover_loop, "discover")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("service started (queue): %d repositories, every %d s, jobs on the queue",
                 len(self.repos), self.interval)  # fmt: skip

    def shutdown(self) -> None:
        """Stop serving and ticking; jobs held here are named (the schedule covers them)."""
        if self.http is not None:
            self.http.begin_stop()
        for thread in self._threads:
            thread.join(timeout=2)
        self._flush()
        if self._outbox:
            log.warning("stopping with %d jobs not queued (the queue is away): the schedule "
                        "covers them", len(self._outbox))  # fmt: skip
        if self.http is not None:
            self.http.stop()
        self.queue.close()
        self.state.close()
        log.info("stopped")

    # -- the repositories -----------------------------------------------------------------

    def discover(self) -> None:
        """Find every repository (the App's installations, or the [[repos]] entries)."""
        found = self.clients.github.installations
        if not self.settings.every_installation or found is None:
            self._set_repos(self._configured(found))
            return
        with self._discovering:
            try:
                directory = found.discover()
            except GitHubError as exc:
                log.warning("installations could not be listed (kept as they were): %s", exc)
                return
            self._directory_changed(directory)

    def _configured(self, found: Any) -> dict[str, int]:
        """[[repos]] entries: the installation of each (0 with a token)."""
        repos: dict[str, int] = {}
        for repo in self.settings.repos:
            try:
                repos[repo.name] = 0 if found is None else int(found.installation_id(repo.name))
            except GitHubError as exc:
                log.warning("%s left out: %s", repo.name, exc)
        return repos

    def _directory_changed(self, directory: Directory) -> None:
        try:
            self.queue.save_directory(directory, now=datetime.now(UTC))
        except QueueUnavailable as exc:
            self._queue_failed(exc)
        before = set(self.repos)
        self._set_repos(directory.repos())
        added = sorted(set(self.repos) - before)
        for repo in added if before else ():  # a new repository is worked at once
            self._enqueue(Job(self.repos[repo], repo, reason="installation"))
        log.info("installations: %d, repositories: %d (%d added, %d removed)",
                 len(directory.installations), len(self.repos), len(added),
                 len(before - set(self.repos)))  # fmt: skip

    def _set_repos(self, repos: Mapping[str, int]) -> None:
        by_slot: dict[int, list[str]] = {}
        for repo in repos:
            by_slot.setdefault(slot(repo, self.interval), []).append(repo)
        with self._lock:
            self.repos, self._by_slot = dict(repos), by_slot
        self.receiver.repos = {name.lower(): name for name in repos}
        self.monitor.repos = tuple(sorted(repos))

    def installation_event(self, event: str, payload: Any) -> str:
        """An `installation` or `installation_repositories` delivery: read that installation
        again (in the background: the answer is given at once)."""
        found = self.clients.github.installations
        iid = _get(payload, "installation", "id")
        if found is None or not isinstance(iid, int):
            return "malformed" if found is not None else "ignored-event"
        account = _get(payload, "installation", "account", "login")
        action = str(payload.get("action") or "") if isinstance(payload, dict) else ""

        def read_again() -> None:
            with self._discovering:  # one change at a time: none is lost to another
                try:
                    directory = found.discover_one(iid, account=str(account or ""), action=action)
                except Exception:
                    log.exception("installation %d could not be read again", iid)
                    return
                log.info("installation %d %s (%s event)", iid, action or "changed", event)
                self._directory_changed(directory)

        threading.Thread(target=read_again, name="installation", daemon=True).start()
        return "installations-changed"

    def _discover_loop(self) -> None:
        """Hourly; every minute while no repository is known (GitHub did not answer)."""
        while not self.stop.wait(DISCOVER_EVERY_S if self.repos else DISCOVER_RETRY_S):
            self.discover()

    # -- the schedule ---------------------------------------------------------------------

    def _tick_loop(self) -> None:
        last = int(time.time()) - 1
        ready_at = page_at = 0.0
        while not self.stop.wait(TICK_S - (time.time() % TICK_S)):
            now = int(time.time())
            self._flush()
            for repo in self._due(last, now):
                self._enqueue(Job(self.repos.get(repo, 0), repo))
            last = now
            if self._problem is None and time.monotonic() - ready_at >= READY_EVERY_S:
                self.monitor.cycle_finished(Summary(), Usage())  # the schedule is kept
                ready_at = time.monotonic()
            if time.monotonic() - page_at >= PAGE_EVERY_S:
                self._load_page()
                page_at = time.monotonic()

    def _due(self, last: int, now: int) -> Iterator[str]:
        """The repositories whose second came in (last, now] (each once, however late)."""
        with self._lock:
            by_slot = dict(self._by_slot)
        seconds = range(last + 1, now + 1)
        if len(seconds) >= self.interval:
            seconds = range(now - self.interval + 1, now + 1)
        for second in seconds:
            yield from by_slot.get(second % self.interval, ())

    def _load_page(self) -> None:
        try:
            self.monitor.load_entries(self.state())
        except StoreError as exc:
            log.debug("the page's rows could not be read: %s", exc)

    # -- jobs -------------------------------------------------------------------------------

    def add(self, marks: Iterable[Mark], *, now: datetime) -> bool:
        """A delivery's marks become jobs now (the MarkSink of the webhook receiver)."""
        for mark in marks:
            if mark.closed:  # a closed pull request's comment is left as it is
                continue
            iid = self.repos.get(mark.repo, 0)
            reason = "webhook" if mark.number is not None else "webhook (a status: its repository)"
            self._enqueue(Job(iid, mark.repo, mark.number, received_at=now, reason=reason))
        return False

    def _enqueue(self, job: Job, at: datetime | None = None) -> None:
        if self._problem is not None:  # known away: held at once (a delivery is answered
            self._hold(job, at)  # without waiting for the pool); each tick tries the queue
            return
        try:
            self.queue.enqueue(job, at=at)
        except QueueUnavailable as exc:
            self._hold(job, at)
            self._queue_failed(exc)
            return
        self._queue_back()

    def _hold(self, job: Job, at: datetime | None) -> None:
        with self._lock:
            if len(self._outbox) < OUTBOX_MAX:
                self._outbox.setdefault(job.key, (job, at))

    def _flush(self) -> None:
        """Queue the jobs held while the queue was away."""
        with self._lock:
            held = list(self._outbox.items())
        for key, (job, at) in held:
            try:
                self.queue.enqueue(job, at=at)
            except QueueUnavailable as exc:
                self._queue_failed(exc)
                return
            with self._lock:
                self._outbox.pop(key, None)
        if held:
            log.info("queued %d jobs held while the queue was away", len(held))
            self._queue_back()

    def _queue_failed(self, exc: Exception) -> None:
        if self._problem is None:
            log.warning("problem started: queue: %s (jobs are held here until it answers)", exc)
        self._problem = str(exc)

    def _queue_back(self) -> None:
        if self._problem is not None:
            log.info("problem resolved: queue (it answers again)")
        self._problem = None

    def queue_problem(self) -> str | None:
        """/readyz: the queue, named, when it cannot be reached."""
        return self.queue.problem()

    def _note_delivery(self, delivery: str, event: str, now: datetime) -> bool:
        return self.state().note_delivery(delivery, event, now=now)

    def _observe_delivery(self, event: str, outcome: str) -> None:
        self.monitor.metrics.webhook_deliveries.labels(event, outcome).inc()
        if outcome == "unconfigured-repository":
            log.info("webhook %s: its repository is in no installation of the App now "
                     "(uninstalled, or removed from it): no job", event)  # fmt: skip

    def held(self) -> int:
        """Jobs held here while the queue is away."""
        with self._lock:
            return len(self._outbox)


class QueueCollector(Collector):
    """/metrics from the queue: depth, job latency, each installation's budget and limit."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        """Read on every scrape (a few small queries)."""
        self.dispatcher = dispatcher

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The queue's gauges; none of them (queue_up 0) while it cannot be read."""
        queue, now = self.dispatcher.queue, datetime.now(UTC)
        up = GaugeMetricFamily("ci_status_bot_queue_up", "1 while the queue's database answers.")
        held = GaugeMetricFamily(
            "ci_status_bot_queue_held_jobs", "Jobs `run` holds while the queue is away."
        )
        held.add_metric([], self.dispatcher.held())
        try:  # a queue that is away answers at once (problem), not after the pool's timeout
            families = [] if queue.problem() else list(self._families(queue, now))
        except QueueUnavailable:
            families = []
        if not families:
            up.add_metric([], 0)
            yield from (up, held)
            return
        up.add_metric([], 1)
        yield from (up, held, *families)

    def _families(self, queue: JobQueue, now: datetime) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "ci_status_bot_queue_jobs", "Jobs on the queue: waiting (todo) and running (doing).",
            labels=["status"],
        )  # fmt: skip
        for status, count in sorted(queue.depth().items()):
            depth.add_metric([status], count)
        yield depth
        seconds = [s for _, s in queue.latencies(since=now - timedelta(seconds=LATENCY_WINDOW_S))]
        latency = GaugeMetricFamily(
            "ci_status_bot_job_latency_seconds",
            "Webhook received to comment written, over the jobs of the last 15 minutes.",
            labels=["quantile"],
        )
        for q in (0.5, 0.95):
            latency.add_metric([str(q)], percentile(seconds, q))
        yield latency
        jobs = GaugeMetricFamily(
            "ci_status_bot_job_latency_jobs", "Webhook jobs that wrote, in the last 15 minutes."
        )
        jobs.add_metric([], len(seconds))
        yield jobs
        yield from _budget_families(queue, now)


def _budget_families(queue: JobQueue, now: datetime) -> Iterator[GaugeMetricFamily]:
    budget = GaugeMetricFamily(
        "ci_status_bot_installation_budget_remaining",
        "GitHub's budget left to each installation, by resource (as its last job saw it).",
        labels=["installation", "resource"],
    )
    for iid, resource, left in sorted(queue.budgets()):
        budget.add_metric([str(iid), resource], left)
    yield budget
    limited = GaugeMetricFamily(
        "ci_status_bot_installation_limited_until_timestamp_seconds",
        "Installations waiting for their reset, and until when (Unix time).",
        labels=["installation"],
    )
    for iid, until in sorted(queue.limits(now=now).items()):
        limited.add_metric([str(iid)], until.timestamp())
    yield limited


def _get(node: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def run_dispatcher(
    settings: Settings, clients: wiring.Clients, stop: threading.Event, *, limits: Limits
) -> int:
    """`run` with a queue, until a stop signal."""
    dispatcher = Dispatcher(settings, clients, stop, limits=limits)
    try:
        dispatcher.start()
        stop.wait()
    finally:
        dispatcher.shutdown()
        clients.close()
    return 0
