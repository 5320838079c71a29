"""The transport to GitHub: REST and GraphQL over one PyGithub requester, under the retry
policy, counting every request, noting the rate limits, raising the errors of errors.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson
import requests
from github import Github
from github.GithubException import GithubException

from bot.core.summary import Usage
from bot.github.answer import Tolerate, field, never
from bot.github.errors import (
    ForeignLink,
    GitHubError,
    MalformedAnswer,
    NotFound,
    RateLimited,
    error_message,
    error_reason,
    graphql_reason,
)
from bot.github.query import PAGE
from bot.guard import same_origin
from bot.retry import (
    TRANSIENT_STATUSES,
    Retryable,
    RetryPolicy,
    rate_limit_reset_s,
    retry_after_s,
    run_with_retries,
)

log = logging.getLogger(__name__)

MAX_INLINE_WAIT_S = 60.0
SECONDARY_BACKOFF_S = 60.0  # a 429 that names no wait: back off from a minute (GitHub's advice)
GITHUB_POLICY = RetryPolicy(attempts=3, backoff_s=1.0, jitter_s=1.0, max_wait_s=MAX_INLINE_WAIT_S)

Decode = Callable[[str], Any]
Sleep = Callable[[float], None]
Answer = tuple[dict[str, str], Any]  # the headers (lower case) and the decoded body


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


class Transport:
    """Every request the bot sends GitHub, through one PyGithub requester."""

    def __init__(
        self,
        gh: Github,
        *,
        sleep: Sleep | None = None,
        max_attempts: int = GITHUB_POLICY.attempts,
        stop: threading.Event | None = None,
        max_inline_wait_s: float = MAX_INLINE_WAIT_S,
    ) -> None:
        """`max_inline_wait_s`: the longest rate-limit wait taken inline (a queue's worker
        takes none: the job waits on the queue instead, and the worker works others)."""
        self.requester = gh.requester
        self._sleep = sleep  # None: wait on `stop` (every wait ends when it is set)
        self._policy = replace(GITHUB_POLICY, attempts=max_attempts, max_wait_s=max_inline_wait_s)
        self.stop = stop or threading.Event()
        self.usage = Usage()

    # -- REST and the request under the retry policy ----------------------------------------

    def send(
        self,
        verb: str,
        url: str,
        *,
        kind: str,
        parameters: dict[str, Any] | None = None,
        body: Any = None,
        retry: bool = True,
        decode: Decode | None = None,
    ) -> Answer:
        """One request under the retry policy: named transient failures and short rate-limit
        waits are tried again (never when `retry` is False: a create is never re-sent here);
        every wait ends when `stop` is set (retry.Stopped)."""
        if not same_origin(url, self.requester.base_url):
            raise ForeignLink(f"refused: {verb} to a host that is not the configured GitHub API")

        def attempt() -> Answer:
            return self._attempt(
                verb, url, kind=kind, parameters=parameters, body=body, retry=retry, decode=decode
            )

        policy = self._policy if retry else replace(self._policy, attempts=1)
        return run_with_retries(
            attempt, policy=policy, stop=self.stop, sleep=self._sleep, what=f"GitHub {verb}"
        )

    def _attempt(
        self,
        verb: str,
        url: str,
        *,
        kind: str,
        parameters: dict[str, Any] | None,
        body: Any,
        retry: bool,
        decode: Decode | None,
    ) -> Answer:
        """One try of a request, counted by `kind`; its failure as the error to raise."""
        self.usage.requests[kind] += 1
        try:
            if kind == "graphql":  # the big answers: decoded here, faster than PyGithub
                headers, data = self._request(verb, url, body, decode or decode_json)
            else:
                headers, data = self.requester.requestJsonAndCheck(
                    verb, url, parameters=parameters, input=body
                )
        except GithubException as exc:
            raise self._on_error(exc, retry=retry) from exc
        except (requests.Timeout, requests.ConnectionError) as exc:
            error = GitHubError(f"GitHub did not answer: {exc.__class__.__name__}")
            raise (Retryable(error) if retry else error) from exc
        except ValueError as exc:  # a body that is not JSON (a proxy's page, a cut answer)
            raise MalformedAnswer(f"GitHub answered {verb} with a body that is not JSON") from exc
        lowered = _lower_headers(headers)
        self._note_rate(lowered)
        return lowered, data

    def _request(
        self, verb: str, url: str, body: Any, decode: Decode
    ) -> tuple[dict[str, Any], Any]:
        """PyGithub's requestJsonAndCheck, its answer decoded with orjson (about twice as fast
        as the json module on a page of pull requests: benchmarks/decode.py), or `decode`."""
        status, headers, text = self.requester.requestJson(verb, url, None, None, body)
        if status >= 400:
            raise self.requester.createException(status, headers, decode_json(text))
        data = decode(text)
        return headers, data

    def _on_error(self, exc: GithubException, *, retry: bool) -> Exception:
        """The error to raise for one failed attempt: Retryable when it may be tried again."""
        headers = _lower_headers(exc.headers)
        self._note_rate(headers)
        if exc.status in (403, 429):
            limited = self._rate_limited(exc, headers, retry=retry)
            if limited is not None:
                return limited
        if exc.status == 404:
            return NotFound(error_message(exc), status=404, reason=error_reason(404, exc.data))
        reason = error_reason(exc.status, exc.data)
        error = GitHubError(error_message(exc), status=exc.status, reason=reason)
        if exc.status in TRANSIENT_STATUSES and retry:
            return Retryable(error)
        return error

    def _rate_limited(
        self, exc: GithubException, headers: Mapping[str, str], *, retry: bool
    ) -> Exception | None:
        """A 403 or 429 that is a rate limit: RateLimited, Retryable when its wait is short
        enough to take inline (None: the 403 is no rate limit)."""
        wait = rate_limit_wait(headers, now=time.time())
        if wait is None and exc.status == 429:
            wait = SECONDARY_BACKOFF_S
        if wait is None:
            return None
        reason = error_reason(exc.status, exc.data)
        if "rate limit" not in reason:  # a 429, or a 403 with only the headers saying it
            reason += " (rate limit)"
        limited = RateLimited(error_message(exc), wait_s=wait, reason=reason)
        if not retry or self._policy.too_long(wait):
            return limited
        log.warning("GitHub rate limit: waiting %.0f s as it asked", wait)
        return Retryable(limited, wait_s=wait)

    def _note_rate(self, headers: Mapping[str, str]) -> None:
        resource = headers.get("x-ratelimit-resource", "core")
        if "x-ratelimit-remaining" in headers:
            try:
                self.usage.remaining[resource] = int(headers["x-ratelimit-remaining"])
                reset = int(headers["x-ratelimit-reset"])
                self.usage.reset_at[resource] = datetime.fromtimestamp(reset, UTC)
            except (KeyError, ValueError):
                pass

    def probe(self, path: str) -> Probe:
        """One REST read for check-config, never retried: what GitHub answered, errors included."""
        self.usage.requests["probe"] += 1  # `path` is below the API root; the guard checks it
        try:
            headers, data = self.requester.requestJsonAndCheck("GET", path)
        except GithubException as exc:
            return Probe(exc.status, _lower_headers(exc.headers), exc.data)
        except (requests.Timeout, requests.ConnectionError) as exc:
            return Probe(None, {}, {"message": f"no answer ({exc.__class__.__name__})"})
        return Probe(200, _lower_headers(headers), data)

    # -- GraphQL ---------------------------------------------------------------------------

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Send one GraphQL query (never a mutation) and return its `data`; errors raise."""
        data, _ = self.query(query, variables)
        return data

    def query(
        self,
        query: str,
        variables: dict[str, Any],
        *,
        tolerate: Tolerate = never,
        decode: Decode | None = None,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """`data` and the error entries `tolerate` accepts; any other error raises."""
        headers, payload = self.send(
            "POST",
            self.requester.graphql_url,
            kind="graphql",
            body={"query": query, "variables": variables},
            decode=decode,
        )
        if not isinstance(payload, dict):
            raise MalformedAnswer("GraphQL answer is not an object")
        errors = _error_entries(payload)
        refused = [e for e in errors if not tolerate(e)]
        if refused:
            _raise_graphql_errors(refused, headers)
        data = payload.get("data")
        if not isinstance(data, dict):
            raise MalformedAnswer("GraphQL answer has no data")
        self._note_cost(data)
        return data, [e for e in errors if tolerate(e)]

    def _note_cost(self, data: dict[str, Any]) -> None:
        """Count the points a query cost and note the points left."""
        cost = field(data, "rateLimit", "cost")
        if isinstance(cost, int):
            self.usage.graphql_points += cost
        remaining = field(data, "rateLimit", "remaining")
        if isinstance(remaining, int):
            self.usage.remaining["graphql"] = remaining

    def by_ids(
        self, query: str, node_ids: Sequence[str], *, tolerate: Tolerate
    ) -> Iterator[tuple[list[str], list[Any], list[dict[str, Any]]]]:
        """`query`'s `nodes(ids: $ids)`, PAGE ids per GraphQL query: each query's ids, the
        nodes answered for them (one per id, in order) and the errors it tolerated."""
        for start in range(0, len(node_ids), PAGE):
            chunk = list(node_ids[start : start + PAGE])
            data, errors = self.query(query, {"ids": chunk}, tolerate=tolerate)
            nodes = field(data, "nodes")
            if not isinstance(nodes, list) or len(nodes) != len(chunk):
                raise MalformedAnswer("nodes(ids:) did not answer one entry per id")
            yield chunk, nodes, errors


def _error_entries(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A GraphQL answer's error entries, each an object."""
    raw = payload.get("errors") or []
    if not isinstance(raw, list):
        raise MalformedAnswer("GraphQL errors is not a list")
    return [e if isinstance(e, dict) else {"message": str(e)} for e in raw]


def _raise_graphql_errors(errors: Any, headers: Mapping[str, str]) -> None:
    first = errors[0] if isinstance(errors, list) and errors else {}
    kind = first.get("type") if isinstance(first, dict) else None
    message = first.get("message") if isinstance(first, dict) else str(first)
    if kind == "NOT_FOUND":
        raise NotFound(f"GitHub: {message}", status=404)
    if kind == "RATE_LIMITED":
        wait = rate_limit_wait(headers, now=time.time()) or 60.0
        raise RateLimited(f"GitHub GraphQL: {message}", wait_s=wait)
    raise GitHubError(f"GitHub GraphQL error: {message}", reason=graphql_reason(kind))
