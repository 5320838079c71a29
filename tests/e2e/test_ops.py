"""Issue 8 (ops): one writer per state, secrets, prompt stops, App installations, the state."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github.Requester import Requester
from support import (
    ABANDONED,
    LOGIN,
    REPO,
    STOPPED,
    TOKEN,
    LoggedRun,
    Waits,
    bot_comments,
    clean_env,
    cli,
    cut_short,
    outside_allowlist,
    seed_case,
    write_config,
)

from bot.core.model import MARKER
from bot.logs import HEADER_LOGGERS, redact, register_secrets, setup_logging
from bot.state.lock import StateBusy, StateLock
from bot.state.store import Store, StoreError
from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC).replace(microsecond=0)
RTD_TOKEN = "rtd-s3cr3t-t0ken-value"


def green_pull(world: World, number: int, repo: str = REPO) -> None:
    sha = f"{number:040x}"
    world.add_pull(repo, number, title=f"pr {number}", author="bob", head_sha=sha)
    world.add_check_run(repo, sha, name="tests", app_slug="github-actions", workflow="ci",
                        started_at=NOW, completed_at=NOW)  # fmt: skip


@pytest.fixture
def world() -> World:
    w = World()
    seed_case(w, now=NOW)
    for number in (1, 2, 3, 4):
        green_pull(w, number)
    return w


def popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the real CLI without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        env=env or clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def lock_file(tmp: Path) -> Path:
    return tmp / "state.sqlite3.lock"


def holds_lock(tmp: Path, pid: int) -> bool:
    path = lock_file(tmp)
    return path.exists() and f"pid {pid} " in path.read_text()


def all_pulls(world: World) -> list[int]:
    return sorted(world.repo(REPO).pulls)


# -- item 1: one writer --------------------------------------------------------------------


def test_two_concurrent_once_post_one_comment_each_and_the_second_names_the_holder(
    world: World, tmp_path: Path
) -> None:
    with Sandbox(world, latency_ms=60) as sandbox:
        cfg = write_config(tmp_path, sandbox)
        first = popen("once", "--config", str(cfg))
        wait_for(lambda: holds_lock(tmp_path, first.pid))
        second = cli("once", "--config", str(cfg))
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        assert second.returncode == 1, second.stderr
        assert f"pid {first.pid} on {socket.gethostname()} since " in second.stderr
        assert "Traceback" not in second.stderr
        for number in all_pulls(world):
            assert len(bot_comments(world, number)) == 1, number


def test_kill_9_of_the_holder_releases_the_lock_and_dry_run_takes_none(
    world: World, tmp_path: Path
) -> None:
    with Sandbox(world, latency_ms=60) as sandbox:
        cfg = write_config(tmp_path, sandbox)
        holder = popen("run", "--config", str(cfg))
        wait_for(lambda: holds_lock(tmp_path, holder.pid))
        dry = cli("once", "--dry-run", "--config", str(cfg))
        assert dry.returncode == 0, dry.stderr
        show = cli("show", f"{REPO}#7430", "--config", str(cfg))
        assert show.returncode == 0, show.stderr
        busy = cli("once", "--config", str(cfg))
        assert busy.returncode == 1 and f"pid {holder.pid}" in busy.stderr
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
        after = cli("once", "--config", str(cfg), sleep=Waits())
        assert after.returncode == 0, after.stderr
        for number in all_pulls(world):
            assert len(bot_comments(world, number)) == 1, number


def test_the_state_lock_names_its_holder_and_is_free_again_after_release(tmp_path: Path) -> None:
    state = tmp_path / "deep" / "state.sqlite3"
    held = StateLock.acquire(state, now=NOW)
    with pytest.raises(StateBusy) as caught:
        StateLock.acquire(state)
    since = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"pid {os.getpid()} on {socket.gethostname()} since {since}" in str(caught.value)
    held.release()
    with StateLock.acquire(state):
        pass


def test_a_corrupt_state_raises_store_error_naming_the_file(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    state.write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreError) as caught:
        Store.open(state)
    assert str(state) in str(caught.value) and "not a database" in str(caught.value)


# -- item 3: secrets ---------------------------------------------------------------------


def test_a_token_pasted_with_a_trailing_newline_works(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox).read_text().replace(f'token = "{TOKEN}"\n', "")
        path = tmp_path / "env.toml"
        path.write_text(cfg)
        env = {"CI_STATUS_BOT_GITHUB__TOKEN": TOKEN + "\n"}
        result = cli("once", "--config", str(path), env=env, sleep=Waits())
        assert result.returncode == 0, result.stderr
        assert len(bot_comments(world, 7430)) == 1


@pytest.mark.parametrize("command", ["check-config", "once"])
def test_a_token_with_a_control_character_is_refused_masked(
    world: World, tmp_path: Path, command: str
) -> None:
    secret = "ghp_abcdefSECRETvalue"
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox)
        env = {"CI_STATUS_BOT_GITHUB__TOKEN": f"{secret}\x1b[2J\nX: y"}
        result = cli(command, "--config", str(cfg), env=env)
    assert result.returncode == 2
    assert "github.token" in result.stderr and "control character" in result.stderr
    output = result.stdout + result.stderr
    assert "SECRET" not in output and "ghp_" not in output
    assert not sandbox.requests


def test_once_at_debug_prints_no_token_and_no_authorization(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        text = write_config(tmp_path, sandbox).read_text()
        text = text.replace("max_retries = 1", f'max_retries = 1\ntoken = "{RTD_TOKEN}"')
        cfg = tmp_path / "debug.toml"
        cfg.write_text(text + '[log]\nlevel = "DEBUG"\n')
        sandbox.fail(None, r".*/builds/.*", 503, times=2)  # errors are logged too
        result = cli("once", "--config", str(cfg), sleep=Waits())
        assert result.returncode in (0, 1), result.stderr
        assert len(bot_comments(world, 7430)) == 1
    output = result.stdout + result.stderr
    for secret in (TOKEN, RTD_TOKEN, "authorization", "Authorization"):
        assert secret not in output


def test_header_loggers_stay_at_warning_and_lines_are_redacted_at_debug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, {n: logging.getLogger(n).level for n in HEADER_LOGGERS})
    register_secrets(["ghs_installationTOKEN123"])
    setup_logging("json", "DEBUG")
    try:
        for name in (*HEADER_LOGGERS, "httpcore.http11", "urllib3.connectionpool"):
            assert logging.getLogger(name).getEffectiveLevel() >= logging.WARNING, name
        logging.getLogger("bot.x").debug(
            "sent Authorization: token ghp_plain with ghs_installationTOKEN123"
        )
        err = capsys.readouterr().err
        assert "ghp_plain" not in err and "ghs_installationTOKEN123" not in err and "****" in err
        assert redact("{'Authorization': 'Bearer abc.def'}") == "{'Authorization': 'Bearer ****'}"
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)


# -- item 5: prompt stops, SIGHUP ---------------------------------------------------------
# What the bot says it waited for is asserted, not how fast this machine ran it (the seconds
# from a signal to exit are benchmarks/stop.py's figures).

RETRYING = re.compile(r"trying again in (\d+\.\d) s")  # retry's note, just before its wait


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_run_stops_at_once_while_read_the_docs_asks_to_wait(
    world: World, tmp_path: Path, signum: int
) -> None:
    with Sandbox(world) as sandbox:
        # 25 s: under RTD's 30 s inline limit, so the bot really waits (and must stop waiting)
        sandbox.fail("GET", r".*/builds/.*", 429, times=-1, headers={"Retry-After": "25"})
        run = LoggedRun(write_config(tmp_path, sandbox), tmp_path)
        try:
            run.wait_until(lambda log: any(float(s) >= 25 for s in RETRYING.findall(log)),
                           "the Retry-After wait began")  # fmt: skip
        finally:
            run.stop(signum)
    log = run.log()
    assert run.proc.returncode == 0, log
    assert f"received {signal.Signals(signum).name}" in log and STOPPED.search(log), log
    assert cut_short(log, least_s=25.0), log  # the 25 s wait ended by the stop, not waited out
    assert ABANDONED not in log  # and the cycle ended with it


def test_run_leaves_a_slow_github_read_after_the_grace(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        sandbox.fail("POST", r"/graphql", 200, times=-1, apply=True, delay_s=25)
        run = LoggedRun(write_config(tmp_path, sandbox), tmp_path)
        try:  # the sandbox records a request as it arrives: from then on its answer is held
            run.wait_until(lambda _: any(r.path == "/graphql" for r in sandbox.requests),
                           "the read was held")  # fmt: skip
        finally:
            run.stop()
    log = run.log()
    assert run.proc.returncode == 0, log
    assert ABANDONED in log and STOPPED.search(log), log  # not waited for past the grace


def test_run_finishes_the_write_in_flight_before_it_stops(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        sandbox.fail("POST", r"/repos/.*/comments", 201, times=1, apply=True, delay_s=6)
        run = LoggedRun(write_config(tmp_path, sandbox), tmp_path)
        try:
            run.wait_until(
                lambda _: any(
                    r.method == "POST" and "/comments" in r.path for r in sandbox.requests
                ),
                "the write was in flight",
            )
        finally:
            run.stop()
        posted = sum(len(bot_comments(world, n)) for n in all_pulls(world))
    log = run.log()
    assert run.proc.returncode == 0, log
    assert posted == 1, "the write in flight completed and no other was started"
    # the 6 s answer was awaited and recorded (past the 1.5 s grace for reads), then it stopped
    assert "comment created on" in log and ABANDONED not in log and STOPPED.search(log), log
    with Sandbox(world) as sandbox:  # the next start records nothing twice
        cfg = write_config(tmp_path, sandbox)
        assert cli("once", "--config", str(cfg), sleep=Waits()).returncode == 0
    for number in all_pulls(world):
        assert len(bot_comments(world, number)) == 1, number


# -- item 9: check-config ------------------------------------------------------------------


def test_check_config_without_repos_exits_2(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        text = write_config(tmp_path, sandbox).read_text()
    cfg = tmp_path / "norepos.toml"
    cfg.write_text(text.split("[[repos]]")[0])
    result = cli("check-config", "--config", str(cfg))
    assert result.returncode == 2
    assert "repos" in result.stderr and "[[repos]]" in result.stderr


def test_check_config_with_a_garbage_private_key_exits_2(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'[github]\napp_id = 1\nprivate_key_path = "{key}"\n[[repos]]\nname = "{REPO}"\n'
    )
    result = cli("check-config", "--config", str(cfg))
    assert result.returncode == 2
    assert "github.private_key_path" in result.stderr and "PEM private key" in result.stderr
    assert "Traceback" not in result.stderr


# -- item 10: the state ---------------------------------------------------------------------


def test_a_corrupt_state_in_run_is_a_problem_logged_once_not_a_traceback(
    world: World, tmp_path: Path
) -> None:
    (tmp_path / "state.sqlite3").write_bytes(b"this is not a database" * 100)
    with Sandbox(world) as sandbox:
        run = LoggedRun(write_config(tmp_path, sandbox), tmp_path)
        try:  # the first cycle meets the state: the problem is logged, the service lives on
            run.wait_until(lambda log: "problem started: state" in log, "the problem was logged")
        finally:
            run.stop()
    err = run.log()
    assert run.proc.returncode == 0, err
    assert "problem started: state" in err and "not a database" in err
    assert "Traceback" not in err and "the cycle failed" not in err
    assert not bot_comments(world, 7430)


def test_show_works_on_a_read_only_state(world: World, tmp_path: Path) -> None:
    with Sandbox(world) as sandbox:
        cfg = write_config(tmp_path, sandbox)
        assert cli("once", "--config", str(cfg), sleep=Waits()).returncode == 0
        os.chmod(tmp_path / "state.sqlite3", 0o444)
        os.chmod(tmp_path, 0o555)
        try:
            result = cli("show", f"{REPO}#7430", "--config", str(cfg))
        finally:
            os.chmod(tmp_path, 0o755)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(MARKER)


# -- item 11: an App installed on two organisations ----------------------------------------


@pytest.fixture
def app_key(tmp_path: Path) -> Iterator[Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "app.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + b"\n\n"
    )
    yield path
    Requester.resetConnectionClasses()


def test_an_app_installed_on_two_organisations_comments_on_both(
    world: World, tmp_path: Path, app_key: Path
) -> None:
    other = "acme/tools"
    world.add_repo(other)
    green_pull(world, 9, repo=other)
    world.add_app(slug="ci-status-bot", app_id=1, installation_id=7, repos=[REPO])
    world.add_app(slug="ci-status-bot", app_id=1, installation_id=8, repos=[other])
    with Sandbox(world) as sandbox:
        text = write_config(tmp_path, sandbox).read_text().replace(f'token = "{TOKEN}"', "")
        text = text.replace("[github]", f'[github]\napp_id = 1\nprivate_key_path = "{app_key}"')
        cfg = tmp_path / "app.toml"
        cfg.write_text(text + f'[[repos]]\nname = "{other}"\n')
        result = cli("once", "--config", str(cfg), sleep=Waits())
        assert result.returncode == 0, result.stderr
        login = "ci-status-bot[bot]"
        assert len(bot_comments(world, 7430, login=login)) == 1
        mine = [c for c in world.comments(other, 9) if c["user"]["login"] == login]
        assert len(mine) == 1 and mine[0]["body"].startswith(MARKER)
        paths = [r.path for r in sandbox.requests]
        assert paths.count("/repos/octo/omni/installation") == 1
        assert paths.count("/repos/acme/tools/installation") == 1
        assert "/app/installations/7/access_tokens" in paths
        assert "/app/installations/8/access_tokens" in paths
        assert outside_allowlist(sandbox) == []
        assert not [c for c in world.comments(REPO, 7430) if c["user"]["login"] == LOGIN]
        # a change in each organisation: both comments are re-read and edited in place
        for repo, number in ((REPO, 1), (other, 9)):
            world.add_check_run(repo, f"{number:040x}", name="lint", app_slug="github-actions",
                                workflow="ci", conclusion="failure", started_at=NOW,
                                completed_at=NOW)  # fmt: skip
        again = cli("once", "--config", str(cfg), sleep=Waits())
        assert again.returncode == 0, again.stderr
        assert "edited 2" in again.stdout, again.stdout
        for repo, number in ((REPO, 1), (other, 9)):
            mine = [c for c in world.comments(repo, number) if c["user"]["login"] == login]
            assert len(mine) == 1 and "lint" in mine[0]["body"]


# -- issue 17: state path problems name state.path, the folder and what to do -----------------


def _state_at(config: Path, state: Path) -> None:
    text = config.read_text()
    start = text.index('path = "')
    end = text.index("\n", start)
    config.write_text(text[:start] + f'path = "{state}"' + text[end:])


@pytest.mark.parametrize("command", ["once", "run"])
def test_a_state_path_under_a_file_names_state_path_and_the_folder(
    world: World, tmp_path: Path, command: str
) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    with Sandbox(world) as sandbox:
        config = write_config(tmp_path, sandbox)
        _state_at(config, tmp_path / "blocker" / "state.sqlite3")
        result = cli(command, "--config", str(config), timeout=30)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "state.path" in result.stderr and str(tmp_path / "blocker") in result.stderr
    assert "not a folder" in result.stderr


@pytest.mark.parametrize("command", ["once", "run"])
@pytest.mark.parametrize("state", ["/sys/kernel/state.sqlite3", "/sys/kernel/bot/state.sqlite3"])
def test_a_state_folder_the_process_cannot_write_names_the_uid_and_what_to_do(
    world: World, tmp_path: Path, command: str, state: str
) -> None:
    # /sys/kernel refuses even root (the tests' user) to create anything: it stands for a
    # bind-mounted folder the container's uid 10001 cannot write to
    with Sandbox(world) as sandbox:
        config = write_config(tmp_path, sandbox)
        _state_at(config, Path(state))
        result = cli(command, "--config", str(config), timeout=30)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "PermissionError" not in result.stderr
    assert "state.path" in result.stderr and "/sys/kernel" in result.stderr
    assert "uid 10001" in result.stderr and "chown" in result.stderr
