"""The HTTP app in process: readiness as a pure function, routes mounted by another module
(the served `run`: e2e/test_server.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from bot.service.http import Monitor, build_app, readiness_problems

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.mark.parametrize(
    ("last", "remaining", "reset", "state", "expected"),
    [
        (NOW - timedelta(seconds=80), {"graphql": 10}, {}, None, []),
        (None, {}, {}, None, ["no cycle has finished since the service started"]),
        (NOW - timedelta(seconds=91), {}, {}, None, ["more than 3 intervals (90 s) ago"]),
        (
            NOW,
            {"graphql": 0},
            {"graphql": NOW + timedelta(minutes=5)},
            None,
            ["GitHub graphql budget exhausted until"],
        ),
        (NOW, {"core": 0}, {"core": NOW - timedelta(seconds=1)}, None, []),  # reset has passed
        (NOW, {}, {}, "file is not a database", ["state unusable: file is not a database"]),
    ],
)
def test_readiness(
    last: datetime | None,
    remaining: dict[str, int],
    reset: dict[str, datetime],
    state: str | None,
    expected: list[str],
) -> None:
    problems = readiness_problems(
        now=NOW, started_at=NOW - timedelta(hours=1), last_finished=last, interval_s=30,
        remaining=remaining, reset_at=reset, state_problem=state,
    )  # fmt: skip
    assert len(problems) == len(expected)
    for problem, words in zip(problems, expected, strict=True):
        assert words in problem


def test_another_module_can_mount_routes_on_the_app(tmp_path: Path) -> None:
    """The webhooks helper mounts POST /webhook through `extra_routes`."""

    def webhook(_: Request) -> PlainTextResponse:
        return PlainTextResponse("accepted", status_code=202)

    monitor = Monitor(state_path=str(tmp_path / "none.sqlite3"), interval_s=30)
    app = build_app(monitor, extra_routes=[Route("/webhook", webhook, methods=["POST"])])
    client = TestClient(app)
    assert client.post("/webhook").status_code == 202
    assert client.get("/livez").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "no state at" in ready.text
    monitor.metrics.webhook_deliveries.labels("ping", "ignored").inc()
    assert 'ci_status_bot_webhook_deliveries_total{event="ping",outcome="ignored"} 1.0' in (
        client.get("/metrics").text
    )
