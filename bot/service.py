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


# -- webhooks: the fast path (issue 11); polling above stays the backstop ---------------------


class Webhooks:
    """The webhook receiver and its debounced refresh job, on the cycles' single worker."""

    def __init__(
        self,
        settings: Settings,
        repos: Sequence[RepoSettings],
        *,
        scheduler: BackgroundScheduler,
        clients: Any,
        make_cycle: Callable[..., Any],
        stop: threading.Event,
    ) -> None:
        """Open the deliveries state and build the receiver (not yet serving)."""
        from bot.webhooks import Inbox, Receiver

        self.settings, self.repos, self.scheduler = settings, list(repos), scheduler
        self.clients, self.make_cycle, self.stop = clients, make_cycle, stop
        self.debounce_s = settings.webhooks.debounce_seconds
        self.inbox = Inbox()
        self.store = Store.open(settings.state.path)
        self.receiver = Receiver(
            secrets=[s.get_secret_value() for s in settings.webhooks.secrets],
            repos=[r.name for r in repos],
            inbox=self.inbox,
            note_delivery=lambda delivery, event, now: self.store.note_delivery(
                delivery, event, now=now
            ),
            on_first_mark=lambda: self.schedule(self.debounce_s),
            clock=lambda: datetime.now(UTC),
        )
        self.server: Any = None

    def start(self) -> Webhooks:
        """Serve POST /webhook and keep a day of delivery ids."""
        from bot.server import BackgroundServer, build_app
        from bot.webhooks import webhook_route

        app = build_app([webhook_route(self.receiver)])
        cfg = self.settings.server
        self.server = BackgroundServer(app, host=cfg.host, port=cfg.port).start()
        self.scheduler.add_job(
            self._forget_old_deliveries, IntervalTrigger(hours=1), id="forget-deliveries"
        )
        log.info(
            "webhooks: POST /webhook on %s:%d, refresh %.0f s after the first mark",
            cfg.host,
            self.server.port,
            self.debounce_s,
        )
        return self

    def schedule(self, delay_s: float) -> None:
        """Run one refresh on the cycles' worker `delay_s` from now."""
        if not self.stop.is_set():
            when = datetime.now(UTC) + timedelta(seconds=delay_s)
            self.scheduler.add_job(self._refresh, "date", run_date=when)

    def after_cycle(self, summary: Summary, repos: Sequence[RepoSettings]) -> None:
        """A full cycle read every open pull request: its heads resolve status events."""
        complete = [r.name for r in repos if r.name not in summary.failed]
        self.inbox.learn_heads(summary.heads, complete=complete)

    def _refresh(self) -> None:
        from bot.github_io import RateLimited
        from bot.webhooks import Mark, refresh

        if self.stop.is_set():
            return
        batch = self.inbox.take()
        if not batch:
            return
        by_name = {r.name: r for r in self.repos}
        cycle = self.make_cycle(self.settings, self.clients, self.store, dry_run=False)
        cycle.should_stop = self.stop.is_set
        remark = [Mark(repo, n) for repo, numbers in batch.items() for n in numbers]
        try:
            summary = refresh(cycle, batch, by_name, inbox=self.inbox)
        except RateLimited as exc:
            self._hold(remark, exc.wait_s, f"GitHub answered with a rate limit: {exc}")
            return
        except Exception:
            log.exception("the webhook refresh failed; the next cycle covers it")
            return
        log.info(
            "webhook refresh: %s",
            summary.line().removeprefix("cycle: "),
            extra={"event": "refresh"},
        )
        if summary.rate_limited_s or summary.deferred:
            wait = summary.rate_limited_s or 60.0
            self._hold(remark, wait, "writes deferred (rate limit or write budget)")

    def _hold(self, marks: Sequence[Any], wait_s: float, why: str) -> None:
        """Put the marks back and refresh them once GitHub's limit allows."""
        self.inbox.add(marks, now=datetime.now(UTC))
        log.warning("webhook refresh held %.0f s: %s", wait_s, why)
        self.schedule(wait_s)

    def _forget_old_deliveries(self) -> None:
        self.store.forget_deliveries(datetime.now(UTC) - timedelta(days=1))

    def stop_receiving(self) -> None:
        """Stop the HTTP server (pending marks are left to the next start's first cycle)."""
        if self.server is not None:
            self.server.stop()
        pending = self.inbox.pending()
        if pending:
            log.info("stopping with %d webhook marks pending; the next cycle covers them", pending)

    def close(self) -> None:
        """Close the deliveries state."""
        self.store.close()


def attach_webhooks(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    scheduler: BackgroundScheduler,
    clients: Any,
    make_cycle: Callable[..., Any],
    stop: threading.Event,
) -> Webhooks | None:
    """Start the webhook fast path when secrets are configured and the server is on."""
    if not settings.webhooks.enabled:
        return None
    if settings.server.port == 0:
        log.warning("webhooks.secrets is set but server.port is 0: webhooks are off")
        return None
    return Webhooks(
        settings, repos, scheduler=scheduler, clients=clients, make_cycle=make_cycle, stop=stop
    ).start()
