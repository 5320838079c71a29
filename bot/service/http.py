"""The service's HTTP endpoints (Starlette on uvicorn): the triage page, health and metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.core.model import format_utc
from bot.cycle import Summary
from bot.github.client import Usage
from bot.service.metrics import CONTENT_TYPE, Metrics
from bot.state.ports import StoreError
from bot.state.readonly import ReadOnlyState
from bot.triage import formats, rows
from bot.triage.keeper import stored_entries

log = logging.getLogger(__name__)

STALE_INTERVALS: Final = 3
PAGE_REFRESH_SECONDS: Final = 30
_HEADERS: Final = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def _utc_now() -> datetime:
    return datetime.now(UTC)


def readiness_problems(
    *,
    now: datetime,
    started_at: datetime,
    last_finished: datetime | None,
    interval_s: float,
    remaining: Mapping[str, int],
    reset_at: Mapping[str, datetime],
    state_problem: str | None,
) -> list[str]:
    """Why the service is not ready (empty: ready); pure."""
    problems: list[str] = []
    if state_problem is not None:
        problems.append(f"state unusable: {state_problem}")
    limit = timedelta(seconds=STALE_INTERVALS * interval_s)
    if last_finished is None:
        started = format_utc(started_at)
        problems.append(f"no cycle has finished since the service started at {started}")
    elif now - last_finished > limit:
        problems.append(
            f"the last cycle finished at {format_utc(last_finished)}, more than "
            f"{STALE_INTERVALS} intervals ({int(limit.total_seconds())} s) ago"
        )
    for resource in sorted(remaining):
        reset = reset_at.get(resource)
        if remaining[resource] <= 0 and (reset is None or reset > now):
            until = f" until {format_utc(reset)}" if reset is not None else ""
            problems.append(f"GitHub {resource} budget exhausted{until}")
    return problems


class Monitor:
    """What the endpoints know of the service: its cycles, GitHub's budget and the state."""

    def __init__(
        self,
        *,
        state_path: str,
        interval_s: float,
        repos: Sequence[str] = (),
        metrics: Metrics | None = None,
        clock: Callable[[], datetime] = _utc_now,
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        """Start watching; `alive` says whether the service's scheduling loop still runs."""
        self.state_path = state_path
        self.interval_s = interval_s
        self.repos = tuple(repos)
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.alive = alive
        self.started_at = clock()
        self.last_finished: datetime | None = None
        self.failed_at: datetime | None = None  # a cycle failed after the last that finished
        self._usage = Usage()
        self._cycle_began: float | None = None
        self._lock = threading.Lock()

    def cycle_started(self) -> None:
        """A cycle begins (its duration is measured from here)."""
        self._cycle_began = time.monotonic()

    def _elapsed(self) -> float:
        began = self._cycle_began
        return 0.0 if began is None else time.monotonic() - began

    def cycle_finished(self, summary: Summary, usage: Usage) -> None:
        """A cycle finished: record it and GitHub's budget, refresh the pull-request gauge."""
        now = self.clock()
        self.metrics.cycle_finished(summary, usage, seconds=self._elapsed(), finished_at=now)
        with self._lock:
            self.last_finished, self.failed_at = now, None
            self._usage = Usage(remaining=dict(usage.remaining), reset_at=dict(usage.reset_at))
        try:
            entries = self.entries()
        except StoreError as exc:
            log.warning("could not read the triage view for the metrics: %s", exc)
            return
        self.metrics.set_pulls(((e.repo, e.verdict.value) for e in entries), repos=self.repos)

    def cycle_failed(self) -> None:
        """A cycle raised before it finished."""
        self.metrics.cycle_failed(seconds=self._elapsed())
        with self._lock:
            self.failed_at = self.clock()

    def freshness(self) -> formats.Freshness:
        """How current the page's data is: the cycles seen, GitHub's budgets at zero."""
        now = self.clock()
        with self._lock:
            usage, last, failed = self._usage, self.last_finished, self.failed_at
        exhausted = tuple(
            (resource, usage.reset_at.get(resource))
            for resource in sorted(usage.remaining)
            if usage.remaining[resource] <= 0
            and (usage.reset_at.get(resource) is None or usage.reset_at[resource] > now)
        )
        return formats.Freshness(self.started_at, last, failed, exhausted)

    def entries(self) -> list[rows.TriageEntry]:
        """The triage view of the configured repositories, most urgent first (read-only)."""
        with ReadOnlyState.open(self.state_path) as reader:
            entries = stored_entries(reader)
        return rows.ordered(entries, rows.Filters(repos=frozenset(self.repos)))

    def state_problem(self) -> str | None:
        """Why the state cannot be read, or None."""
        try:  # a probe every few seconds: open and read the schema, no copy of the state
            ReadOnlyState.open(self.state_path).close()
        except StoreError as exc:
            return str(exc)
        return None

    def problems(self) -> list[str]:
        """Why the service is not ready (empty: ready)."""
        with self._lock:
            usage, last = self._usage, self.last_finished
        return readiness_problems(
            now=self.clock(),
            started_at=self.started_at,
            last_finished=last,
            interval_s=self.interval_s,
            remaining=usage.remaining,
            reset_at=usage.reset_at,
            state_problem=self.state_problem(),
        )


def build_app(monitor: Monitor, *, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app: GET /, /triage.json, /livez, /readyz, /metrics, plus `extra_routes`."""
    renderer = formats.PageRenderer()

    def page(request: Request) -> Response:
        try:
            entries = monitor.entries()
        except StoreError as exc:
            return PlainTextResponse(f"the state cannot be read: {exc}\n", 503, headers=_HEADERS)
        refresh = _refresh_seconds(request.query_params.get("refresh"))
        html = renderer.render(
            entries, now=monitor.clock(), refresh_seconds=refresh, freshness=monitor.freshness()
        )
        return HTMLResponse(html, headers=_HEADERS)

    def triage_document(_: Request) -> Response:
        try:
            entries = monitor.entries()
        except StoreError as exc:
            return JSONResponse({"error": f"the state cannot be read: {exc}"}, 503)
        document = formats.triage_document(entries, now=monitor.clock())
        return JSONResponse(document, headers=_HEADERS)

    def livez(_: Request) -> Response:
        if not monitor.alive():
            return PlainTextResponse("not alive: the scheduler stopped\n", 503, headers=_HEADERS)
        return PlainTextResponse("ok\n", headers=_HEADERS)

    def readyz(_: Request) -> Response:
        problems = monitor.problems()
        if problems:
            return PlainTextResponse(
                "not ready: " + "; ".join(problems) + "\n", 503, headers=_HEADERS
            )
        return PlainTextResponse("ready\n", headers=_HEADERS)

    def metrics(_: Request) -> Response:
        return Response(monitor.metrics.exposition(), media_type=CONTENT_TYPE, headers=_HEADERS)

    routes: list[BaseRoute] = [
        Route("/", page),
        Route("/triage.json", triage_document),
        Route("/livez", livez),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        *extra_routes,
    ]
    return Starlette(routes=routes)


def _refresh_seconds(value: str | None) -> int:
    """The page's data refresh interval: ?refresh=N (2 to 3600 s), else the default."""
    if value is None or not value.isdigit():
        return PAGE_REFRESH_SECONDS
    return min(3600, max(2, int(value)))


class HttpServer:
    """uvicorn serving one app in a background thread; `stop` ends it."""

    def __init__(self, app: Starlette, *, host: str, port: int) -> None:
        """Prepare (not start) the server."""
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
        )
        self.host, self.port = host, port
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)

    def start(self, *, timeout_s: float = 10.0) -> None:
        """Start serving; OSError when the address cannot be bound."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise OSError(f"server: cannot listen on {self.host}:{self.port}")
            time.sleep(0.02)
        log.info("serving the triage page, /livez, /readyz, /metrics on %s", self.url)

    @property
    def url(self) -> str:
        """http://host:port/."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def stop(self) -> None:
        """Ask the server to exit and wait for it."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def serve(
    monitor: Monitor, *, host: str, port: int, extra_routes: Sequence[BaseRoute] = ()
) -> HttpServer | None:
    """Start the HTTP server on host:port (None when port is 0: the server is off)."""
    if port == 0:
        return None
    server = HttpServer(build_app(monitor, extra_routes=extra_routes), host=host, port=port)
    server.start()
    return server
