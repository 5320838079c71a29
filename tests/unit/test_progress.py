"""Issue 28, item 6: a long first run shows how far its writes are (the words, the pace of the
log line); the dry run's summary says what it would write."""

from __future__ import annotations

import logging

import pytest

from bot.core.summary import Summary
from bot.progress import WriteProgress, progress_line


@pytest.mark.parametrize(
    ("done", "total", "gap", "elapsed", "said"),
    [
        (37, 200, 1.0, 37.0, "comment 37 of 200 · ~3 min left at GitHub's 1 write/s"),
        (1, 200, 1.0, 0.0, "comment 1 of 200 · ~3 min left at GitHub's 1 write/s"),
        (190, 200, 1.0, 190.0, "comment 190 of 200 · ~10 s left at GitHub's 1 write/s"),
        (10, 100, 2.0, 20.0, "comment 10 of 100 · ~3 min left at 1 write every 2 s"),
        # slower than the pacing (a slow GitHub): the pace measured so far counts
        (10, 100, 1.0, 50.0, "comment 10 of 100 · ~8 min left at GitHub's 1 write/s"),
        (200, 200, 1.0, 200.0, "comment 200 of 200"),
    ],
)
def test_the_progress_line(done: int, total: int, gap: float, elapsed: float, said: str) -> None:
    assert progress_line(done, total, gap_s=gap, elapsed_s=elapsed) == said


def test_logs_one_line_a_minute_and_tells_the_terminal_each_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [0.0]
    shown: list[str] = []
    progress = WriteProgress(200, gap_s=1.0, clock=lambda: clock[0], show=shown.append)
    caplog.set_level(logging.INFO, logger="bot.progress")
    for done in range(1, 151):
        clock[0] = float(done)
        progress.wrote(done)
    progress.finish()
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.progress"]
    assert lines == [
        "writing comments: comment 60 of 200 · ~2 min left at GitHub's 1 write/s",
        "writing comments: comment 120 of 200 · ~80 s left at GitHub's 1 write/s",
    ]
    assert shown[36] == "comment 37 of 200 · ~3 min left at GitHub's 1 write/s"
    assert len(shown) == 151 and shown[-1] == ""  # cleared at the end


def test_a_short_run_shows_nothing() -> None:
    shown: list[str] = []
    progress = WriteProgress(1, gap_s=1.0, clock=lambda: 0.0, show=shown.append)
    progress.wrote(1)
    progress.finish()
    assert shown == []


def test_a_dry_runs_summary_says_what_it_would_write() -> None:
    summary = Summary(pulls_seen=9, created=7, edited=1, left=1, dry_run=True)
    assert "would create 7, would edit 1, would leave 1" in summary.line()
    assert "created" not in summary.line()
    assert "comments created 7, edited 1, left 1" in Summary(created=7, edited=1, left=1).line()
