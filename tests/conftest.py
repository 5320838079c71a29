"""Shared pytest fixtures: a World, a running loopback Sandbox over it, `env` (both plus a
config, a clock and a Waits), `demo` (the console script's demo, once per session) and
`postgres_url` (a database of the test's own). A module seeds `env` by overriding `world`."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from github.Requester import Requester
from hypothesis import settings
from support import Env, clean_env, sandbox_env

from bot_sandbox import Sandbox, World

# The property tests' time is bounded by their example counts (max_examples), not by a
# per-example deadline, which a shared two-core machine running four workers misses at random.
# CI runs them with a fixed seed, so a landing never hangs on a new random draw; developers'
# runs keep exploring (a failure they find becomes an @example).
settings.register_profile("suite", deadline=None)
settings.register_profile("ci", parent=settings.get_profile("suite"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "suite")


@pytest.fixture(autouse=True)
def _no_guard_left_behind() -> Iterator[None]:
    """The bot's guard is installed process-wide by a cycle run in process; a later test of
    the same worker on another sandbox would be refused as a foreign host: reset after each."""
    yield
    Requester.resetConnectionClasses()


@pytest.fixture
def now() -> datetime:
    """The test's "now" (UTC), the same for its world and its env."""
    return datetime.now(UTC)


@pytest.fixture
def world() -> World:
    """An empty World (modules override this fixture to seed one)."""
    return World()


@pytest.fixture
def sandbox(world: World) -> Iterator[Sandbox]:
    """A running Sandbox serving `world`."""
    with Sandbox(world) as sb:
        yield sb


@pytest.fixture
def env(world: World, tmp_path: Path, now: datetime) -> Iterator[Env]:
    """A Sandbox serving `world` and a config for it; checks the allowlist afterwards."""
    with sandbox_env(world, tmp_path, now) as env:
        yield env


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """`ci-status-bot demo` run once, as the installed console script (its exit code included).

    Once for the whole run: under pytest-xdist the first worker to ask runs it, under a lock in
    the run's own temporary folder, and the others read what it printed.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run_demo()
    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, above every worker's
    with (shared / "demo.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "demo.json"
        if done.exists():
            return subprocess.CompletedProcess(**json.loads(done.read_text(encoding="utf-8")))
        result = _run_demo()
        fields = ("args", "returncode", "stdout", "stderr")
        done.write_text(json.dumps({k: getattr(result, k) for k in fields}), encoding="utf-8")
        return result


def _run_demo() -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("ci-status-bot")
    return subprocess.run(
        [str(script), "demo"], capture_output=True, text=True, timeout=180, env=clean_env()
    )


# -- bytecode: compiled once per run, not once per process -----------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Under PYTHONDONTWRITEBYTECODE every `python -m bot` the tests start compiles the bot and
    its libraries again (about 0.15 s of CPU each, over a hundred of them): the run caches the
    bytecode in .pytest_cache/ instead (PYTHONPYCACHEPREFIX), for itself, its workers and their
    children, leaving the source tree as clean as the variable meant."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or getattr(config, "cache", None) is None:
        return
    prefix = str(config.cache.mkdir("pycache"))
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


# -- a real PostgreSQL server (issue 18): .ci/run starts one and names it here ---------------

POSTGRES_ENV = "CISB_TEST_POSTGRES_URL"  # a role that may CREATE DATABASE


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI the PostgreSQL tests must run: a missing server fails the run, never skips."""
    if os.environ.get("CI") and not os.environ.get(POSTGRES_ENV):
        raise pytest.UsageError(
            f"CI is set but {POSTGRES_ENV} is not: the PostgreSQL tests would be skipped "
            "(.ci/run starts the server and sets it)"
        )
    _rewrite_once(session.config)


def _rewrite_once(config: pytest.Config) -> None:
    """Each worker imports every test module with its asserts rewritten (about 6 s of CPU for
    this tree): before the workers start, the run's main process writes pytest's cache of the
    rewritten modules once, and the workers read it. Skipped where pytest's internals differ."""
    workers = config.getoption("numprocesses", None)
    if not workers or hasattr(config, "workerinput") or sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        here = Path(__file__).parent
        for path in sorted([*here.rglob("test_*.py"), *here.rglob("conftest.py")]):
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc, state.trace) is None and rewrite.try_makedirs(
                pyc.parent
            ):
                source_hash, code = rewrite._rewrite_test(path, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except (AttributeError, ImportError, KeyError, TypeError):
        return


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards (tests may run in parallel)."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set: no PostgreSQL server to test against")
    import uuid

    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"cisb_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(base)
    user, password = params.get("user", ""), params.get("password", "")
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    try:
        yield f"postgresql://{auth}{host}:{port}/{name}"
    finally:
        with psycopg.connect(make_conninfo(base), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
