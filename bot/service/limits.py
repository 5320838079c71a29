"""The HTTP server's defences against slow or numerous clients (uvicorn does not time out a
request whose headers or body arrive slowly): a deadline for the whole request, a bound on
connections (idle ones closed first), and drops counted and logged at most once a minute."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

LOG_EVERY_S: Final = 60.0
SLOW_REQUEST: Final = "slow-request"  # headers and body not received within the deadline
CONNECTION_BOUND: Final = "connection-bound"  # closed to make room, or refused at the bound
DROP_REASONS: Final = (SLOW_REQUEST, CONNECTION_BOUND)


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a request may take to arrive and how many connections are held at once."""

    request_timeout_s: float = 10.0
    max_connections: int = 256


class DropLog:
    """Counts dropped connections and logs them in one line at most every LOG_EVERY_S."""

    def __init__(
        self,
        count: Callable[[str], None] = lambda _: None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`count(reason)` is told of every drop (e.g. the Prometheus counter)."""
        self._count = count
        self._clock = clock
        self._unlogged: Counter[str] = Counter()
        self._logged_at: float | None = None

    def drop(self, reason: str) -> None:
        """Count one dropped connection; log the drops since the last line if a minute passed."""
        self._count(reason)
        self._unlogged[reason] += 1
        now = self._clock()
        if self._logged_at is None or now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            parts = ", ".join(f"{reason} {n}" for reason, n in sorted(self._unlogged.items()))
            log.warning(
                "dropped %d connections (%s) since the last such line; at most one line a minute",
                sum(self._unlogged.values()),
                parts,
            )
            self._unlogged.clear()


class BoundedProtocol(H11Protocol):
    """One connection: its request must arrive whole within the deadline, and connections
    past the bound make room. `limits` and `drops` are one server's (`bounded_protocol`)."""

    limits: ClassVar[Limits]
    drops: ClassVar[DropLog]
    _deadline: asyncio.TimerHandle | None = None
    _armed_for: Any = None  # the request cycle current when the deadline was armed
    _since: float = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Arm the deadline of the first request; past the bound, make room."""
        super().connection_made(transport)
        self._arm()
        if self._held() > self.limits.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        """Arm the deadline of a kept-alive connection's next request; disarm once it is whole."""
        if self._deadline is None and self._between_requests():
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        if self._arrived():
            self._disarm()  # the request's headers and body have arrived

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """A request still arriving will not be answered: close it now; else uvicorn's way."""
        if self.receiving:
            self.transport.close()
            return
        super().shutdown()

    @property
    def receiving(self) -> bool:
        """Whether this connection's request has not yet arrived whole."""
        return self._deadline is not None

    @property
    def idle(self) -> bool:
        """Kept alive between requests (answered, nothing new arriving)."""
        return self._deadline is None and self._between_requests()

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arrived(self) -> bool:
        """Whether the request armed for has been replaced by one whose body is all in."""
        cycle = self.cycle
        return cycle is not None and cycle is not self._armed_for and not cycle.more_body

    def _held(self) -> int:
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _arm(self) -> None:
        self._disarm()
        self._since = time.monotonic()
        self._armed_for = self.cycle
        self._deadline = self.loop.call_later(self.limits.request_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.drops.drop(SLOW_REQUEST)
            self.transport.close()

    def _make_room(self) -> None:
        """At the bound: close an idle connection, else the oldest still arriving, else this."""
        victim = self._victim()
        self.drops.drop(CONNECTION_BOUND)
        victim._disarm()
        victim.transport.close()

    def _victim(self) -> BoundedProtocol:
        others = [
            c
            for c in self.connections
            if c is not self and isinstance(c, BoundedProtocol) and not c.transport.is_closing()
        ]
        idle = [c for c in others if c.idle]
        arriving = sorted((c for c in others if c.receiving), key=lambda c: c._since)
        return (idle or arriving or [self])[0]


def bounded_protocol(limits: Limits, drops: DropLog) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a request deadline and a connection bound: one server's."""

    class Bounded(BoundedProtocol):
        """The connections of one server."""

    Bounded.limits, Bounded.drops = limits, drops
    return Bounded
