"""GitHub reads (batched GraphQL statusCheckRollup) as model types; the comment calls."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import requests
from github import Github
from github.GithubException import GithubException

from bot.model import Kind, PullSnapshot, Signal, parse_time

log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
MAX_INLINE_WAIT_S = 60.0

_CHECK_FIELDS = """
fragment CheckFields on CheckRun {
  name status conclusion startedAt completedAt detailsUrl databaseId title summary
  checkSuite { app { slug } workflowRun { workflow { name } } }
}
fragment StatusFields on StatusContext { context state description targetUrl createdAt }
fragment Contexts on StatusCheckRollupContextConnection {
  pageInfo { hasNextPage endCursor }
  nodes { __typename ...CheckFields ...StatusFields }
}
"""


def _pull_fragment(*, with_labels: bool) -> str:
    labels = "labels(first: 20) { nodes { name } }" if with_labels else ""
    return (
        "fragment PullFields on PullRequest {\n"
        f"  number title url isDraft headRefOid author {{ login }} {labels}\n"
        "  statusCheckRollup { contexts(first: 100) { ...Contexts } }\n}\n" + _CHECK_FIELDS
    )


def pulls_page_query(*, with_labels: bool) -> str:
    """The query that reads one page of open pull requests with their head's rollup."""
    return (
        "query PullPage($owner: String!, $name: String!, $first: Int!, $after: String) {\n"
        "  rateLimit { cost remaining resetAt }\n"
        "  repository(owner: $owner, name: $name) {\n"
        "    pullRequests(states: OPEN, first: $first, after: $after,"
        " orderBy: {field: CREATED_AT, direction: ASC}) {\n"
        "      pageInfo { hasNextPage endCursor }\n"
        "      nodes { ...PullFields }\n"
        "    }\n  }\n}\n" + _pull_fragment(with_labels=with_labels)
    )


def pull_query(*, with_labels: bool) -> str:
    """The query that reads one pull request with its head's rollup."""
    return (
        "query OnePull($owner: String!, $name: String!, $number: Int!) {\n"
        "  rateLimit { cost remaining resetAt }\n"
        "  repository(owner: $owner, name: $name) {\n"
        "    pullRequest(number: $number) { ...PullFields }\n  }\n"
        "}\n" + _pull_fragment(with_labels=with_labels)
    )


def more_contexts_query(count: int) -> str:
    """The query that reads the next page of contexts for `count` pull requests at once."""
    params = ", ".join(f"$n{i}: Int!, $c{i}: String" for i in range(count))
    aliases = "\n".join(
        f"    p{i}: pullRequest(number: $n{i}) {{ statusCheckRollup {{"
        f" contexts(first: 100, after: $c{i}) {{ ...Contexts }} }} }}"
        for i in range(count)
    )
    return (
        f"query MoreContexts($owner: String!, $name: String!, {params}) {{\n"
        "  rateLimit { cost remaining resetAt }\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n" + _CHECK_FIELDS
    )


COMMENTS_QUERY = """
query Comments($ids: [ID!]!) {
  rateLimit { cost remaining resetAt }
  nodes(ids: $ids) {
    __typename
    ... on IssueComment { databaseId body author { __typename login } }
  }
}
"""


class GitHubError(Exception):
    """GitHub could not be read or written; the message says what it answered."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(GitHubError):
    """The repository, pull request or comment does not exist or is not visible to the bot."""


class RateLimited(GitHubError):
    """GitHub refused for rate limiting; retry after `wait_s` seconds."""

    def __init__(self, message: str, *, wait_s: float) -> None:
        super().__init__(message, status=403)
        self.wait_s = wait_s


class MalformedAnswer(GitHubError):
    """GitHub answered with a shape the bot does not understand."""


@dataclass(frozen=True, slots=True)
class Comment:
    """An issue comment: the parts the bot needs."""

    id: int
    author: str | None
    body: str
    node_id: str = ""


@dataclass
class Usage:
    """What the bot spent on GitHub: requests by kind, GraphQL points, and what is left."""

    requests: Counter[str] = field(default_factory=Counter)
    graphql_points: int = 0
    remaining: dict[str, int] = field(default_factory=dict)
    reset_at: dict[str, datetime] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All GitHub requests sent."""
        return sum(self.requests.values())


def _parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TypeError, ValueError) as exc:
        raise MalformedAnswer(f"malformed timestamp {value!r}") from exc


def _get(node: Any, *path: str) -> Any:
    for key in path:
        if node is None:
            return None
        if not isinstance(node, dict):
            raise MalformedAnswer(f"expected an object at {'.'.join(path)}")
        node = node.get(key)
    return node


def _text(node: Any, key: str, *, required: bool = False) -> str | None:
    value = _get(node, key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise MalformedAnswer(f"field {key!r} is {value!r}, expected text")
    return value


def _str(node: dict[str, Any], key: str) -> str | None:
    value = node.get(key)
    if value is None or isinstance(value, str):
        return value
    raise MalformedAnswer(f"field {key!r} is {value!r}, expected text")


def _required(node: dict[str, Any], key: str) -> str:
    value = node.get(key)
    if isinstance(value, str):
        return value
    raise MalformedAnswer(f"field {key!r} is {value!r}, expected text")


def parse_context(node: Any) -> Signal:
    """Turn one statusCheckRollup context (CheckRun or StatusContext) into a Signal."""
    if not isinstance(node, dict):
        raise MalformedAnswer("a rollup context is not an object")
    kind = node.get("__typename")
    if kind == "CheckRun":
        status = _required(node, "status").lower()
        conclusion = _str(node, "conclusion")
        database_id = node.get("databaseId")
        suite = node.get("checkSuite")
        return Signal(
            name=_required(node, "name"),
            kind=Kind.CHECK_RUN,
            github_state=conclusion.lower() if status == "completed" and conclusion else status,
            app=_get(suite, "app", "slug"),
            workflow=_get(suite, "workflowRun", "workflow", "name"),
            url=_str(node, "detailsUrl"),
            description=_str(node, "title"),
            summary=_str(node, "summary"),
            started_at=_parse_time(node.get("startedAt")),
            completed_at=_parse_time(node.get("completedAt")),
            database_id=database_id if isinstance(database_id, int) else None,
        )
    if kind == "StatusContext":
        return Signal(
            name=_required(node, "context"),
            kind=Kind.STATUS,
            github_state=_required(node, "state").lower(),
            url=_str(node, "targetUrl"),
            description=_str(node, "description"),
            created_at=_parse_time(node.get("createdAt")),
        )
    raise MalformedAnswer(f"unknown rollup context type {kind!r}")


def _contexts(connection: Any) -> tuple[list[Signal], str | None]:
    """Signals of one contexts page and the cursor of the next page (None when done)."""
    if connection is None:
        return [], None
    nodes = _get(connection, "nodes")
    if not isinstance(nodes, list):
        raise MalformedAnswer("statusCheckRollup.contexts.nodes is not a list")
    signals = [parse_context(n) for n in nodes if n is not None]
    more = _get(connection, "pageInfo", "hasNextPage")
    return signals, (_get(connection, "pageInfo", "endCursor") if more else None)


@dataclass
class _Partial:
    snapshot: PullSnapshot
    signals: list[Signal]
    cursor: str | None


def parse_pull(repo: str, node: Any, *, now: datetime) -> _Partial:
    """Turn one PullRequest node into a snapshot (first contexts page) and its next cursor."""
    if not isinstance(node, dict):
        raise MalformedAnswer("pull request node is not an object")
    number = _get(node, "number")
    head = _text(node, "headRefOid", required=True) or ""
    if not isinstance(number, int) or len(head) != 40:
        raise MalformedAnswer(f"pull request node lacks a number or a head sha: {number!r}")
    labels = _get(node, "labels", "nodes") or []
    signals, cursor = _contexts(_get(node, "statusCheckRollup", "contexts"))
    snapshot = PullSnapshot(
        repo=repo,
        number=number,
        title=_text(node, "title") or "",
        author=_get(node, "author", "login"),
        draft=bool(_get(node, "isDraft")),
        head_sha=head,
        url=_text(node, "url") or "",
        labels=tuple(str(_get(label, "name")) for label in labels if label),
        fetched_at=now,
    )
    return _Partial(snapshot, signals, cursor)


def _lower_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def rate_limit_wait(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds to wait when a 403/429 is a rate limit (None when it is not one)."""
    if "retry-after" in headers:
        try:
            return max(1.0, float(headers["retry-after"]))
        except ValueError:
            return 60.0
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            return max(1.0, float(headers["x-ratelimit-reset"]) - now + 1)
        except (KeyError, ValueError):
            return 60.0
    return None


def _error_message(exc: GithubException) -> str:
    data = exc.data
    message = data.get("message") if isinstance(data, dict) else None
    return f"GitHub answered {exc.status}: {message or data!r}"


class GitHubApi:
    """Everything the bot asks of GitHub, through one PyGithub requester."""

    def __init__(
        self,
        gh: Github,
        *,
        page_size: int = 100,
        with_labels: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = 3,
    ) -> None:
        self._requester = gh.requester
        self._page_size = page_size
        self._with_labels = with_labels
        self._sleep = sleep
        self._max_attempts = max_attempts
        self.usage = Usage()

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
    ) -> tuple[dict[str, str], Any]:
        """One request with named-transient retries and rate-limit handling."""
        for attempt in range(self._max_attempts):
            self.usage.requests[kind] += 1
            try:
                headers, data = self._requester.requestJsonAndCheck(
                    verb, url, parameters=parameters, input=body
                )
            except GithubException as exc:
                wait = self._on_error(exc, attempt=attempt, retry=retry)
                self._sleep(wait)
                continue
            except (requests.Timeout, requests.ConnectionError) as exc:
                if not retry or attempt + 1 >= self._max_attempts:
                    raise GitHubError(f"GitHub did not answer: {exc.__class__.__name__}") from exc
                self._sleep(2.0**attempt)
                continue
            lowered = _lower_headers(headers)
            self._note_rate(lowered)
            return lowered, data
        raise GitHubError(f"GitHub kept failing after {self._max_attempts} attempts: {verb} {url}")

    def _on_error(self, exc: GithubException, *, attempt: int, retry: bool) -> float:
        """Seconds to wait before retrying, or raise the error the caller should see."""
        headers = _lower_headers(exc.headers)
        self._note_rate(headers)
        last = attempt + 1 >= self._max_attempts
        if exc.status in (403, 429):
            wait = rate_limit_wait(headers, now=time.time())
            if wait is not None:
                if wait > MAX_INLINE_WAIT_S or last:
                    raise RateLimited(_error_message(exc), wait_s=wait) from exc
                log.warning("GitHub rate limit: waiting %.0f s as it asked", wait)
                return wait
        if exc.status == 404:
            raise NotFound(_error_message(exc), status=404) from exc
        if exc.status in TRANSIENT_STATUSES and retry and not last:
            return float(2**attempt)
        raise GitHubError(_error_message(exc), status=exc.status) from exc

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
        data, _ = self._graphql(query, variables, missing_ok=False)
        return data

    def _graphql(
        self, query: str, variables: dict[str, Any], *, missing_ok: bool
    ) -> tuple[dict[str, Any], set[tuple[Any, ...]]]:
        """`data` and the paths GitHub answered NOT_FOUND for (allowed when `missing_ok`)."""
        headers, payload = self._send(
            "POST",
            self._requester.graphql_url,
            kind="graphql",
            body={"query": query, "variables": variables},
        )
        if not isinstance(payload, dict):
            raise MalformedAnswer("GraphQL answer is not an object")
        errors = payload.get("errors") or []
        missing = {tuple(e.get("path") or ()) for e in errors if _is_not_found(e)}
        if errors and not (missing_ok and len(missing) == len(errors)):
            self._raise_graphql_errors(errors, headers)
        data = payload.get("data")
        if not isinstance(data, dict):
            raise MalformedAnswer("GraphQL answer has no data")
        cost = _get(data, "rateLimit", "cost")
        if isinstance(cost, int):
            self.usage.graphql_points += cost
        remaining = _get(data, "rateLimit", "remaining")
        if isinstance(remaining, int):
            self.usage.remaining["graphql"] = remaining
        return data, missing

    def _raise_graphql_errors(self, errors: Any, headers: Mapping[str, str]) -> None:
        first = errors[0] if isinstance(errors, list) and errors else {}
        kind = first.get("type") if isinstance(first, dict) else None
        message = first.get("message") if isinstance(first, dict) else str(first)
        if kind == "NOT_FOUND":
            raise NotFound(f"GitHub: {message}", status=404)
        if kind == "RATE_LIMITED":
            wait = rate_limit_wait(headers, now=time.time()) or 60.0
            raise RateLimited(f"GitHub GraphQL: {message}", wait_s=wait)
        raise GitHubError(f"GitHub GraphQL error: {message}")

    # -- reads -----------------------------------------------------------------------------

    def viewer_login(self) -> str:
        """The login of the token's user (the bot's own comments carry it)."""
        _, data = self._send("GET", "/user", kind="rest_get")
        login = _get(data, "login")
        if not isinstance(login, str):
            raise MalformedAnswer("GET /user has no login")
        return login

    def open_pulls(self, repo: str, *, now: datetime) -> Iterator[PullSnapshot]:
        """Every open pull request of `repo` with every context on its head, page by page."""
        owner, name = repo.split("/", 1)
        query = pulls_page_query(with_labels=self._with_labels)
        after: str | None = None
        while True:
            variables = {"owner": owner, "name": name, "first": self._page_size, "after": after}
            data = self.graphql(query, variables)
            repository = _get(data, "repository")
            if repository is None:
                raise NotFound(f"repository {repo} not found or not visible", status=404)
            page = _get(repository, "pullRequests")
            nodes = _get(page, "nodes")
            if not isinstance(nodes, list):
                raise MalformedAnswer("pullRequests.nodes is not a list")
            partials = [parse_pull(repo, n, now=now) for n in nodes if n is not None]
            self._complete_contexts(owner, name, partials)
            yield from (_finish(p) for p in partials)
            if not _get(page, "pageInfo", "hasNextPage"):
                return
            after = _get(page, "pageInfo", "endCursor")

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request with every context on its head."""
        owner, name = repo.split("/", 1)
        data = self.graphql(
            pull_query(with_labels=self._with_labels),
            {"owner": owner, "name": name, "number": number},
        )
        if _get(data, "repository") is None:
            raise NotFound(f"repository {repo} not found or not visible", status=404)
        node = _get(data, "repository", "pullRequest")
        if node is None:
            raise NotFound(f"pull request {repo}#{number} not found", status=404)
        partial = parse_pull(repo, node, now=now)
        self._complete_contexts(owner, name, [partial])
        return _finish(partial)

    def _complete_contexts(self, owner: str, name: str, partials: list[_Partial]) -> None:
        """Follow context pages past the first 100, batching many pull requests per query."""
        batch_size = 20
        while pending := [p for p in partials if p.cursor]:
            for start in range(0, len(pending), batch_size):
                chunk = pending[start : start + batch_size]
                variables: dict[str, Any] = {"owner": owner, "name": name}
                for i, p in enumerate(chunk):
                    variables[f"n{i}"] = p.snapshot.number
                    variables[f"c{i}"] = p.cursor
                data = self.graphql(more_contexts_query(len(chunk)), variables)
                for i, p in enumerate(chunk):
                    conn = _get(data, "repository", f"p{i}", "statusCheckRollup", "contexts")
                    signals, p.cursor = _contexts(conn)
                    p.signals.extend(signals)

    # -- the comment -----------------------------------------------------------------------

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment of the pull request's conversation, oldest first."""
        url: str | None = f"/repos/{repo}/issues/{number}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        comments: list[Comment] = []
        while url:
            headers, data = self._send("GET", url, kind="rest_get", parameters=params)
            if not isinstance(data, list):
                raise MalformedAnswer("the comment list is not a list")
            comments.extend(_comment(c) for c in data)
            url, params = _next_link(headers.get("link", "")), None
        return comments

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Re-read many comments in one GraphQL query; None for one that no longer exists."""
        if not node_ids:
            return {}
        data, missing = self._graphql(COMMENTS_QUERY, {"ids": list(node_ids)}, missing_ok=True)
        nodes = _get(data, "nodes")
        if not isinstance(nodes, list) or len(nodes) != len(node_ids):
            raise MalformedAnswer("nodes(ids:) did not answer one entry per id")
        found: dict[str, Comment | None] = {}
        for index, (node_id, node) in enumerate(zip(node_ids, nodes, strict=True)):
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

    # -- a batched read of named pull requests (webhook refresh) ---------------------------

    def pulls_by_number(
        self, repo: str, numbers: Sequence[int], *, now: datetime
    ) -> dict[int, PullSnapshot]:
        """The open pull requests among `numbers`, by number; <= 50 per GraphQL query."""
        owner, name = repo.split("/", 1)
        found: dict[int, PullSnapshot] = {}
        wanted = sorted(set(numbers))
        for start in range(0, len(wanted), PULLS_PER_QUERY):
            chunk = wanted[start : start + PULLS_PER_QUERY]
            query = pulls_by_number_query(chunk, with_labels=self._with_labels)
            data, _ = self._graphql(query, {"owner": owner, "name": name}, missing_ok=True)
            repository = _get(data, "repository")
            if repository is None:
                raise NotFound(f"repository {repo} not found or not visible", status=404)
            nodes = [_get(repository, f"p{n}") for n in chunk]
            partials = [
                parse_pull(repo, node, now=now)
                for node in nodes
                if isinstance(node, dict) and node.get("state") == "OPEN"
            ]
            self._complete_contexts(owner, name, partials)
            found.update((p.snapshot.number, _finish(p)) for p in partials)
        return found


PULLS_PER_QUERY = 50


def pulls_by_number_query(numbers: Sequence[int], *, with_labels: bool) -> str:
    """One query reading several pull requests by number (aliases pN), each with its rollup."""
    aliases = "\n".join(
        f"    p{int(n)}: pullRequest(number: {int(n)}) {{ state ...PullFields }}" for n in numbers
    )
    return (
        "query PullsByNumber($owner: String!, $name: String!) {\n"
        "  rateLimit { cost remaining resetAt }\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
        + _pull_fragment(with_labels=with_labels)
    )


def _finish(partial: _Partial) -> PullSnapshot:
    return replace(partial.snapshot, signals=tuple(partial.signals))


def _comment(data: Any) -> Comment:
    comment_id = _get(data, "id")
    body = _get(data, "body")
    if not isinstance(comment_id, int):
        raise MalformedAnswer("a comment has no id")
    node_id = _get(data, "node_id")
    return Comment(
        id=comment_id,
        author=_get(data, "user", "login"),
        body=body or "",
        node_id=node_id if isinstance(node_id, str) else "",
    )


def _is_not_found(error: Any) -> bool:
    return isinstance(error, dict) and error.get("type") == "NOT_FOUND"


def _graphql_comment(node: Any, node_id: str) -> Comment:
    """An IssueComment node; a Bot's GraphQL login lacks the `[bot]` its REST login has."""
    comment_id = _get(node, "databaseId")
    if not isinstance(comment_id, int):
        raise MalformedAnswer("an IssueComment has no databaseId")
    login = _get(node, "author", "login")
    if isinstance(login, str) and _get(node, "author", "__typename") == "Bot":
        login += "[bot]"
    return Comment(id=comment_id, author=login, body=_get(node, "body") or "", node_id=node_id)


def _next_link(link: str) -> str | None:
    """The rel="next" URL of a Link header, followed as given."""
    for part in link.split(","):
        section = part.split(";")
        if len(section) >= 2 and section[1].strip() == 'rel="next"':
            return section[0].strip().strip("<>")
    return None
