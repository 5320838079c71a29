"""Shared helpers of the test suite (unit and e2e): seed worlds, write configs, run the CLI, build
core values."""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from github.Requester import Requester

from bot import logs
from bot.cli import main
from bot.core.model import MARKER, Kind, Policy, PullSnapshot, Report, Signal
from bot.core.reconcile import reconcile
from bot.guard import Allowance, Guard
from bot.logs import HEADER_LOGGERS
from bot.sources.azure_pipelines.provider import PATHS as AZURE_PATHS
from bot.sources.codecov.provider import PATHS as CODECOV_PATHS
from bot.sources.readthedocs.provider import PATHS as RTD_PATHS
from bot.sources.readthedocs.rows import RtdLookup
from bot.sources.readthedocs.rules import RtdBuild
from bot_sandbox import Recorded, Sandbox, World

TESTS = Path(__file__).resolve().parent  # tests/: data/ and golden/ live here
# The tests' own requests to loopback servers (the served `run`, the sandbox): one client.
# `httpx.get` builds a client, and with it an SSL context, on every call (~23 ms of CPU): a
# test polling /livez 20 times a second spent half a core on that alone. No keep-alive, so
# each request has a connection of its own as with httpx.get (servers under test count and
# bound their connections); no proxy from the environment (loopback only).
LOOPBACK = httpx.Client(trust_env=False, limits=httpx.Limits(max_keepalive_connections=0))
ROOT = TESTS.parent  # the repository
REPO = "octo/omni"
RTD = "omni-docs"
TOKEN = "test-token"
LOGIN = "ci-status-bot"
SEED_SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
CONTEXT = f"docs/readthedocs.org:{RTD}"


def repo_world() -> World:
    """The bot's user and its one repository, nothing else: what most e2e modules start from
    (`world = pytest.fixture(repo_world, name="world")` overrides conftest's empty World)."""
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    return world


def seed_case(world: World, *, now: datetime, number: int = 7430, sha: str = SEED_SHA) -> str:
    """The core issue's seed case: four green runs, RTD status pending, build cancelled on RTD."""
    world.add_user(login=LOGIN, token=TOKEN)
    if REPO not in world.repos:
        world.add_repo(REPO)
    world.add_pull(
        REPO, number, title="Add the omni resolver", author="alice", head_sha=sha, draft=True
    )
    done = now - timedelta(hours=5)
    world.add_check_run(REPO, sha, name="DCO", app_slug="dco", started_at=done, completed_at=done)
    for name in ("build-wheel (3.11)", "build-wheel (3.12)"):
        world.add_check_run(
            REPO, sha, name=name, app_slug="github-actions", workflow="wheels",
            started_at=done, completed_at=done + timedelta(minutes=4),
        )  # fmt: skip
    world.add_check_run(
        REPO, sha, name="pre-commit", app_slug="pre-commit-ci", started_at=done, completed_at=done
    )
    world.add_status(
        REPO, sha, context=CONTEXT, state="pending",
        description="Read the Docs build is in progress!",
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/34894885/",
        created_at=now - timedelta(hours=5),
    )  # fmt: skip
    world.add_rtd_build(
        RTD, id=34894885, commit=sha, version=str(number), state="cancelled", success=False,
        created=now - timedelta(hours=5), finished=None, duration=0,
    )  # fmt: skip
    world.add_rtd_notification(RTD, 34894885, "build:user:cancelled")
    return sha


def write_config(tmp: Path, sandbox: Sandbox, **policy: Any) -> Path:
    """A config file pointing at the sandbox; returns its path."""
    lines = [
        "[github]",
        f'api_url = "{sandbox.github_url}"',
        f'token = "{TOKEN}"',
        "[readthedocs]",
        f'api_url = "{sandbox.rtd_url}"',
        f'business_api_url = "{sandbox.rtd_url}"',
        "max_retries = 1",
        "[codecov]",
        f'api_url = "{sandbox.codecov_url}"',
        "max_retries = 1",
        "[azure_pipelines]",
        f'api_url = "{sandbox.azure_url}"',
        "max_retries = 1",
        "[state]",
        f'path = "{tmp / "state.sqlite3"}"',
        "[schedule]",
        "interval_seconds = 30",
        "jitter_seconds = 0",
        "[server]",
        "port = 0",  # no HTTP server unless a test asks for one (tests run side by side)
        "[policy]",
        *(f"{k} = {_toml(v)}" for k, v in policy.items()),
        "[[repos]]",
        f'name = "{REPO}"',
    ]
    path = tmp / "bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return repr(value)


def clean_env_of(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without any CI_STATUS_BOT_* variable."""
    return {k: v for k, v in environ.items() if not k.startswith("CI_STATUS_BOT_")}


def clean_env() -> dict[str, str]:
    """The environment without any CI_STATUS_BOT_* variable."""
    return clean_env_of(os.environ)


def cli_process(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real command line as a subprocess (`python -m bot`), in a clean environment."""
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean_env(), **(env or {})},
        check=False,
    )


@dataclass
class Waits:
    """A `sleep` for the bot that returns at once and records every wait: when, how long."""

    log: list[tuple[float, float]] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        """Record a wait of `seconds` at the time it was asked (time.time(), as Recorded.at)."""
        self.log.append((time.time(), seconds))

    def between(self, start: float, end: float) -> list[float]:
        """The waits asked between two moments (two recorded requests' `at`)."""
        return [seconds for at, seconds in self.log if start <= at <= end]


def cli(
    *args: str,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    sleep: Waits | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`bot.cli.main`), seen as `cli_process` sees it.

    A clean environment (plus `env`), its own stdout and stderr, the exit code, an uncaught
    exception as a traceback on stderr with exit 1; afterwards the process-wide state main()
    sets (logging, registered secrets, PyGithub's guarded connections) is put back. A call that
    takes longer than `timeout` fails the test instead of blocking the suite; `cwd` is the
    working folder during the call. With `sleep`,
    the bot's waits (backoff, Retry-After, write pacing) are recorded there and return at
    once; without, they are real.
    """
    out, err = io.StringIO(), io.StringIO()
    outcome: list[int] = []

    def call() -> None:
        try:
            outcome.append(main(list(args), sleep=sleep))
        except BaseException:
            traceback.print_exc(file=err)
            outcome.append(1)

    with _process_state(env, cwd), redirect_stdout(out), redirect_stderr(err):
        worker = threading.Thread(target=call, name="cli", daemon=True)
        worker.start()
        worker.join(timeout)
    assert outcome, f"ci-status-bot {' '.join(args)} did not finish within {timeout} s"
    return subprocess.CompletedProcess(
        ["ci-status-bot", *args], outcome[0], out.getvalue(), err.getvalue()
    )


@contextmanager
def _process_state(env: Mapping[str, str] | None, cwd: Path | None) -> Iterator[None]:
    """Run with a clean environment (in `cwd`); then restore them, logging, secrets, PyGithub."""
    environ, folder = dict(os.environ), os.getcwd()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in HEADER_LOGGERS}
    secrets = set(logs._secrets)
    os.environ.clear()
    os.environ.update({**clean_env_of(environ), **(env or {})})
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(environ)
        root.handlers[:], root.level = handlers, level
        for name, value in levels.items():
            logging.getLogger(name).setLevel(value)
        logs._secrets.clear()
        logs._secrets.update(secrets)
        Requester.resetConnectionClasses()


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_config(tmp: Path, sandbox: Sandbox, port: int) -> Path:
    """The tests' config with the HTTP server on `port`."""
    config = write_config(tmp, sandbox)
    config.write_text(config.read_text().replace("port = 0", f"port = {port}"))
    return config


def start_run(config: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """`ci-status-bot run` as a subprocess (`env` added to the clean environment)."""
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(config)],
        env={**clean_env(), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


# What `run` logs about a stop (retry.pause, Service.shutdown): tests assert these, not seconds.
WAITING = re.compile(r"waiting (\d+\.\d) s$", re.MULTILINE)  # a wait begins (debug)
STOPPED_INTO = re.compile(r"stopped (\d+\.\d) s into a (\d+\.\d) s wait")  # ... cut short
ABANDONED = "stopping without waiting for the cycle's reads to end"  # reads left at the grace
STOPPED = re.compile(r" info stopped$", re.MULTILINE)  # the service's shutdown ran to its end
START_GUARD_S = 120.0  # start-up and first requests on a loaded machine: a hang guard only
EXIT_GUARD_S = 60.0  # signal to exit: a hang guard only (the seconds: benchmarks/stop.py)


def cut_short(log: str, *, least_s: float) -> bool:
    """Whether the log says a stop cut short a wait of at least `least_s`."""
    return any(float(a) >= least_s and float(w) < float(a) for w, a in STOPPED_INTO.findall(log))


@dataclass
class LoggedRun:
    """`ci-status-bot run` as a subprocess whose stdout and log go to files, read as they grow."""

    config: Path
    folder: Path
    proc: subprocess.Popen[str] = field(init=False)

    def __post_init__(self) -> None:
        with self.out_path.open("w") as out, self.log_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bot", "run", "--config", str(self.config)],
                env=clean_env(), stdout=out, stderr=err, text=True,
            )  # fmt: skip

    @property
    def out_path(self) -> Path:
        return self.folder / "run.out"

    @property
    def log_path(self) -> Path:
        return self.folder / "run.log"

    def log(self) -> str:
        """What it has logged so far."""
        return self.log_path.read_text(encoding="utf-8")

    def wait_until(self, met: Callable[[str], bool], what: str) -> None:
        """Until `met(log so far)`; fails if the process ends first or START_GUARD_S pass."""
        deadline = time.monotonic() + START_GUARD_S
        while not met(self.log()):
            assert self.proc.poll() is None, f"run ended before {what}: {self.log()[-2000:]}"
            assert time.monotonic() < deadline, f"never {what}: {self.log()[-2000:]}"
            time.sleep(0.05)

    def stop(self, signum: int = signal.SIGTERM) -> float:
        """Send `signum`; the seconds until the process exited (for benchmarks, not asserts)."""
        self.proc.send_signal(signum)
        sent = time.monotonic()
        try:
            self.proc.wait(timeout=EXIT_GUARD_S)
        finally:
            self.end()
        return time.monotonic() - sent

    def end(self) -> None:
        """Kill it if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_ready(base: str, proc: subprocess.Popen[str], *, timeout: float = 60) -> httpx.Response:
    """Poll /readyz until it answers 200 (the process must stay alive)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            answer = LOOPBACK.get(base + "/readyz", timeout=5)
        except httpx.TransportError:
            answer = None
        if answer is not None and answer.status_code == 200:
            return answer
        time.sleep(0.2)
    raise AssertionError("the service never became ready")


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM the process (if still running); its exit code and stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def bot_comments(world: World, number: int, *, login: str = LOGIN) -> list[dict[str, Any]]:
    """The bot's own comments on a pull request (marker AND author)."""
    return [
        c
        for c in world.comments(REPO, number)
        if c["user"]["login"] == login and c["body"].startswith(MARKER)
    ]


def state_at_revision(where: str, revision: int) -> None:
    """A new state (a SQLite path or a PostgreSQL URL) migrated up to `revision` only: as a bot
    whose newest revision that was left it."""
    from alembic import command
    from alembic.config import Config

    from bot.state.db import is_url, pg_engine, sqlite_engine

    engine = pg_engine(where, read_only=False) if is_url(where) else (
        sqlite_engine(where, read_only=False)
    )  # fmt: skip
    try:
        with engine.begin() as conn:
            config = Config()
            config.set_main_option("script_location", "bot.state:migrations")
            config.attributes["connection"] = conn
            command.upgrade(config, f"{revision:04d}")
    finally:
        engine.dispose()


def writes(sandbox: Sandbox) -> list[Recorded]:
    """Every GitHub request that writes (GraphQL queries excluded)."""
    return [
        r
        for r in sandbox.requests
        if r.service == "github" and r.method in {"POST", "PATCH", "PUT", "DELETE"}
        and r.graphql_operation is None
    ]  # fmt: skip


@dataclass(frozen=True)
class Refused:
    """A recorded request that the allowlist would refuse."""

    request: Recorded
    reason: str


def outside_allowlist(sandbox: Sandbox) -> list[Refused]:
    """Recorded requests that the bot's own allowlist does not permit."""
    guard = Guard.for_urls(
        sandbox.github_url,
        (
            Allowance.of("readthedocs", "Read the Docs", (sandbox.rtd_url,), RTD_PATHS),
            Allowance.of("codecov", "Codecov", (sandbox.codecov_url,), CODECOV_PATHS),
            Allowance.of("azure-pipelines", "Azure", (sandbox.azure_url,), AZURE_PATHS),
        ),
    )
    urls = {"codecov": sandbox.codecov_url, "azure": sandbox.azure_url}
    names = {"codecov": "codecov", "azure": "azure-pipelines"}
    refused: list[Refused] = []
    for r in sandbox.requests:
        try:
            if r.service == "github" and r.graphql_operation is not None:
                guard.check_github(r.method, sandbox.graphql_url, r.body)
            elif r.service == "github":
                guard.check_github(r.method, sandbox.github_url + r.path)
            elif r.service in urls:
                guard.check_source(names[r.service], r.method, urls[r.service] + r.path)
            else:
                guard.check_source("readthedocs", r.method, sandbox.rtd_url + r.path)
        except Exception as exc:
            refused.append(Refused(r, str(exc)))
    return refused


@dataclass
class Env:
    """A running sandbox over `world`, a config pointing at it, the test's folder and clock."""

    world: World
    sandbox: Sandbox
    tmp: Path
    config: Path
    now: datetime
    waits: Waits = field(default_factory=Waits)  # for `cli(..., sleep=env.waits)`

    @property
    def state(self) -> Path:
        """The state file the config names."""
        return self.tmp / "state.sqlite3"

    def configure(self, **policy: Any) -> Path:
        """Rewrite the config with these [policy] keys; its path."""
        return write_config(self.tmp, self.sandbox, **policy)


@contextmanager
def sandbox_env(world: World, tmp: Path, now: datetime) -> Iterator[Env]:
    """Serve `world`; afterwards, assert the bot sent nothing outside its allowlist."""
    with Sandbox(world) as sandbox:
        yield Env(world, sandbox, tmp, write_config(tmp, sandbox), now)
        # main() in-process installs the bot's guard process-wide; leave PyGithub as it was
        Requester.resetConnectionClasses()
        refused = outside_allowlist(sandbox)
        assert refused == [], f"requests outside the allowlist: {refused}"


# --- The pure core's builders (table tests of reconcile and render) ----------------------

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
PR_URL = "https://github.com/example/omni/pull/7430"
DOCS = "docs/readthedocs.org:omni-docs"
BUILD_URL = "https://readthedocs.org/projects/omni-docs/builds/34894885/"
RECENT = NOW - timedelta(minutes=10)
OLD = NOW - timedelta(hours=3)


def at(hour: int, minute: int) -> datetime:
    """A time on the seed day, in UTC."""
    return datetime(2026, 10, 5, hour, minute, tzinfo=UTC)


def run(name: str, state: str, **fields: object) -> Signal:
    """A check run; completed states get a recent completed_at unless given."""
    fields.setdefault("app", "github-actions")
    fields.setdefault("started_at", RECENT)
    fields.setdefault("completed_at", RECENT if state not in PENDING_RAW else None)
    return Signal(name, Kind.CHECK_RUN, state, **fields)  # type: ignore[arg-type]


def status(name: str, state: str, **fields: object) -> Signal:
    """A commit status posted recently unless created_at is given."""
    fields.setdefault("created_at", RECENT)
    return Signal(name, Kind.STATUS, state, **fields)  # type: ignore[arg-type]


def snapshot(*signals: Signal, truncated: bool = False, draft: bool = False) -> PullSnapshot:
    """A pull request whose head carries the given signals."""
    return PullSnapshot(
        repo="example/omni",
        number=7430,
        title="Add the omni docs",
        author="someone",
        draft=draft,
        head_sha=SHA,
        url=PR_URL,
        signals=signals,
        truncated=truncated,
    )


def build(code: str, success: bool | None, **fields: object) -> RtdBuild:
    """An RTD build of the head commit, of the pull request's own version (7430)."""
    fields.setdefault("id", 34894885)
    fields.setdefault("version", "7430")
    fields.setdefault("created", RECENT)
    fields.setdefault("url", BUILD_URL)
    fields.setdefault("commit", SHA)
    return RtdBuild(project="omni-docs", state=code, success=success, **fields)  # type: ignore[arg-type]


def lookup(*builds: RtdBuild, notes: tuple[str, ...] = (), error: str | None = None) -> RtdLookup:
    """What RTD answered for omni-docs and the head commit."""
    return RtdLookup("omni-docs", SHA, NOW, builds, notes, error)


def one_row(signal: Signal, rtd: RtdLookup | None = None, **kwargs: object) -> Report:
    """Reconcile a pull request carrying one signal."""
    table = {signal.name: rtd} if rtd is not None else {}
    return reconcile(snapshot(signal), table, Policy(), now=NOW, **kwargs)  # type: ignore[arg-type]


def seed_snapshot() -> PullSnapshot:
    """The seed case: a draft PR, four passing runs and a docs status pending since 09:12."""
    return dataclasses.replace(
        snapshot(
            run("DCO", "success", app="dco", started_at=at(9, 10), completed_at=at(9, 10)),
            run("build-wheel (3.11)", "success", workflow="wheels", completed_at=at(9, 31)),
            run("build-wheel (3.12)", "success", workflow="wheels", completed_at=at(9, 33)),
            run("pre-commit", "success", workflow="pre-commit", completed_at=at(9, 14)),
            status(
                DOCS,
                "pending",
                url=BUILD_URL,
                description="Read the Docs build is in progress!",
                created_at=at(9, 12),
            ),
        ),
        draft=True,
        fetched_at=NOW,
    )


def seed_rtd() -> dict[str, RtdLookup]:
    """RTD's answer in the seed case: one cancelled build, notification build:user:cancelled."""
    cancelled = build("cancelled", False, created=at(9, 12), duration=0, finished=None)
    return {DOCS: lookup(cancelled, notes=("build:user:cancelled",))}


def seed_report() -> Report:
    """The seed case reconciled at 14:03 UTC."""
    return reconcile(seed_snapshot(), seed_rtd(), Policy(), now=NOW)


PENDING_RAW = ("queued", "in_progress", "waiting", "pending", "requested")


# -- the GitHub Action (tests/e2e/test_action.py, benchmarks/action.py) ---------------------

REPOSITORY = Path(__file__).resolve().parent.parent
_INPUT = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")


def action_metadata() -> dict[str, Any]:
    """action.yml, parsed."""
    return dict(yaml.safe_load((REPOSITORY / "action.yml").read_text(encoding="utf-8")))


def action_step(inputs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The action's last step: its `run:` text and its `env:`, the inputs substituted as the
    runner would (an input not given takes its default)."""
    meta = action_metadata()
    values = {name: str(spec.get("default", "")) for name, spec in meta["inputs"].items()}
    values.update(inputs)
    step = meta["runs"]["steps"][-1]
    env = {k: _INPUT.sub(lambda m: values[m[1]], str(v)) for k, v in step["env"].items()}
    return str(step["run"]), env


class TcpRelay:
    """A loopback TCP relay to a server (e.g. PostgreSQL) that a test can cut and restore: cut,
    every connection through it is closed and new ones are refused, as when the server goes
    away; restored, it relays again (the server itself, shared with other tests, is untouched)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = int(self.listener.getsockname()[1])
        self.up = True
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Close every relayed connection and refuse new ones."""
        self.up = False
        with self._lock:
            ends, self._open = self._open, []
        for end in ends:
            try:
                end.shutdown(socket.SHUT_RDWR)
                end.close()
            except OSError:
                pass

    def restore(self) -> None:
        """Relay again."""
        self.up = True

    def close(self) -> None:
        """Cut and stop listening."""
        self.cut()
        self.listener.close()

    def url(self, url: str) -> str:
        """`url` (postgresql://user:pw@host:port/db) through this relay."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
