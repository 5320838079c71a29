"""The allowlist every request passes: the bot reads CI state and writes only its comment."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import graphql
import requests
from github.Requester import (
    HTTPRequestsConnectionClass,
    HTTPSRequestsConnectionClass,
    Requester,
    RequestsResponse,
)

_OWNER_REPO = r"(?:repos/[^/]+/[^/]+|repositories/\d+)"

# (method, path below the REST prefix). Everything else is refused before it is sent.
GITHUB_REST_ALLOWED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (method, re.compile(pattern))
    for method, pattern in (
        ("GET", r"/user"),
        ("GET", r"/app"),
        ("GET", r"/rate_limit"),
        ("GET", r"/repos/[^/]+/[^/]+/installation"),
        ("POST", r"/app/installations/\d+/access_tokens"),
        ("GET", rf"/{_OWNER_REPO}"),
        ("GET", rf"/{_OWNER_REPO}/pulls(?:/\d+)?"),
        ("GET", rf"/{_OWNER_REPO}/commits/[^/]+/(?:check-runs|status|statuses)"),
        ("GET", rf"/{_OWNER_REPO}/issues/\d+/comments"),
        ("POST", rf"/{_OWNER_REPO}/issues/\d+/comments"),
        ("GET", rf"/{_OWNER_REPO}/issues/comments/\d+"),
        ("PATCH", rf"/{_OWNER_REPO}/issues/comments/\d+"),
    )
)

RTD_ALLOWED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    ("GET", re.compile(pattern))
    for pattern in (
        r"/projects/[^/]+/builds/",
        r"/projects/[^/]+/builds/\d+/",
        r"/projects/[^/]+/builds/\d+/notifications/",
    )
)


class RefusedRequest(RuntimeError):
    """Raised before sending a request that is outside the allowlist."""


def _is_query_only(body: Any) -> bool:
    """True when a GraphQL body holds only query operations (no mutation, no subscription)."""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    try:
        payload = json.loads(body) if isinstance(body, str) else body
        document = graphql.parse(payload["query"])
    except (TypeError, KeyError, ValueError, graphql.GraphQLError):
        return False
    return all(
        (
            isinstance(d, graphql.OperationDefinitionNode)
            and d.operation is graphql.OperationType.QUERY
        )
        or isinstance(d, graphql.FragmentDefinitionNode)
        for d in document.definitions
    )


@dataclass(frozen=True)
class Guard:
    """Decides whether a request may be sent, given the configured API locations."""

    github_rest_prefix: str  # path of the REST root: "" on api.github.com, "/api/v3" on Enterprise
    github_graphql_path: str  # "/graphql" or "/api/graphql"
    rtd_prefixes: tuple[str, ...]  # paths of the RTD API roots, e.g. ("/api/v3",)

    @classmethod
    def for_urls(cls, github_api_url: str, rtd_api_urls: tuple[str, ...]) -> Guard:
        """Build the guard for a GitHub API root and the Read the Docs API roots."""
        rest = urlsplit(github_api_url).path.rstrip("/")
        graphql_path = rest[: -len("/v3")] + "/graphql" if rest.endswith("/v3") else "/graphql"
        rtd = tuple(urlsplit(u).path.rstrip("/") for u in rtd_api_urls)
        return cls(rest, graphql_path, rtd)

    def check_github(self, method: str, url: str, body: Any = None) -> None:
        """Raise RefusedRequest unless this GitHub request is on the allowlist."""
        method = method.upper()
        path = urlsplit(url).path.rstrip("/") or "/"
        if path == self.github_graphql_path.rstrip("/"):
            if method == "POST" and _is_query_only(body):
                return
            raise RefusedRequest(f"refused: GraphQL {method} that is not a plain query")
        prefix = self.github_rest_prefix
        if prefix and path.startswith(prefix + "/"):
            path = path[len(prefix) :]
        if not any(m == method and p.fullmatch(path) for m, p in GITHUB_REST_ALLOWED):
            raise RefusedRequest(f"refused: {method} {path} is not on the bot's allowlist")

    def check_rtd(self, method: str, url: str) -> None:
        """Raise RefusedRequest unless this Read the Docs request is on the allowlist."""
        method = method.upper()
        path = urlsplit(url).path
        for prefix in self.rtd_prefixes:
            if path.startswith(prefix + "/"):
                rest = path[len(prefix) :]
                if any(m == method and p.fullmatch(rest) for m, p in RTD_ALLOWED):
                    return
        raise RefusedRequest(
            f"refused: {method} {path} is not on the bot's Read the Docs allowlist"
        )


class _GuardedMixin:
    """Checks every PyGithub request against the installed guard; reuses one session per host."""

    guard: ClassVar[Guard | None] = None
    _sessions: ClassVar[dict[tuple[str, str, int], requests.Session]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    session: requests.Session

    verb: str
    url: str
    input: Any
    protocol: str
    host: str
    port: int

    def getresponse(self) -> RequestsResponse:
        """Refuse anything outside the allowlist, then send on a kept-alive session."""
        guard = _GuardedMixin.guard
        if guard is None:
            raise RefusedRequest("refused: no request guard is installed")
        guard.check_github(self.verb, self.url, self.input)
        key = (self.protocol, self.host, self.port)
        with _GuardedMixin._lock:
            shared = _GuardedMixin._sessions.setdefault(key, self.session)
        self.session = shared
        return super().getresponse()  # type: ignore[misc, no-any-return]

    def close(self) -> None:
        """Keep the shared session open; it is reused by the next request."""


class GuardedHTTPConnection(_GuardedMixin, HTTPRequestsConnectionClass):
    """PyGithub's plain-HTTP connection, behind the guard (Enterprise over http, the sandbox)."""


class GuardedHTTPSConnection(_GuardedMixin, HTTPSRequestsConnectionClass):
    """PyGithub's HTTPS connection, behind the guard."""


def install_github_guard(guard: Guard) -> None:
    """Route every PyGithub request of this process through the guard."""
    _GuardedMixin.guard = guard
    Requester.injectConnectionClasses(GuardedHTTPConnection, GuardedHTTPSConnection)
