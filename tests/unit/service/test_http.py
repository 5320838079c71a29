"""The HTTP app in process: readiness as a pure function, routes mounted by another module
(the served `run`: e2e/test_server.py)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from bot.core.model import Verdict
from bot.service.http import (
    Endpoints,
    LoopLag,
    Monitor,
    _livez_first,
    accepts_gzip,
    build_app,
    readiness_problems,
)
from bot.service.metrics import Metrics
from bot.state.store import Store
from bot.triage.rows import TriageEntry

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


def test_livez_is_answered_without_the_state_or_a_thread(tmp_path: Path) -> None:
    """/livez answers while the state cannot be read and while a page waits for the rows (the
    rows' lock held, as a first page load holds it): it touches neither."""
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"not a database at all" * 100)
    monitor = Monitor(state_path=str(broken), interval_s=30)
    client = TestClient(_livez_first(build_app(monitor), monitor))
    with monitor._loading:  # a page being loaded from the state holds this
        answer = client.get("/livez")
    assert (answer.status_code, answer.text) == (200, "ok\n")
    assert answer.headers["cache-control"] == "no-store"
    assert client.get("/").status_code == 503  # the page does read the state
    stopped = Monitor(state_path=str(broken), interval_s=30, alive=lambda: False)
    answer = TestClient(_livez_first(build_app(stopped), stopped)).get("/livez")
    assert answer.status_code == 503 and "scheduler stopped" in answer.text


def test_new_rows_are_rendered_once_however_many_requests_wait_for_them(tmp_path: Path) -> None:
    """Requests that find the page (or the JSON rows) of new rows not yet rendered wait for one
    render of it: at 2,000 pull requests twenty of them rendered the same rows each in its own
    thread, and those threads held the GIL the event loop needed (benchmarks/server.py's
    /livez p95 401 ms). /livez is answered while the render waits for the rows."""
    Store.open(tmp_path / "state.sqlite3").close()
    monitor = Monitor(state_path=str(tmp_path / "state.sqlite3"), interval_s=30)
    app = _livez_first(build_app(monitor), monitor)

    async def requests() -> tuple[list[httpx.Response], httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            with monitor._loading:  # the rows are being read: a render waits for them
                waiting = [asyncio.create_task(client.get(p)) for p in ("/", "/triage.json") * 10]
                for _ in range(20):  # every request reaches its render (or the wait for it)
                    await asyncio.sleep(0.01)
                livez = await client.get("/livez")
            return list(await asyncio.gather(*waiting)), livez

    answers, livez = asyncio.run(requests())
    assert (livez.status_code, livez.text) == (200, "ok\n")
    assert [a.status_code for a in answers] == [200] * 20
    assert len({a.content for a in answers[::2]}) == 1  # the same page to every request
    renders = monitor.metrics.page_renders
    assert (renders.labels("page")._value.get(), renders.labels("json")._value.get()) == (1, 1)


def test_the_page_and_the_document_are_gzip_encoded_for_a_client_that_accepts_it(
    tmp_path: Path,
) -> None:
    """A client that accepts gzip gets the same page and document compressed (once per body,
    in a thread: 1.5 MB pages sent 20 at a time took the event loop's time); one that does not
    gets them as they are. Both answers say they vary by Accept-Encoding."""
    monitor = Monitor(state_path=str(tmp_path / "none.sqlite3"), interval_s=30)
    monitor.set_entries(failing_entries(39))
    client = TestClient(build_app(monitor))
    for path in ("/", "/triage.json"):
        plain = client.get(path, headers={"Accept-Encoding": "identity"})
        zipped = client.get(path, headers={"Accept-Encoding": "br, gzip;q=0.8"})
        refused = client.get(path, headers={"Accept-Encoding": "gzip;q=0, deflate"})
        assert "content-encoding" not in plain.headers
        assert "content-encoding" not in refused.headers and refused.content == plain.content
        assert zipped.headers["content-encoding"] == "gzip"
        assert int(zipped.headers["content-length"]) < len(plain.content)
        assert zipped.headers["vary"] == plain.headers["vary"] == "Accept-Encoding"
        if path == "/":
            assert zipped.content == plain.content  # decoded by the client: the same bytes
        else:
            assert zipped.json()["pulls"] == plain.json()["pulls"]
            assert len(plain.json()["pulls"]) == 39
    assert monitor.metrics.page_renders.labels("page")._value.get() == 1  # one render for both


def failing_entries(count: int, title: str = "Change") -> list[TriageEntry]:
    """`count` failing rows of octo/repo."""
    return [
        TriageEntry(
            repo="octo/repo", number=n, title=f"{title} {n}", author="ada", draft=False,
            head_sha="a" * 40, verdict=Verdict.FAILING, url=f"https://github.com/octo/repo/pull/{n}",
            observed_at=NOW, failing=("tests",),
            counts={"failing": 1, "pending": 0, "incomplete": 0, "passing": 9},
        )
        for n in range(1, count + 1)
    ]  # fmt: skip


def test_a_client_that_names_no_encoding_gets_the_page_as_it_is(tmp_path: Path) -> None:
    monitor = Monitor(state_path=str(tmp_path / "none.sqlite3"), interval_s=30)
    monitor.set_entries(failing_entries(39))
    client = TestClient(build_app(monitor))
    del client.headers["accept-encoding"]  # httpx's default names gzip: this client names none
    for path in ("/", "/triage.json"):
        answer = client.get(path)
        assert "accept-encoding" not in answer.request.headers
        assert "content-encoding" not in answer.headers
        assert answer.headers["content-length"] == str(len(answer.content))
        assert b"Change 39" in answer.content


def test_the_gzip_bytes_of_older_rows_are_dropped_with_their_page(tmp_path: Path) -> None:
    """The page bytes of an older generation are dropped when a newer one is rendered, and its
    gzip encoding with them: memory holds the newest rows' bodies, compressed or not."""
    monitor = Monitor(state_path=str(tmp_path / "none.sqlite3"), interval_s=30)
    endpoints = Endpoints(monitor)
    client = TestClient(Starlette(routes=endpoints.routes()))
    for generation in range(1, 4):
        monitor.set_entries(failing_entries(39, title=f"Generation {generation}"))
        for path in ("/", "/triage.json"):
            answer = client.get(path, headers={"Accept-Encoding": "gzip"})
            assert answer.headers["content-encoding"] == "gzip"
            assert f"Generation {generation} 39" in answer.text
        kept = endpoints.rendered._zipped
        assert {g for g, _, _ in kept} == {monitor.generation}, generation
        assert len(kept) == 2  # the page's and the document's of this second


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip, deflate", True), ("GZIP", True), ("br;q=1, gzip;q=0.5", True),
        ("gzip;q=0", False), ("gzip; q=0.0", False), ("identity", False), (None, False),
        ("x-gzip", False), ("gzip;q=nope", False),
    ],
)  # fmt: skip
def test_accept_encoding_is_read_as_http_says(header: str | None, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


def test_the_event_loops_lag_is_measured_and_shown_in_metrics() -> None:
    """A loop kept busy for 0.3 s wakes the lag watcher late by about that much: the histogram
    counts it and the gauge shows the worst of the last minute (older samples leave it)."""
    metrics = Metrics()
    lag = LoopLag(metrics, every_s=0.01)

    async def busy() -> None:
        watcher = asyncio.create_task(lag.watch())
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # blocks the loop, as a cycle holding the GIL does
        await asyncio.sleep(0.05)
        watcher.cancel()

    asyncio.run(busy())
    text = metrics.exposition().decode()
    assert "ci_status_bot_event_loop_lag_seconds_count" in text
    worst = metrics.loop_lag_max._value.get()
    assert worst >= 0.2
    over = [ln for ln in text.splitlines() if 'event_loop_lag_seconds_bucket{le="0.1"}' in ln]
    total = [ln for ln in text.splitlines() if "event_loop_lag_seconds_count" in ln]
    assert float(over[0].split()[-1]) < float(total[0].split()[-1])  # one sample past 100 ms
    lag.record(0.001, at=time.monotonic() + LoopLag.WINDOW_S + 1)  # a minute later
    assert metrics.loop_lag_max._value.get() == 0.001
