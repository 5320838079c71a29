"""The allowlist every request passes: the bot reads CI state and writes only its comment."""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    import requests
    from github.Requester import RequestsResponse

# graphql-core and PyGithub are imported on first use (a GraphQL body to check, the guard
# installed for PyGithub): a command that sends nothing to GitHub starts without them.

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
        ("GET", r"/app/installations"),  # many installations: the App's installations ...
        ("GET", r"/installation/repositories"),  # ... and each one's repositories
        ("GET", rf"/{_OWNER_REPO}"),
        ("GET", rf"/{_OWNER_REPO}/pulls(?:/\d+)?"),
        ("GET", rf"/{_OWNER_REPO}/commits/[^/]+/(?:check-runs|status|statuses)"),
        ("GET", rf"/{_OWNER_REPO}/compare/[^?#]+\.\.\.[0-9a-f]{{40}}"),
        ("GET", rf"/{_OWNER_REPO}/branches/[^?#/]+"),  # branch protection's app pins
        ("GET", rf"/{_OWNER_REPO}/issues/\d+/comments"),
        ("POST", rf"/{_OWNER_REPO}/issues/\d+/comments"),
        ("GET", rf"/{_OWNER_REPO}/issues/comments/\d+"),
        ("PATCH", rf"/{_OWNER_REPO}/issues/comments/\d+"),
    )
)

# The one DELETE: of an issue comment, and only of one the bot admitted just before (its own
# later comment: marker AND its login), once. Nothing else is ever deleted.
OWN_COMMENT_DELETE = re.compile(rf"/{_OWNER_REPO}/issues/comments/\d+")
_admitted: set[str] = set()
_admitted_lock = threading.Lock()


def admit_delete(path: str) -> None:
    """Let one DELETE of `path` (below the REST root) pass: the caller checked that the comment
    is the bot's own."""
    if OWN_COMMENT_DELETE.fullmatch(path) is None:
        raise RefusedRequest(f"refused: DELETE {path} is not of an issue comment")
    with _admitted_lock:
        _admitted.add(path)


def _take_delete(path: str) -> bool:
    with _admitted_lock:
        if path in _admitted:
            _admitted.discard(path)
            return True
    return False


@dataclass(frozen=True)
class Allowance:
    """What one second source may be asked (bot.sources: each provider declares its own): GET
    only, below its configured API roots, paths (below a root) matching one of `paths`."""

    source: str  # the provider's name ("codecov")
    label: str  # its name in words ("Codecov"), for the refusal
    # origin + path of each API root, e.g. "https://api.codecov.io:443/api/v2"
    roots: tuple[str, ...]
    paths: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, source: str, label: str, urls: Sequence[str], paths: Sequence[str]) -> Allowance:
        """The allowance for API roots given as URLs and path patterns (regex, fullmatch)."""
        roots = tuple(origin(u) + urlsplit(u).path.rstrip("/") for u in urls)
        return cls(source, label, roots, tuple(re.compile(p) for p in paths))


class RefusedRequest(RuntimeError):
    """Raised before sending a request that is outside the allowlist."""


class ForeignHost(RefusedRequest):
    """Raised before sending a request (or following a link) to a host that is not configured."""


class PaginationLoop(RuntimeError):
    """A paginated list repeated a cursor or link, or ran past what its first page implied."""


_DEFAULT_PORTS = {"http": 80, "https": 443}

# Pages a list may have when its first page says nothing of its size (100 items a page).
MAX_PAGES = 1000


def origin(url: str) -> str:
    """scheme://host:port of an absolute URL, lower case, the default port made explicit."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        port = -1
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


T = TypeVar("T")


def same_origin(url: str, base: str) -> bool:
    """Whether `url` (absolute, or relative to `base`) goes to the origin of `base`."""
    if not urlsplit(url).netloc and not urlsplit(url).scheme:
        return True
    return origin(url) == origin(base)


def link_url(link: str, rel: str) -> str | None:
    """The URL a Link header gives for `rel` ("next", "last"), as given (None when absent)."""
    for part in link.split(","):
        section = part.split(";")
        if len(section) >= 2 and section[1].strip() == f'rel="{rel}"':
            return section[0].strip().strip("<>")
    return None


def last_page(link: str) -> int | None:
    """The page number of a Link header's rel="last" URL (None when it has none)."""
    url = link_url(link, "last")
    if url is None:
        return None
    pages = parse_qs(urlsplit(url).query).get("page", [])
    return int(pages[0]) if pages and pages[0].isdigit() else None


class Pages:
    """Bounds one paginated read: refuses a cursor or link seen before, more pages than the
    first page's total implies (or MAX_PAGES when it gives none), and a link to another origin.
    """

    def __init__(
        self,
        what: str,
        *,
        origin: str | None = None,
        error: type[Exception] = PaginationLoop,
        refused: type[Exception] = ForeignHost,
    ) -> None:
        self.what = what
        self.origin = origin
        self.error = error
        self.refused = refused
        self.seen: set[str] = set()
        self.limit = MAX_PAGES
        self.count = 1

    def expect(self, total: object, per_page: int = 1) -> None:
        """Bound the pages by a total the first page gave (e.g. RTD `count`, totalCount, the
        last page of a Link header), with one page to spare for items added meanwhile; later
        pages' totals are ignored."""
        if self.count > 1 or isinstance(total, bool) or not isinstance(total, int):
            return
        if total >= 0 and per_page > 0:
            self.limit = min(self.limit, max(1, -(-total // per_page)) + 1)

    def follow(self, cursor: str | None) -> str | None:
        """Check the next cursor or link before it is asked for; returns it unchanged."""
        if cursor is None:
            return None
        if self.origin is not None and not same_origin(cursor, self.origin):
            raise self.refused(
                f"refused: {self.what} links to {origin(cursor)}, not to {origin(self.origin)} "
                "where the list was read (nothing is sent there)"
            )
        if cursor in self.seen:
            raise self.error(f"pagination loop: {self.what} repeated the page {cursor!r}")
        self.count += 1
        if self.count > self.limit:
            raise self.error(
                f"pagination loop: {self.what} went past the {self.limit} pages "
                "its first page implied"
            )
        self.seen.add(cursor)
        return cursor

    def read_all(
        self,
        url: str,
        params: dict[str, Any] | None,
        read: Callable[[str, dict[str, Any] | None], Page[T]],
    ) -> list[T]:
        """Every item of a paginated list from `url`, each next page checked before it is read."""
        items: list[T] = []
        at: str | None = url
        while at:
            page = read(at, params)
            items.extend(page.items)
            self.expect(page.total, page.per_page)
            at, params = self.follow(page.next), None
        return items


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list: its items, the next page's URL, the total its answer announces."""

    items: Sequence[T]
    next: str | None
    total: object = None  # e.g. RTD's `count`, the last page of a Link header
    per_page: int = 1


def _is_query_only(body: Any) -> bool:
    """True when a GraphQL body holds only query operations (no mutation, no subscription)."""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    try:
        payload = json.loads(body) if isinstance(body, str) else body
        query = payload["query"]
    except (TypeError, KeyError, ValueError):
        return False
    return isinstance(query, str) and _only_queries(query)


@functools.lru_cache(maxsize=64)
def _only_queries(query: str) -> bool:
    """Whether this GraphQL text holds only query operations (parsed once per text: a cycle
    sends the same few texts again and again). An operation of another type names it (the
    keywords are case-sensitive, and no escape spells a name): a text in which neither word
    appears holds none, and is not parsed (graphql-core is not imported for it)."""
    if "mutation" not in query and "subscription" not in query:
        return True
    import graphql

    try:
        document = graphql.parse(query)
    except (TypeError, ValueError, graphql.GraphQLError):
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
    github_origin: str = ""  # scheme://host:port of the GitHub API ("" : not checked)
    sources: tuple[Allowance, ...] = ()  # every second source's (bot.sources declares them)

    @classmethod
    def for_urls(cls, github_api_url: str, sources: Sequence[Allowance] = ()) -> Guard:
        """Build the guard for a GitHub API root and what every second source declares it may
        ask."""
        rest = urlsplit(github_api_url).path.rstrip("/")
        graphql_path = rest[: -len("/v3")] + "/graphql" if rest.endswith("/v3") else "/graphql"
        return cls(rest, graphql_path, origin(github_api_url), tuple(sources))

    def check_source(self, source: str, method: str, url: str) -> None:
        """Raise RefusedRequest unless this request is a GET its source declared (any other
        method, host, port or path is refused before it is sent)."""
        method = method.upper()
        allowed = [a for a in self.sources if a.source == source]
        label = allowed[0].label if allowed else source
        where, path = origin(url), urlsplit(url).path
        roots = [r for a in allowed for r in a.roots]
        if not any(r.startswith(where + "/") or r == where for r in roots):
            raise ForeignHost(f"refused: {method} to host {where}, not a configured {label} host")
        for allowance in allowed:
            for root in allowance.roots:
                mine = root == where or root.startswith(where + "/")
                prefix = root[len(where) :] if mine else None
                if prefix is None or not path.startswith(prefix + "/"):
                    continue
                rest = path[len(prefix) :]
                if method == "GET" and any(p.fullmatch(rest) for p in allowance.paths):
                    return
        raise RefusedRequest(f"refused: {method} {path} is not on the bot's {label} allowlist")

    def check_github(self, method: str, url: str, body: Any = None) -> None:
        """Raise RefusedRequest unless this GitHub request is on the allowlist."""
        method = method.upper()
        if self.github_origin and origin(url) != self.github_origin:
            raise ForeignHost(
                f"refused: {method} to host {origin(url)}, not the configured GitHub "
                f"{self.github_origin}"
            )
        path = urlsplit(url).path.rstrip("/") or "/"
        if path == self.github_graphql_path.rstrip("/"):
            if method == "POST" and _is_query_only(body):
                return
            raise RefusedRequest(f"refused: GraphQL {method} that is not a plain query")
        prefix = self.github_rest_prefix
        if prefix and path.startswith(prefix + "/"):
            path = path[len(prefix) :]
        if method == "DELETE" and OWN_COMMENT_DELETE.fullmatch(path) and _take_delete(path):
            return
        if not any(m == method and p.fullmatch(path) for m, p in GITHUB_REST_ALLOWED):
            raise RefusedRequest(f"refused: {method} {path} is not on the bot's allowlist")


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
        port = self.port or _DEFAULT_PORTS.get(self.protocol, 0)
        guard.check_github(self.verb, f"{self.protocol}://{self.host}:{port}{self.url}", self.input)
        key = (self.protocol, self.host, self.port)
        with _GuardedMixin._lock:
            shared = _GuardedMixin._sessions.setdefault(key, self.session)
        self.session = shared
        return super().getresponse()  # type: ignore[misc, no-any-return]

    def close(self) -> None:
        """Keep the shared session open; it is reused by the next request."""


@functools.cache
def _guarded_connections() -> tuple[type, type]:
    """PyGithub's connection classes, each behind the guard (made on first use)."""
    from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass

    class GuardedHTTPConnection(_GuardedMixin, HTTPRequestsConnectionClass):
        """PyGithub's plain-HTTP connection, behind the guard (Enterprise over http, the
        sandbox)."""

    class GuardedHTTPSConnection(_GuardedMixin, HTTPSRequestsConnectionClass):
        """PyGithub's HTTPS connection, behind the guard."""

    return GuardedHTTPConnection, GuardedHTTPSConnection


def install_github_guard(guard: Guard) -> None:
    """Route every PyGithub request of this process through the guard."""
    from github.Requester import Requester

    _GuardedMixin.guard = guard
    Requester.injectConnectionClasses(*_guarded_connections())
