"""How far a cycle's comment writes are: a line a write for a terminal, a log line a minute."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Final

log = logging.getLogger(__name__)

LOG_EVERY_S: Final = 60.0  # the log says how far the writes are once a minute at most
SHOWN_FROM: Final = 2  # a terminal is told about runs of at least this many writes


def progress_line(done: int, total: int, *, gap_s: float, elapsed_s: float) -> str:
    """ "comment 37 of 200 · ~3 min left at GitHub's 1 write/s": the writes left at the pace
    kept between writes, or at the pace measured so far where that is slower."""
    if done >= total:
        return f"comment {done} of {total}"
    pace = max(gap_s, elapsed_s / done if done else gap_s)
    left = (total - done) * pace
    when = f"~{math.ceil(left)} s" if left < 90 else f"~{round(left / 60)} min"
    rate = "GitHub's 1 write/s" if gap_s == 1 else f"1 write every {gap_s:g} s"
    return f"comment {done} of {total} · {when} left at {rate}"


class WriteProgress:
    """One cycle's writes: `show` (a terminal's line, "" clears it) hears of each write of a
    run of SHOWN_FROM writes or more; the log hears once a minute."""

    def __init__(
        self,
        total: int,
        *,
        gap_s: float,
        clock: Callable[[], float] = time.monotonic,
        show: Callable[[str], None] | None = None,
    ) -> None:
        """`total` writes planned, kept `gap_s` apart; times on `clock` (monotonic)."""
        self.total, self.gap_s, self.clock = total, gap_s, clock
        self.show = show if total >= SHOWN_FROM else None
        self.started = self.logged = clock()
        self.shown = False

    def wrote(self, done: int) -> None:
        """`done` of the writes are made (or tried)."""
        now = self.clock()
        line = progress_line(done, self.total, gap_s=self.gap_s, elapsed_s=now - self.started)
        if self.show is not None:
            self.show(line)
            self.shown = True
        if now - self.logged >= LOG_EVERY_S:
            self.logged = now
            log.info("writing comments: %s", line)

    def finish(self) -> None:
        """The writes are over: the terminal's line is cleared."""
        if self.show is not None and self.shown:
            self.show("")
