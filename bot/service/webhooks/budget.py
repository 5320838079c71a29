"""The webhook refreshes' share of GitHub's GraphQL points: a token bucket."""

from __future__ import annotations

import time
from collections.abc import Callable

# Webhook refreshes spend at most WEBHOOK_POINTS_PER_HOUR GitHub GraphQL points an hour (a
# fifth of a token's 5,000), in bursts of at most WEBHOOK_POINTS_BURST; past it, marks wait
# for the next cycle.
WEBHOOK_POINTS_PER_HOUR = 1000.0
WEBHOOK_POINTS_BURST = 250.0


class PointsBucket:
    """A token bucket of GitHub GraphQL points for webhook refreshes (monotonic clock)."""

    def __init__(
        self,
        *,
        per_hour: float = WEBHOOK_POINTS_PER_HOUR,
        burst: float = WEBHOOK_POINTS_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start full."""
        self.per_hour, self.burst, self.clock = per_hour, burst, clock
        self._points = burst
        self._at = clock()

    def available(self) -> float:
        """Points left now (negative after an overdraft: it is paid back first)."""
        now = self.clock()
        self._points = min(self.burst, self._points + (now - self._at) * self.per_hour / 3600)
        self._at = now
        return self._points

    def spend(self, points: float) -> None:
        """Take what a refresh spent."""
        self.available()
        self._points -= points
