"""The long-running service: APScheduler runs one cycle at a time; SIGTERM stops it cleanly."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from starlette.routing import BaseRoute

from bot import app as wiring
from bot.cycle import Summary
from bot.github.client import Usage
from bot.service.http import HttpServer, Monitor, serve
from bot.service.webhooks import attach_webhooks
from bot.settings import RepoSettings, Settings
from bot.state.ports import StoreError

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


def run_service(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    stop: threading.Event | None = None,
) -> int:
    """Run cycles every interval (with jitter), never two at once, until a stop signal."""
    stop = stop or threading.Event()
    _install_signal_handlers(stop)
    clients = wiring.build_clients(settings, repos, stop=stop)
    tracker = ProblemTracker()
    scheduler = BackgroundScheduler(
        timezone=UTC,
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )
    worker: list[threading.Thread] = []
    state = wiring.ServiceState(settings)
    if settings.state.shared:  # an unreachable server at start: exit 1 naming it
        state()
    webhooks = attach_webhooks(
        settings, repos, scheduler=scheduler, clients=clients, make_cycle=wiring.make_cycle,
        stop=stop, state=state,
    )  # fmt: skip

    def cycle_body() -> None:
        monitor.cycle_started()
        try:
            store = state()
        except StoreError as exc:  # a problem of the service, logged when it starts and ends
            tracker.update({STATE_PROBLEM: str(exc)})
            monitor.cycle_failed()
            return
        try:
            summary = wiring.make_cycle(settings, clients, store, dry_run=False).run(repos)
        except Exception:
            log.exception("the cycle failed")
            monitor.cycle_failed()
            return
        finally:
            state.release()
        log.info(summary.line(), extra={"event": "cycle"})
        monitor.cycle_finished(summary, clients.github.usage)
        if webhooks is not None:
            webhooks.after_cycle(summary, repos)
        tracker.update(summary.failed)
        if not stop.is_set():  # a stopped scheduler takes no new run time
            _hold_if_over_budget(scheduler, summary, clients.github.usage)

    def one_cycle() -> None:
        # The cycle runs in a daemon thread this job waits on, so a stop never waits for it.
        if stop.is_set():
            return
        thread = threading.Thread(target=cycle_body, name="cycle", daemon=True)
        worker[:] = [thread]
        thread.start()
        while thread.is_alive() and not stop.wait(0.2):
            pass

    trigger = IntervalTrigger(
        seconds=settings.schedule.interval_seconds, jitter=settings.schedule.jitter_seconds
    )
    scheduler.add_job(one_cycle, trigger, id="cycle", next_run_time=datetime.now(UTC))
    routes = webhooks.routes() if webhooks is not None else []
    monitor, http = start_http(
        settings, repos, alive=lambda: scheduler.running, extra_routes=routes
    )
    if webhooks is not None:
        deliveries = monitor.metrics.webhook_deliveries
        webhooks.receiver.observers.append(lambda e, o: deliveries.labels(e, o).inc())
        webhooks.observers.append(lambda s: monitor.metrics.spent(s, clients.github.usage))
    scheduler.start()
    log.info(
        "service started: %d repositories, every %d s",
        len(repos),
        settings.schedule.interval_seconds,
    )
    stop.wait()
    log.info("stopping: finishing the write in progress")
    if webhooks is not None:
        webhooks.stop_receiving()
    scheduler.shutdown(wait=False)
    _finish_cycle(worker, clients)
    stop_http(http)
    state.close()
    clients.close()
    log.info("stopped")
    return 0


def _finish_cycle(worker: Sequence[threading.Thread], clients: wiring.Clients) -> None:
    """Give the running cycle STOP_GRACE_S to end (longer while a write is in flight)."""
    if not worker:
        return
    thread = worker[0]
    started = time.monotonic()
    while thread.is_alive():
        waited = time.monotonic() - started
        if waited >= WRITE_GRACE_S or (waited >= STOP_GRACE_S and not clients.github.writing):
            log.warning("stopping without waiting for the cycle's reads to end")
            return
        thread.join(0.05)


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


# -- the HTTP server of `run` (issue 10): the triage page, /livez, /readyz, /metrics ----------


def start_http(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    alive: Callable[[], bool],
    extra_routes: Sequence[BaseRoute] = (),
) -> tuple[Monitor, HttpServer | None]:
    """Start serving on server.host:server.port (port 0: no server, the monitor still counts)."""
    monitor = Monitor(
        state_path=settings.state.location,
        interval_s=settings.schedule.interval_seconds,
        repos=[repo.name for repo in repos],
        alive=alive,
    )
    http = serve(
        monitor, host=settings.server.host, port=settings.server.port, extra_routes=extra_routes
    )
    return monitor, http


def stop_http(http: HttpServer | None) -> None:
    """Stop the HTTP server, if one was started."""
    if http is not None:
        http.stop()
