"""GitHub transport, reads (batched GraphQL statusCheckRollup) and the comment calls.

Query text lives in bot/github_query.py, parsing into the model in bot/github_parse.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

import msgspec
import orjson
import requests
from github import Github
from github.GithubException import GithubException

from bot.core.annotations import GENERIC, QUOTED
from bot.core.base import MergeBase
from bot.core.merge_queue import QueueConfig
from bot.core.model import (
    BRANCH_PROTECTION,
    Annotation,
    PullSnapshot,
    QueueEntry,
    QueueState,
    RequiredChecks,
    Signal,
)
from bot.core.summary import Usage
from bot.github.ownership import is_own
from bot.github.parse import Comment as Comment
from bot.github.parse import (
    Partial,
    PullFailure,
    Unreadable,
    get,
    normal_login,
    parse_annotation_page,
    parse_context,
    parse_contexts,
    parse_graphql_comment,
    parse_labels,
    parse_pins,
    parse_pull,
    parse_required,
    parse_rest_comment,
    required_of,
    reread,
    with_pins,
)
from bot.github.query import (
    ANNOTATIONS_QUERY,
    COMMENTS_QUERY,
    MORE_LABELS_QUERY,
    PAGE,
    VIEWER_QUERY,
    attempts_query,
    branch_history_query,
    commits_query,
    more_annotations_query,
    more_contexts_query,
    one_point_page,
    pull_comments_query,
    pull_query,
    pulls_by_number_query,
    pulls_page_query,
    required_sets_query,
)
from bot.guard import (
    MAX_PAGES,
    Page,
    Pages,
    RefusedRequest,
    admit_delete,
    last_page,
    link_url,
    same_origin,
)
from bot.retry import (
    TRANSIENT_STATUSES,
    Retryable,
    RetryPolicy,
    rate_limit_reset_s,
    retry_after_s,
    run_with_retries,
)
from bot.state.ports import REQUIRED_SETS_KEPT
from bot.state.ports import RequiredCache as RequiredCache

log = logging.getLogger(__name__)

MAX_INLINE_WAIT_S = 60.0
# How a commits query's errors name its commits: (in an error, not found).
MERGE_BASE: Final = ("the merge base", "the merge-base commit")
MERGE_GROUP: Final = ("the merge-group commit", "the merge-group commit")
SECONDARY_BACKOFF_S = 60.0  # a 429 that names no wait: back off from a minute (GitHub's advice)
GITHUB_POLICY = RetryPolicy(attempts=3, backoff_s=1.0, jitter_s=1.0, max_wait_s=MAX_INLINE_WAIT_S)
ALIAS_BATCH = 20  # pull requests per aliased query (follow-up context pages, isRequired)

Pair = tuple[str, str]  # (base branch, check or status name)


class GitHubError(Exception):
    """GitHub could not be read or written; the message says what it answered (for logs).

    `reason` says it in words that are the same for every such answer (the status and a
    category; never a request id or a body): the only text of an error a comment may carry.
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason or message


class NotFound(GitHubError):
    """The repository, pull request or comment does not exist or is not visible to the bot."""


class RateLimited(GitHubError):
    """GitHub refused for rate limiting; retry after `wait_s` seconds."""

    def __init__(self, message: str, *, wait_s: float, reason: str = "") -> None:
        super().__init__(message, status=403, reason=reason or "GitHub's rate limit was reached")
        self.wait_s = wait_s


class MalformedAnswer(GitHubError):
    """GitHub answered with a shape the bot does not understand."""


class PaginationLoop(MalformedAnswer):
    """GitHub's pages repeated a cursor or link, or ran past what the first page implied."""


class ForeignLink(GitHubError):
    """GitHub's answer linked to a host other than the configured API; it is not followed."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What GitHub answered one read: status (None: no answer), headers (lower case), body."""

    status: int | None
    headers: dict[str, str]
    data: Any

    @property
    def message(self) -> str:
        """GitHub's own message (`Bad credentials`, `Not Found`, ...), or the status."""
        message = self.data.get("message") if isinstance(self.data, dict) else None
        return str(message) if message else f"HTTP {self.status}"


def _never(error: dict[str, Any]) -> bool:
    return False


def _is_not_found(error: dict[str, Any]) -> bool:
    return error.get("type") == "NOT_FOUND"


def _path(error: dict[str, Any]) -> list[Any]:
    path = error.get("path")
    return path if isinstance(path, list) else []


def _in_pull_page(error: dict[str, Any]) -> bool:
    """An error inside one pull request of a page: repository.pullRequests.nodes.<i>...."""
    path = _path(error)
    return (
        path[:3] == ["repository", "pullRequests", "nodes"]
        and len(path) > 3
        and (isinstance(path[3], int))
    )


def _in_alias(error: dict[str, Any]) -> bool:
    """An error inside one aliased pull request: repository.p<i>...."""
    path = _path(error)
    return len(path) > 1 and path[0] == "repository" and str(path[1]).startswith("p")


def _in_base_ref(error: dict[str, Any]) -> bool:
    """An error inside the base branch of one pull request: ...pullRequest.baseRef...."""
    return "baseRef" in _path(error)


def _required_of_ref(base: str, node: Any, errors: list[dict[str, Any]]) -> RequiredChecks:
    """What a base branch requires, from its Ref and the errors GitHub gave on it."""
    if errors:
        error = f"GitHub answered on the rules of {base}: {_stable_message(errors[0])}"
        return RequiredChecks(base, read=False, error=error)
    try:
        return parse_required(base, node)
    except Unreadable as exc:
        return RequiredChecks(base, read=False, error=str(exc))


def _in_ref(error: dict[str, Any]) -> bool:
    """An error inside one aliased base branch: repository.b<i>...."""
    path = _path(error)
    return len(path) > 1 and path[0] == "repository" and str(path[1]).startswith("b")


def _in_nodes(error: dict[str, Any]) -> bool:
    """An error on one node of a `nodes(ids:)` query (that node only)."""
    path = _path(error)
    return len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int)


def _in_run_alias(error: dict[str, Any]) -> bool:
    """An error inside one aliased check run of a MoreAnnotations query: r<k>...."""
    path = _path(error)
    return len(path) >= 1 and str(path[0]).startswith("r")


def _in_commit(error: dict[str, Any]) -> bool:
    """An error inside one aliased commit: repository.c<i>...."""
    path = _path(error)
    return len(path) > 1 and path[0] == "repository" and str(path[1]).startswith("c")


def _in_commit_or_queue(error: dict[str, Any]) -> bool:
    """An error inside one aliased commit or merge queue: repository.c<i>... or .q<i>...."""
    path = _path(error)
    return _in_commit(error) or (
        len(path) > 1 and path[0] == "repository" and str(path[1]).startswith("q")
    )


def _message(error: dict[str, Any]) -> str:
    return str(error.get("message") or error.get("type") or "an error")


def _stable_message(error: dict[str, Any]) -> str:
    """A GraphQL error entry in words a comment may carry: its message only where it is one of
    GitHub's fixed sentences (short, no digit: "Resource not accessible by integration"), else
    its type (GitHub's other messages carry a request id that changes every time)."""
    message, kind = error.get("message"), error.get("type")
    if isinstance(message, str) and _FIXED_MESSAGE.fullmatch(message.strip()):
        return message.strip()
    if isinstance(kind, str) and re.fullmatch(r"[A-Z_]{1,40}", kind):
        return kind
    return "an error"


_FIXED_MESSAGE: Final = re.compile(r"[A-Za-z][A-Za-z ,.'()_-]{0,99}")


def _lower_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def rate_limit_wait(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds to wait when a 403/429 is a rate limit (None when it is not one).

    Retry-After in seconds or as an HTTP date; else, with x-ratelimit-remaining 0, until
    x-ratelimit-reset; a limit that names no readable wait backs off a minute.
    """
    moment = datetime.fromtimestamp(now, UTC)
    if "retry-after" in headers:
        wait = retry_after_s(headers["retry-after"], now=moment)
        return SECONDARY_BACKOFF_S if wait is None else max(1.0, wait)
    if headers.get("x-ratelimit-remaining") == "0":
        reset = rate_limit_reset_s(headers, now=moment)
        return SECONDARY_BACKOFF_S if reset is None else max(1.0, reset)
    return None


def _error_message(exc: GithubException) -> str:
    data = exc.data
    message = data.get("message") if isinstance(data, dict) else None
    return f"GitHub answered {exc.status}: {message or data!r}"


# What a GitHub error message is about, by a phrase it carries (lower case): the stable category
# a comment may say (GitHub's own messages carry request ids; error pages differ per request).
_CATEGORIES: Final = (
    ("secondary rate limit", "secondary rate limit"),
    ("abuse detection", "secondary rate limit"),  # its older wording (recorded 2018)
    ("rate limit", "rate limit"),
    ("resource not accessible", "not accessible to the bot's token"),
    ("bad credentials", "bad credentials"),
)


def error_reason(status: int | None, data: Any) -> str:
    """A GitHub error answer in words that do not change from one request to the next: the
    HTTP status and, where its message says one, a known category; never the body."""
    message = data.get("message") if isinstance(data, dict) else None
    text = message.lower() if isinstance(message, str) else ""
    category = next((name for phrase, name in _CATEGORIES if phrase in text), None)
    said = f"GitHub answered {status}"
    return f"{said} ({category})" if category else said


def _graphql_reason(kind: Any) -> str:
    """A GraphQL error entry in stable words: its type (the message may carry a request id)."""
    return "GitHub's GraphQL API answered an error" + (
        f" ({kind})" if isinstance(kind, str) and re.fullmatch(r"[A-Z_]{1,40}", kind) else ""
    )


class GitHubApi:
    """Everything the bot asks of GitHub, through one PyGithub requester."""

    def __init__(
        self,
        gh: Github,
        *,
        page_size: int = 100,
        with_labels: bool = False,
        sleep: Callable[[float], None] | None = None,
        max_attempts: int = GITHUB_POLICY.attempts,
        stop: threading.Event | None = None,
        max_inline_wait_s: float = MAX_INLINE_WAIT_S,
        comments_in_page: bool = False,
    ) -> None:
        """`max_inline_wait_s`: the longest rate-limit wait taken inline (a queue's worker
        takes none: the job waits on the queue instead, and the worker works others).
        `comments_in_page`: each page of open pull requests also reads their first comments
        (a run with no state: `pulls_comments` then starts from them, no second pass)."""
        self._requester = gh.requester
        self._page_size = page_size
        self._with_labels = with_labels
        self._comments_in_page = comments_in_page
        # each pull request's first comments read with its page (and the cursor after them
        # where more follow), until `pulls_comments` takes them, by (repo, number)
        self._page_comments: dict[tuple[str, int], tuple[list[Comment], str | None, Any]] = {}
        self._sleep = sleep  # None: wait on `stop` (every wait ends when it is set)
        self._policy = replace(GITHUB_POLICY, attempts=max_attempts, max_wait_s=max_inline_wait_s)
        self.stop = stop or threading.Event()
        self.usage = Usage()
        # what was read from each open pull request's last raw node, by the node's digest, by repo
        self._nodes: dict[str, dict[bytes, PullSnapshot]] = {}

    # -- transport -----------------------------------------------------------------------

    def _send(
        self,
        verb: str,
        url: str,
        *,
        kind: str,
        parameters: dict[str, Any] | None = None,
        body: Any = None,
        retry: bool = True,
        decode: Callable[[str], Any] | None = None,
    ) -> tuple[dict[str, str], Any]:
        """One request under the retry policy: named transient failures and short rate-limit
        waits are tried again (never when `retry` is False: a create is never re-sent here);
        every wait ends when `stop` is set (retry.Stopped)."""
        if not same_origin(url, self._requester.base_url):
            raise ForeignLink(f"refused: {verb} to a host that is not the configured GitHub API")

        def attempt() -> tuple[dict[str, str], Any]:
            self.usage.requests[kind] += 1
            try:
                if kind == "graphql":  # the big answers: decoded here, faster than PyGithub
                    headers, data = self._request(verb, url, body, decode or decode_json)
                else:
                    headers, data = self._requester.requestJsonAndCheck(
                        verb, url, parameters=parameters, input=body
                    )
            except GithubException as exc:
                raise self._on_error(exc, retry=retry) from exc
            except (requests.Timeout, requests.ConnectionError) as exc:
                error = GitHubError(f"GitHub did not answer: {exc.__class__.__name__}")
                raise (Retryable(error) if retry else error) from exc
            except ValueError as exc:  # a body that is not JSON (a proxy's page, a cut answer)
                raise MalformedAnswer(
                    f"GitHub answered {verb} with a body that is not JSON"
                ) from exc
            lowered = _lower_headers(headers)
            self._note_rate(lowered)
            return lowered, data

        policy = self._policy if retry else replace(self._policy, attempts=1)
        return run_with_retries(
            attempt, policy=policy, stop=self.stop, sleep=self._sleep, what=f"GitHub {verb}"
        )

    def _request(
        self, verb: str, url: str, body: Any, decode: Callable[[str], Any]
    ) -> tuple[dict[str, Any], Any]:
        """PyGithub's requestJsonAndCheck, its answer decoded with orjson (about twice as fast
        as the json module on a page of pull requests: benchmarks/decode.py), or `decode`."""
        status, headers, text = self._requester.requestJson(verb, url, None, None, body)
        if status >= 400:
            raise self._requester.createException(status, headers, decode_json(text))
        data = decode(text)
        return headers, data

    def _on_error(self, exc: GithubException, *, retry: bool) -> Exception:
        """The error to raise for one failed attempt: Retryable when it may be tried again."""
        headers = _lower_headers(exc.headers)
        self._note_rate(headers)
        if exc.status in (403, 429):
            wait = rate_limit_wait(headers, now=time.time())
            if wait is None and exc.status == 429:
                wait = SECONDARY_BACKOFF_S
            if wait is not None:
                reason = error_reason(exc.status, exc.data)
                if "rate limit" not in reason:  # a 429, or a 403 with only the headers saying it
                    reason += " (rate limit)"
                limited = RateLimited(_error_message(exc), wait_s=wait, reason=reason)
                if not retry or self._policy.too_long(wait):
                    return limited
                log.warning("GitHub rate limit: waiting %.0f s as it asked", wait)
                return Retryable(limited, wait_s=wait)
        if exc.status == 404:
            return NotFound(_error_message(exc), status=404, reason=error_reason(404, exc.data))
        reason = error_reason(exc.status, exc.data)
        error = GitHubError(_error_message(exc), status=exc.status, reason=reason)
        if exc.status in TRANSIENT_STATUSES and retry:
            return Retryable(error)
        return error

    def _note_rate(self, headers: Mapping[str, str]) -> None:
        resource = headers.get("x-ratelimit-resource", "core")
        if "x-ratelimit-remaining" in headers:
            try:
                self.usage.remaining[resource] = int(headers["x-ratelimit-remaining"])
                reset = int(headers["x-ratelimit-reset"])
                self.usage.reset_at[resource] = datetime.fromtimestamp(reset, UTC)
            except (KeyError, ValueError):
                pass

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Send one GraphQL query (never a mutation) and return its `data`; errors raise."""
        data, _ = self._graphql(query, variables)
        return data

    def _graphql(
        self,
        query: str,
        variables: dict[str, Any],
        *,
        tolerate: Callable[[dict[str, Any]], bool] = _never,
        decode: Callable[[str], Any] | None = None,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """`data` and the error entries `tolerate` accepts; any other error raises."""
        headers, payload = self._send(
            "POST",
            self._requester.graphql_url,
            kind="graphql",
            body={"query": query, "variables": variables},
            decode=decode,
        )
        if not isinstance(payload, dict):
            raise MalformedAnswer("GraphQL answer is not an object")
        raw = payload.get("errors") or []
        if not isinstance(raw, list):
            raise MalformedAnswer("GraphQL errors is not a list")
        errors = [e if isinstance(e, dict) else {"message": str(e)} for e in raw]
        refused = [e for e in errors if not tolerate(e)]
        if refused:
            self._raise_graphql_errors(refused, headers)
        data = payload.get("data")
        if not isinstance(data, dict):
            raise MalformedAnswer("GraphQL answer has no data")
        cost = _get(data, "rateLimit", "cost")
        if isinstance(cost, int):
            self.usage.graphql_points += cost
        remaining = _get(data, "rateLimit", "remaining")
        if isinstance(remaining, int):
            self.usage.remaining["graphql"] = remaining
        return data, [e for e in errors if tolerate(e)]

    def _raise_graphql_errors(self, errors: Any, headers: Mapping[str, str]) -> None:
        first = errors[0] if isinstance(errors, list) and errors else {}
        kind = first.get("type") if isinstance(first, dict) else None
        message = first.get("message") if isinstance(first, dict) else str(first)
        if kind == "NOT_FOUND":
            raise NotFound(f"GitHub: {message}", status=404)
        if kind == "RATE_LIMITED":
            wait = rate_limit_wait(headers, now=time.time()) or 60.0
            raise RateLimited(f"GitHub GraphQL: {message}", wait_s=wait)
        raise GitHubError(f"GitHub GraphQL error: {message}", reason=_graphql_reason(kind))

    # -- reads -----------------------------------------------------------------------------

    # -- reads -----------------------------------------------------------------------------

    def probe(self, path: str) -> Probe:
        """One REST read for check-config, never retried: what GitHub answered, errors included."""
        self.usage.requests["probe"] += 1  # `path` is below the API root; the guard checks it
        try:
            headers, data = self._requester.requestJsonAndCheck("GET", path)
        except GithubException as exc:
            return Probe(exc.status, _lower_headers(exc.headers), exc.data)
        except (requests.Timeout, requests.ConnectionError) as exc:
            return Probe(None, {}, {"message": f"no answer ({exc.__class__.__name__})"})
        return Probe(200, _lower_headers(headers), data)

    def viewer_login(self) -> str:
        """The login the token acts as, in REST's form (the bot's own comments carry it).

        `GET /user`; an installation token (a workflow's GITHUB_TOKEN, an App's token) is
        refused it (403) but has a GraphQL `viewer`, which is asked then.
        """
        try:
            _, data = self._send("GET", "/user", kind="rest_get")
        except GitHubError as exc:
            if exc.status != 403 or isinstance(exc, RateLimited):
                raise
            viewer = _get(self.graphql(VIEWER_QUERY, {}), "viewer")
            data = {"login": normal_login(_get(viewer, "login"), _get(viewer, "__typename"))}
        login = _get(data, "login")
        if not isinstance(login, str):
            raise MalformedAnswer("GitHub did not say the token's login")
        return login

    def installation_repositories(self) -> list[str]:
        """The repositories an installation token reaches (`GET /installation/repositories`,
        every page), by full name."""
        names: list[str] = []
        for page in range(1, MAX_PAGES + 1):
            params = {"per_page": self._page_size, "page": page}
            _, data = self._send(
                "GET", "/installation/repositories", kind="rest_get", parameters=params
            )
            found = data.get("repositories") if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise MalformedAnswer("GitHub's installation repositories are not a list")
            names += [r["full_name"] for r in found if isinstance(r.get("full_name"), str)]
            total = data.get("total_count")
            if not found or (isinstance(total, int) and len(names) >= total):
                return names
        raise PaginationLoop("GitHub's installation repositories ran past the page bound")

    def open_pulls(
        self, repo: str, *, now: datetime, required: RequiredCache | None = None
    ) -> Iterator[PullSnapshot | PullFailure]:
        """Every open pull request of `repo` with every context on its head, page by page.

        A pull request that cannot be read is yielded as a PullFailure; the others are read.
        With `required`, each signal's `required` comes from that cache, and (base branch,
        name) pairs it does not know are learned from GitHub first and recorded in it.
        """
        owner, name = repo.split("/", 1)
        comments = self._comments_in_page
        query = pulls_page_query(with_labels=self._with_labels, with_comments=comments)
        per_page = self._page_size
        if comments:  # each page one point still: fewer pull requests a page
            per_page = min(per_page, one_point_page(2 + self._with_labels))
        for key in [k for k in self._page_comments if k[0] == repo]:
            del self._page_comments[key]
        sets: dict[str, RequiredChecks] = {}  # read once per base branch in this pass
        after: str | None = None
        pages = Pages(f"the open pull requests of {repo}", error=PaginationLoop)
        read: dict[bytes, PullSnapshot] = {}  # this pass's nodes (kept when whole), by digest
        # With the cache, each node is kept raw until its digest is found new: only then parsed.
        decode = None if required is None else decode_pulls_page
        while True:
            variables = {"owner": owner, "name": name, "first": per_page, "after": after}
            data, errors = self._graphql(query, variables, tolerate=_in_pull_page, decode=decode)
            repository = _get(data, "repository")
            if repository is None:
                raise NotFound(f"repository {repo} not found or not visible", status=404)
            page = _get(repository, "pullRequests")
            nodes = _get(page, "nodes")
            if not isinstance(nodes, list):
                raise MalformedAnswer("pullRequests.nodes is not a list")
            broken, unqueued = _by_pull(errors)
            more = _get(page, "pageInfo", "hasNextPage")
            total, cursor = _get(page, "totalCount"), _get(page, "pageInfo", "endCursor")
            # Without the required cache `required` is GitHub's own: nothing is reused then.
            digests = [node_digest(n) if required is not None else None for n in nodes]
            digests = [None if i in unqueued else d for i, d in enumerate(digests)]
            items = [
                self._pull_item(repo, node, broken.get(index), digests[index], now=now)
                for index, node in enumerate(nodes)
            ]
            for index, why in unqueued.items():  # GitHub's index: only one of this page
                if isinstance(index, int) and 0 <= index < len(items):
                    _queue_unread(items[index], why)
            whole = [isinstance(p, Partial) and p.whole() for p in items]
            partials = [p for p in items if isinstance(p, Partial)]
            self._complete(owner, name, partials)
            if required is not None:
                self._fill_required(repo, partials, required, now=now)
            self._attach_required(repo, partials, required, now=now, known=sets)
            done = [p.finish() if isinstance(p, Partial) else p for p in items]
            for item, digest, alone in zip(done, digests, whole, strict=True):
                if alone and digest is not None and isinstance(item, PullSnapshot):
                    read[digest] = item
            yield from done
            if not more:
                self._nodes[repo] = read
                return
            pages.expect(total, per_page)
            after = pages.follow(cursor or "")

    def read_nodes(self, repo: str) -> Mapping[bytes, PullSnapshot]:
        """The pull requests of `repo` the last whole listing read, by their node's digest."""
        return self._nodes.get(repo, {})

    def keep_nodes(self, repo: str, nodes: Mapping[bytes, PullSnapshot]) -> None:
        """Take these pull requests as read from the nodes of these digests (by an earlier
        process), where this one has listed none of `repo` yet: an equal node is not parsed."""
        self._nodes.setdefault(repo, dict(nodes))

    def _pull_item(
        self, repo: str, node: Any, error: str | None, digest: bytes | None, *, now: datetime
    ) -> Partial | PullFailure:
        """One node of a pull-request page, not decoded or parsed again when it equals a node
        last read (and was whole: no page of contexts or labels followed); a raw node that is
        new is decoded here."""
        if error is None and digest is not None:
            last = self._nodes.get(repo, {}).get(digest)
            if last is not None:  # the same node: the same pull request, base branch and all
                return reread({"baseRefName": last.base}, last, now=now)
        if isinstance(node, msgspec.Raw):
            try:
                node = orjson.loads(bytes(node))
            except orjson.JSONDecodeError as exc:
                raise MalformedAnswer("a pull request node is not JSON") from exc
        if error is None and isinstance(node, dict) and "comments" in node:
            self._keep_page_comments(repo, node.pop("comments"), node.get("number"))
        return _pull_item(repo, node, error, now=now)

    def _keep_page_comments(self, repo: str, connection: Any, number: Any) -> None:
        """Keep a pull request's first comments as its page gave them (one that cannot be read
        is not kept: `pulls_comments` then lists that pull request from its start)."""
        if not isinstance(number, int) or not isinstance(connection, dict):
            return
        try:
            page = _graphql_comments(connection)
        except MalformedAnswer:
            return
        more = _get(connection, "pageInfo", "hasNextPage") is True
        cursor = _get(connection, "pageInfo", "endCursor") if more else None
        if more and not isinstance(cursor, str):
            return
        self._page_comments[(repo, number)] = (page, cursor, _get(connection, "totalCount"))

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request with every context on its head and what is required for it."""
        owner, name = repo.split("/", 1)
        data, errors = self._graphql(
            pull_query(with_labels=self._with_labels),
            {"owner": owner, "name": name, "number": number},
            tolerate=lambda e: _in_base_ref(e) or _in_queue_entry(e),
        )
        if _get(data, "repository") is None:
            raise NotFound(f"repository {repo} not found or not visible", status=404)
        node = _get(data, "repository", "pullRequest")
        if node is None:
            raise NotFound(f"pull request {repo}#{number} not found", status=404)
        unqueued = next((_stable_message(e) for e in errors if _in_queue_entry(e)), None)
        errors = [e for e in errors if not _in_queue_entry(e)]
        partial = _queue_unread(parse_pull(repo, node, now=now), unqueued)
        if isinstance(partial, PullFailure):
            raise MalformedAnswer(f"{partial.label}: {partial.reason}")
        self._complete(owner, name, [partial], required=True)
        if partial.base is not None:
            found = _required_of_ref(partial.base, node.get("baseRef"), errors)
            partial.required_checks = self._pinned(repo, found)
        snapshot = partial.finish()
        if isinstance(snapshot, PullFailure):
            raise MalformedAnswer(f"{snapshot.label}: {snapshot.reason}")
        return snapshot

    def _complete(
        self, owner: str, name: str, partials: list[Partial], *, required: bool = False
    ) -> None:
        """Follow context pages past the first 100 (many pull requests per query), then labels.

        A follow-up page that comes back missing marks that snapshot truncated (it is never
        called complete); labels that cannot all be read make that pull request a failure.
        """
        pages = {p.snapshot.number: Pages("the contexts", error=PaginationLoop) for p in partials}
        while pending := [p for p in partials if p.cursor and p.failure is None]:
            for start in range(0, len(pending), ALIAS_BATCH):
                chunk = pending[start : start + ALIAS_BATCH]
                variables: dict[str, Any] = {"owner": owner, "name": name}
                for i, p in enumerate(chunk):
                    variables[f"o{i}"] = p.snapshot.head_sha  # by commit: one head per report
                    variables[f"c{i}"] = p.cursor
                    if required:
                        variables[f"n{i}"] = p.snapshot.number
                query = more_contexts_query(len(chunk), required=required)
                data, errors = self._graphql(query, variables, tolerate=_in_alias)
                broken = {str(_path(e)[1]) for e in errors}
                for i, p in enumerate(chunk):
                    _extend(p, _get(data, "repository", f"p{i}", "statusCheckRollup", "contexts"),
                            missing=f"p{i}" in broken)  # fmt: skip
                    p.cursor = pages[p.snapshot.number].follow(p.cursor)
        for p in partials:
            label_pages = Pages("the labels", error=PaginationLoop)
            while p.labels_cursor and p.failure is None:
                variables = {
                    "owner": owner,
                    "name": name,
                    "number": p.snapshot.number,
                    "after": p.labels_cursor,
                }
                data = self.graphql(MORE_LABELS_QUERY, variables)
                try:
                    connection = _get(data, "repository", "pullRequest", "labels")
                    if connection is None:
                        raise Unreadable("a page of its labels came back empty")
                    labels, cursor = parse_labels(connection)
                    p.labels_cursor = label_pages.follow(cursor)
                except Unreadable as exc:
                    p.failure = f"its labels could not all be read: {exc}"
                    continue
                p.extra_labels.extend(labels)

    # -- required-ness: learned per (base branch, name), cached ---------------------------

    def _fill_required(
        self, repo: str, partials: list[Partial], cache: RequiredCache, *, now: datetime
    ) -> None:
        """Set each signal's `required` from the cache, learning unknown pairs first."""
        bases = {p.base for p in partials if p.base}
        known = cache.required_known(repo, bases, now=now)
        chosen: list[tuple[Partial, set[str]]] = []
        todo: set[Pair] = set()
        for p in partials:
            if p.base is None or p.failure is not None:
                continue
            names = {s.name for s in p.signals} - {n for b, n in known if b == p.base}
            names -= {n for b, n in todo if b == p.base}
            if names:
                chosen.append((p, names))
                todo |= {(p.base, n) for n in names}
        if chosen:
            owner, name = repo.split("/", 1)
            try:
                learned = self._learn_required(owner, name, chosen)
            except RateLimited:
                raise
            except GitHubError as exc:  # the last answers stand; else unknown, never made up
                log.warning("could not learn which checks are required in %s: %s", repo, exc)
                learned = {}
                known = {**cache.required_known(repo, bases, now=now, max_age=None), **known}
            if learned:
                cache.remember_required(repo, learned, now=now)
            known = {**known, **learned}
        for p in partials:
            base = p.base or ""
            p.signals = [_required(s, known.get((base, s.name))) for s in p.signals]

    def _learn_required(
        self, owner: str, name: str, chosen: list[tuple[Partial, set[str]]]
    ) -> dict[Pair, bool | None]:
        """Ask isRequired through per-PR aliases, for the pull requests covering unknown pairs."""
        learned: dict[Pair, bool | None] = {}
        failed: set[int] = set()
        asking: list[tuple[Partial, str | None]] = [(p, None) for p, _ in chosen]
        pages = {p.snapshot.number: Pages("the required contexts", error=PaginationLoop)
                 for p, _ in chosen}  # fmt: skip
        while asking:
            following: list[tuple[Partial, str | None]] = []
            for start in range(0, len(asking), ALIAS_BATCH):
                chunk = asking[start : start + ALIAS_BATCH]
                variables: dict[str, Any] = {"owner": owner, "name": name}
                for i, (p, cursor) in enumerate(chunk):
                    variables[f"o{i}"] = p.snapshot.head_sha  # the commit the report is of
                    variables[f"n{i}"] = p.snapshot.number
                    variables[f"c{i}"] = cursor
                query = more_contexts_query(len(chunk), required=True)
                data, errors = self._graphql(query, variables, tolerate=_in_alias)
                broken = {str(_path(e)[1]) for e in errors}
                for i, (p, _) in enumerate(chunk):
                    conn = _get(data, "repository", f"p{i}", "statusCheckRollup", "contexts")
                    if f"p{i}" in broken or not isinstance(conn, dict):
                        failed.add(p.snapshot.number)
                        continue
                    base = p.base or ""
                    learned.update({(base, n): flag for n, flag in required_of(conn).items()})
                    if _get(conn, "pageInfo", "hasNextPage"):
                        cursor = _get(conn, "pageInfo", "endCursor")
                        following.append((p, pages[p.snapshot.number].follow(cursor)))
            asking = following
        for p, names in chosen:  # asked and answered, but GitHub did not say: not asked again
            if p.snapshot.number not in failed:
                for n in names:
                    learned.setdefault((p.base or "", n), None)
        return learned

    # -- what base branches require: protection and rulesets, cached per base -------------

    def _attach_required(
        self,
        repo: str,
        partials: list[Partial],
        cache: RequiredCache | None,
        *,
        now: datetime,
        known: dict[str, RequiredChecks] | None = None,
    ) -> None:
        """Give each pull request what its base branch requires: from `known`, the cache, or
        one query for every base branch neither knows."""
        known = {} if known is None else known
        bases = sorted({p.base for p in partials if p.base and p.failure is None} - set(known))
        if bases and cache is not None:
            known.update(cache.required_sets(repo, bases, now=now))
        missing = [b for b in bases if b not in known]
        if missing:
            read = self.required_checks(repo, missing)
            if cache is not None:  # what could not be read is asked again next time
                cache.remember_required_sets(
                    repo, {b: r for b, r in read.items() if r.read}, now=now
                )
                failed = [b for b, r in read.items() if not r.read]
                last = cache.required_sets(repo, failed, now=now, max_age=REQUIRED_SETS_KEPT)
                for base in sorted(last):  # a failed read is no new fact: the last set stands
                    log.warning("%s: the required checks of %s stand as last read", repo, base)
                read |= last
            known.update(read)
        for p in partials:
            p.required_checks = known.get(p.base) if p.base else None

    def required_checks(self, repo: str, bases: Sequence[str]) -> dict[str, RequiredChecks]:
        """What each base branch requires, read in one query per ALIAS_BATCH branches; a branch
        whose rules GitHub refuses (or a query that fails) is `read: False` with the reason."""
        owner, name = repo.split("/", 1)
        found: dict[str, RequiredChecks] = {}
        for start in range(0, len(bases), ALIAS_BATCH):
            chunk = list(bases[start : start + ALIAS_BATCH])
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"b{i}": f"refs/heads/{b}" for i, b in enumerate(chunk)}
            try:
                data, errors = self._graphql(
                    required_sets_query(len(chunk)), variables, tolerate=_in_ref
                )
            except RateLimited:
                raise
            except GitHubError as exc:
                log.warning("could not read the required checks of %s: %s", repo, exc)
                found |= {b: RequiredChecks(b, read=False, error=exc.reason) for b in chunk}
                continue
            for i, base in enumerate(chunk):
                mine = [e for e in errors if str(_path(e)[1]) == f"b{i}"]
                node = _get(data, "repository", f"b{i}") if not mine else None
                found[base] = self._pinned(repo, _required_of_ref(base, node, mine))
        return found

    def _pinned(self, repo: str, checks: RequiredChecks) -> RequiredChecks:
        """Branch protection's contexts tied to the app it pins each to ("expected source"):
        GraphQL gives names only, REST's branch answer (read access) gives `checks[].app_id`.
        Asked only where branch protection requires something; where it cannot be read, the
        set says so (`pins_error`) and its names stand unpinned."""
        if not checks.read or not any(
            rule.source == BRANCH_PROTECTION for c in checks.contexts for rule in c.rules
        ):
            return checks
        path = f"/repos/{repo}/branches/{quote(checks.base, safe='')}"
        try:
            _, data = self._send("GET", path, kind="rest_get")
            return with_pins(checks, parse_pins(data))
        except RateLimited:
            raise
        except GitHubError as exc:
            log.warning(
                "%s: the apps required checks of %s are pinned to: %s", repo, checks.base, exc
            )
            return replace(checks, pins_error=exc.reason or str(exc))
        except Unreadable as exc:
            return replace(checks, pins_error=str(exc))

    # -- the comment -----------------------------------------------------------------------

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment of the pull request's conversation, oldest first."""
        pages = Pages(
            f"the comments of {repo}#{number}",
            origin=self._requester.base_url,
            error=PaginationLoop,
            refused=ForeignLink,
        )
        url = f"/repos/{repo}/issues/{number}/comments"
        return pages.read_all(url, {"per_page": 100}, self._comment_page)

    def _comment_page(self, url: str, params: dict[str, Any] | None) -> Page[Comment]:
        headers, data = self._send("GET", url, kind="rest_get", parameters=params)
        if not isinstance(data, list):
            raise MalformedAnswer("the comment list is not a list")
        link = headers.get("link", "")
        return Page([_comment(c) for c in data], link_url(link, "next"), last_page(link))

    def pulls_comments(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        until: Callable[[Comment], bool] | None = None,
    ) -> dict[int, list[Comment]]:
        """The comments of these pull requests, oldest first, over GraphQL (PULLS_PER_QUERY
        pull requests and 100 comments a query, one point), each up to the first that `until`
        accepts (all of them without `until`). A pull request whose comments could not be
        read is left out: the caller lists it over REST. A pull request whose first comments
        came with its page of open pull requests (`comments_in_page`) starts from those: none
        is asked again, and it is asked for only where its own comment was not among them."""
        owner, name = repo.split("/", 1)
        found: dict[int, list[Comment]] = {n: [] for n in dict.fromkeys(numbers)}
        cursors: dict[int, str | None] = dict.fromkeys(found)
        pages = {n: Pages(f"the comments of {repo}#{n}", error=PaginationLoop) for n in found}
        for number in list(cursors):
            kept = self._page_comments.pop((repo, number), None)
            if kept is None:
                continue
            first, cursor, total = kept
            found[number].extend(first)
            pages[number].expect(total, PAGE)
            if cursor is None or (until is not None and any(until(c) for c in first)):
                del cursors[number]  # read whole, or its own comment is among the first
            else:
                cursors[number] = pages[number].follow(cursor)
        while cursors:
            asking = list(cursors.items())
            for start in range(0, len(asking), PULLS_PER_QUERY):
                chunk = asking[start : start + PULLS_PER_QUERY]
                variables: dict[str, Any] = {"owner": owner, "name": name}
                for i, (number, cursor) in enumerate(chunk):
                    variables[f"n{i}"], variables[f"c{i}"] = number, cursor
                query = pull_comments_query(len(chunk))
                data, errors = self._graphql(query, variables, tolerate=_in_alias)
                broken = {str(_path(e)[1]) for e in errors}
                for i, (number, _) in enumerate(chunk):
                    conn = _get(data, "repository", f"p{i}", "comments")
                    try:
                        if f"p{i}" in broken or not isinstance(conn, dict):
                            raise MalformedAnswer("the comments came back missing")
                        pages[number].expect(_get(conn, "totalCount"), PAGE)
                        page = _graphql_comments(conn)
                        found[number].extend(page)
                        done = until is not None and any(until(c) for c in page)
                        more = not done and _get(conn, "pageInfo", "hasNextPage")
                        cursor = _get(conn, "pageInfo", "endCursor") if more else None
                        cursors[number] = pages[number].follow(cursor)
                    except MalformedAnswer as exc:  # that pull request only: listed over REST
                        log.info("%s#%d: comments not read over GraphQL: %s", repo, number, exc)
                        found.pop(number, None)
                        cursors[number] = None
            cursors = {n: c for n, c in cursors.items() if c is not None}
        return found

    def _by_ids(
        self, query: str, node_ids: Sequence[str], *, tolerate: Callable[[dict[str, Any]], bool]
    ) -> Iterator[tuple[list[str], list[Any], list[dict[str, Any]]]]:
        """`query`'s `nodes(ids: $ids)`, PAGE ids per GraphQL query: each query's ids, the
        nodes answered for them (one per id, in order) and the errors it tolerated."""
        for start in range(0, len(node_ids), PAGE):
            chunk = list(node_ids[start : start + PAGE])
            data, errors = self._graphql(query, {"ids": chunk}, tolerate=tolerate)
            nodes = _get(data, "nodes")
            if not isinstance(nodes, list) or len(nodes) != len(chunk):
                raise MalformedAnswer("nodes(ids:) did not answer one entry per id")
            yield chunk, nodes, errors

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Re-read comments, 100 per GraphQL query (one point each); None for one that no
        longer exists."""
        found: dict[str, Comment | None] = {}
        for chunk, nodes, errors in self._by_ids(COMMENTS_QUERY, node_ids, tolerate=_is_not_found):
            missing = {tuple(_path(e)) for e in errors}
            for index, (node_id, node) in enumerate(zip(chunk, nodes, strict=True)):
                if node is None and ("nodes", index) not in missing:
                    raise MalformedAnswer(f"comment {node_id} came back empty without an error")
                found[node_id] = None if node is None else _graphql_comment(node, node_id)
        return found

    def get_comment(self, repo: str, comment_id: int) -> Comment | None:
        """Re-read one comment; None when it no longer exists."""
        try:
            _, data = self._send(
                "GET", f"/repos/{repo}/issues/comments/{comment_id}", kind="rest_get"
            )
        except NotFound:
            return None
        return _comment(data)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Create the comment. Never retried here: a lost answer may still have created it."""
        _, data = self._send(
            "POST",
            f"/repos/{repo}/issues/{number}/comments",
            kind="rest_write",
            body={"body": body},
            retry=False,
        )
        return _comment(data)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        """Edit the comment in place (an edit notifies nobody new)."""
        _, data = self._send(
            "PATCH",
            f"/repos/{repo}/issues/comments/{comment_id}",
            kind="rest_write",
            body={"body": body},
        )
        return _comment(data)

    def delete_own_comment(self, repo: str, comment: Comment, *, login: str) -> None:
        """Delete one of the bot's own later comments (never two on a pull request): only a
        comment `login` wrote that carries the marker, and the allowlist admits this one DELETE
        for its id alone. A comment already gone is no failure."""
        if not is_own(comment, login):
            raise RefusedRequest(f"refused: comment {comment.id} is not the bot's own")
        path = f"/repos/{repo}/issues/comments/{comment.id}"
        admit_delete(path)
        with contextlib.suppress(NotFound):
            self._send("DELETE", path, kind="rest_write", retry=False)

    # -- the merge base --------------------------------------------------------------------

    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The merge-base commit of branch `base` and commit `head` (REST compare, one GET)."""
        basehead = f"{quote(base, safe='/')}...{head}"
        _, data = self._send(
            "GET", f"/repos/{repo}/compare/{basehead}", kind="rest_get", parameters={"per_page": 1}
        )
        return merge_base_of(data)

    def commits_signals(self, repo: str, shas: Sequence[str]) -> dict[str, MergeBase]:
        """The contexts GitHub reports on each commit (its first 100), COMMITS_PER_QUERY commits
        per GraphQL query; a commit that cannot be read says why, the others are read."""
        return self.commits_and_queues(repo, shas)[0]

    def commits_and_queues(
        self,
        repo: str,
        shas: Sequence[str],
        branches: Sequence[str] = (),
        *,
        what: tuple[str, str] = MERGE_BASE,
    ) -> tuple[dict[str, MergeBase], dict[str, QueueConfig]]:
        """commits_signals' answer (`what` names the commits in its errors), and the merge queue
        of each of `branches` (its checkResponseTimeout, or why it is unknown), asked in the first
        query: no query of its own."""
        owner, name = repo.split("/", 1)
        found: dict[str, MergeBase] = {}
        queues: dict[str, QueueConfig] = {}
        wanted = sorted(set(shas))
        asked = list(dict.fromkeys(branches))
        for start in range(0, max(len(wanted), 1 if asked else 0), COMMITS_PER_QUERY):
            chunk = wanted[start : start + COMMITS_PER_QUERY]
            ask = asked if start == 0 else []
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"q{i}": branch for i, branch in enumerate(ask)}
            data, errors = self._graphql(
                commits_query(chunk, queues=len(ask)), variables, tolerate=_in_commit_or_queue
            )
            repository = _get(data, "repository")
            if repository is None:
                raise NotFound(f"repository {repo} not found or not visible", status=404)
            broken = {str(_path(e)[1]): _stable_message(e) for e in errors}
            for index, sha in enumerate(chunk):
                alias = f"c{index}"
                found[sha] = _commit_item(
                    sha, _get(repository, alias), broken.get(alias), what=what
                )
            for index, branch in enumerate(ask):
                alias = f"q{index}"
                queues[branch] = _queue_config(branch, _get(repository, alias), broken.get(alias))
        return found, queues

    # -- annotations of failing check runs ------------------------------------------------

    def check_run_annotations(self, node_ids: Sequence[str]) -> dict[str, tuple[Annotation, ...]]:
        """Each check run's failure-level annotations, by node id, PAGE runs per GraphQL query;
        a run GitHub did not answer for is left out (GitHubError when a whole query fails).

        GitHub cannot filter annotations by level: a run whose pages so far hold fewer than
        QUOTED specific failures and that has more is paged on, all such runs together, at
        most MORE_ANNOTATION_PAGES further pages each (what was read by then is its answer)."""
        found: dict[str, tuple[Annotation, ...]] = {}
        more: dict[str, str] = {}  # node id -> the cursor of its next page
        wanted = list(dict.fromkeys(node_ids))
        for chunk, nodes, errors in self._by_ids(ANNOTATIONS_QUERY, wanted, tolerate=_in_nodes):
            broken = {_path(e)[1] for e in errors}
            for index, (node_id, node) in enumerate(zip(chunk, nodes, strict=True)):
                if node is None or index in broken:
                    continue
                self._annotation_page(node_id, node, found, more)
        for _ in range(MORE_ANNOTATION_PAGES):
            if not more:
                break
            asked: list[tuple[str, str]] = list(more.items())
            more = {}
            for start in range(0, len(asked), MORE_ANNOTATION_RUNS):
                batch = asked[start : start + MORE_ANNOTATION_RUNS]
                variables: dict[str, Any] = {}
                for k, (node_id, cursor) in enumerate(batch):
                    variables |= {f"i{k}": node_id, f"a{k}": cursor}
                data, errors = self._graphql(
                    more_annotations_query(len(batch)), variables, tolerate=_in_run_alias
                )
                broken = {str(_path(e)[0]) for e in errors}
                for k, (node_id, _cursor) in enumerate(batch):
                    listed = _get(data, f"r{k}")
                    node = listed[0] if isinstance(listed, list) and len(listed) == 1 else None
                    if node is None or f"r{k}" in broken:  # that run is not read this time
                        found.pop(node_id, None)
                        continue
                    self._annotation_page(node_id, node, found, more)
        return found

    @staticmethod
    def _annotation_page(
        node_id: str, node: Any, found: dict[str, tuple[Annotation, ...]], more: dict[str, str]
    ) -> None:
        """Add one page of a run's annotations to `found`; its next page to `more` when the run
        still has fewer than QUOTED specific failures."""
        try:
            page, cursor = parse_annotation_page(node)
        except Unreadable as exc:
            log.warning("the annotations of check run %s are unreadable: %s", node_id, exc)
            found.pop(node_id, None)
            return
        found[node_id] = annotations = found.get(node_id, ()) + page
        specific = [a for a in annotations if not GENERIC.fullmatch(a.message.strip())]
        if cursor is not None and len(specific) < QUOTED:
            more[node_id] = cursor

    # -- a failure's history (issue 27) ---------------------------------------------------

    def check_attempts(
        self, repo: str, asks: Sequence[tuple[str, str, int | None]]
    ) -> dict[int, list[Signal]]:
        """Every run GitHub keeps (every attempt) of each asked check, (head, name, app id), on
        its head, by the ask's index, ATTEMPTS_PER_QUERY checks per GraphQL query. An ask whose
        answer cannot all be read (an error on it, more suites or runs than one page) is left
        out: its attempts are not known, never guessed."""
        owner, name = repo.split("/", 1)
        found: dict[int, list[Signal]] = {}
        for start in range(0, len(asks), ATTEMPTS_PER_QUERY):
            chunk = asks[start : start + ATTEMPTS_PER_QUERY]
            variables: dict[str, Any] = {"owner": owner, "name": name}
            for k, (head, check, app_id) in enumerate(chunk):
                variables |= {f"o{k}": head, f"n{k}": check, f"p{k}": app_id}
            data, errors = self._graphql(
                attempts_query(len(chunk)), variables, tolerate=_in_attempt
            )
            broken = {str(_path(e)[1]) for e in errors}
            for k in range(len(chunk)):
                node = None if f"a{k}" in broken else _get(data, "repository", f"a{k}")
                runs = _attempt_runs(node)
                if runs is not None:
                    found[start + k] = runs
        return found

    def commit_statuses(self, repo: str, sha: str) -> list[Signal] | None:
        """Every state posted on the commit (REST, newest first, one page of 100); None where
        GitHub holds more than one page (the earliest states would be missing)."""
        headers, data = self._send(
            "GET",
            f"/repos/{repo}/commits/{sha}/statuses",
            kind="rest_get",
            parameters={"per_page": PAGE},
        )
        if not isinstance(data, list):
            raise MalformedAnswer("the statuses of a commit are not a list")
        if link_url(headers.get("link", ""), "next"):
            return None
        try:
            return [parse_context(_status_node(item)) for item in data]
        except Unreadable as exc:
            raise MalformedAnswer(f"a status of {sha} is unreadable: {exc}") from exc

    def branch_histories(
        self, repo: str, branches: Sequence[str]
    ) -> dict[str, tuple[MergeBase, ...] | str]:
        """Each branch's last commits, newest first, with their contexts' first page (or why
        they could not be read), ALIAS_BATCH branches per GraphQL query."""
        owner, name = repo.split("/", 1)
        found: dict[str, tuple[MergeBase, ...] | str] = {}
        for start in range(0, len(branches), ALIAS_BATCH):
            chunk = list(branches[start : start + ALIAS_BATCH])
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"b{i}": f"refs/heads/{b}" for i, b in enumerate(chunk)}
            data, errors = self._graphql(
                branch_history_query(len(chunk)), variables, tolerate=_in_ref
            )
            broken = {str(_path(e)[1]): _stable_message(e) for e in errors}
            for i, branch in enumerate(chunk):
                if f"b{i}" in broken:
                    found[branch] = f"GitHub answered an error on {branch}: {broken[f'b{i}']}"
                    continue
                found[branch] = _branch_commits(branch, _get(data, "repository", f"b{i}"))
        return found

    # -- a batched read of named pull requests (webhook refresh) ---------------------------

    def pulls_by_number(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        now: datetime,
        required: RequiredCache | None = None,
    ) -> dict[int, PullSnapshot | PullFailure]:
        """The open pull requests among `numbers`, by number (closed or unknown ones are left
        out); <= PULLS_PER_QUERY per GraphQL query, with the same per-PR isolation as
        `open_pulls`."""
        owner, name = repo.split("/", 1)
        found: dict[int, PullSnapshot | PullFailure] = {}
        wanted = sorted(set(numbers))
        for start in range(0, len(wanted), PULLS_PER_QUERY):
            chunk = wanted[start : start + PULLS_PER_QUERY]
            query = pulls_by_number_query(chunk, with_labels=self._with_labels)
            data, errors = self._graphql(query, {"owner": owner, "name": name}, tolerate=_in_alias)
            repository = _get(data, "repository")
            if repository is None:
                raise NotFound(f"repository {repo} not found or not visible", status=404)
            unqueued = {str(_path(e)[1]): _stable_message(e) for e in errors if _in_queue_entry(e)}
            errors = [e for e in errors if not _in_queue_entry(e)]
            gone = {str(_path(e)[1]) for e in errors if e.get("type") == "NOT_FOUND"}
            broken = {str(_path(e)[1]): _message(e) for e in errors if e.get("type") != "NOT_FOUND"}
            items: list[Partial | PullFailure] = []
            for number in chunk:
                alias, node = f"p{number}", _get(repository, f"p{number}")
                if alias in gone or (node is None and alias not in broken):
                    continue
                if isinstance(node, dict) and node.get("state") not in (None, "OPEN"):
                    continue  # closed or merged: its comment is left as it is
                item = _queue_unread(
                    _pull_item(repo, node, broken.get(alias), now=now), unqueued.get(alias)
                )
                if isinstance(item, PullFailure) and item.number is None:
                    item = PullFailure(repo, number, item.reason)
                items.append(item)
            partials = [p for p in items if isinstance(p, Partial)]
            self._complete(owner, name, partials)
            if required is not None:
                self._fill_required(repo, partials, required, now=now)
            self._attach_required(repo, partials, required, now=now)
            for item in items:
                done = item.finish() if isinstance(item, Partial) else item
                if done.number is not None:
                    found[done.number] = done
        return found


PULLS_PER_QUERY = 50
ATTEMPTS_PER_QUERY = 50  # checks whose attempts one CheckAttempts query reads (~3 points)
MORE_ANNOTATION_PAGES = 4  # further pages of annotations of one run, PAGE each, at most
MORE_ANNOTATION_RUNS = 50  # check runs per MoreAnnotations query
COMMITS_PER_QUERY = 50  # merge-base commits per aliased query (their first contexts page)


def merge_base_of(compare: Any) -> str:
    """The merge-base commit of a REST compare answer (MalformedAnswer when it has none)."""
    sha = _get(compare, "merge_base_commit", "sha")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise MalformedAnswer(f"GitHub's compare gave no merge-base commit ({sha!r})")
    return sha


def _commit_item(
    sha: str, node: Any, error: str | None, *, what: tuple[str, str] = MERGE_BASE
) -> MergeBase:
    """One aliased commit of a commits query: its signals, or why they cannot be read."""
    if error is not None:
        return MergeBase(sha, error=f"GitHub GraphQL error on {what[0]}: {error}")
    if node is None:
        return MergeBase(sha, error=f"GitHub did not find {what[1]}")
    try:
        signals, cursor = parse_contexts(get(node, "statusCheckRollup", "contexts"))
    except Unreadable as exc:
        return MergeBase(sha, error=f"GitHub's answer for {what[0]} is unreadable: {exc}")
    return MergeBase(sha, tuple(signals), truncated=cursor is not None)


def _in_attempt(error: dict[str, Any]) -> bool:
    """An error inside one aliased check's attempts: repository.a<k>...."""
    path = _path(error)
    return len(path) > 1 and path[0] == "repository" and str(path[1]).startswith("a")


def _attempt_runs(node: Any) -> list[Signal] | None:
    """The runs of one aliased check's suites, as signals; None where not all were read."""
    if not isinstance(node, dict):
        return None
    suites = node.get("checkSuites")
    if not isinstance(suites, dict):
        return None
    nodes = suites.get("nodes")
    if not isinstance(nodes, list) or suites.get("totalCount") != len(nodes):
        return None
    runs: list[Signal] = []
    for suite in nodes:
        connection = suite.get("checkRuns") if isinstance(suite, dict) else None
        if not isinstance(connection, dict):
            return None
        items = connection.get("nodes")
        if not isinstance(items, list) or connection.get("totalCount") != len(items):
            return None
        shell = {"app": suite.get("app"), "workflowRun": suite.get("workflowRun")}
        try:
            runs.extend(
                parse_context({**item, "__typename": "CheckRun", "checkSuite": shell})
                for item in items
                if isinstance(item, dict)
            )
        except Unreadable:
            return None
    return runs


def _status_node(item: Any) -> dict[str, Any]:
    """A REST status as the rollup's StatusContext node (one parser for both)."""
    if not isinstance(item, dict):
        raise Unreadable("a status is not an object")
    return {
        "__typename": "StatusContext",
        "context": item.get("context"),
        "state": item.get("state"),
        "description": item.get("description"),
        "targetUrl": item.get("target_url"),
        "createdAt": item.get("created_at"),
    }


def _branch_commits(branch: str, node: Any) -> tuple[MergeBase, ...] | str:
    """A branch's last commits with their contexts, or why they cannot be read."""
    if node is None:
        return f"GitHub did not find the branch {branch}"
    if isinstance(node, dict) and node.get("target") is None:
        return ()  # a branch with no commit: no history (kept like any answer)
    try:
        commits = get(node, "target", "history", "nodes")
    except Unreadable:
        commits = None
    if not isinstance(commits, list):
        return f"GitHub's history of {branch} is unreadable"
    found: list[MergeBase] = []
    for commit in commits:
        sha = commit.get("oid") if isinstance(commit, dict) else None
        if not isinstance(sha, str):
            return f"GitHub's history of {branch} names a commit without an id"
        rollup = commit.get("statusCheckRollup")  # null: nothing reported on that commit
        found.append(_commit_item(sha, commit, None) if rollup else MergeBase(sha))
    return tuple(found)


def _queue_config(branch: str, node: Any, error: str | None) -> QueueConfig:
    """One aliased merge queue: its checkResponseTimeout, or why it is not known."""
    if error is not None:
        return QueueConfig(None, f"GitHub answered on the merge queue of {branch}: {error}")
    if not isinstance(node, dict):
        return QueueConfig(None, f"GitHub gave no merge queue for {branch}")
    minutes = get(node, "configuration", "checkResponseTimeout")
    if isinstance(minutes, int) and not isinstance(minutes, bool) and minutes >= 0:
        return QueueConfig(minutes)
    return QueueConfig(None, f"GitHub gave no check response timeout for the queue of {branch}")


def _get(node: Any, *path: str) -> Any:
    try:
        return get(node, *path)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc


def decode_json(text: str) -> Any:
    """An answer's body as PyGithub reads it: None when empty, text that is not JSON (and does
    not start like JSON) as {"data": text}; a cut JSON body raises ValueError."""
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if text.startswith(("{", "[")):
            raise
        return {"data": text}


def _required(signal: Signal, flag: bool | None) -> Signal:
    """The signal with this `required` (the same object when it already has it)."""
    return signal if signal.required is flag else signal._replace(required=flag)


class _Pulls(msgspec.Struct):
    """A pullRequests connection, its nodes left as their JSON text."""

    nodes: list[msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET
    pageInfo: Any = msgspec.UNSET
    totalCount: Any = msgspec.UNSET


class _PullsRepository(msgspec.Struct):
    pullRequests: _Pulls | msgspec.UnsetType | None = msgspec.UNSET


class _PullsData(msgspec.Struct):
    repository: _PullsRepository | msgspec.UnsetType | None = msgspec.UNSET
    rateLimit: Any = msgspec.UNSET


class _PullsAnswer(msgspec.Struct):
    data: _PullsData | msgspec.UnsetType | None = msgspec.UNSET
    errors: Any = msgspec.UNSET


_PULLS_ANSWER = msgspec.json.Decoder(_PullsAnswer)


def _present(struct: Any) -> Any:
    """A decoded struct as the dict orjson would give (absent fields absent), nodes raw."""
    if not isinstance(struct, msgspec.Struct):
        return struct
    return {
        name: _present(value)
        for name in struct.__struct_fields__
        if (value := getattr(struct, name)) is not msgspec.UNSET
    }


def decode_pulls_page(text: str) -> Any:
    """A page of open pull requests as `decode_json` gives it, except that each node of
    `pullRequests.nodes` stays its raw JSON text (msgspec.Raw): its digest says whether it
    is new, and only a new one is decoded (most of a warm cycle's answers are not). An answer
    of another shape is decoded whole."""
    try:
        return _present(_PULLS_ANSWER.decode(text))
    except msgspec.DecodeError:  # not JSON (raised as any answer), or of another shape
        return decode_json(text)


def node_digest(node: Any) -> bytes | None:
    """A digest of one GraphQL node, equal for equal nodes (None: not an object): of its raw
    JSON text when it was left raw, else of its decoded form."""
    if isinstance(node, msgspec.Raw):
        return b"r" + hashlib.blake2b(node, digest_size=20).digest()
    if not isinstance(node, dict):
        return None
    try:
        raw = orjson.dumps(node, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON's own types (it always is, decoded from an answer)
        return None
    return hashlib.blake2b(raw, digest_size=20).digest()


def _pull_item(repo: str, node: Any, error: str | None, *, now: datetime) -> Partial | PullFailure:
    """One node of a pull-request page: a partial read, or that pull request's failure."""
    number = node.get("number") if isinstance(node, dict) else None
    number = number if isinstance(number, int) else None
    if error is not None:
        return PullFailure(repo, number, f"GitHub GraphQL error on this pull request: {error}")
    if node is None:
        return PullFailure(repo, None, "GitHub answered null for a pull request")
    return parse_pull(repo, node, now=now)


def _by_pull(errors: list[dict[str, Any]]) -> tuple[dict[Any, str], dict[Any, str]]:
    """A page's errors by pull request (its index): those that fail it, and those on its
    merge-queue entry only (stable words: the rest of it is read)."""
    broken = {_path(e)[3]: _message(e) for e in errors if not _in_queue_entry(e)}
    unqueued = {_path(e)[3]: _stable_message(e) for e in errors if _in_queue_entry(e)}
    return broken, unqueued


def _in_queue_entry(error: dict[str, Any]) -> bool:
    """An error on a pull request's merge-queue entry only (the rest of it is read)."""
    path = _path(error)
    return "mergeQueueEntry" in path or "isInMergeQueue" in path


def _queue_unread(item: Partial | PullFailure, error: str | None) -> Partial | PullFailure:
    """The pull request read, its merge-queue entry unknown where GitHub answered an error."""
    if error is None or not isinstance(item, Partial):
        return item
    why = f"GitHub answered an error on its merge-queue entry: {error}"
    entry = QueueEntry(QueueState.UNKNOWN, "", error=why)
    item.snapshot = replace(item.snapshot, queue=entry)
    return item


def _extend(partial: Partial, connection: Any, *, missing: bool) -> None:
    """Add a follow-up contexts page; a missing or unreadable page truncates the snapshot."""
    try:
        if missing or connection is None:
            raise Unreadable("a follow-up contexts page came back missing")
        signals, partial.cursor = parse_contexts(connection)
    except Unreadable as exc:
        log.warning("%s#%s: %s", partial.snapshot.repo, partial.snapshot.number, exc)
        partial.truncated, partial.cursor = True, None
        return
    partial.signals.extend(signals)


def _comment(data: Any) -> Comment:
    try:
        return parse_rest_comment(data)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc


def _graphql_comments(connection: Any) -> list[Comment]:
    """The IssueComment nodes of a comments connection."""
    nodes = _get(connection, "nodes")
    if not isinstance(nodes, list):
        raise MalformedAnswer("a comments connection has no nodes")
    return [_graphql_comment(node, str(_get(node, "id") or "")) for node in nodes]


def _graphql_comment(node: Any, node_id: str) -> Comment:
    try:
        return parse_graphql_comment(node, node_id)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc
