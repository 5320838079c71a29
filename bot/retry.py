"""The one retry policy of every GitHub and Read the Docs call (tenacity underneath).

Only named transient failures are tried again (the 5xx in TRANSIENT_STATUSES, timeouts,
connection errors, 429 and rate limits that name their wait); a wait a server asks for
(Retry-After in seconds or as an HTTP date, a rate-limit reset) is honoured when it is short
and gives up otherwise; backoff is exponential with jitter; attempts are bounded; and every
wait ends within a second of a stop request (`Stopped` is raised instead of trying again).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import tenacity

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], None]  # a wait of so many seconds (tests pass one that returns)

TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
TOO_MANY_REQUESTS = 429


class Stopped(Exception):
    """A stop request ended a wait: nothing more is tried."""


class Retryable(Exception):
    """Raised by one attempt that may be tried again; `cause` is what the caller sees at the end.

    `wait_s` is the wait the server asked for (Retry-After, a rate-limit reset); None means
    the policy's own backoff.
    """

    def __init__(self, cause: Exception, *, wait_s: float | None = None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.wait_s = wait_s


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to try again."""

    attempts: int = 3  # every try, the first included
    backoff_s: float = 1.0  # the first backoff; it doubles, plus up to `jitter_s`
    backoff_max_s: float = 30.0
    jitter_s: float = 1.0
    max_wait_s: float = 60.0  # the longest wait a server may ask for that is taken inline

    def too_long(self, wait_s: float) -> bool:
        """Whether a server-asked wait is longer than the bot waits inline (then it gives up)."""
        return wait_s > self.max_wait_s


def pause(seconds: float, stop: threading.Event | None) -> None:
    """Wait `seconds`; raise Stopped as soon as `stop` is set (at once when it already is).

    The wait is logged as it starts (debug) and, when the stop ends it, with how long it had
    lasted of how long it was to last (monotonic clock): what a stop interrupted, told.
    """
    log.debug("waiting %.1f s", seconds)
    if stop is None:
        threading.Event().wait(max(0.0, seconds))
        return
    started = time.monotonic()
    if stop.wait(max(0.0, seconds)) or stop.is_set():
        log.info("stopped %.1f s into a %.1f s wait", time.monotonic() - started, seconds)
        raise Stopped("stopped while waiting")


def retry_after_s(value: str | None, *, now: datetime) -> float | None:
    """Seconds a Retry-After header asks for: delta-seconds or an HTTP date (None: unreadable)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def rate_limit_reset_s(headers: Mapping[str, str], *, now: datetime) -> float | None:
    """Seconds until x-ratelimit-reset when x-ratelimit-remaining is 0 (None otherwise)."""
    if headers.get("x-ratelimit-remaining") != "0":
        return None
    try:
        reset = float(headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None
    return max(0.0, reset - now.timestamp()) + 1.0


def run_with_retries(
    attempt: Callable[[], T],
    *,
    policy: RetryPolicy,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] | None = None,
    what: str = "request",
) -> T:
    """Call `attempt` until it returns, raises something else than Retryable, or runs out.

    Out of attempts, the last Retryable's `cause` is raised. A wait interrupted by `stop`
    raises Stopped. `sleep` (tests, or a caller's own interruptible sleep) replaces the wait;
    `stop` is checked after it all the same.
    """

    waits = _Waits(policy, stop=stop, sleep=sleep, what=what)
    retrying = tenacity.Retrying(
        sleep=waits.nap,
        stop=tenacity.stop_after_attempt(max(1, policy.attempts)),
        wait=waits.wait,
        retry=tenacity.retry_if_exception_type(Retryable),
        before_sleep=waits.note,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except Retryable as exc:
        raise exc.cause from exc.cause.__cause__


@dataclass(frozen=True)
class _Waits:
    """The waits of one run_with_retries: how long, how (interruptibly), and what is logged."""

    policy: RetryPolicy
    stop: threading.Event | None
    sleep: Callable[[float], None] | None
    what: str

    def wait(self, state: tenacity.RetryCallState) -> float:
        """The server's asked-for wait (with a little jitter), else the policy's backoff."""
        error = state.outcome.exception() if state.outcome else None
        asked: float | None = error.wait_s if isinstance(error, Retryable) else None
        if asked is not None:
            return asked + random.uniform(0.0, min(self.policy.jitter_s, 0.1 * asked))
        backoff = self.policy.backoff_s * 2.0 ** (state.attempt_number - 1)
        jitter = random.uniform(0.0, self.policy.jitter_s)
        return float(min(self.policy.backoff_max_s, backoff + jitter))

    def nap(self, seconds: float) -> None:
        """Wait; raise Stopped on a stop request."""
        if self.sleep is None:
            pause(seconds, self.stop)
            return
        self.sleep(seconds)
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped while waiting")

    def note(self, state: tenacity.RetryCallState) -> None:
        """Log the failure that is tried again, and when."""
        error = state.outcome.exception() if state.outcome else None
        log.info("%s failed (%s); trying again in %.1f s", self.what, error, state.upcoming_sleep)
