"""The HTTP reads of a second source (httpx): GET only, through the guard, JSON only.

Every provider but Read the Docs (whose client predates this one) reads through `JsonApi`:
the guard checks each request against what the provider declared (`Guard.check_source`);
redirects are never followed (a 3xx, wherever it points, is an answer that proves nothing);
a body is read up to MAX_BODY bytes and must be a JSON object; 429 and 5xx are tried again
under the one retry policy, and what finally fails is a `SourceError` in words that do not
change from one answer to the next (the status code and what it means, never the body).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import httpx

from bot.guard import Guard, RefusedRequest
from bot.retry import (
    TOO_MANY_REQUESTS,
    TRANSIENT_STATUSES,
    Retryable,
    RetryPolicy,
    retry_after_s,
    run_with_retries,
)

log = logging.getLogger(__name__)

MAX_BODY = 2 * 1024 * 1024  # bytes: a record larger than this is not read (a huge page)
RETRY_STATUSES = TRANSIENT_STATUSES | {TOO_MANY_REQUESTS}
POLICY = RetryPolicy(attempts=4, backoff_s=0.5, jitter_s=0.5, max_wait_s=30.0)
_MEANINGS: Mapping[int, str] = {
    401: "the token was not accepted",
    403: "access refused",
    404: "no such record is visible",
    429: "too many requests",
}


class SourceError(Exception):
    """A source could not be read; the message says what it answered (stable words)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        """`status`: the HTTP status the source answered, when it answered one."""
        super().__init__(message)
        self.status = status


def describe(label: str, status: int) -> str:
    """What `label` answering `status` means, the same words for every such answer."""
    if status in _MEANINGS:
        meaning = _MEANINGS[status]
    elif status >= 500:
        meaning = "a server error"
    elif 300 <= status < 400:
        meaning = "a redirect, not followed"
    else:
        meaning = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    return f"{label} answered HTTP {status}" + (f" ({meaning})" if meaning else "")


def tls() -> ssl.SSLContext:
    """The verifying TLS context every second source's client shares, as httpx builds one for
    a client (SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's bundle): built once per process
    and bundle, not once per client (loading the bundle costs ~35 ms of CPU each time)."""
    return _tls(os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))


@functools.cache
def _tls(_cafile: str, _capath: str) -> ssl.SSLContext:
    return httpx.create_ssl_context()


class _Bearer(httpx.Auth):
    """`Authorization: <scheme> <token>` only for requests under the configured API root."""

    def __init__(self, root: str, token: str, scheme: str) -> None:
        self.root, self.token, self.scheme = root.rstrip("/") + "/", token, scheme

    def auth_flow(self, request: httpx.Request) -> Any:
        if self.token and str(request.url).startswith(self.root):
            request.headers["Authorization"] = f"{self.scheme} {self.token}"
        yield request


class JsonApi:
    """Read-only JSON client of one provider's API root."""

    def __init__(
        self,
        *,
        source: str,
        label: str,
        api_url: str,
        guard: Guard,
        token: str = "",
        scheme: str = "Bearer",
        timeout_s: float = 10.0,
        max_retries: int = 3,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.source, self.label, self.api_url = source, label, api_url.rstrip("/")

        def check(request: httpx.Request) -> None:
            guard.check_source(source, request.method, str(request.url))

        self._client = httpx.Client(
            headers={"Accept": "application/json", "User-Agent": "ci-status-bot"},
            auth=_Bearer(self.api_url, token, scheme),
            timeout=timeout_s,
            transport=transport,
            verify=tls(),
            follow_redirects=False,
            event_hooks={"request": [check]},
        )
        self.has_token = bool(token)
        self._policy = RetryPolicy(
            attempts=max_retries + 1,
            backoff_s=POLICY.backoff_s,
            jitter_s=POLICY.jitter_s,
            max_wait_s=POLICY.max_wait_s,
        )
        self._sleep, self.stop = sleep, stop or threading.Event()
        self.requests = 0
        self.refused: str | None = None  # what the provider said while it refuses the token

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """GET `path` below the API root: a JSON object, or SourceError (retried when 429/5xx)."""
        url = self.api_url + path
        return run_with_retries(
            lambda: self._attempt(url, params),
            policy=self._policy,
            stop=self.stop,
            sleep=self._sleep,
            what=f"{self.label} GET",
        )

    def _attempt(self, url: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        self.requests += 1
        try:
            with self._client.stream("GET", url, params=params) as response:
                status = response.status_code
                if status in RETRY_STATUSES:
                    raise self._retryable(response)
                self._note_refusal(status)
                if status != 200:
                    raise SourceError(describe(self.label, status), status=status)
                return self._json(response)
        except RefusedRequest as exc:  # refused by the guard before anything was sent
            self.requests -= 1
            log.warning("%s", exc)
            raise SourceError(str(exc)) from exc
        except httpx.TimeoutException as exc:
            said = f"{self.label} did not answer in time ({exc.__class__.__name__})"
            raise Retryable(SourceError(said)) from exc
        except httpx.TransportError as exc:
            said = f"{self.label} could not be reached ({exc.__class__.__name__})"
            raise Retryable(SourceError(said)) from exc

    def _retryable(self, response: httpx.Response) -> Exception:
        wait = retry_after_s(response.headers.get("retry-after"), now=datetime.now(UTC))
        error = SourceError(describe(self.label, response.status_code), status=response.status_code)
        if wait is not None and self._policy.too_long(wait):
            return SourceError(f"{error} (it asked to wait {wait:.0f} s)", status=error.status)
        return Retryable(error, wait_s=wait)

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        """The body as a JSON object, read up to MAX_BODY bytes (never an HTML error page)."""
        body = bytearray()
        for chunk in response.iter_bytes():
            body.extend(chunk)
            if len(body) > MAX_BODY:
                raise SourceError(f"{self.label} answered with more than {MAX_BODY} bytes")
        try:
            data = json.loads(bytes(body))
        except ValueError as exc:
            raise SourceError(f"{self.label} answered with a body that is not JSON") from exc
        if not isinstance(data, dict):
            raise SourceError(f"{self.label} answered with JSON that is not an object")
        return data

    def _note_refusal(self, status: int) -> None:
        """Remember the provider refusing the bot's token (401/403) until it answers 200."""
        if status in (401, 403) and self.has_token:
            key = self.source.replace("-", "_")
            self.refused = (
                f"{self.label} refused the bot's credential (HTTP {status}): check {key}.token"
            )
        elif status == 200:
            self.refused = None


class JsonConnection:
    """What every JSON provider's connection shares: its requests, its one problem key (the
    provider refusing the bot's token, while it does), closing. `KEY` is its settings block."""

    KEY: str = ""

    def __init__(self, api: JsonApi) -> None:
        self.api = api

    @property
    def requests(self) -> int:
        """Requests made to the provider so far."""
        return self.api.requests

    def problems(self) -> Mapping[str, str]:
        """The provider refusing the bot's token, while it does."""
        return {} if self.api.refused is None else {self.KEY: self.api.refused}

    def problem_keys(self) -> tuple[str, ...]:
        """The one key of its problems."""
        return (self.KEY,)

    def close(self) -> None:
        """Close the connections."""
        self.api.close()
