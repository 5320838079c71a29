"""The long-running service: APScheduler runs one cycle at a time; SIGTERM stops it cleanly."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot.cycle import Summary
from bot.github_io import Usage
from bot.settings import RepoSettings, Settings
from bot.store import Store
from bot.webhooks import attach_webhooks

log = logging.getLogger(__name__)


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


def run_service(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    build_clients: Callable[..., Any],
    make_cycle: Callable[..., Any],
    stop: threading.Event | None = None,
) -> int:
    """Run cycles every interval (with jitter), never two at once, until a stop signal."""
    stop = stop or threading.Event()
    _install_signal_handlers(stop)
    clients = build_clients(settings, repos)
    tracker = ProblemTracker()
    scheduler = BackgroundScheduler(
        timezone=UTC,
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )
    webhooks = attach_webhooks(
        settings, repos, scheduler=scheduler, clients=clients, make_cycle=make_cycle, stop=stop
    )

    def one_cycle() -> None:
        if stop.is_set():
            return
        store = Store.open(settings.state.path)
        try:
            cycle = make_cycle(settings, clients, store, dry_run=False)
            cycle.should_stop = stop.is_set
            summary = cycle.run(repos)
        except Exception:
            log.exception("the cycle failed")
            return
        finally:
            store.close()
        log.info(summary.line(), extra={"event": "cycle"})
        if webhooks is not None:
            webhooks.after_cycle(summary, repos)
        tracker.update(summary.failed)
        _hold_if_over_budget(scheduler, summary, clients.github.usage)

    trigger = IntervalTrigger(
        seconds=settings.schedule.interval_seconds, jitter=settings.schedule.jitter_seconds
    )
    scheduler.add_job(one_cycle, trigger, id="cycle", next_run_time=datetime.now(UTC))
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
    scheduler.shutdown(wait=True)
    if webhooks is not None:
        webhooks.close()
    clients.close()
    log.info("stopped")
    return 0


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
    def handler(signum: int, _: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
