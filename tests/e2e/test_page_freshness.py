"""Issue 16, item 6: the served page tells the truth about its data.

Before the first cycle it says so (not "0 open pull requests"); after a cycle it shows when
its data was read; while the last cycle failed or GitHub's budget is exhausted it says since
when its data is. The real `run` (first cycle held back by a slow sandbox), and the service's
own Monitor fed the events the scheduler sends.
"""

from __future__ import annotations

import html
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from starlette.testclient import TestClient
from support import (
    LOOPBACK,
    REPO,
    cli,
    free_port,
    seed_case,
    serve_config,
    start_run,
    stop,
    write_config,
)

from bot.core.model import format_utc
from bot.core.summary import Summary, Usage
from bot.service.http import Monitor, build_app
from bot.state.store import Store
from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC)


def _page(base: str) -> str | None:
    try:
        answer = LOOPBACK.get(base + "/", timeout=5)
    except httpx.TransportError:
        return None
    return answer.text if answer.status_code == 200 else None


def test_before_the_first_cycle_the_page_says_so_then_shows_the_cycle(tmp_path: Path) -> None:
    world = World()
    seed_case(world, now=NOW)
    port = free_port()
    with Sandbox(world) as sandbox:
        # the first cycle's pull-request query takes 6 s: the page is served meanwhile (the
        # real answer, held back: `transform` keeps it, where `apply` would answer an empty 200)
        sandbox.fail("POST", r"/graphql", times=1, delay_s=6, transform=lambda answer: answer)
        proc = start_run(serve_config(tmp_path, sandbox, port))
        base = f"http://127.0.0.1:{port}"
        try:
            deadline, first = time.monotonic() + 30, None
            while first is None and time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()[1]
                first = _page(base)
                time.sleep(0.1)
            assert first is not None, "the page was never served"
            assert "<title>CI triage · waiting for the first cycle</title>" in first
            assert "Waiting for the first cycle" in first
            assert "No cycle has finished yet (the service started at" in first
            assert "0 open pull requests" not in first
            deadline, later = time.monotonic() + 60, first
            while "octo/omni#7430" not in later and time.monotonic() < deadline:
                time.sleep(0.3)
                later = _page(base) or later
            assert "<title>CI triage · 1 open pull requests</title>" in later
            assert "No cycle has finished" not in later and "Waiting" not in later
            as_of = re.search(r"open pull requests as of <time datetime=\"([^\"]+)\"", later)
            assert as_of is not None  # when the cycle finished, not when the page was asked
            finished = datetime.fromisoformat(as_of[1])
            assert abs(finished - datetime.now(UTC)) < timedelta(seconds=60)
        finally:
            _, err = stop(proc)
        cycles = re.findall(r"info cycle: (\d+) pull requests seen", err)
        assert cycles[:1] == ["1"], err  # the held-back first cycle is the one the page shows


def _monitor(tmp_path: Path, *, with_rows: bool) -> tuple[Monitor, TestClient, list[datetime]]:
    state = tmp_path / "state.sqlite3"
    Store.open(state).close()  # `run` opens (creates) its state before it serves the page
    if with_rows:  # an earlier run's rows in the state
        world = World()
        seed_case(world, now=NOW)
        with Sandbox(world) as sandbox:
            assert cli("once", "--config", str(write_config(tmp_path, sandbox))).returncode == 0
    clock = [NOW + timedelta(hours=1)]
    monitor = Monitor(state_path=str(state), interval_s=30, repos=[REPO], clock=lambda: clock[0])
    return monitor, TestClient(build_app(monitor)), clock


def test_rows_kept_from_an_earlier_run_say_when_they_were_read(tmp_path: Path) -> None:
    monitor, client, _ = _monitor(tmp_path, with_rows=True)
    page = html.unescape(client.get("/").text)
    started = format_utc(monitor.started_at)
    assert f"No cycle has finished since the service started at {started}" in page
    assert "these rows are kept from an earlier run; the data was read at" in page
    as_of = re.search(r"1 open pull requests as of <time datetime=\"([^\"]+)\"", page)
    assert as_of is not None and "octo/omni#7430" in page
    read = datetime.fromisoformat(as_of[1])  # when the earlier run read it, not "now"
    assert abs(read - datetime.now(UTC)) < timedelta(minutes=5) and read < monitor.started_at


def test_a_failed_cycle_and_an_exhausted_budget_say_since_when_the_data_is(
    tmp_path: Path,
) -> None:
    monitor, client, clock = _monitor(tmp_path, with_rows=True)
    finished = clock[0]
    monitor.cycle_finished(Summary(), Usage(remaining={"graphql": 4000, "core": 4000}))
    page = html.unescape(client.get("/").text)
    assert 'id="notes" role="status"></div>' in page  # a finished cycle: nothing to say
    assert f'as of <time datetime="{finished.strftime("%Y-%m-%dT%H:%M:%SZ")}"' in page

    clock[0] = finished + timedelta(minutes=10)
    monitor.cycle_failed()
    page = html.unescape(client.get("/").text)
    failed, read = format_utc(clock[0]), format_utc(finished)
    assert f"The last cycle failed at {failed}; the data was read at {read}." in page

    reset = finished + timedelta(minutes=50)
    clock[0] = finished + timedelta(minutes=20)
    monitor.cycle_finished(Summary(), Usage(remaining={"graphql": 0, "core": 10},
                                            reset_at={"graphql": reset}))  # fmt: skip
    page = html.unescape(client.get("/").text)
    assert "The last cycle failed" not in page  # a later cycle finished
    read = format_utc(clock[0])
    assert f"GitHub's graphql budget is exhausted until {format_utc(reset)}; " in page
    assert f"the data was read at {read}." in page
    clock[0] = reset + timedelta(minutes=1)  # the budget came back: nothing to say
    assert "exhausted" not in client.get("/").text


def test_an_empty_state_before_the_first_cycle_is_not_zero_pull_requests(tmp_path: Path) -> None:
    _, client, _ = _monitor(tmp_path, with_rows=False)
    answer = client.get("/")
    assert answer.status_code == 200, answer.text
    assert (
        "waiting for the first cycle" in answer.text and "0 open pull requests" not in answer.text
    )
    assert "No cycle has finished yet." in answer.text  # where the rows would be
