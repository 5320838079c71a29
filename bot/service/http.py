"""The service's HTTP endpoints (Starlette on uvicorn): the triage page, health and metrics."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.core.model import format_utc
from bot.core.summary import Summary, Usage
from bot.service.limits import DROP_REASONS, DropLog, Limits, bounded_protocol
from bot.service.metrics import CONTENT_TYPE, Metrics
from bot.state.ports import StoreError, TriageRows
from bot.state.readonly import open_read_only
from bot.triage import formats, rows
from bot.triage.keeper import stored_entries

log = logging.getLogger(__name__)

STALE_INTERVALS: Final = 3
PAGE_REFRESH_SECONDS: Final = 30
_HEADERS: Final = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
# How often the event loop's lag is sampled: a sleep of this long that wakes late by L seconds
# means every request arriving meanwhile waited up to L before the loop could look at it.
LAG_EVERY_S: Final = 0.05
# The interpreter's thread switch interval while the server runs (Python's default 5 ms): a
# thread waiting for the GIL asks the running one to let go after this long. The loop lets go
# at every socket call, so a request answered while a cycle computes waits for the GIL a few
# times; at 5 ms each that was most of /livez's 50 ms median under load (benchmarks/server.py).
# At 1 ms, a 1.5 MB page sent while two threads computed was served 2,211 times in 15 s (p95
# 162 ms); at 0.2 ms 4,763 times (p95 62 ms); 0.1 ms served fewer again (a scratch server on
# the bot's HttpServer, 10 clients at nice 10, on this project's 2-core machine).
SWITCH_INTERVAL_S: Final = 0.0002


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
        # several replicas: what this one holds, and why it is not ready (bot.service.replicas)
        self.leases: Callable[[], list[str]] | None = None
        self.lease_problem: Callable[[], str | None] = lambda: None
        self.checks: list[Callable[[], str | None]] = []  # more reasons not to be ready (a queue)
        self.epoch: Callable[[], str] = lambda: ""  # the shared state's identity
        self.started_at = clock()
        self.last_finished: datetime | None = None
        self.failed_at: datetime | None = None  # a cycle failed after the last that finished
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
            self.last_finished, self.failed_at = now, None
            self._usage = Usage(remaining=dict(usage.remaining), reset_at=dict(usage.reset_at))

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

    def load_entries(self, store: TriageRows, *, only_first: bool = False) -> None:
        """Hold the triage rows of `store` in memory (the page answers from them, no copy)."""
        if only_first and self._entries is not None:
            return
        try:
            entries = stored_entries(store)
        except StoreError as exc:
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

        Before any cycle has loaded them, the state is read once (read-only, where it is).
        """
        with self._lock:
            held = self._entries
        if held is not None:
            return held
        with self._loading:  # one copy at a time, however many requests wait
            if self._entries is None:
                with open_read_only(self.state_path) as reader:
                    self.set_entries(stored_entries(reader))
        return self._entries or []

    def set_service_problems(self, problems: Mapping[str, str]) -> None:
        """The service's open problems (repositories, credentials, state) for /readyz."""
        with self._lock:
            self._service_problems = dict(problems)

    def state_problem(self) -> str | None:
        """Why the state cannot be read, or None."""
        try:  # a probe every few seconds: open and read the schema, no copy of the state
            open_read_only(self.state_path).close()
        except StoreError as exc:
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
        return (
            blocking
            + readiness_problems(
                now=self.clock(),
                started_at=self.started_at,
                last_finished=last,
                interval_s=self.interval_s,
                remaining=usage.remaining,
                reset_at=usage.reset_at,
                state_problem=self.state_problem(),
            )
            + [p for p in (self.lease_problem(), *(c() for c in self.checks)) if p is not None]
        )

    def notes(self) -> list[str]:
        """The service's open problems that do not stop it being ready, one line each."""
        with self._lock:
            service = dict(self._service_problems)
        return [f"{key}: {why}" for key, why in sorted(service.items()) if key != "state"]


class LoopLag:
    """How late the server's event loop wakes: a task sleeps LAG_EVERY_S again and again and
    records by how much each wake-up overshot (the time any request arriving then waited
    before the loop could read it). /metrics shows the histogram and the worst of the last
    minute; nothing here touches the state."""

    WINDOW_S: Final = 60.0

    def __init__(self, metrics: Metrics, *, every_s: float = LAG_EVERY_S) -> None:
        """Nothing runs until `watch` is awaited on the loop."""
        self.metrics, self.every_s = metrics, every_s
        self._recent: list[tuple[float, float]] = []  # (monotonic time, lag) of the window
        self._lock = threading.Lock()

    def record(self, lag_s: float, *, at: float) -> None:
        """One sample: its lag into the histogram, the window's worst into the gauge."""
        lag_s = max(0.0, lag_s)
        self.metrics.loop_lag.observe(lag_s)
        with self._lock:
            self._recent = [(t, v) for t, v in self._recent if at - t <= self.WINDOW_S]
            self._recent.append((at, lag_s))
            worst = max(v for _, v in self._recent)
        self.metrics.loop_lag_max.set(worst)

    async def watch(self) -> None:
        """Sample until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.every_s
            await asyncio.sleep(self.every_s)
            now = loop.time()
            self.record(now - due, at=now)


def _livez_first(app: Starlette, monitor: Monitor) -> Callable[..., Any]:
    """The app behind an ASGI callable that answers GET /livez itself: no routing, no thread,
    no state; only whether the scheduling loop still runs."""
    headers = [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/livez":
            await app(scope, receive, send)
            return
        alive = monitor.alive()
        body = b"ok\n" if alive else b"not alive: the scheduler stopped\n"
        await send({
            "type": "http.response.start", "status": 200 if alive else 503,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()), *headers],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return asgi


def build_app(monitor: Monitor, *, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app: GET /, /triage.json, /livez, /readyz, /metrics, plus `extra_routes`."""
    return Starlette(routes=[*Endpoints(monitor).routes(), *extra_routes])


class Endpoints:
    """The handlers of the service's own routes, answering from one Monitor."""

    def __init__(self, monitor: Monitor) -> None:
        """Answer from `monitor`; the page and the document rendered once per generation."""
        self.monitor = monitor
        self.rendered = Rendered(monitor)
        # the renders (and compressions) under way, by loop and what: a request awaits it
        self._rendering: dict[Hashable, asyncio.Future[bytes]] = {}

    def routes(self) -> list[BaseRoute]:
        """GET /, /triage.json, /livez, /readyz, /metrics."""
        return [
            Route("/", self.page),
            Route("/triage.json", self.triage_document),
            Route("/livez", self.livez),
            Route("/readyz", self.readyz),
            Route("/metrics", self.metrics),
        ]

    async def body_of(self, kind: str, refresh: int = 0) -> tuple[int, bytes]:
        """The rendered body of `kind` now and its rows generation: a cached one on the event
        loop, else rendered in a thread."""
        rendered = self.rendered
        key = rendered.key(refresh)  # taken first: newer rows never go under an older key
        body = rendered.cached(kind, key)  # a hit is answered on the event loop, no thread
        if body is None:
            body = await self._once((kind, key), lambda: rendered.render(kind, key))
        return key[0], body

    async def _once(self, what: Hashable, work: Callable[[], bytes]) -> bytes:
        """`work` in a thread, once at a time for `what`: the requests that need it meanwhile
        await that one (at 2,000 pull requests, a new generation met by 20 page requests was
        rendered 10 times at once: most of the process's CPU, each thread holding the GIL the
        event loop needs)."""
        slot = (asyncio.get_running_loop(), what)
        found = self._rendering.get(slot)
        if found is None:
            found = asyncio.ensure_future(run_in_threadpool(work))
            self._rendering[slot] = found
            found.add_done_callback(lambda done: self._done(slot, done))
        return await asyncio.shield(found)  # a request gone does not cancel the others' render

    def _done(self, slot: Hashable, done: asyncio.Future[bytes]) -> None:
        del self._rendering[slot]
        if not done.cancelled():
            done.exception()  # retrieved: every request that awaited it was given it

    async def encoded(
        self, request: Request, generation: int, body: bytes, media_type: str
    ) -> Response:
        """`body` (of rows `generation`) answered gzip-encoded where the client accepts it
        (compressed once per body, in a thread: a 1.5 MB page sent 20 at a time took the event
        loop's time), else as is."""
        headers = {**_HEADERS, "Vary": "Accept-Encoding"}
        if len(body) < GZIP_MIN_BYTES or not accepts_gzip(request.headers.get("accept-encoding")):
            return Response(body, media_type=media_type, headers=headers)
        rendered = self.rendered
        zipped = rendered.zipped(body)
        if zipped is None:
            zipped = await self._once(("gzip", id(body)), lambda: rendered.zip(generation, body))
        headers["Content-Encoding"] = "gzip"
        return Response(zipped, media_type=media_type, headers=headers)

    async def page(self, request: Request) -> Response:
        """GET /: the triage page (?refresh=N: its data refresh interval)."""
        refresh = _refresh_seconds(request.query_params.get("refresh"))
        try:
            generation, body = await self.body_of("page", refresh)
        except StoreError as exc:
            return PlainTextResponse(f"the state cannot be read: {exc}\n", 503, headers=_HEADERS)
        return await self.encoded(request, generation, body, "text/html; charset=utf-8")

    async def triage_document(self, request: Request) -> Response:
        """GET /triage.json: the ci-status-bot.triage/v1 document."""
        try:
            generation, pulls = await self.body_of("json")
        except StoreError as exc:
            return JSONResponse({"error": f"the state cannot be read: {exc}"}, 503)
        document = self.rendered.document(pulls)
        return await self.encoded(request, generation, document, "application/json")

    async def livez(self, _: Request) -> Response:
        """GET /livez (served by _livez_first; kept for the route list)."""
        if not self.monitor.alive():
            return PlainTextResponse("not alive: the scheduler stopped\n", 503, headers=_HEADERS)
        return PlainTextResponse("ok\n", headers=_HEADERS)

    def readyz(self, _: Request) -> Response:
        """GET /readyz: 503 naming why the service is not ready; its notes either way."""
        monitor = self.monitor
        problems, notes = monitor.problems(), monitor.notes()
        listed = "".join(f"problem: {note}\n" for note in notes)
        if problems:
            text = "not ready: " + "; ".join(problems) + "\n" + listed
            return PlainTextResponse(text, 503, headers=_HEADERS)
        if monitor.leases is not None:
            held = ", ".join(monitor.leases()) or "none"
            epoch = monitor.epoch() or "unknown"
            text = f"ready; leases held: {held}; state epoch {epoch}\n"
            return PlainTextResponse(text + listed, headers=_HEADERS)
        return PlainTextResponse("ready\n" + listed, headers=_HEADERS)

    def metrics(self, _: Request) -> Response:
        """GET /metrics: the registry in Prometheus text format."""
        monitor = self.monitor
        if monitor.leases is not None:
            monitor.metrics.leases_held.set(len(monitor.leases()))
        return Response(monitor.metrics.exposition(), media_type=CONTENT_TYPE, headers=_HEADERS)


Key = tuple[int, int, formats.Freshness]  # rows generation, refresh interval, freshness


class Rendered:
    """The page and the JSON document's rows, encoded once per rows generation (and refresh
    interval and freshness) and kept until they change: requests never render them again."""

    MAX_KEPT: Final = 8

    def __init__(self, monitor: Monitor) -> None:
        """Start empty."""
        self.monitor = monitor
        self.renderer = formats.PageRenderer()
        self._kept: dict[tuple[str, Key], bytes] = {}
        self._lock = threading.Lock()
        self._document: tuple[bytes, bytes, bytes] | None = None  # head, rows, the document
        # (rows generation, body, its gzip encoding), newest last
        self._zipped: list[tuple[int, bytes, bytes]] = []

    def key(self, refresh: int = 0) -> Key:
        """What the answer depends on now (taken before the rows are read)."""
        return (self.monitor.generation, refresh, self.monitor.freshness())

    def cached(self, kind: str, key: Key) -> bytes | None:
        """What was rendered under `key`, if still kept."""
        with self._lock:
            return self._kept.get((kind, key))

    def render(self, kind: str, key: Key) -> bytes:
        """Render from the rows held (a thread's work) and keep it under `key`."""
        entries = self.monitor.entries()
        if kind == "page":
            text = self.renderer.render(
                entries, now=self.monitor.clock(), refresh_seconds=key[1], freshness=key[2]
            )
        else:  # the rows of the JSON document; `document` adds the time it is served
            pulls = formats.triage_document(entries, now=self.monitor.clock())["pulls"]
            text = json.dumps(pulls, ensure_ascii=False, separators=(",", ":"))
        body = text.encode("utf-8")
        self.monitor.metrics.page_renders.labels(kind).inc()
        with self._lock:
            for older in [k for k in self._kept if k[1][0] < key[0]]:
                del self._kept[older]  # an older generation's: requests now take the newer key
            self._zipped = [z for z in self._zipped if z[0] >= key[0]]  # and its gzip bytes
            if len(self._kept) >= self.MAX_KEPT:
                self._kept.clear()
            self._kept[(kind, key)] = body
        return body

    def zipped(self, body: bytes) -> bytes | None:
        """The gzip encoding of this very body, if it was made."""
        with self._lock:
            return next((z for _, b, z in self._zipped if b is body), None)

    def zip(self, generation: int, body: bytes) -> bytes:
        """Compress `body` of rows `generation` (a thread's work; zlib lets the GIL go) and
        keep it beside it until a newer generation is rendered (at most GZIP_KEPT bodies)."""
        zipped = gzip.compress(body, compresslevel=6, mtime=0)
        with self._lock:
            if all(generation >= k[1][0] for k in self._kept):  # not one already dropped
                self._zipped = [*self._zipped[-(GZIP_KEPT - 1) :], (generation, body, zipped)]
        return zipped

    def document(self, pulls: bytes) -> bytes:
        """The ci-status-bot.triage/v1 document around its cached rows, generated now (the same
        bytes again within the second its time names: not a copy of the rows per request)."""
        head = formats.triage_document([], now=self.monitor.clock())
        del head["pulls"]
        top = json.dumps(head, separators=(",", ":")).encode()[:-1]
        last = self._document
        if last is not None and last[0] == top and last[1] is pulls:
            return last[2]
        document = top + b',"pulls":' + pulls + b"}"
        self._document = (top, pulls, document)
        return document


GZIP_MIN_BYTES: Final = 1024  # a smaller body is sent as it is
GZIP_KEPT: Final = 4  # the compressed bodies kept (the page's, the document's of this second)


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header accepts gzip (named, and not with q=0)."""
    for item in (header or "").split(","):
        name, *params = item.split(";")
        if name.strip().lower() != "gzip":
            continue
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def _refresh_seconds(value: str | None) -> int:
    """The page's data refresh interval: ?refresh=N (2 to 3600 s), else the default."""
    if value is None or not value.isdigit():
        return PAGE_REFRESH_SECONDS
    return min(3600, max(2, int(value)))


SHUTDOWN_GRACE_S: Final = 1  # requests being answered get this long after a stop


class _Server(uvicorn.Server):
    """uvicorn's server, with the event loop's lag watched while it serves."""

    lag: LoopLag | None = None

    async def serve(self, sockets: Any = None) -> None:
        watcher = None if self.lag is None else asyncio.create_task(self.lag.watch())
        try:
            await super().serve(sockets)
        finally:
            if watcher is not None:
                watcher.cancel()


class HttpServer:
    """uvicorn serving one app in a background thread; `stop` ends it."""

    def __init__(
        self,
        app: Any,
        *,
        host: str,
        port: int,
        limits: Limits | None = None,
        drops: DropLog | None = None,
        lag: LoopLag | None = None,
    ) -> None:
        """Prepare (not start) the server; `limits` bound slow and numerous clients; `lag`
        watches the event loop while it serves."""
        protocol = bounded_protocol(limits or Limits(), drops or DropLog())
        config = uvicorn.Config(
            app, host=host, port=port, log_level="error", access_log=False, lifespan="off",
            http=protocol, log_config=None, timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )  # fmt: skip
        self.host, self.port = host, port
        self._server = _Server(config)
        self._server.lag = lag
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)

    def start(self, *, timeout_s: float = 10.0) -> None:
        """Start serving; OSError when the address cannot be bound."""
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)  # the loop gets the GIL back sooner
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
        if self._thread.is_alive():
            log.warning("the HTTP server did not end within %g s: exiting without it",
                        SHUTDOWN_GRACE_S + 1.0)  # fmt: skip


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
    app = _livez_first(build_app(monitor, extra_routes=extra_routes), monitor)
    lag = LoopLag(monitor.metrics)
    server = HttpServer(app, host=host, port=port, limits=limits, drops=drops, lag=lag)
    server.start()
    return server
