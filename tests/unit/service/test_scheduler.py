"""The service schedule in process: the budget hold, problem logging, the frozen garbage.

Through the CLI against the sandbox: e2e/test_service_behaviour.py.
"""

from __future__ import annotations

import gc
import logging
import weakref
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.summary import Summary, Usage
from bot.service.scheduler import ProblemTracker, budget_delay, settle_garbage

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.mark.parametrize(
    ("summary", "usage", "expected"),
    [
        (Summary(rate_limited_s=42.0), Usage(), 42.0),
        (
            Summary(graphql_points=40, github_requests=45),
            Usage(remaining={"graphql": 30}, reset_at={"graphql": NOW + timedelta(seconds=600)}),
            601.0,
        ),
        (
            Summary(graphql_points=40, github_requests=45),
            Usage(remaining={"graphql": 4000}, reset_at={"graphql": NOW + timedelta(seconds=600)}),
            None,
        ),
        (
            Summary(graphql_points=1, github_requests=300),
            Usage(remaining={"core": 100}, reset_at={"core": NOW + timedelta(seconds=60)}),
            61.0,
        ),
    ],
)
def test_budget_delay(summary: Summary, usage: Usage, expected: float | None) -> None:
    delay = budget_delay(summary, usage, now=NOW)
    assert (delay[0] if delay else None) == expected
    if delay:
        assert delay[1]  # a stated reason


def test_problems_are_logged_when_they_start_and_end(caplog: pytest.LogCaptureFixture) -> None:
    tracker = ProblemTracker()
    with caplog.at_level(logging.INFO, logger="bot.service.scheduler"):
        tracker.update({"o/r#1": "boom"})
        tracker.update({"o/r#1": "boom"})
        tracker.update({})
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["problem started: o/r#1: boom", "problem resolved: o/r#1"]
    assert caplog.records[0].pr == 1  # type: ignore[attr-defined]


class _Node:
    """An object in a reference cycle (freed only by the cyclic collector)."""

    def __init__(self) -> None:
        self.me = self


def test_settle_garbage_freezes_what_is_held_and_frees_its_cycles_at_the_next_call() -> None:
    """What is alive at a cycle's end is frozen (the collector's own runs skip it); a cycle of
    garbage among it is freed at the next call, not kept frozen for good."""
    freed: list[bool] = []
    held = _Node()
    witness = weakref.ref(held, lambda _: freed.append(True))
    try:
        settle_garbage()
        assert gc.get_freeze_count() > 0
        assert not any(o is held for o in gc.get_objects())  # frozen: not walked
        del held  # now a cycle of garbage, frozen
        gc.collect()
        assert witness() is not None and not freed  # a collection alone keeps it
        settle_garbage()
        assert witness() is None and freed == [True]
    finally:
        gc.unfreeze()
