"""Read the Docs API v3 reads (httpx), turned into model types. GET only, through the guard."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

import httpx

from bot.core.model import parse_optional_time
from bot.core.remedies import READTHEDOCS
from bot.guard import Guard, Page, Pages, RefusedRequest
from bot.retry import (
    TOO_MANY_REQUESTS,
    TRANSIENT_STATUSES,
    Retryable,
    RetryPolicy,
    retry_after_s,
    run_with_retries,
)
from bot.sources.http import tls
from bot.sources.readthedocs.rules import RtdBuild, describe_status

log = logging.getLogger(__name__)

RETRY_STATUSES = TRANSIENT_STATUSES | {TOO_MANY_REQUESTS}
MAX_RETRY_AFTER_S = 30.0
RTD_POLICY = RetryPolicy(attempts=4, backoff_s=0.5, jitter_s=0.5, max_wait_s=MAX_RETRY_AFTER_S)


class RtdError(Exception):
    """Read the Docs could not be read; the message says what it answered."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        """`status`: the HTTP status RTD answered, when it answered one."""
        super().__init__(message)
        self.status = status


class _TokenPerHost(httpx.Auth):
    """`Authorization: Token ...` for requests under one configured API root, and only there."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(root.rstrip("/") + "/", token) for root, token in tokens.items() if token]

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        url = str(request.url)
        for root, token in self._tokens:
            if url.startswith(root):
                request.headers["Authorization"] = f"Token {token}"
                break
        yield request


class RtdPaginationLoop(RtdError):
    """RTD's `next` links repeated, or ran past what the first page's `count` implied."""


class RtdForeignLink(RtdError):
    """An RTD `next` link pointed to another origin: not followed, no token sent there."""


def _time(value: Any) -> datetime | None:
    try:
        return parse_optional_time(value)
    except (TypeError, ValueError) as exc:
        raise RtdError(f"malformed timestamp {value!r}") from exc


def parse_build(data: Any) -> RtdBuild:
    """One RTD v3 build object -> RtdBuild (raises RtdError on a malformed one)."""
    if not isinstance(data, dict):
        raise RtdError("a build is not an object")
    build_id, state = data.get("id"), data.get("state")
    code = state.get("code") if isinstance(state, dict) else None
    success = data.get("success")
    if not isinstance(build_id, int) or not isinstance(code, str):
        raise RtdError("a build lacks its id or state code")
    if success is not None and not isinstance(success, bool):
        raise RtdError(f"build {build_id} has a non-boolean success {success!r}")
    urls: dict[str, Any] = data["urls"] if isinstance(data.get("urls"), dict) else {}
    duration = data.get("duration")
    return RtdBuild(
        id=build_id,
        project=str(data.get("project") or ""),
        commit=str(data.get("commit") or ""),
        state=code,
        success=success,
        version=None if data.get("version") is None else str(data.get("version")),
        created=_time(data.get("created")),
        finished=_time(data.get("finished")),
        duration=duration if isinstance(duration, int) else None,
        url=urls.get("build") if isinstance(urls.get("build"), str) else None,
    )


def _newest_first(builds: list[RtdBuild]) -> tuple[RtdBuild, ...]:
    floor = datetime.min.replace(tzinfo=UTC)
    return tuple(sorted(builds, key=lambda b: (b.created or floor, b.id), reverse=True))


def _client(
    api_urls: dict[str, str],
    *,
    token: str,
    tokens: Mapping[str, str] | None,
    guard: Guard,
    timeout_s: float,
    transport: httpx.BaseTransport | None,
) -> httpx.Client:
    """The HTTP client every RTD request goes through: each one checked by the guard, each
    host's token sent only under that host's API root."""
    headers = {"Accept": "application/json", "User-Agent": "ci-status-bot"}
    # `tokens`: host -> token (each sent only under that host's API root); `token`: all hosts
    per_host = {h: (tokens or {}).get(h, token) for h in api_urls}
    auth = _TokenPerHost({api_urls[h]: t for h, t in per_host.items()})

    def check(request: httpx.Request) -> None:
        guard.check_source(READTHEDOCS, request.method, str(request.url))

    return httpx.Client(
        headers=headers,
        auth=auth,
        timeout=timeout_s,
        transport=transport,
        verify=tls(),
        event_hooks={"request": [check]},
    )


class RtdApi:
    """Read-only client of Read the Docs API v3 for its hosts (.org, .com, a self-hosted one)."""

    def __init__(
        self,
        *,
        api_urls: dict[str, str],
        token: str = "",
        tokens: Mapping[str, str] | None = None,
        guard: Guard,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._client = _client(
            api_urls,
            token=token,
            tokens=tokens,
            guard=guard,
            timeout_s=timeout_s,
            transport=transport,
        )
        self._api_urls = api_urls
        self._policy = RetryPolicy(
            attempts=max_retries + 1,
            backoff_s=RTD_POLICY.backoff_s,
            jitter_s=RTD_POLICY.jitter_s,
            max_wait_s=RTD_POLICY.max_wait_s,
        )
        self._sleep = sleep  # None: wait on `stop` (every wait ends when it is set)
        self.stop = stop or threading.Event()
        self.requests = 0
        # site -> what it answered, while it refuses the bot's credential (401/403): a problem
        # of the service (the operator's), logged and shown in /readyz by `run`
        self.refused: dict[str, str] = {}

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _get(self, url: str, params: dict[str, Any] | None = None) -> Any:
        """GET under the retry policy (429/5xx/timeouts/connection errors, Retry-After honoured
        when short); raise RtdError with what RTD answered, retry.Stopped on a stop request."""

        def attempt() -> Any:
            self.requests += 1
            try:
                response = self._client.get(url, params=params)
            except RefusedRequest as exc:  # refused by the guard before anything was sent
                self.requests -= 1
                log.warning("%s", exc)
                raise RtdError(str(exc)) from exc
            except httpx.TimeoutException as exc:
                error = RtdError(f"Read the Docs did not answer in time ({exc.__class__.__name__})")
                raise Retryable(error) from exc
            except httpx.TransportError as exc:
                error = RtdError(f"Read the Docs could not be reached ({exc.__class__.__name__})")
                raise Retryable(error) from exc
            if response.status_code in RETRY_STATUSES:
                wait = _retry_after(response)
                error = _status_error(response.status_code)
                if wait is not None and self._policy.too_long(wait):
                    raise RtdError(f"{error} (it asked to wait {wait:.0f} s)", status=error.status)
                raise Retryable(error, wait_s=wait)
            self._note_refusal(url, response.status_code)
            return _json_or_error(response)

        return run_with_retries(
            attempt,
            policy=self._policy,
            stop=self.stop,
            sleep=self._sleep,
            what="Read the Docs GET",
        )

    def _note_refusal(self, url: str, status: int) -> None:
        """Remember a site refusing the credential (401/403) until it answers 200 again."""
        site = next((s for s, root in self._api_urls.items() if url.startswith(root)), None)
        if site is None:
            return
        if status in (401, 403):
            self.refused[site] = (
                f"Read the Docs ({site}) refused the bot's credential (HTTP {status}): check "
                "readthedocs.token" + (" / business_token" if site == "com" else "")
            )
        elif status == 200:
            self.refused.pop(site, None)

    def commit_builds(self, host: str, project: str, commit: str) -> tuple[RtdBuild, ...]:
        """Every build of `project` for exactly `commit` (all versions), newest first."""
        url = f"{self._root(host)}/projects/{project}/builds/"
        pages = Pages(
            f"the builds of {project}", origin=url, error=RtdPaginationLoop, refused=RtdForeignLink
        )
        builds = pages.read_all(url, {"commit": commit, "limit": 100}, self._build_page)
        return _newest_first([b for b in builds if b.commit == commit])

    def _build_page(self, url: str, params: dict[str, Any] | None) -> Page[RtdBuild]:
        page = self._get(url, params)
        results = page.get("results") if isinstance(page, dict) else None
        if not isinstance(results, list):
            raise RtdError("the build list has no results")
        nxt = page.get("next")
        following = urljoin(url, nxt) if isinstance(nxt, str) and nxt else None
        return Page([parse_build(b) for b in results], following, page.get("count"), len(results))

    def build(self, host: str, project: str, build_id: int) -> RtdBuild:
        """One build, by id (the build detail endpoint)."""
        return parse_build(self._get(f"{self._root(host)}/projects/{project}/builds/{build_id}/"))

    def notifications(self, host: str, project: str, build_id: int) -> tuple[str, ...]:
        """The message ids of a build's notifications (why it ended), e.g. build:user:cancelled."""
        url = f"{self._root(host)}/projects/{project}/builds/{build_id}/notifications/"
        page = self._get(url)
        results = page.get("results") if isinstance(page, dict) else None
        if not isinstance(results, list):
            raise RtdError("the notification list has no results")
        ids = (r.get("message", {}).get("id") for r in results if isinstance(r, dict))
        return tuple(i for i in ids if isinstance(i, str))

    def own_projects(self, host: str) -> int:
        """How many projects the token's user maintains on `host` (RTD refuses a bad token: 401)."""
        page = self._get(f"{self._root(host)}/projects/", {"limit": 1})
        count = page.get("count") if isinstance(page, dict) else None
        if not isinstance(count, int):
            raise RtdError("the project list has no count")
        return count

    def project_exists(self, host: str, project: str) -> bool:
        """Whether `project`'s builds can be read on `host` (False: RTD answered 404)."""
        try:
            self._get(f"{self._root(host)}/projects/{project}/builds/", {"limit": 1})
        except RtdError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _root(self, host: str) -> str:
        base = self._api_urls.get(host)
        if base is None:
            raise RtdError(f"no API URL configured for readthedocs.{host}", status=400)
        return base.rstrip("/")


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds RTD's Retry-After asks for (seconds or an HTTP date); None: the policy's backoff."""
    return retry_after_s(response.headers.get("retry-after"), now=datetime.now(UTC))


def _status_error(status: int) -> RtdError:
    """An answer other than 200, in words that never change between answers: the status code
    and what it means. Its body is never quoted (error pages differ per request, a CDN's block
    page carries a new ray id each time; and the body is not Read the Docs' evidence)."""
    return RtdError(describe_status(status), status=status)


def _json_or_error(response: httpx.Response) -> Any:
    if response.status_code != 200:
        raise _status_error(response.status_code)
    try:
        return response.json()
    except ValueError as exc:
        raise RtdError("Read the Docs answered with a body that is not JSON") from exc
