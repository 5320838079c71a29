"""The long-running service: APScheduler runs one cycle at a time; SIGTERM stops it cleanly."""

from __future__ import annotations

import gc
import logging
import resource as rlimit
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any, TypeVar

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot import app as wiring
from bot.core.summary import Summary, Usage
from bot.github.errors import GitHubError
from bot.service.dispatch import run_dispatcher
from bot.service.http import HttpServer, Monitor, serve
from bot.service.limits import Limits
from bot.service.replicas import Replicas
from bot.service.webhooks.service import Webhooks, attach_webhooks
from bot.service.webhooks.wiring import Wiring
from bot.settings import RepoSettings, Settings
from bot.sources.base import Connection
from bot.state.ports import StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)

STATE_PROBLEM = "state"  # the ProblemTracker key of an unusable state (for /readyz)


@dataclass
class ProblemTracker:
    """Logs a problem when it starts and when it ends, not on every tick."""

    open: dict[str, str] = field(default_factory=dict)

    def update(self, failed: Mapping[str, str]) -> None:
        """Compare this cycle's failures with the last cycle's and log the changes."""
        for key, reason in failed.items():
            if key not in self.open:
                log.warning("problem started: %s: %s", key, reason, extra=_where(key))
        for key in self.open.keys() - failed.keys():
            log.info("problem resolved: %s", key, extra=_where(key))
        self.open = dict(failed)


def _where(key: str) -> dict[str, Any]:
    repo, _, number = key.partition("#")
    return {"repo": repo, "pr": int(number)} if number.isdigit() else {"repo": repo}


def budget_delay(summary: Summary, usage: Usage, *, now: datetime) -> tuple[float, str] | None:
    """How long to hold the next cycle so it fits GitHub's budget, and why (None: on time)."""
    if summary.rate_limited_s:
        return summary.rate_limited_s, "GitHub answered with a rate limit"
    needs = {"graphql": summary.graphql_points, "core": summary.github_requests}
    for resource, needed in needs.items():
        remaining, reset = usage.remaining.get(resource), usage.reset_at.get(resource)
        if remaining is not None and reset is not None and remaining < needed:
            wait = max(0.0, (reset - now).total_seconds()) + 1
            why = (
                f"{resource} budget: {remaining} left, the last cycle spent {needed}; "
                f"waiting for the reset at {reset:%Y-%m-%d %H:%M:%S} UTC"
            )
            return wait, why
    return None


STOP_GRACE_S = 1.5  # after a stop: the cycle's own checks end it sooner; then exit anyway
WRITE_GRACE_S = 35.0  # ... unless a comment write is in flight (GitHub's timeout is 30 s)
PRUNE_EVERY_S = 3600.0  # the state's old rows are dropped at most once an hour
DISCOVER_EVERY_S = 3600.0  # installations = "all": the installations are read again hourly

T = TypeVar("T")


def settle_garbage() -> None:
    """Collect every generation once, then freeze what is left (gc.freeze): the collector's
    own full collections until the next call walk only what was made since.

    Between two cycles they walked everything the service holds (a cycle's reads and reports,
    the libraries), holding the GIL the HTTP server's event loop needs: at 2,000 pull requests
    18 full collections a minute of 250-650 ms each under benchmarks/server.py's load. Called
    after each scheduled cycle (one such walk per interval, here) and at start; whatever the
    frozen objects drop in between is freed by reference count as ever, and their cycles of
    garbage at the next call (gc.unfreeze first: nothing is kept frozen past one cycle)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def run_service(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    stop: threading.Event | None = None,
) -> int:
    """Run cycles every interval (with jitter), never two at once, until a stop signal."""
    stop = stop or threading.Event()
    _install_signal_handlers(stop)
    # Start-up talks to GitHub (the token's login): a stop meanwhile ends it at once.
    clients = until_stopped(lambda: wiring.build_clients(settings, repos, stop=stop), stop)
    if clients is None:
        log.info("stopped during start-up")
        return 0
    if settings.queue.enabled:  # the work is the workers': this process feeds the queue
        return run_dispatcher(settings, clients, stop, limits=server_limits(settings))
    if settings.every_installation:
        repos = wiring.discovered_repos(settings, clients)
    service = Service(settings, repos, clients, stop)
    try:
        service.start()
        stop.wait()
    finally:
        service.shutdown()
    return 0


def until_stopped(start: Callable[[], T], stop: threading.Event) -> T | None:
    """`start()` in a daemon thread; its result, or None as soon as a stop is requested."""
    done: list[T] = []
    failed: list[BaseException] = []

    def body() -> None:
        try:
            done.append(start())
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=body, name="start-up", daemon=True)
    thread.start()
    while thread.is_alive() and not stop.wait(0.05):
        pass
    if failed:
        raise failed[0]
    return done[0] if done and not stop.is_set() else None


class Service:
    """One `run`: the scheduler's cycles, the HTTP server and webhooks, sharing one stop."""

    def __init__(
        self,
        settings: Settings,
        repos: Sequence[RepoSettings],
        clients: wiring.Clients,
        stop: threading.Event,
    ) -> None:
        """Wire the parts (nothing runs until `start`)."""
        self.settings, self.repos, self.clients, self.stop = settings, list(repos), clients, stop
        self.tracker = ProblemTracker()
        self.scheduler = _one_job_at_a_time()
        self.worker: threading.Thread | None = None
        self.monitor = Monitor(
            state_path=settings.state.location,
            interval_s=settings.schedule.interval_seconds,
            repos=[repo.name for repo in repos],
            alive=lambda: self.scheduler.running,
        )
        self.state = wiring.ServiceState(settings)  # one state for the cycles and webhooks
        self.sharing = self._replicas()  # several replicas: only the leased repositories
        # installations = "all" in one process: their webhooks and an hourly pass find them again
        self.rediscovers = settings.every_installation and self.sharing is None
        self.webhooks = self._webhooks()
        self.http: HttpServer | None = None
        self._pruned_at: float | None = None
        self._discovering = threading.Lock()

    def _replicas(self) -> Replicas | None:
        """A shared state: this replica's leases (an unreachable server at start: exit 1
        naming it); None with one process."""
        settings = self.settings
        if not settings.state.shared:
            return None
        self.state()
        return Replicas(
            self.state, [r.name for r in self.repos], lease_seconds=settings.state.lease_seconds,
            stop=self.stop, on_taken=self._taken,
        )  # fmt: skip

    def _webhooks(self) -> Webhooks | None:
        """The webhook fast path on this service's scheduler, worker and state (None: off)."""
        parts = Wiring(
            scheduler=self.scheduler, clients=self.clients, make_cycle=wiring.make_cycle,
            stop=self.stop, state=self.state, run=self.in_worker, sharing=self.sharing,
        )  # fmt: skip
        webhooks = attach_webhooks(self.settings, self.repos, parts)
        if self.rediscovers and webhooks is not None:
            webhooks.receiver.on_installation = self._installation_event
        return webhooks

    def start(self) -> None:
        """Serve, then schedule the first cycle now (nothing starts after a stop)."""
        cfg = self.settings.schedule
        trigger = IntervalTrigger(
            seconds=cfg.interval_seconds, jitter=cfg.jitter_seconds, timezone=UTC
        )
        self.scheduler.add_job(self.one_cycle, trigger, id="cycle", next_run_time=datetime.now(UTC))
        if self.rediscovers:
            hourly = IntervalTrigger(seconds=DISCOVER_EVERY_S, timezone=UTC)
            self.scheduler.add_job(self.rediscover, hourly, id="discover")
        if self.webhooks is not None:
            self._observe_webhooks(self.webhooks)
        if self.stop.is_set():
            return
        settle_garbage()  # the libraries, settings and clients: never walked again
        self.http = serve(
            self.monitor, host=self.settings.server.host, port=self.settings.server.port,
            extra_routes=self.webhooks.routes() if self.webhooks is not None else (),
            limits=server_limits(self.settings),
        )  # fmt: skip
        if self.stop.is_set():
            return
        if self.sharing is not None:
            self._share(self.sharing.start())
        self.scheduler.start()
        log.info("service started: %d repositories, every %d s", len(self.repos),
                 cfg.interval_seconds)  # fmt: skip

    def _installation_event(self, event: str, payload: Any) -> str:
        """An `installation` or `installation_repositories` delivery: the installations are
        read again in the background (the answer is given at once)."""
        iid = payload.get("installation", {}).get("id") if isinstance(payload, dict) else None
        if not isinstance(iid, int):
            return "malformed"
        why = f"installation {iid}: {event} {payload.get('action') or ''}".rstrip()
        threading.Thread(target=self.rediscover, args=(why,), name="discover", daemon=True).start()
        return "installations-changed"

    def rediscover(self, why: str = "hourly") -> None:
        """Every repository of every installation again: the cycles, the webhooks and the page
        follow; a repository added is worked at once."""
        with self._discovering:
            try:
                repos = wiring.discovered_repos(self.settings, self.clients)
            except GitHubError as exc:
                log.warning("installations could not be listed (kept as they were): %s", exc)
                return
            before = {r.name for r in self.repos}
            names = [r.name for r in repos]
            self.repos = list(repos)
            self.monitor.repos = tuple(sorted(names))
            if self.webhooks is not None:
                self.webhooks.follow(repos)
            added = sorted(set(names) - before)
            log.info("installations read again (%s): %d repositories (%d added, %d removed)",
                     why, len(names), len(added), len(before - set(names)))  # fmt: skip
            if added and not self.stop.is_set():
                self.scheduler.add_job(self.one_cycle, "date", run_date=datetime.now(UTC),
                                       id="installation", replace_existing=True)  # fmt: skip

    def _share(self, sharing: Replicas) -> None:
        """/readyz names the leases held; /metrics counts them and the takeovers."""
        self.monitor.leases, self.monitor.lease_problem = sharing.held, sharing.readiness
        self.monitor.epoch = sharing.epoch
        self.monitor.metrics.lease_takeovers.set_function(lambda: sharing.leases.takeovers)

    def _taken(self) -> None:
        """A lease was just taken (its holder died, or gave it up): work it now."""
        when = datetime.now(UTC)
        self.scheduler.add_job(
            self.one_cycle, "date", run_date=when, id="takeover", replace_existing=True
        )

    def _observe_webhooks(self, webhooks: Webhooks) -> None:
        deliveries = self.monitor.metrics.webhook_deliveries
        webhooks.receiver.observers.append(lambda e, o: deliveries.labels(e, o).inc())

        def refreshed(summary: Summary, store: Store) -> None:
            self.monitor.metrics.spent(summary, self.clients.github.usage)
            self.monitor.load_entries(store)

        webhooks.observers.append(refreshed)

    def one_cycle(self) -> None:
        """The scheduler's job: one cycle in the worker thread."""
        self.in_worker(self.cycle_body)

    def in_worker(self, body: Callable[[], None]) -> None:
        """Run `body` in a daemon thread this job waits on, so a stop never waits for it."""
        if self.stop.is_set():
            return
        thread = threading.Thread(target=body, name="cycle", daemon=True)
        self.worker = thread
        thread.start()
        while thread.is_alive() and not self.stop.wait(0.2):
            pass

    def cycle_body(self) -> None:
        """One cycle: open the state, run, record; its problems are logged as they start/end."""
        self.monitor.cycle_started()
        try:
            store = self.state()
        except StoreError as exc:  # a problem of the service, logged when it starts and ends
            self._problems({STATE_PROBLEM: str(exc)})
            self.monitor.cycle_failed()
            return
        try:
            self._cycle(store)
        except StoreError as exc:  # lost while the cycle ran (a PostgreSQL server went away)
            self._problems({STATE_PROBLEM: str(exc)})
            self.monitor.cycle_failed()
        finally:
            self.state.release()
            if not self.stop.is_set():  # a stop ends the thread now (a walk can take 1 s)
                settle_garbage()

    def _cycle(self, store: Store) -> None:
        self.monitor.load_entries(store, only_first=True)  # the page shows the state at once
        sharing = self.sharing
        mine = self.repos if sharing is None else _leased(self.repos, sharing.claim())
        leases = None if sharing is None else sharing.leases
        try:
            cycle = wiring.make_cycle(
                self.settings, self.clients, store, dry_run=False, leases=leases
            )
            summary = cycle.run(mine)
        except Exception:
            if not self.stop.is_set():
                log.exception("the cycle failed")
            self.monitor.cycle_failed()
            return
        log.info(summary.line(), extra={"event": "cycle"})
        self.monitor.cycle_finished(summary, self.clients.github.usage)
        self.monitor.load_entries(store)
        if self.webhooks is not None:
            self.webhooks.after_cycle(summary, mine)
        self._problems({**summary.failed, **credential_problems(self.clients.sources)})
        self._prune(store)
        if not self.stop.is_set():  # a stopped scheduler takes no new run time
            _hold_if_over_budget(self.scheduler, summary, self.clients.github.usage)

    def _problems(self, failed: Mapping[str, str]) -> None:
        """Log problems as they start and end; the service's own ones go to /readyz, /metrics."""
        self.tracker.update(failed)
        service = {k: v for k, v in failed.items() if "#" not in k}
        self.monitor.set_service_problems(service)
        credentials = [key for source in self.clients.sources for key in source.problem_keys()]
        known = [STATE_PROBLEM, *self.monitor.repos, *credentials]
        self.monitor.metrics.set_problems(service, known=known)

    def _prune(self, store: Store) -> None:
        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        dropped = store.prune(now=datetime.now(UTC))
        if any(dropped.values()):
            log.info("state pruned: %s", ", ".join(f"{k} {n}" for k, n in dropped.items()))

    def shutdown(self) -> None:
        """Stop everything within 5 s: the HTTP server and the cycle are ended side by side."""
        log.info("stopping: finishing the write in progress")
        if self.http is not None:
            self.http.begin_stop()
        if self.webhooks is not None:
            self.webhooks.stop_receiving()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        _finish_cycle(self.worker, self.clients)
        if self.http is not None:
            self.http.stop()
        if self.sharing is not None:
            self.sharing.close()  # the others take its repositories over without waiting
        close_soon(self.state.close)  # a delivery may hold it while SQLite waits for a writer
        self.clients.close()
        log.info("stopped")


CLOSE_WAIT_S = 0.5


def _one_job_at_a_time() -> BackgroundScheduler:
    """APScheduler on one worker thread: a job that falls due while one runs waits (coalesced,
    never two at once, never dropped as misfired)."""
    return BackgroundScheduler(
        timezone=UTC,
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )


def close_soon(close: Callable[[], None]) -> None:
    """Close in a daemon thread, waiting CLOSE_WAIT_S at most (the process is ending)."""
    closer = threading.Thread(target=close, name="close-state", daemon=True)
    closer.start()
    closer.join(CLOSE_WAIT_S)


def server_limits(settings: Settings) -> Limits:
    """The server's bounds: the configured ones, connections under a quarter of the fd limit."""
    soft, _ = rlimit.getrlimit(rlimit.RLIMIT_NOFILE)
    fds = soft if soft != rlimit.RLIM_INFINITY else 1 << 20
    cfg = settings.server
    return Limits(
        request_timeout_s=cfg.request_timeout_seconds,
        max_connections=max(8, min(cfg.max_connections, fds // 4)),
    )


def credential_problems(sources: Sequence[Connection]) -> dict[str, str]:
    """The second sources (or their sites) that refused the bot's credential (401/403) in
    their last read, by key (e.g. readthedocs:com, codecov)."""
    return {key: why for source in sources for key, why in source.problems().items()}


def _leased(repos: Sequence[RepoSettings], held: Sequence[str]) -> list[RepoSettings]:
    """The configured repositories this replica holds the lease of."""
    names = set(held)
    return [r for r in repos if r.name in names]


def _finish_cycle(worker: threading.Thread | None, clients: wiring.Clients) -> None:
    """Give the running cycle STOP_GRACE_S to end, counted from the stop or from the end of
    the comment write in flight (so the cycle records what it wrote); WRITE_GRACE_S at most."""
    if worker is None:
        return
    started = quiet = time.monotonic()
    while worker.is_alive():
        now = time.monotonic()
        if clients.github.writing:
            quiet = now
        if now - started >= WRITE_GRACE_S or now - quiet >= STOP_GRACE_S:
            log.warning("stopping without waiting for the cycle's reads to end")
            return
        worker.join(0.05)


def _hold_if_over_budget(scheduler: BackgroundScheduler, summary: Summary, usage: Usage) -> None:
    now = datetime.now(UTC)
    delay = budget_delay(summary, usage, now=now)
    if delay is None:
        return
    seconds, why = delay
    job = scheduler.get_job("cycle")
    if job is not None and job.next_run_time is not None:
        later = now + timedelta(seconds=seconds)
        if later > job.next_run_time:
            job.modify(next_run_time=later)
            log.warning("next cycle held until %s: %s", f"{later:%H:%M:%S} UTC", why)


def _install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM, SIGINT and SIGHUP stop the service cleanly (a restart reloads the settings)."""

    def handler(signum: int, _: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, handler)
