"""The service schedule in process: the budget hold and problem logging.

Through the CLI against the sandbox: e2e/test_service_behaviour.py.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.summary import Summary, Usage
from bot.service.scheduler import ProblemTracker, budget_delay

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
