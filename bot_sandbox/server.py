"""The loopback HTTP server: routing, auth, rate limits, ETags, fault injection, recording."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from bot_sandbox import graphql_api, providers_api, rest_api, rtd_api
from bot_sandbox.world import API, RTD_API, Answer, AppRec, Call, World

logger = logging.getLogger(__name__)

EXPOSED = (
    "ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, "
    "X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset, X-OAuth-Scopes, "
    "X-Accepted-OAuth-Scopes"
)
GITHUB_PREFIX = "/api/v3"
GRAPHQL_PATH = "/api/graphql"
RTD_PREFIX = "/rtd/api/v3"
CODECOV_PREFIX = "/codecov/api/v2"
AZURE_PREFIX = "/azure"
CONTROL_PREFIX = "/_sandbox/"


@dataclass(frozen=True)
class Recorded:
    """One request the sandbox received (path relative to the service root) and its status."""

    service: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int
    graphql_cost: int | None = None
    graphql_operation: str | None = None
    route: str = ""
    at: float = 0.0


@dataclass
class _Rule:
    method: str | None
    path: re.Pattern[str]
    status: int
    times: int
    body: bytes | Callable[[], Any] | None  # a callable is called for each answer
    headers: dict[str, str | Callable[[], str]]  # a callable is read when answering
    apply: bool
    delay_s: float
    when: str | None = None
    transform: Callable[[Any], Any] | None = None


@dataclass
class _Bucket:
    limit: int
    remaining: int
    reset: float
    used: int = 0
    reset_after_refusal_s: float | None = None  # the window starts at the first refusal

    def refresh(self, now: float) -> None:
        if now >= self.reset:
            self.remaining, self.used, self.reset = self.limit, 0, now + 3600

    def headers(self, resource: str) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-reset": str(int(self.reset)),
            "x-ratelimit-used": str(self.used),
            "x-ratelimit-resource": resource,
        }


# The name of a GraphQL request's query, from its JSON body: {"query": "query Name(...".
_QUERY_NAME = re.compile(rb'\s*\{\s*"query"\s*:\s*"(?:\s|\\n)*(?:query|mutation)\s+(\w+)')


@dataclass
class _Stats:
    by_route: Counter[str] = field(default_factory=Counter)
    by_query: Counter[str] = field(default_factory=Counter)  # GraphQL requests by query name
    graphql_points: int = 0
    writes: int = 0
    writes_per_minute: Counter[str] = field(default_factory=Counter)
    requests: int = 0


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sandbox: Sandbox) -> None:
        super().__init__(address, _Handler)
        self.sandbox = sandbox

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a bot refusing a huge page) is no sandbox error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Sandbox:
    """A fake GitHub (REST + GraphQL) and Read the Docs API v3 on 127.0.0.1, serving a World."""

    def __init__(
        self, world: World, *, latency_ms: float = 0, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        """Bind the server (not yet serving); `latency_ms` is slept before every answer."""
        self.world = world
        self.latency_ms = latency_ms
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._rules: list[_Rule] = []
        now = time.time()
        self._buckets = {
            "core": _Bucket(5000, 5000, now + 3600),
            "graphql": _Bucket(5000, 5000, now + 3600),
        }
        # an installation's own budget (GitHub gives each installation one): set per
        # installation, or for every installation token with `installation_limits = True`
        self._installation_buckets: dict[tuple[int, str], _Bucket] = {}
        self.installation_limits = False
        self._stats = _Stats()
        self._http = _HTTPServer((host, port), self)
        self._thread: threading.Thread | None = None
        bound_host, bound_port = self._http.server_address[:2]
        self.base_url = f"http://{bound_host!s}:{bound_port}"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Sandbox:
        """Serve in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._http.serve_forever, args=(0.05,), name="sandbox", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._http.server_close()

    def serve_forever(self) -> None:
        """Serve in the calling thread until shutdown() is called from elsewhere."""
        self._http.serve_forever(0.05)

    def shutdown(self) -> None:
        """Stop serve_forever() (from another thread or a signal handler thread)."""
        self._http.shutdown()

    def __enter__(self) -> Sandbox:
        """Start serving."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop serving."""
        self.stop()

    # -- addresses -------------------------------------------------------------------------

    @property
    def github_url(self) -> str:
        """REST base URL (GitHub Enterprise layout): http://127.0.0.1:PORT/api/v3."""
        return self.base_url + GITHUB_PREFIX

    @property
    def graphql_url(self) -> str:
        """GraphQL endpoint: http://127.0.0.1:PORT/api/graphql."""
        return self.base_url + GRAPHQL_PATH

    @property
    def rtd_url(self) -> str:
        """RTD API v3 base URL: http://127.0.0.1:PORT/rtd/api/v3."""
        return self.base_url + RTD_PREFIX

    @property
    def codecov_url(self) -> str:
        """Codecov API v2 base URL: http://127.0.0.1:PORT/codecov/api/v2."""
        return self.base_url + CODECOV_PREFIX

    @property
    def azure_url(self) -> str:
        """Azure DevOps base URL (dev.azure.com's place): http://127.0.0.1:PORT/azure."""
        return self.base_url + AZURE_PREFIX

    # -- recording, faults, limits ---------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        """A copy of every request recorded so far (control API excluded)."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget recorded requests."""
        with self._lock:
            self._requests.clear()

    def fail(
        self,
        method: str | None,
        path: str,
        status: int = 502,
        *,
        times: int = 1,
        body: bytes | str | dict[str, Any] | Callable[[], Any] | None = None,
        headers: dict[str, str | Callable[[], str]] | None = None,
        apply: bool = False,
        delay_s: float = 0.0,
        when: str | None = None,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        """Answer matching requests (path regex, fullmatch, no query) with `status`.

        The path may be given relative to the service root (/repos/...) or in full
        (/api/v3/repos/...); `times=-1` fails forever; `apply=True` performs the real
        operation first; `delay_s` sleeps before answering; status 0 closes the connection
        without an answer. A callable `body` is called for each answer (an error page that
        differs per request, as a CDN's does). `when` limits the rule to
        requests whose body or query string contains that text (e.g. a GraphQL operation
        name); `transform` performs the real operation and rewrites its JSON payload (a
        repeated cursor, a foreign `next` link), keeping its status and headers.
        """
        raw = body if body is None or callable(body) else _as_bytes(body)
        rule = _Rule(
            method.upper() if method else None,
            re.compile(path),
            status,
            times,
            raw,
            dict(headers or {}),
            apply,
            delay_s,
            when,
            transform,
        )
        with self._lock:
            self._rules.append(rule)

    def clear_failures(self) -> None:
        """Drop every fault rule."""
        with self._lock:
            self._rules.clear()

    def set_rate_limit(
        self,
        resource: str,
        *,
        limit: int = 5000,
        remaining: int | None = None,
        reset_in_s: float = 3600,
    ) -> None:
        """Set the primary rate limit of "core" or "graphql"."""
        if resource not in self._buckets:
            raise ValueError(f"unknown rate-limit resource {resource!r}")
        left = limit if remaining is None else remaining
        with self._lock:
            self._buckets[resource] = _Bucket(limit, left, time.time() + reset_in_s, limit - left)

    def set_installation_rate_limit(
        self,
        installation_id: int,
        resource: str,
        *,
        limit: int = 5000,
        remaining: int | None = None,
        reset_in_s: float = 3600,
        reset_after_refusal_s: float | None = None,
    ) -> None:
        """Give one installation's tokens a primary rate limit of their own ("core", "graphql").
        With `reset_after_refusal_s` the budget resets that long after the first request it
        refuses (however long the client took to send it), not `reset_in_s` from now."""
        if resource not in self._buckets:
            raise ValueError(f"unknown rate-limit resource {resource!r}")
        left = limit if remaining is None else remaining
        bucket = _Bucket(limit, left, time.time() + reset_in_s, limit - left,
                         reset_after_refusal_s)  # fmt: skip
        with self._lock:
            self._installation_buckets[(installation_id, resource)] = bucket

    def installation_rate_limit(self, installation_id: int, resource: str) -> dict[str, int]:
        """One installation's own rate-limit resource as it stands (not refreshed: a reset
        that has passed is still named)."""
        with self._lock:
            bucket = self._bucket(resource, installation_id)
            return {"limit": bucket.limit, "remaining": bucket.remaining,
                    "reset": int(bucket.reset), "used": bucket.used}  # fmt: skip

    def _bucket(self, resource: str, installation: int | None) -> _Bucket:
        """The bucket a request spends from (under the lock): its installation's, if it has one."""
        if installation is None:
            return self._buckets[resource]
        key = (installation, resource)
        found = self._installation_buckets.get(key)
        if found is None and self.installation_limits:
            found = _Bucket(5000, 5000, time.time() + 3600)
            self._installation_buckets[key] = found
        return found if found is not None else self._buckets[resource]

    def rate_limit(self, resource: str) -> dict[str, int]:
        """The current state of one rate-limit resource."""
        with self._lock:
            bucket = self._buckets[resource]
            bucket.refresh(time.time())
            return {
                "limit": bucket.limit,
                "remaining": bucket.remaining,
                "reset": int(bucket.reset),
                "used": bucket.used,
            }

    def stats(self) -> dict[str, Any]:
        """Counts of requests by service/method/route, GraphQL points, writes (also per minute)."""
        with self._lock:
            s = self._stats
            return {
                "requests": s.requests,
                "by_route": dict(sorted(s.by_route.items())),
                "by_query": dict(sorted(s.by_query.items())),
                "graphql_points": s.graphql_points,
                "writes": s.writes,
                "writes_per_minute": dict(sorted(s.writes_per_minute.items())),
                "rate_limit": {
                    name: {"limit": b.limit, "remaining": b.remaining, "used": b.used}
                    for name, b in self._buckets.items()
                },
            }

    def reset_stats(self) -> None:
        """Zero the statistics (recorded requests are kept)."""
        with self._lock:
            self._stats = _Stats()

    # -- internals used by the handler -----------------------------------------------------

    def _take_rule(self, method: str, paths: tuple[str, ...], call: Call) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.method not in (None, method):
                    continue
                if not any(rule.path.fullmatch(p) for p in paths):
                    continue
                if rule.when is not None and not _mentions(call, rule.when):
                    continue
                if rule.times > 0:
                    rule.times -= 1
                    if rule.times == 0:
                        self._rules.remove(rule)
                return rule
        return None

    def _bucket_blocked(self, resource: str, iid: int | None = None) -> dict[str, str] | None:
        with self._lock:
            bucket = self._bucket(resource, iid)
            now = time.time()
            bucket.refresh(now)
            if bucket.remaining <= 0:
                if bucket.reset_after_refusal_s is not None:
                    bucket.reset = now + bucket.reset_after_refusal_s
                    bucket.reset_after_refusal_s = None
                return bucket.headers(resource)
            return None

    def _charge(self, resource: str, points: int, iid: int | None = None) -> dict[str, str]:
        with self._lock:
            bucket = self._bucket(resource, iid)
            bucket.refresh(time.time())
            bucket.remaining = max(0, bucket.remaining - points)
            bucket.used += points
            if resource == "graphql":
                self._stats.graphql_points += points
            return bucket.headers(resource)

    def _peek(self, resource: str, iid: int | None = None) -> dict[str, str]:
        with self._lock:
            bucket = self._bucket(resource, iid)
            bucket.refresh(time.time())
            return bucket.headers(resource)

    def _graphql_charge(self, points: int, iid: int | None = None) -> dict[str, Any]:
        headers = self._charge("graphql", points, iid)
        return {
            "limit": int(headers["x-ratelimit-limit"]),
            "remaining": int(headers["x-ratelimit-remaining"]),
            "used": int(headers["x-ratelimit-used"]),
            "resetAt": graphql_api.reset_at(float(headers["x-ratelimit-reset"])),
        }

    def _record(self, rec: Recorded, *, write: bool) -> None:
        with self._lock:
            self._requests.append(rec)
            s = self._stats
            s.requests += 1
            s.by_route[f"{rec.service} {rec.method} {rec.route}"] += 1
            named = _QUERY_NAME.match(rec.body) if rec.path.endswith("graphql") else None
            if named:
                s.by_query[named.group(1).decode()] += 1
            if write:
                s.writes += 1
                minute = datetime.fromtimestamp(rec.at, UTC).strftime("%Y-%m-%dT%H:%MZ")
                s.writes_per_minute[minute] += 1

    def _rate_limit_json(self) -> dict[str, Any]:
        with self._lock:
            now = time.time()
            resources = {}
            for name, bucket in self._buckets.items():
                bucket.refresh(now)
                resources[name] = {
                    "limit": bucket.limit,
                    "used": bucket.used,
                    "remaining": bucket.remaining,
                    "reset": int(bucket.reset),
                }
            resources["search"] = {"limit": 30, "used": 0, "remaining": 30, "reset": int(now) + 60}
            return {"resources": resources, "rate": resources["core"]}


@dataclass
class _Reply:
    status: int
    body: bytes
    headers: dict[str, str]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ci-status-bot-sandbox"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet."""

    def do_GET(self) -> None:
        """Serve GET."""
        self._serve()

    def do_POST(self) -> None:
        """Serve POST."""
        self._serve()

    def do_PATCH(self) -> None:
        """Serve PATCH."""
        self._serve()

    def do_PUT(self) -> None:
        """Serve PUT."""
        self._serve()

    def do_DELETE(self) -> None:
        """Serve DELETE."""
        self._serve()

    # -- plumbing --------------------------------------------------------------------------

    def _serve(self) -> None:
        sandbox = self.server.sandbox
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        headers = {k.lower(): v for k, v in self.headers.items()}
        started = time.time()
        if path.startswith(CONTROL_PREFIX):
            reply = _control(sandbox, self.command, path, body)
            self._write(reply)
            return
        if path.startswith(RTD_PREFIX + "/"):
            service, rel = "rtd", path[len(RTD_PREFIX) :]
        elif path.startswith(CODECOV_PREFIX + "/"):
            service, rel = "codecov", path[len(CODECOV_PREFIX) :]
        elif path.startswith(AZURE_PREFIX + "/"):
            service, rel = "azure", path[len(AZURE_PREFIX) :]
        elif path == GRAPHQL_PATH:
            service, rel = "github", "/graphql"
        elif path.startswith(GITHUB_PREFIX + "/") or path == GITHUB_PREFIX:
            service, rel = "github", path[len(GITHUB_PREFIX) :] or "/"
        else:
            service, rel = "github", path
        call = Call(
            world=sandbox.world,
            method=self.command,
            path=rel,
            query=query,
            headers=headers,
            body=body,
            github_url=sandbox.github_url,
            rtd_url=sandbox.rtd_url,
        )
        try:
            if service == "rtd":
                reply, rule, kind, answer = self._rtd(sandbox, call, path)
            elif service in _PROVIDERS:
                reply, rule, kind, answer = self._provider(sandbox, call, path, service)
            else:
                reply, rule, kind, answer = self._github(sandbox, call, path)
        except Exception as exc:
            logger.exception("sandbox failed on %s %s", self.command, self.path)
            payload = {"message": f"sandbox error: {type(exc).__name__}: {exc}"}
            reply, rule, kind, answer = (
                _Reply(500, json.dumps(payload).encode(), {}),
                None,
                "error",
                None,
            )
        operation = graphql_api.sniff_operation(body) if rel == "/graphql" else None
        write = (
            service == "github"
            and self.command in ("POST", "PATCH", "PUT", "DELETE")
            and operation in (None, "mutation")
            and kind != "access_tokens"
        )
        sandbox._record(
            Recorded(
                service=service,
                method=self.command,
                path=rel,
                query=query,
                headers=headers,
                body=body,
                status=reply.status,
                graphql_cost=answer.graphql_cost if answer else None,
                graphql_operation=operation,
                route=kind,
                at=started,
            ),
            write=write,
        )
        if rule is not None and rule.delay_s > 0:
            time.sleep(rule.delay_s)
        if sandbox.latency_ms > 0:
            time.sleep(sandbox.latency_ms / 1000)
        if rule is not None and rule.status == 0:  # a dropped connection: no answer at all
            self.close_connection = True
            return
        self._write(reply)

    def _write(self, reply: _Reply) -> None:
        try:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if reply.status not in (204, 304):
                self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if reply.status not in (204, 304) and self.command != "HEAD":
                self.wfile.write(reply.body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- GitHub ----------------------------------------------------------------------------

    def _github(
        self, sandbox: Sandbox, call: Call, full_path: str
    ) -> tuple[_Reply, _Rule | None, str, Answer | None]:
        world = sandbox.world
        if call.path == "/graphql":
            kind, auth, resource = "graphql", "token", "graphql"
            found: tuple[rest_api.Route, dict[str, str]] | None = None
        else:
            found = rest_api.match(world, call.method, call.path)
            kind = found[0].kind if found else "unknown"
            auth = found[0].auth if found else "token"
            resource = "core"
        problem = self._authenticate(world, call, auth) or _lacks_permission(world, call, kind)
        if problem is not None:
            return (
                self._github_reply(sandbox, call, problem, resource, charged=False),
                None,
                kind,
                problem,
            )
        if kind != "rate_limit":
            blocked = sandbox._bucket_blocked(resource, _installation_of(world, call))
            if blocked is not None:
                ip = self.client_address[0]
                reply = _Reply(
                    403,
                    json.dumps({"message": f"API Rate Limit Exceeded for {ip}"}).encode(),
                    {**_github_headers(), **blocked},
                )
                return reply, None, kind, None
        rule = sandbox._take_rule(call.method, (call.path, full_path), call)
        if rule is not None and not rule.apply and rule.transform is None:
            answer = _fault_answer(rule, "github")
        elif call.path == "/graphql":
            answer = self._graphql(sandbox, call)
        elif found is None:
            answer = rest_api.not_found()
        elif kind == "rate_limit":
            answer = Answer(200, sandbox._rate_limit_json(), charge=False)
        else:
            with world.lock:
                answer = found[0].handler(call, found[1])
        if rule is not None and rule.transform is not None:
            answer = _transformed(rule, answer)
        elif rule is not None and rule.apply:
            answer = _fault_answer(rule, "github")
        reply = self._github_reply(sandbox, call, answer, resource, charged=answer.charge)
        return reply, rule, kind, answer

    def _authenticate(self, world: World, call: Call, auth: str) -> Answer | None:
        scheme, _, token = call.headers.get("authorization", "").partition(" ")
        scheme, token = scheme.lower(), token.strip()
        if auth == "jwt":
            slug = _jwt_app(world, token) if scheme == "bearer" else None
            if slug is None:
                return rest_api.error(401, "A JSON web token could not be decoded")
            call.login, call.token = slug, token
            return None
        if scheme not in ("token", "bearer") or not token:
            return rest_api.error(401, "Requires authentication")
        login = world.login_for(token)
        if login is None:
            return rest_api.error(401, "Bad credentials")
        call.login, call.token = login, token
        return _outside_installation(world, token, call.path)

    def _graphql(self, sandbox: Sandbox, call: Call) -> Answer:
        if call.method != "POST":
            return rest_api.not_found()
        try:
            body = json.loads(call.body or b"null")
        except ValueError:
            return Answer(
                400,
                {
                    "message": "Problems parsing JSON",
                    "documentation_url": "https://docs.github.com/graphql",
                },
            )
        assert call.login is not None
        rec = sandbox.world.token_record(call.token) if call.token else None
        iid = _installation_of(sandbox.world, call)
        installation = None if iid is None else sandbox.world.app_by_installation(iid)
        outcome = graphql_api.run_query(
            sandbox.world, body, login=call.login,
            charge=lambda points: sandbox._graphql_charge(points, iid),
            permissions=None if rec is None else rec.permissions,
            reach=None if installation is None else frozenset(installation.repos),
        )  # fmt: skip
        return Answer(
            200,
            outcome.payload,
            graphql_cost=outcome.cost,
            graphql_operation=outcome.operation,
            charge=False,  # run_query charged the points itself
        )

    def _github_reply(
        self, sandbox: Sandbox, call: Call, answer: Answer, resource: str, *, charged: bool
    ) -> _Reply:
        headers = {**_github_headers(), **answer.headers}
        iid = _installation_of(sandbox.world, call)
        token = sandbox.world.token_record(call.token) if call.token else None
        if token is not None and token.scopes is not None:  # a classic token says its scopes
            headers["X-OAuth-Scopes"] = token.scopes
        body = answer.raw if answer.raw is not None else _dump(answer.payload, call)
        status = answer.status
        if call.method == "GET" and status == 200:
            digest = hashlib.sha256((call.login or "").encode() + b"\0" + body).hexdigest()
            etag = f'W/"{digest}"'
            headers["ETag"] = etag
            headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
            if _etag_matches(call.headers.get("if-none-match"), digest):
                headers.update(sandbox._peek(resource, iid))
                return _Reply(304, b"", headers)
        if charged and status not in (401,):
            headers.update(sandbox._charge(resource, 1, iid))
        else:
            headers.update(sandbox._peek(resource, iid))
        # A fault rule's own rate-limit headers win (a limit met on one request only).
        own = {
            k.lower(): v for k, v in answer.headers.items() if k.lower().startswith("x-ratelimit")
        }
        headers.update(own)
        if status in (204, 304):
            body = b""
        return _Reply(status, body, headers)

    # -- RTD -------------------------------------------------------------------------------

    def _rtd(
        self, sandbox: Sandbox, call: Call, full_path: str
    ) -> tuple[_Reply, _Rule | None, str, Answer | None]:
        kind = rtd_api.route_kind(call.method, call.path)
        rule = sandbox._take_rule(call.method, (call.path, full_path), call)
        if rule is not None and not rule.apply and rule.transform is None:
            answer = _fault_answer(rule, "rtd")
        else:
            answer = rtd_api.handle(call)
            if rule is not None and rule.transform is not None:
                answer = _transformed(rule, answer)
            elif rule is not None:
                answer = _fault_answer(rule, "rtd")
        body = answer.raw if answer.raw is not None else _dump(answer.payload, call)
        headers = {
            "Content-Type": "application/json",
            "Allow": "GET, HEAD, OPTIONS",
            "Vary": "Accept, Authorization",
        }
        headers.update(answer.headers)
        return _Reply(answer.status, body, headers), rule, kind, answer

    def _provider(
        self, sandbox: Sandbox, call: Call, full_path: str, service: str
    ) -> tuple[_Reply, _Rule | None, str, Answer | None]:
        """Codecov or Azure DevOps: the real answer, or a fault rule's, as for RTD."""
        handle = _PROVIDERS[service]
        rule = sandbox._take_rule(call.method, (call.path, full_path), call)
        if rule is not None and not rule.apply and rule.transform is None:
            answer = _fault_answer(rule, service)
        else:
            answer = handle(call)
            if rule is not None and rule.transform is not None:
                answer = _transformed(rule, answer)
            elif rule is not None:
                answer = _fault_answer(rule, service)
        body = answer.raw if answer.raw is not None else _dump(answer.payload, call)
        headers = {"Content-Type": "application/json; charset=utf-8"}
        headers.update(answer.headers)
        kind = f"{service}.{'uploads' if call.path.endswith('/uploads/') else 'record'}"
        return _Reply(answer.status, body, headers), rule, kind, answer


_PROVIDERS = {"codecov": providers_api.codecov_handle, "azure": providers_api.azure_handle}


def _github_headers() -> dict[str, str]:
    return {
        "Content-Type": "application/json; charset=utf-8",
        "X-GitHub-Media-Type": "github.v3; format=json",
        "x-github-api-version-selected": "2022-11-28",
        "X-GitHub-Request-Id": base64.b16encode(
            hashlib.sha1(str(time.time_ns()).encode()).digest()[:8]
        ).decode(),
        "Access-Control-Expose-Headers": EXPOSED,
    }


def _dump(payload: Any, call: Call) -> bytes:
    if payload is None:
        return b""
    text = json.dumps(payload, separators=(",", ":"))
    text = text.replace(API + "/", call.github_url + "/").replace(RTD_API + "/", call.rtd_url + "/")
    return text.encode()


def _etag_matches(header: str | None, digest: str) -> bool:
    if not header:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or any(t.removeprefix("W/").strip('"') == digest for t in tags)


def _installation_of(world: World, call: Call) -> int | None:
    """The installation whose token made the request (None: a user's token, a JWT, none)."""
    rec = world.token_record(call.token) if call.token else None
    return None if rec is None else rec.installation_id


def _outside_installation(world: World, token: str, path: str) -> Answer | None:
    """An installation token reaches only its installation's repositories (REST): else 404."""
    rec = world.token_record(token)
    found = _REPO_PATH.match(path)
    if rec is None or rec.installation_id is None or found is None:
        return None
    installation = world.app_by_installation(rec.installation_id)
    if installation is not None and f"{found[1]}/{found[2]}" in installation.repos:
        return None
    return rest_api.not_found()


_REPO_PATH = re.compile(r"/repos/([^/]+)/([^/]+)")

# The permission (and level) each REST route needs of a fine-grained or installation token.
_NEEDS = {
    "repo": ("metadata", "read"),
    "pulls.list": ("pull_requests", "read"), "pulls.get": ("pull_requests", "read"),
    "check-runs.list": ("checks", "read"), "check-runs.get": ("checks", "read"),
    "check-suites.list": ("checks", "read"), "check-suites.get": ("checks", "read"),
    "status.combined": ("statuses", "read"), "statuses.list": ("statuses", "read"),
    "issues.get": ("issues", "read"), "comments.list": ("issues", "read"),
    "comments.get": ("issues", "read"), "comments.create": ("issues", "write"),
    "comments.edit": ("issues", "write"), "comments.delete": ("issues", "write"),
}  # fmt: skip
_LEVELS = {"read": 1, "write": 2}


def _lacks_permission(world: World, call: Call, kind: str) -> Answer | None:
    """GitHub's 403 for a token whose permissions (when it has a list) do not cover the route."""
    rec = world.token_record(call.token) if call.token else None
    need = _NEEDS.get(kind)
    if rec is None or rec.permissions is None or need is None:
        return None
    permission, level = need
    if _LEVELS.get(rec.permissions.get(permission, ""), 0) >= _LEVELS[level]:
        return None
    who = "integration" if rec.installation_id is not None else "personal access token"
    return rest_api.error(403, f"Resource not accessible by {who}")


def _jwt_app(world: World, token: str) -> str | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
        issuer = str(claims.get("iss"))
    except (ValueError, AttributeError):
        issuer = ""
    with world.lock:
        found = next((a for a in world.apps.values() if str(a.app_id) == issuer), None)
        if found is None and len(world.apps) == 1:
            found = next(iter(world.apps.values()))
    if found is None or not _signed_by(found, token):
        return None
    return found.slug


def _signed_by(app: AppRec, token: str) -> bool:
    """Whether the JWT's RS256 signature verifies with the App's key (no key set: any)."""
    if app.public_key_pem is None:
        return True
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    key = load_pem_public_key(app.public_key_pem.encode())
    head, _, signature = token.rpartition(".")
    try:
        raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        assert isinstance(key, rsa.RSAPublicKey)
        key.verify(raw, head.encode(), padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError):
        return False
    return True


def _mentions(call: Call, text: str) -> bool:
    """Whether a request's body or query string contains `text` (a rule's `when`)."""
    query = " ".join(f"{k}={v}" for k, values in call.query.items() for v in values)
    return text in call.body.decode("utf-8", "replace") or text in query


def _transformed(rule: _Rule, answer: Answer) -> Answer:
    """The real answer with its JSON payload rewritten by the rule (status and headers kept)."""
    payload = json.loads(answer.raw) if answer.raw is not None else answer.payload
    changed = rule.transform(payload) if rule.transform is not None else payload
    headers = {**answer.headers, **{k: v() if callable(v) else v for k, v in rule.headers.items()}}
    return Answer(
        answer.status,
        changed,
        headers=headers,
        graphql_cost=answer.graphql_cost,
        graphql_operation=answer.graphql_operation,
        charge=answer.charge,
    )


def _as_bytes(body: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(body, dict):
        return json.dumps(body).encode()
    return body.encode() if isinstance(body, str) else body


def _fault_answer(rule: _Rule, service: str) -> Answer:
    phrase = (
        HTTPStatus(rule.status).phrase if rule.status in HTTPStatus._value2member_map_ else "Error"
    )
    if rule.body is not None:
        raw = _as_bytes(rule.body()) if callable(rule.body) else rule.body
    elif service in ("rtd", "codecov"):
        raw = json.dumps({"detail": phrase}).encode()
    else:
        raw = json.dumps(
            {
                "message": phrase,
                "documentation_url": "https://docs.github.com/rest",
                "status": str(rule.status),
            }
        ).encode()
    headers = {k: v() if callable(v) else v for k, v in rule.headers.items()}
    return Answer(rule.status, raw=raw, headers=headers)


def _control(sandbox: Sandbox, method: str, path: str, body: bytes) -> _Reply:
    from bot_sandbox import seeds

    def reply(status: int, payload: Any) -> _Reply:
        return _Reply(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    if method == "GET" and path == "/_sandbox/stats":
        return reply(200, sandbox.stats())
    if method == "POST" and path == "/_sandbox/reset-stats":
        sandbox.reset_stats()
        return reply(200, {"ok": True})
    if method == "POST" and path == "/_sandbox/change":
        try:
            args = json.loads(body or b"{}")
            changed = seeds.change_heads(
                sandbox.world, float(args.get("fraction", 0.05)), rng_seed=int(args.get("seed", 0))
            )
        except (ValueError, TypeError) as exc:
            return reply(400, {"error": str(exc)})
        return reply(200, {"changed": changed})
    if method == "POST" and path == "/_sandbox/codecov":
        try:
            args = json.loads(body or b"{}")
            stuck = providers_api.stick_codecov(
                sandbox.world, float(args.get("fraction", 0.05)), seed=int(args.get("seed", 0))
            )
        except (ValueError, TypeError) as exc:
            return reply(400, {"error": str(exc)})
        return reply(200, {"stuck": stuck})
    if method == "POST" and path == "/_sandbox/comments":
        # Seeds or edits comments directly (a benchmark's settled state); not a GitHub write.
        try:
            items = json.loads(body or b"[]")
            made = [
                sandbox.world.edit_comment(int(i["id"]), str(i["body"]))
                if i.get("id")
                else sandbox.world.add_comment(
                    str(i["repo"]), int(i["number"]), author=str(i["author"]), body=str(i["body"])
                )
                for i in items
            ]
        except (KeyError, ValueError, TypeError) as exc:
            return reply(400, {"error": str(exc)})
        return reply(200, {"comments": [{"id": c["id"], "node_id": c["node_id"]} for c in made]})
    if method == "POST" and path == "/_sandbox/rate-limit":
        try:
            args = json.loads(body or b"{}")
            sandbox.set_rate_limit(
                str(args["resource"]),
                limit=int(args.get("limit", 5000)),
                remaining=None if args.get("remaining") is None else int(args["remaining"]),
                reset_in_s=float(args.get("reset_in_s", 3600)),
            )
        except (KeyError, ValueError, TypeError) as exc:
            return reply(400, {"error": str(exc)})
        return reply(200, sandbox.rate_limit(str(args["resource"])))
    return reply(404, {"error": "unknown control endpoint"})
