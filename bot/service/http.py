"""The service's HTTP endpoints (Starlette on uvicorn): the triage page, health and metrics."""

from __future__ import annotations

import logging
import sqlite3
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
from bot.service.limits import DROP_REASONS, DropLog, Limits, bounded_protocol
from bot.service.metrics import CONTENT_TYPE, Metrics
from bot.state.sqlite import Store, StoreError
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
        self._usage = Usage()
        self._cycle_began: float | None = None
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        self._entries: list[rows.TriageEntry] | None = None
        self.generation = 0  # bumped whenever the rows held change
        self._service_problems: dict[str, str] = {}

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
            self.last_finished = now
            self._usage = Usage(remaining=dict(usage.remaining), reset_at=dict(usage.reset_at))

    def cycle_failed(self) -> None:
        """A cycle raised before it finished."""
        self.metrics.cycle_failed(seconds=self._elapsed())

    def load_entries(self, store: Store, *, only_first: bool = False) -> None:
        """Hold the triage rows of `store` in memory (the page answers from them, no copy)."""
        if only_first and self._entries is not None:
            return
        try:
            entries = stored_entries(store)
        except (StoreError, sqlite3.Error) as exc:
            log.warning("could not read the triage view: %s", exc)
            return
        self.set_entries(entries)

    def set_entries(self, entries: Sequence[rows.TriageEntry]) -> None:
        """Replace the rows held for the page (a new generation: cached pages are dropped)."""
        view = rows.ordered(entries, rows.Filters(repos=frozenset(self.repos)))
        with self._lock:
            self._entries = view
            self.generation += 1
        self.metrics.set_pulls(((e.repo, e.verdict.value) for e in view), repos=self.repos)

    def entries(self) -> list[rows.TriageEntry]:
        """The triage view of the configured repositories, most urgent first (from memory).

        Before any cycle has loaded them, the state is read once (a read-only copy).
        """
        with self._lock:
            held = self._entries
        if held is not None:
            return held
        with self._loading:  # one copy at a time, however many requests wait
            if self._entries is None:
                with Store.open_readonly(self.state_path) as store:
                    self.set_entries(stored_entries(store))
        return self._entries or []

    def set_service_problems(self, problems: Mapping[str, str]) -> None:
        """The service's open problems (repositories, credentials, state) for /readyz."""
        with self._lock:
            self._service_problems = dict(problems)

    def state_problem(self) -> str | None:
        """Why the state cannot be read, or None."""
        try:  # a probe every few seconds: open and read the schema, no copy of the state
            Store.check_readable(self.state_path)
        except (StoreError, sqlite3.Error) as exc:
            return str(exc)
        return None

    def problems(self) -> list[str]:
        """Why the service is not ready (empty: ready)."""
        with self._lock:
            usage, last = self._usage, self.last_finished
            service = dict(self._service_problems)
        unread = [repo for repo in self.repos if repo in service]
        blocking = []
        if self.repos and len(unread) == len(self.repos):
            blocking.append("no configured repository could be read")
        return blocking + readiness_problems(
            now=self.clock(),
            started_at=self.started_at,
            last_finished=last,
            interval_s=self.interval_s,
            remaining=usage.remaining,
            reset_at=usage.reset_at,
            state_problem=self.state_problem(),
        )

    def notes(self) -> list[str]:
        """The service's open problems that do not stop it being ready, one line each."""
        with self._lock:
            service = dict(self._service_problems)
        return [f"{key}: {why}" for key, why in sorted(service.items()) if key != "state"]


def build_app(monitor: Monitor, *, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app: GET /, /triage.json, /livez, /readyz, /metrics, plus `extra_routes`."""
    pages = PageCache(formats.PageRenderer())

    def page(request: Request) -> Response:
        generation = monitor.generation  # read first: newer rows never go under an older key
        try:
            entries = monitor.entries()
        except (StoreError, sqlite3.Error) as exc:
            return PlainTextResponse(f"the state cannot be read: {exc}\n", 503, headers=_HEADERS)
        refresh = _refresh_seconds(request.query_params.get("refresh"))
        html = pages.page(monitor, entries, refresh, generation=generation)
        return HTMLResponse(html, headers=_HEADERS)

    def triage_document(_: Request) -> Response:
        try:
            entries = monitor.entries()
        except (StoreError, sqlite3.Error) as exc:
            return JSONResponse({"error": f"the state cannot be read: {exc}"}, 503)
        document = formats.triage_document(entries, now=monitor.clock())
        return JSONResponse(document, headers=_HEADERS)

    def livez(_: Request) -> Response:
        if not monitor.alive():
            return PlainTextResponse("not alive: the scheduler stopped\n", 503, headers=_HEADERS)
        return PlainTextResponse("ok\n", headers=_HEADERS)

    def readyz(_: Request) -> Response:
        problems, notes = monitor.problems(), monitor.notes()
        listed = "".join(f"problem: {note}\n" for note in notes)
        if problems:
            text = "not ready: " + "; ".join(problems) + "\n" + listed
            return PlainTextResponse(text, 503, headers=_HEADERS)
        return PlainTextResponse("ready\n" + listed, headers=_HEADERS)

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


class PageCache:
    """The rendered page of the rows held, per refresh interval, until the rows change."""

    MAX_PAGES: Final = 8

    def __init__(self, renderer: formats.PageRenderer) -> None:
        """Start empty."""
        self.renderer = renderer
        self._pages: dict[tuple[int, int, datetime], str] = {}
        self._lock = threading.Lock()

    def page(
        self,
        monitor: Monitor,
        entries: Sequence[rows.TriageEntry],
        refresh: int,
        *,
        generation: int,
    ) -> str:
        """The page as of the last cycle (rendered once per rows generation and interval)."""
        as_of = monitor.last_finished
        if as_of is None:  # no cycle yet: the state's rows, as of now
            return self.renderer.render(entries, now=monitor.clock(), refresh_seconds=refresh)
        key = (generation, refresh, as_of)
        with self._lock:
            cached = self._pages.get(key)
        if cached is not None:
            return cached
        html = self.renderer.render(entries, now=as_of, refresh_seconds=refresh)
        with self._lock:
            if len(self._pages) >= self.MAX_PAGES:
                self._pages.clear()
            self._pages[key] = html
        return html


def _refresh_seconds(value: str | None) -> int:
    """The page's data refresh interval: ?refresh=N (2 to 3600 s), else the default."""
    if value is None or not value.isdigit():
        return PAGE_REFRESH_SECONDS
    return min(3600, max(2, int(value)))


SHUTDOWN_GRACE_S: Final = 2  # requests being answered get this long after a stop


class HttpServer:
    """uvicorn serving one app in a background thread; `stop` ends it."""

    def __init__(
        self,
        app: Starlette,
        *,
        host: str,
        port: int,
        limits: Limits | None = None,
        drops: DropLog | None = None,
    ) -> None:
        """Prepare (not start) the server; `limits` bound slow and numerous clients."""
        protocol = bounded_protocol(limits or Limits(), drops or DropLog())
        config = uvicorn.Config(
            app, host=host, port=port, log_level="error", access_log=False, lifespan="off",
            http=protocol, log_config=None, timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )  # fmt: skip
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

    def begin_stop(self) -> None:
        """Ask the server to exit (it closes connections whose request is still arriving)."""
        self._server.should_exit = True

    def stop(self) -> None:
        """Ask the server to exit and wait for it (a little longer than its own grace)."""
        self.begin_stop()
        if self._thread.is_alive():
            self._thread.join(timeout=SHUTDOWN_GRACE_S + 1.0)


def serve(
    monitor: Monitor,
    *,
    host: str,
    port: int,
    extra_routes: Sequence[BaseRoute] = (),
    limits: Limits | None = None,
) -> HttpServer | None:
    """Start the HTTP server on host:port (None when port is 0: the server is off)."""
    if port == 0:
        return None
    dropped = monitor.metrics.dropped_connections
    drops = DropLog(lambda reason: dropped.labels(reason).inc())
    for reason in DROP_REASONS:
        dropped.labels(reason)  # shown at 0 before the first drop
    app = build_app(monitor, extra_routes=extra_routes)
    server = HttpServer(app, host=host, port=port, limits=limits, drops=drops)
    server.start()
    return server
