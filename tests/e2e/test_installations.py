"""Many installations on a job queue (issue 30): one App, several installations, `run` and
`worker` subprocesses on a real PostgreSQL (Procrastinate's queue and the shared state).

The sandbox knows three installations of the App, each with its own repositories, tokens that
reach only those, and (where a test sets one) a rate limit of its own. Every test ends with
at most one comment per pull request, and each fault names its reason in the logs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github.Requester import Requester
from private_postgres import PrivatePostgres
from support import clean_env, cli_process, free_port, outside_allowlist

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World
from bot_sandbox.webhook_sender import check_run_payload, installation_payload, sign

SLUG, LOGIN, APP_ID = "ci-status-bot", "ci-status-bot[bot]", 1
INSTALLATIONS = {11: ("octo/a", "octo/b"), 12: ("acme/c",), 13: ("zeta/d",)}
PULLS = (1, 2)
SECRET = "many-secret"
INTERVAL_S = 30


def head(repo: str, number: int) -> str:
    """A head sha per pull request."""
    return (repo.replace("/", "").encode().hex() + f"{number:02x}").ljust(40, "0")[:40]


def make_world() -> World:
    """The App installed three times; two green pull requests in each repository."""
    world = World()
    done = datetime.now(UTC) - timedelta(hours=1)
    for iid, repos in INSTALLATIONS.items():
        for repo in repos:
            world.add_repo(repo)
            for number in PULLS:
                sha = head(repo, number)
                world.add_pull(repo, number, title=f"pr {number}", author="alice", head_sha=sha)
                world.add_check_run(repo, sha, name="tests", app_slug="github-actions",
                                    workflow="ci", started_at=done, completed_at=done)  # fmt: skip
        world.add_app(slug=SLUG, app_id=APP_ID, installation_id=iid, repos=list(repos))
    return world


def own(world: World, repo: str, number: int) -> list[dict[str, Any]]:
    """The App's own comments on one pull request (marker AND author)."""
    return [
        c
        for c in world.comments(repo, number)
        if c["user"]["login"] == LOGIN and c["body"].startswith(MARKER)
    ]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `predicate()` holds (AssertionError naming `what` past `timeout`)."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def red(world: World, repo: str, number: int, check: str) -> Any:
    """A new failing check run on one pull request's head (the record, for its webhook)."""
    now = datetime.now(UTC)
    return world.add_check_run_record(
        repo, head(repo, number), name=check, app_slug="github-actions", workflow="ci",
        conclusion="failure", started_at=now, completed_at=now,
    )  # fmt: skip


class Fleet:
    """The sandbox, `run` and workers on a real PostgreSQL: the state on the shared test server,
    the queue there too or on a broker of the test's own (which the test may crash)."""

    def __init__(
        self,
        folder: Path,
        world: World,
        sandbox: Sandbox,
        url: str,
        *,
        broker: PrivatePostgres | None = None,
        queue: bool = True,
    ) -> None:
        self.folder, self.world, self.sandbox = folder, world, sandbox
        self.broker = broker
        self.db_url = url if broker is None else broker.url  # the queue's database
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, Path] = {}
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = folder / "app.pem"
        pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))  # fmt: skip
        state = [f'url = "{url}"', "lease_seconds = 3"] if queue else [
            f'path = "{folder / "state.sqlite3"}"'
        ]  # fmt: skip
        jobs = ["[queue]", f'url = "{self.db_url}"', "stalled_seconds = 3",
                "jobs_per_worker = 2"] if queue else []  # fmt: skip
        lines = [
            "[github]", f'api_url = "{sandbox.github_url}"', 'installations = "all"',
            f"app_id = {APP_ID}", f'private_key_path = "{pem}"',
            "[readthedocs]", f'api_url = "{sandbox.rtd_url}"',
            f'business_api_url = "{sandbox.rtd_url}"', "max_retries = 1",
            "[state]", *state, *jobs,
            "[schedule]", f"interval_seconds = {INTERVAL_S}", "jitter_seconds = 0",
            "[server]", 'host = "127.0.0.1"', f"port = {self.port}",
            "[webhooks]", f'secrets = ["{SECRET}"]', "debounce_seconds = 1",
            "[policy]", "min_seconds_between_writes = 1",
        ]  # fmt: skip
        self.config = folder / "bot.toml"
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, name: str, command: str = "worker") -> subprocess.Popen[str]:
        """Start `run` or a worker (its stderr kept in a file of its own)."""
        path = self.folder / f"{name}.log"
        self.logs[name] = path
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", command, "--config", str(self.config)],
            env=clean_env(), stdout=subprocess.DEVNULL, stderr=path.open("a"), text=True,
        )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start_run(self, *workers: str) -> None:
        """`run` (and `workers`, started beside it), answering on its port."""
        self.start("run", "run")
        for name in workers:
            self.start(name)
        wait_for(self.alive, 150, "`run` serves /livez")

    def get(self, path: str) -> httpx.Response:
        """GET one of `run`'s endpoints (a loaded machine may take seconds to answer)."""
        return httpx.get(self.base + path, timeout=30)

    def alive(self) -> bool:
        try:
            return httpx.get(self.base + "/livez", timeout=2).status_code == 200
        except httpx.TransportError:
            assert self.procs["run"].poll() is None, self.log("run")
            return False

    def working(self, name: str) -> None:
        """Wait until worker `name` takes jobs from the queue."""
        wait_for(lambda: "Starting worker on queues" in self.log(name), 60, f"{name} works")

    def kill(self, name: str) -> None:
        """SIGKILL a process (no clean stop: its jobs and leases are left behind)."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def log(self, name: str) -> str:
        return self.logs[name].read_text() if name in self.logs else ""

    def logs_text(self) -> str:
        return "\n".join(self.log(name) for name in self.logs)

    def deliver(self, event: str, payload: dict[str, Any], delivery: str = "") -> httpx.Response:
        """One signed delivery to `run`."""
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(body, SECRET), "Content-Type": "application/json",
        }  # fmt: skip
        return httpx.post(self.base + "/webhook", content=body, headers=headers, timeout=10)

    def check_run(self, repo: str, number: int, check: str) -> httpx.Response:
        """A new failing check and its `check_run` delivery."""
        run = red(self.world, repo, number, check)
        return self.deliver("check_run", check_run_payload(self.world, "completed", run))

    def jobs(self) -> list[dict[str, Any]]:
        """The queue's jobs (those done are deleted: these wait, run, failed or were ended)."""
        with psycopg.connect(self.db_url) as conn:
            rows = conn.execute(
                "SELECT status::text, args, queueing_lock FROM procrastinate_jobs"
            ).fetchall()
        return [{"status": r[0], "args": r[1], "queueing_lock": r[2]} for r in rows]

    def open_jobs(self, repo: str, number: int | None) -> list[dict[str, Any]]:
        """The jobs of one pull request (or repository) waiting or running."""
        return [
            j
            for j in self.jobs()
            if j["status"] in ("todo", "doing")
            and j["args"].get("repo") == repo
            and j["args"].get("number") == number
        ]

    def close(self) -> None:
        """SIGTERM every process at once, then wait for each (SIGKILL past 15 s)."""
        procs = [self.procs.pop(name) for name in list(self.procs)]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture
def broker() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of the test's own for the queue, that the test may crash."""
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def fleet(tmp_path: Path, postgres_url: str) -> Iterator[Fleet]:
    """The queue and the state on the shared test server (a database of the test's own)."""
    world = make_world()
    with Sandbox(world) as sandbox:
        crew = Fleet(tmp_path, world, sandbox, postgres_url)
        try:
            yield crew
        finally:
            crew.close()
            Requester.resetConnectionClasses()


@pytest.fixture
def fleet_on_broker(tmp_path: Path, postgres_url: str, broker: PrivatePostgres) -> Iterator[Fleet]:
    """The queue on the test's own broker (crashed and started again by the test); the state
    on the shared test server."""
    world = make_world()
    with Sandbox(world) as sandbox:
        crew = Fleet(tmp_path, world, sandbox, postgres_url, broker=broker)
        try:
            yield crew
        finally:
            crew.close()
            Requester.resetConnectionClasses()


def every_pull() -> list[tuple[str, int]]:
    return [(repo, n) for repos in INSTALLATIONS.values() for repo in repos for n in PULLS]


def one_each(world: World, pulls: list[tuple[str, int]] | None = None) -> bool:
    return all(len(own(world, repo, n)) == 1 for repo, n in pulls or every_pull())


def says(world: World, repo: str, number: int, check: str) -> bool:
    found = own(world, repo, number)
    return len(found) == 1 and f"`{check}`" in found[0]["body"]


def installation_of_request(world: World, request: Any) -> int | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    rec = world.token_record(token.strip()) if scheme.lower() in ("token", "bearer") else None
    return None if rec is None else rec.installation_id


REPO_PATH = re.compile(r"/repos/([^/]+/[^/]+)/")


DONE = re.compile(r"job \d+ done \((?P<repo>[^,#]+), installation \d+\): (?P<reason>[a-z]+)")


def done_jobs(fleet: Fleet, reason: str = "schedule") -> list[str]:
    """The repositories of every repository job the workers finished (`reason`), in order."""
    return [m["repo"] for m in DONE.finditer(fleet.logs_text()) if m["reason"] == reason]


def writes(sandbox: Sandbox, repo: str = "") -> list[Any]:
    """The comment writes GitHub (the sandbox) accepted, of `repo` or of any."""
    return [r for r in sandbox.requests if r.method in ("POST", "PATCH", "DELETE")
            and "/issues/" in r.path and r.status < 300 and f"/repos/{repo}" in r.path]  # fmt: skip


def enqueue(fleet: Fleet, *jobs: Any) -> None:
    """Queue jobs as `run` does (as a worker finds them), through the bot's own queue."""
    from bot.service.queue import JobQueue

    queue = JobQueue(fleet.db_url)
    try:
        for job in jobs:
            queue.enqueue(job)
    finally:
        queue.close()


def test_every_repository_of_every_installation_is_worked_by_the_workers_with_its_own_token(
    fleet: Fleet,
) -> None:
    """Discovery, the spread schedule and the workers: one comment on every pull request of
    every installation, each installation's reads under its own token, renewed as it expires;
    a second reconcile of every repository finds nothing new and writes nothing."""
    from bot.service.queue import Job

    fleet.world.token_lifetime = timedelta(seconds=22)  # renewed 20 s before: every 2 s
    fleet.start_run("w1", "w2")
    wait_for(lambda: one_each(fleet.world), INTERVAL_S + 45, "a comment on every pull request")
    paths = [r.path for r in fleet.sandbox.requests]
    assert "/app/installations" in paths
    listings = [r for r in fleet.sandbox.requests if r.path == "/installation/repositories"]
    assert {installation_of_request(fleet.world, r) for r in listings} >= set(INSTALLATIONS)
    serves = {repo: iid for iid, repos in INSTALLATIONS.items() for repo in repos}
    wait_for(lambda: set(done_jobs(fleet)) >= set(serves), 30, "every repository's job ended")
    # the schedule's job of every repository once more (as its next pass queues them): warm
    wrote, before = len(writes(fleet.sandbox)), len(done_jobs(fleet))
    enqueue(fleet, *(Job(iid, repo) for repo, iid in serves.items()))
    wait_for(lambda: len(done_jobs(fleet)) >= before + len(serves), 60, "the second jobs done")
    assert len(writes(fleet.sandbox)) == wrote, "a warm reconcile wrote"
    assert one_each(fleet.world)
    for request in fleet.sandbox.requests:
        match = REPO_PATH.match(request.path)
        if match and match[1] in serves and request.route != "installation":
            assert installation_of_request(fleet.world, request) == serves[match[1]], request.path
    assert not [r for r in fleet.sandbox.requests if r.status == 401], "a token was refused"
    assert outside_allowlist(fleet.sandbox) == []
    tokens = [r for r in fleet.sandbox.requests if r.path.endswith("/access_tokens")]
    assert len(tokens) > len(INSTALLATIONS), "no installation token was renewed"


def test_a_webhook_is_a_job_at_once_and_duplicate_deliveries_make_one_comment(
    fleet: Fleet,
) -> None:
    """A delivery is queued before it is answered (one waiting job per pull request however
    many deliveries come); a repeated delivery is harmless; the comment says the new check."""
    fleet.start_run()
    answer = fleet.check_run("octo/a", 1, "lint")
    assert answer.status_code == 202 and answer.json()["outcome"] == "marked"
    waiting = [j for j in fleet.jobs() if j["args"].get("number") == 1]
    assert [j["queueing_lock"] for j in waiting] == ["pull:11:octo/a#1"]
    run = red(fleet.world, "octo/a", 1, "lint")
    payload = check_run_payload(fleet.world, "completed", run)
    for _ in range(3):  # GitHub's redelivery (same id) and two more deliveries of the change
        fleet.deliver("check_run", payload, delivery="same-delivery")
        fleet.deliver("check_run", payload)
    assert len(fleet.open_jobs("octo/a", 1)) == 1
    fleet.start("w1")
    wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 60, "the comment names lint")
    wait_for(lambda: not fleet.open_jobs("octo/a", 1), 30, "no job of octo/a#1 is left")
    assert len(own(fleet.world, "octo/a", 1)) == 1
    logged = fleet.log("w1")
    assert "(octo/a#1, installation 11): webhook" in logged, logged


def test_installation_changes_drop_their_jobs_with_a_reason_and_never_two_comments(
    fleet: Fleet,
) -> None:
    """A repository removed from its installation, an installation suspended, one deleted and
    a webhook for it afterwards: no read or write for them, each reason in the logs; an
    added repository is worked."""
    from bot.service.queue import Job

    fleet.start_run()
    world = fleet.world
    world.set_installation_repos(11, ["octo/a"])  # octo/b removed
    payload = installation_payload(world, "installation_repositories", "removed", 11,
                                   removed=("octo/b",))  # fmt: skip
    assert fleet.deliver("installation_repositories", payload).json()["outcome"] == (
        "installations-changed"
    )
    world.suspend_installation(12)
    fleet.deliver("installation", installation_payload(world, "installation", "suspend", 12))
    deleted = installation_payload(world, "installation", "deleted", 13)
    world.delete_installation(13)
    fleet.deliver("installation", deleted)
    wait_for(lambda: "repositories: 1 (" in fleet.log("run"), 30, "the directory read again")
    # a webhook for the installation the App no longer has: no job, and why
    answer = fleet.check_run("zeta/d", 1, "late")
    assert answer.json()["outcome"] == "unconfigured-repository"
    assert "its repository is in no installation of the App now" in fleet.log("run")
    assert not fleet.open_jobs("zeta/d", 1)
    fleet.start("w1")
    fleet.check_run("octo/a", 1, "lint")
    wait_for(lambda: says(world, "octo/a", 1, "lint"), 60, "octo/a#1 is worked")
    # jobs queued before the changes were known (as a worker finds them): dropped, with why
    enqueue(
        fleet,
        *(
            Job(iid, repo, 2, reason="webhook")
            for iid, repo in ((11, "octo/b"), (12, "acme/c"), (13, "zeta/d"))
        ),
    )
    for why in ("octo/b was removed from installation 11", "installation 12 (acme) is "
                "suspended", "installation 13 no longer has the App"):  # fmt: skip
        wait_for(lambda why=why: re.search(rf"dropped \(.*{re.escape(why)}.*nothing read or",
                                           fleet.log("w1")) is not None,
                 30, f"a job dropped: {why}")  # fmt: skip
    for repo in ("octo/b", "acme/c", "zeta/d"):
        assert not writes(fleet.sandbox, repo), repo
        assert not [
            r
            for r in fleet.sandbox.requests
            if f"/repos/{repo}/" in r.path and installation_of_request(world, r) is not None
        ], f"{repo} was read"
    # a repository added to an installation is worked at once
    world.add_repo("octo/e")
    world.add_pull("octo/e", 1, title="new", author="alice", head_sha=head("octo/e", 1))
    world.set_installation_repos(11, ["octo/a", "octo/e"])
    fleet.deliver("installation_repositories", installation_payload(
        world, "installation_repositories", "added", 11, added=("octo/e",)))  # fmt: skip
    wait_for(lambda: len(own(world, "octo/e", 1)) == 1, 60, "the added repository is worked")
    assert one_each(world, [("octo/a", 1), ("octo/e", 1)])


def test_installations_removed_or_suspended_on_github_mid_job_write_nothing_and_say_why(
    fleet: Fleet,
) -> None:
    """GitHub has dropped one installation and suspended another, but no webhook told `run`
    yet (jobs in flight): their tokens are refused, the jobs end without a write, GitHub's
    answer in the log, the comments as they were."""
    fleet.start_run("w1")
    fleet.check_run("acme/c", 1, "before")
    fleet.check_run("octo/a", 1, "before")
    wait_for(lambda: says(fleet.world, "acme/c", 1, "before")
             and says(fleet.world, "octo/a", 1, "before"), 90, "both worked")  # fmt: skip
    fleet.world.delete_installation(12)  # GitHub knows; the bot's directory does not
    fleet.world.suspend_installation(11)
    fleet.check_run("acme/c", 1, "after-uninstall")
    fleet.check_run("octo/a", 1, "after-suspend")
    refused = re.compile(r"job \d+ failed \((?P<repo>[^,]+), installation \d+\): webhook: "
                         r"GitHub refused a read: .*; nothing written")  # fmt: skip
    wait_for(lambda: {m["repo"] for m in refused.finditer(fleet.log("w1"))}
             >= {"acme/c#1", "octo/a#1"}, 60, "both jobs' reasons")  # fmt: skip
    assert not says(fleet.world, "acme/c", 1, "after-uninstall")
    assert not says(fleet.world, "octo/a", 1, "after-suspend")
    assert one_each(fleet.world, [("acme/c", 1), ("octo/a", 1)])


def test_a_rate_limited_installation_waits_for_its_reset_and_delays_no_other(
    fleet: Fleet,
) -> None:
    """Installation 11 has no GraphQL budget left until its reset: its job waits for it on the
    queue (the "limited until" mark at GitHub's reset, /metrics says until when) while
    installation 12's job is done and never held; 11's comment is written after the reset."""
    fleet.sandbox.set_installation_rate_limit(11, "graphql", remaining=0,
                                              reset_after_refusal_s=12)  # fmt: skip
    fleet.start_run("w1")
    fleet.check_run("octo/a", 1, "lint")
    fleet.check_run("acme/c", 1, "lint")
    wait_for(lambda: says(fleet.world, "acme/c", 1, "lint"), 90, "installation 12 worked")
    assert not re.search(r"held \(acme/c", fleet.log("w1")), fleet.log("w1")
    wait_for(lambda: any(r.status == 403 and installation_of_request(fleet.world, r) == 11
                         for r in fleet.sandbox.requests), 60, "GitHub refused 11")  # fmt: skip
    reset_at = fleet.sandbox.installation_rate_limit(11, "graphql")["reset"]

    def limit_in_metrics() -> float | None:
        text = fleet.get("/metrics").text
        found = re.search(r'installation_limited_until_timestamp_seconds\{installation="11"\} '
                          r"(\S+)", text)  # fmt: skip
        return None if found is None else float(found[1])

    wait_for(lambda: limit_in_metrics() is not None, 30, "/metrics names installation 11's limit")
    until = limit_in_metrics() or 0.0
    assert abs(until - reset_at) < 3, f"limited until {until}, GitHub's reset {reset_at}"
    held = re.search(r"held \(octo/[ab](#1)?, installation 11\): \w+: installation (11 waits: "
                     r"GitHub rate-limited it|limited: ).*queued again for \d\d:\d\d:\d\d UTC",
                     fleet.log("w1"))  # fmt: skip
    assert held is not None, fleet.log("w1")
    wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 90, "11 after its reset")
    first = min(r.at for r in writes(fleet.sandbox, "octo/a"))
    assert first >= reset_at, f"installation 11 wrote {reset_at - first:.1f} s before its reset"
    assert max(r.at for r in writes(fleet.sandbox, "acme/c")) < first, "12 came after 11"
    assert len(own(fleet.world, "octo/a", 1)) == 1


def test_the_broker_crashing_holds_the_jobs_names_it_and_recovers(
    fleet_on_broker: Fleet,
) -> None:
    """The queue's PostgreSQL server is stopped at once (`pg_ctl stop -m immediate`) with a job
    waiting in it: /readyz 503 names the queue, a delivery's job is held by `run`, a worker
    started meanwhile waits; the server started again, both jobs are worked, nothing lost,
    one comment each, and `run` and the worker say the problem resolved."""
    fleet, broker = fleet_on_broker, fleet_on_broker.broker
    assert broker is not None
    fleet.start_run()
    wait_for(lambda: fleet.get("/readyz").status_code == 200, 60, "ready")
    fleet.check_run("octo/a", 1, "before-crash")
    assert len(fleet.open_jobs("octo/a", 1)) == 1  # waiting in the broker: no worker yet
    broker.crash()
    answer = fleet.get("/readyz")
    assert answer.status_code == 503, answer.text
    named = f"queue unreachable (postgresql://127.0.0.1:{broker.port}/postgres): "
    assert named in answer.text and "Connection refused" in answer.text, answer.text
    delivered = fleet.check_run("octo/a", 2, "during-crash")
    assert delivered.status_code == 202
    wait_for(lambda: "problem started: queue" in fleet.log("run"), 20, "run logs the problem")
    scraped = fleet.get("/metrics").text
    # the delivery is held; a schedule's repository job that fell due in the outage is too
    held = re.search(r"^ci_status_bot_queue_held_jobs (\d+)\.0$", scraped, re.MULTILINE)
    assert held is not None and int(held.group(1)) >= 1, scraped
    assert "ci_status_bot_queue_up 0.0" in scraped, scraped
    fleet.start("w1")
    wait_for(lambda: "problem started: queue" in fleet.log("w1"), 60, "the worker waits")
    broker.start()
    wait_for(lambda: says(fleet.world, "octo/a", 1, "before-crash")
             and says(fleet.world, "octo/a", 2, "during-crash"), 90, "both worked")  # fmt: skip
    wait_for(lambda: fleet.get("/readyz").status_code == 200, 40, "ready again")
    # /readyz probes the queue itself; `run` says the problem resolved when its next tick has
    # queued what it held, and the worker when its next job is taken: each within a tick
    for who in ("run", "w1"):
        wait_for(lambda w=who: "problem resolved: queue" in fleet.log(w), 30, f"{who} resolved")
    assert "database system was interrupted" in broker.log()  # a real crash and its recovery
    assert one_each(fleet.world, [("octo/a", 1), ("octo/a", 2)])


def test_metrics_name_queue_depth_latency_and_budget_by_installation(fleet: Fleet) -> None:
    fleet.start_run()
    fleet.check_run("octo/a", 1, "lint")
    text = fleet.get("/metrics").text
    assert 'ci_status_bot_queue_jobs{status="todo"}' in text
    fleet.start("w1")
    wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 60, "worked")

    def latency() -> bool:
        text = fleet.get("/metrics").text
        found = re.search(r"^ci_status_bot_job_latency_jobs (\d+)", text, re.MULTILINE)
        return found is not None and int(found[1]) >= 1

    wait_for(latency, 30, "a job latency")
    text = fleet.get("/metrics").text
    assert re.search(r'ci_status_bot_installation_budget_remaining\{installation="11",'
                     r'resource="graphql"\} \d', text), text  # fmt: skip


def test_every_installation_without_a_queue_is_worked_by_one_process(
    tmp_path: Path,
) -> None:
    """`installations = "all"` with no queue (SQLite, one process): `once` and `run` work every
    repository of every active installation, each with its own token; the suspended
    installation's and the uninstalled one's repositories are not read; a webhook for the
    uninstalled one's repository is refused by name, one for a discovered one refreshes it;
    installation webhooks drop a removed repository and add an unsuspended installation's."""
    world = make_world()
    world.suspend_installation(12)
    world.delete_installation(13)
    with Sandbox(world) as sandbox:
        crew = Fleet(tmp_path, world, sandbox, "", queue=False)
        try:
            done = cli_process("once", "--config", str(crew.config))
            assert done.returncode == 0, done.stderr
            assert "installations: 2, repositories: 2" in done.stderr, done.stderr
            active = [("octo/a", n) for n in PULLS] + [("octo/b", n) for n in PULLS]
            assert one_each(world, active)
            for repo in ("acme/c", "zeta/d"):
                assert not [r for r in sandbox.requests if f"/repos/{repo}/" in r.path], repo
            for request in sandbox.requests:
                if REPO_PATH.match(request.path) and request.route != "installation":
                    assert installation_of_request(world, request) == 11, request.path
            crew.start_run()
            answer = crew.check_run("zeta/d", 1, "late")
            assert answer.json()["outcome"] == "unconfigured-repository"
            assert crew.check_run("octo/b", 2, "lint").json()["outcome"] == "marked"
            wait_for(lambda: says(world, "octo/b", 2, "lint"), 60, "the webhook's refresh")
            assert one_each(world, active)
            # every read of a failing pull request (its history too) under 11's token
            assert not [r.path for r in sandbox.requests if r.status == 401]
            # octo/b removed from installation 11 on GitHub while `run` runs: refused, named
            world.set_installation_repos(11, ["octo/a"])
            crew.check_run("octo/b", 1, "after-removal")
            wait_for(lambda: "name 'octo/b'" in crew.log("run"), 60, "GitHub's refusal logged")
            assert not says(world, "octo/b", 1, "after-removal")
            # ... and its webhook: the installations are read again, octo/b is dropped
            removed = installation_payload(world, "installation_repositories", "removed", 11,
                                           removed=("octo/b",))  # fmt: skip
            answer = crew.deliver("installation_repositories", removed)
            assert answer.json()["outcome"] == "installations-changed"
            wait_for(lambda: "1 repositories (0 added, 1 removed)" in crew.log("run"), 60,
                     "the installations read again")  # fmt: skip
            assert crew.check_run("octo/b", 1, "gone").json()["outcome"] == (
                "unconfigured-repository"
            )
            # installation 12 unsuspended: its webhook adds acme/c, worked at once
            with world.lock:
                world.installations[12].suspended_at = None
            crew.deliver("installation", installation_payload(world, "installation",
                                                              "unsuspend", 12))  # fmt: skip
            back = [("acme/c", n) for n in PULLS]
            wait_for(lambda: one_each(world, back), 90, "the unsuspended installation worked")
            assert one_each(world, active) and not says(world, "octo/b", 1, "gone")
            assert not own(world, "zeta/d", 1)
        finally:
            crew.close()
            Requester.resetConnectionClasses()


CHAOS_ROUNDS = 6
CHAOS_SEED = int(os.environ.get("CHAOS_SEED", "30"))
COMMENT_PATH = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)")


def no_older_stamp_after_a_newer(sandbox: Sandbox) -> None:
    """In the order GitHub received them, no comment's edits go back to an older lease
    generation (a worker thought dead that woke up wrote nothing over a newer one)."""
    from bot.render.stamp import generation_of

    seen: dict[str, int] = {}
    for request in sorted(sandbox.requests, key=lambda r: r.at):
        match = COMMENT_PATH.fullmatch(request.path)
        if request.method != "PATCH" or match is None or request.status >= 300:
            continue
        generation = generation_of(json.loads(request.body)["body"]) or 0
        assert generation >= seen.get(match["id"], 0), f"comment {match['id']} went back"
        seen[match["id"]] = generation


def test_chaos_three_workers_killed_at_random_and_a_broker_restart_leave_one_current_comment(
    fleet_on_broker: Fleet,
) -> None:
    """`run` and three workers; each round turns a new check red on pull request 1 of every
    repository (its webhook delivered to `run`), kills a random worker with SIGKILL at a random
    moment of the work that follows and starts another; once, the queue's PostgreSQL server
    is stopped at once (`-m immediate`) and started again. Within a bound, every pull request
    has exactly one comment, and those of pull request 1 name the last check."""
    import random

    fleet, broker = fleet_on_broker, fleet_on_broker.broker
    assert broker is not None
    chance = random.Random(CHAOS_SEED)
    fleet.start_run("w0", "w1", "w2")
    started = 3
    repos = [repo for repos in INSTALLATIONS.values() for repo in repos]
    check = ""
    for round_ in range(CHAOS_ROUNDS):
        check = f"chaos-{round_}"
        for repo in repos:
            fleet.check_run(repo, 1, check)
        time.sleep(chance.uniform(0.2, 2.5))
        victim = chance.choice(sorted(fleet.procs.keys() - {"run"}))
        fleet.kill(victim)
        fleet.start(f"w{started}")
        started += 1
        if round_ == CHAOS_ROUNDS // 2:  # the broker goes away for real, and comes back
            broker.crash()
            time.sleep(chance.uniform(1.0, 3.0))
            broker.start()
    last = check
    wait_for(lambda: all(says(fleet.world, repo, 1, last) for repo in repos)
             and one_each(fleet.world), 150, "one current comment each")  # fmt: skip
    wait_for(lambda: not any(fleet.open_jobs(repo, 1) for repo in repos), 60,
             "every pull request 1 job ended")  # fmt: skip
    assert one_each(fleet.world)
    assert all(says(fleet.world, repo, 1, last) for repo in repos)
    assert "database system was interrupted" in broker.log()
    no_older_stamp_after_a_newer(fleet.sandbox)


def test_a_job_whose_worker_is_killed_mid_job_is_put_back_and_done_once(fleet: Fleet) -> None:
    """A worker is killed (SIGKILL) while its job waits on a slow GitHub answer: another
    worker puts the job back once the dead one's heartbeat is stale, and does it; one comment."""
    fleet.sandbox.fail(
        "POST", "/graphql", delay_s=30, times=-1, when="acme", transform=lambda payload: payload
    )  # a slow answer, the real one
    fleet.start_run("w1")
    fleet.check_run("acme/c", 2, "killed")
    wait_for(lambda: re.search(r"Starting job .*acme/c", fleet.log("w1")) is not None, 60,
             "the worker took acme/c's job")  # fmt: skip
    fleet.kill("w1")
    fleet.sandbox.clear_failures()
    fleet.start("w2")
    wait_for(lambda: says(fleet.world, "acme/c", 2, "killed"), 90, "the job done by w2")
    logged = fleet.log("w2")
    assert "put back: its worker stopped beating its heartbeat" in logged or (
        "ended: its worker stopped beating its heartbeat" in logged
    ), logged
    wait_for(lambda: not fleet.open_jobs("acme/c", 2), 30, "no job of acme/c#2 is left")
    assert len(own(fleet.world, "acme/c", 2)) == 1


def test_discovery_follows_every_page_of_installations_and_of_their_repositories(
    tmp_path: Path,
) -> None:
    """More installations than a page (100 a page, as the bot asks) and an installation with
    more repositories than a page: every one found, through the pages' own next links."""
    from bot import app as wiring
    from bot.settings import load_settings

    world = World()
    many = [f"big/r{n}" for n in range(101)]
    for name in many:
        world.add_repo(name)
    world.add_app(slug=SLUG, app_id=APP_ID, installation_id=1, repos=many)
    for iid in range(2, 102):
        world.add_repo(f"org{iid}/only")
        world.add_app(slug=SLUG, app_id=APP_ID, installation_id=iid, repos=[f"org{iid}/only"])
    with Sandbox(world) as sandbox:
        crew = Fleet(tmp_path, world, sandbox, "", queue=False)
        settings = load_settings(str(crew.config), environ={})
        clients = wiring.build_clients(settings, [])
        try:
            found = clients.github.installations
            assert found is not None
            directory = found.discover()
        finally:
            clients.close()
            Requester.resetConnectionClasses()
    assert sorted(directory.installations) == list(range(1, 102))
    assert sorted(directory.installations[1].repos) == sorted(many)
    assert len(directory.repos()) == 101 + 100
    for path in ("/app/installations", "/installation/repositories"):
        pages = [r for r in sandbox.requests if r.path == path and r.query.get("page")]
        assert pages and all(r.status == 200 for r in pages), path
