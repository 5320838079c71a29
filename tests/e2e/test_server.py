"""`run` serves the triage page, /livez, /readyz and /metrics: a real service on the sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import (
    LOOPBACK,
    REPO,
    START_GUARD_S,
    TOKEN,
    clean_env,
    cli,
    free_port,
    seed_case,
    serve_config,
    start_run,
    stop,
    wait_ready,
    write_config,
    writes,
)

from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC).replace(microsecond=0)
FAILING_SHA = "f" * 40


def seed(world: World) -> None:
    seed_case(world, now=NOW)  # 7430: incomplete (RTD build cancelled), draft
    world.add_pull(REPO, 7, title="Break the build", author="bob", head_sha=FAILING_SHA)
    world.add_check_run(
        REPO, FAILING_SHA, name="tests", app_slug="github-actions", workflow="ci",
        conclusion="failure", started_at=NOW, completed_at=NOW,
    )  # fmt: skip


@dataclass
class Service:
    world: World
    sandbox: Sandbox
    proc: subprocess.Popen[str]
    base: str
    state: Path
    writes_after_first_cycle: int


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("server")
    world = World()
    seed(world)
    port = free_port()
    with Sandbox(world) as sandbox:
        proc = start_run(serve_config(tmp, sandbox, port))
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base, proc)
            yield Service(world, sandbox, proc, base, tmp / "state.sqlite3", len(writes(sandbox)))
        finally:
            stop(proc)


def test_livez(service: Service) -> None:
    answer = LOOPBACK.get(service.base + "/livez")
    assert answer.status_code == 200 and answer.text == "ok\n"


def test_readyz_after_a_finished_cycle(service: Service) -> None:
    answer = LOOPBACK.get(service.base + "/readyz")
    assert answer.status_code == 200 and answer.text == "ready\n"


def test_metrics_parse_with_prometheus_own_parser(service: Service) -> None:
    answer = LOOPBACK.get(service.base + "/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    assert all(name.startswith("ci_status_bot_") for name in families)
    for family in families.values():
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        for sample in family.samples:
            assert not {"number", "pr", "pull"} & set(sample.labels), sample
            assert not any(v.isdigit() for v in sample.labels.values()), sample

    def value(name: str, **labels: str) -> float:
        for family in families.values():
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        raise AssertionError(f"no sample {name} {labels}")

    assert value("ci_status_bot_cycles_total", outcome="finished") >= 1
    assert value("ci_status_bot_cycle_duration_seconds_count") >= 1
    last = value("ci_status_bot_last_successful_cycle_timestamp_seconds")
    assert abs(last - time.time()) < 120
    assert value("ci_status_bot_pull_requests", repo=REPO, verdict="failing") == 1
    assert value("ci_status_bot_pull_requests", repo=REPO, verdict="incomplete") == 1
    assert value("ci_status_bot_pull_requests", repo=REPO, verdict="passing") == 0
    assert value("ci_status_bot_comment_writes_total", action="created") == 2
    assert value("ci_status_bot_github_requests_total") > 0
    assert value("ci_status_bot_github_graphql_points_total") >= 1
    assert value("ci_status_bot_readthedocs_requests_total") >= 1
    assert value("ci_status_bot_github_rate_limit_remaining", resource="graphql") > 0
    assert "ci_status_bot_webhook_deliveries" in families  # defined for the webhooks helper


def test_the_page_and_json_show_the_last_cycle(service: Service) -> None:
    page = LOOPBACK.get(service.base + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-pull="octo/omni#7" ' in page.text and 'data-pull="octo/omni#7430"' in page.text
    assert page.text.index("octo/omni#7 ") < page.text.index("octo/omni#7430")  # failing first
    assert 'data-refresh-seconds="30"' in page.text
    assert 'data-refresh-seconds="5"' in LOOPBACK.get(service.base + "/?refresh=5").text
    document = LOOPBACK.get(service.base + "/triage.json").json()
    assert document["schema"] == "ci-status-bot.triage/v1"
    assert [p["number"] for p in document["pulls"]] == [7, 7430]


def test_nothing_served_writes_or_shows_a_secret(service: Service) -> None:
    for path in ("/", "/livez", "/readyz", "/metrics", "/triage.json", "/?refresh=5"):
        answer = LOOPBACK.get(service.base + path)
        assert TOKEN not in answer.text and "Authorization" not in answer.text
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/", "/metrics", "/readyz"):
            assert httpx.request(method, service.base + path).status_code == 405
    assert len(writes(service.sandbox)) == service.writes_after_first_cycle


@contextmanager
def not_a_database(state: Path) -> Iterator[None]:
    """The state's path holds a file that is not a database; the state is put back after.

    Overwriting the file in place is not enough: while the service holds the state open (a
    cycle, and the first cycle's end after /readyz said ready), SQLite in WAL mode reads the
    current pages from `-wal`, and its checkpoint writes them back into the file when the
    service lets go; /readyz then rightly says ready. So the state's file, its WAL and its
    shared-memory index are set aside whole (the service's open connection keeps them), the
    path swapped atomically to the garbage, and everything put back the same way.
    """
    aside, garbage = state.with_name("aside"), state.with_name("garbage")
    garbage.write_bytes(b"this is not a database" * 100)
    sidecars = [(state.with_name(state.name + s), aside.with_name(aside.name + s))
                for s in ("-wal", "-shm")]  # fmt: skip
    os.link(state, aside)
    os.replace(garbage, state)  # never a moment without a file at the path
    for current, kept in sidecars:
        with suppress(FileNotFoundError):  # none while the state is not held open
            os.replace(current, kept)
    try:
        yield
    finally:
        for current, kept in sidecars:
            with suppress(FileNotFoundError):
                os.replace(kept, current)
        os.replace(aside, state)


def test_readyz_is_503_naming_why_when_the_state_is_unusable(service: Service) -> None:
    with not_a_database(service.state):
        answer = LOOPBACK.get(service.base + "/readyz")
        assert answer.status_code == 503
        assert answer.text.startswith("not ready: state unusable:")
        # the page answers from the last cycle's rows held in memory (it never reads the state)
        assert LOOPBACK.get(service.base + "/").status_code == 200
        assert LOOPBACK.get(service.base + "/livez").status_code == 200  # alive, just not ready
    assert LOOPBACK.get(service.base + "/readyz").status_code == 200


def test_a_stop_request_stops_the_server_with_the_rest(tmp_path: Path) -> None:
    world = World()
    seed(world)
    port = free_port()
    with Sandbox(world) as sandbox:
        proc = start_run(serve_config(tmp_path, sandbox, port))
        wait_ready(f"http://127.0.0.1:{port}", proc)
        code, err = stop(proc)
    assert code == 0, err
    assert "stopped" in err
    with pytest.raises(httpx.ConnectError):
        LOOPBACK.get(f"http://127.0.0.1:{port}/livez")


def test_run_keeps_utc_whatever_the_machine_s_local_zone(tmp_path: Path) -> None:
    """A `TZ` no zone database resolves (an image without tzdata, a typo) never stops `run`:
    its schedule is in UTC, it asks nothing of the local zone (it used to exit with
    ZoneInfoNotFoundError from APScheduler's interval trigger)."""
    world = World()
    seed(world)
    port = free_port()
    with Sandbox(world) as sandbox:
        proc = start_run(serve_config(tmp_path, sandbox, port), env={"TZ": "Nowhere/Nothing"})
        wait_ready(f"http://127.0.0.1:{port}", proc, timeout=START_GUARD_S)
        code, err = stop(proc)
    assert code == 0, err
    assert "ZoneInfoNotFoundError" not in err


def test_a_port_in_use_is_an_error_naming_it(tmp_path: Path) -> None:
    world = World()
    seed(world)
    with socket.socket() as taken, Sandbox(world) as sandbox:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "bot", "run", "--config",
             str(serve_config(tmp_path, sandbox, port))],
            capture_output=True, text=True, env=clean_env(), timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def test_the_server_binds_to_loopback_by_default(tmp_path: Path, sandbox: Sandbox) -> None:
    config = write_config(tmp_path, sandbox)
    config.write_text(config.read_text().replace("[server]\nport = 0\n", ""))
    shown = cli("check-config", "--offline", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert '[server]\nhost = "127.0.0.1"\nport = 8080' in shown.stdout
