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
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github.Requester import Requester
from support import TcpRelay, clean_env, free_port, outside_allowlist

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
    """The sandbox, the database (through a relay the test may cut), `run` and workers."""

    def __init__(self, folder: Path, world: World, sandbox: Sandbox, url: str) -> None:
        self.folder, self.world, self.sandbox = folder, world, sandbox
        host = urlsplit(url)
        self.relay = TcpRelay(host.hostname or "127.0.0.1", host.port or 5432)
        self.db_url = url
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, Path] = {}
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = folder / "app.pem"
        pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))  # fmt: skip
        queue = self.relay.url(url)  # the queue goes through the relay; the state does not
        lines = [
            "[github]", f'api_url = "{sandbox.github_url}"', 'installations = "all"',
            f"app_id = {APP_ID}", f'private_key_path = "{pem}"',
            "[readthedocs]", f'api_url = "{sandbox.rtd_url}"',
            f'business_api_url = "{sandbox.rtd_url}"', "max_retries = 1",
            "[state]", f'url = "{url}"', "lease_seconds = 3",
            "[queue]", f'url = "{queue}"', "stalled_seconds = 3", "jobs_per_worker = 2",
            "[schedule]", f"interval_seconds = {INTERVAL_S}", "jitter_seconds = 0",
            "[server]", 'host = "127.0.0.1"', f"port = {self.port}",
            "[webhooks]", f'secrets = ["{SECRET}"]',
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

    def start_run(self) -> None:
        """`run`, answering on its port."""
        self.start("run", "run")
        wait_for(self.alive, 150, "`run` serves /livez")

    def alive(self) -> bool:
        try:
            return httpx.get(self.base + "/livez", timeout=2).status_code == 200
        except httpx.TransportError:
            assert self.procs["run"].poll() is None, self.log("run")
            return False

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
        with psycopg.connect(self.db_url) as conn:
            rows = conn.execute(
                "SELECT status::text, args, queueing_lock FROM procrastinate_jobs"
            ).fetchall()
        return [{"status": r[0], "args": r[1], "queueing_lock": r[2]} for r in rows]

    def close(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
        self.relay.close()


@pytest.fixture
def fleet(tmp_path: Path, postgres_url: str) -> Iterator[Fleet]:
    world = make_world()
    with Sandbox(world) as sandbox:
        crew = Fleet(tmp_path, world, sandbox, postgres_url)
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


def test_every_repository_of_every_installation_is_worked_by_the_workers_with_its_own_token(
    fleet: Fleet,
) -> None:
    """Discovery, the spread schedule and the workers: one comment on every pull request of
    every installation, each installation's reads under its own token, renewed as it expires."""
    fleet.world.token_lifetime = timedelta(seconds=24)  # renewed 20 s before: every few s
    fleet.start_run()
    fleet.start("w1")
    fleet.start("w2")
    wait_for(lambda: one_each(fleet.world), INTERVAL_S + 45, "a comment on every pull request")
    paths = [r.path for r in fleet.sandbox.requests]
    assert "/app/installations" in paths
    listings = [r for r in fleet.sandbox.requests if r.path == "/installation/repositories"]
    assert {installation_of_request(fleet.world, r) for r in listings} >= set(INSTALLATIONS)
    serves = {repo: iid for iid, repos in INSTALLATIONS.items() for repo in repos}
    for request in fleet.sandbox.requests:
        match = REPO_PATH.match(request.path)
        if match and match[1] in serves and request.route != "installation":
            assert installation_of_request(fleet.world, request) == serves[match[1]], request.path
    assert not [r for r in fleet.sandbox.requests if r.status == 401], "a token was refused"
    assert outside_allowlist(fleet.sandbox) == []
    # the second pass of the schedule finds nothing new: no write, one comment each
    time.sleep(8)
    tokens = [r for r in fleet.sandbox.requests if r.path.endswith("/access_tokens")]
    assert len(tokens) > len(INSTALLATIONS), "no installation token was renewed"
    assert one_each(fleet.world)


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
    waiting = [j for j in fleet.jobs() if j["args"].get("repo") == "octo/a"]
    assert len([j for j in waiting if j["args"].get("number") == 1]) == 1
    fleet.start("w1")
    wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 30, "the comment names lint")
    time.sleep(3)
    assert len(own(fleet.world, "octo/a", 1)) == 1
    logged = fleet.log("w1")
    assert "(octo/a#1, installation 11): webhook" in logged, logged


def test_installation_changes_drop_their_jobs_with_a_reason_and_never_two_comments(
    fleet: Fleet,
) -> None:
    """A repository removed from its installation, an installation suspended, one deleted and
    a webhook for it afterwards: no read or write for them, each reason in the logs; an
    added repository is worked."""
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
    wait_for(lambda: "repositories: 1 (" in fleet.log("run"), 20, "the directory read again")
    # a webhook for the deleted installation's repository: no job
    answer = fleet.check_run("zeta/d", 1, "late")
    assert answer.json()["outcome"] == "unconfigured-repository"
    assert "no job" in fleet.log("run")
    # a job queued before the removal (as a worker would find it): dropped with its reason
    fleet.start("w1")
    fleet.check_run("octo/a", 1, "lint")
    wait_for(lambda: says(world, "octo/a", 1, "lint"), 40, "octo/a#1 is worked")
    for repo in ("octo/b", "acme/c", "zeta/d"):
        assert own(world, repo, 1) == [] or len(own(world, repo, 1)) == 1
    writes = [r for r in fleet.sandbox.requests if r.method in ("POST", "PATCH")
              and "/issues/" in r.path]  # fmt: skip
    assert not [w for w in writes if "/octo/b/" in w.path or "/acme/c/" in w.path
                or "/zeta/d/" in w.path]  # fmt: skip
    # jobs queued before the changes were known (as a worker finds them): dropped, with why
    from bot.service.queue import Job, JobQueue

    queue = JobQueue(fleet.db_url)
    try:
        for iid, repo in ((11, "octo/b"), (12, "acme/c"), (13, "zeta/d")):
            queue.enqueue(Job(iid, repo, 2, reason="webhook"))
    finally:
        queue.close()
    for why in ("octo/b was removed from installation 11", "installation 12 (acme) is "
                "suspended", "installation 13 no longer has the App"):  # fmt: skip
        wait_for(lambda why=why: "dropped (" in fleet.log("w1") and why in fleet.log("w1"),
                 30, f"a job dropped: {why}")  # fmt: skip
    assert not own(world, "octo/b", 2) and not own(world, "acme/c", 2)
    # a repository added to an installation is worked at once
    world.add_repo("octo/e")
    world.add_pull("octo/e", 1, title="new", author="alice", head_sha=head("octo/e", 1))
    world.set_installation_repos(11, ["octo/a", "octo/e"])
    fleet.deliver("installation_repositories", installation_payload(
        world, "installation_repositories", "added", 11, added=("octo/e",)))  # fmt: skip
    wait_for(lambda: len(own(world, "octo/e", 1)) == 1, 40, "the added repository is worked")


def test_an_installation_removed_on_github_mid_job_writes_nothing_and_says_why(
    fleet: Fleet,
) -> None:
    """GitHub has dropped the installation but no webhook told `run` yet (a job in flight):
    its token is refused, the job ends without a write, GitHub's answer in the log."""
    fleet.start_run()
    fleet.start("w1")
    wait_for(lambda: len(own(fleet.world, "acme/c", 1)) == 1, INTERVAL_S + 40, "acme/c worked")
    fleet.world.delete_installation(12)  # GitHub knows; the bot's directory does not
    fleet.check_run("acme/c", 1, "after-uninstall")
    wait_for(lambda: "GitHub refused a read" in fleet.log("w1"), 30, "the job's reason")
    assert not says(fleet.world, "acme/c", 1, "after-uninstall")
    assert len(own(fleet.world, "acme/c", 1)) == 1


def test_a_rate_limited_installation_waits_for_its_reset_and_delays_no_other(
    fleet: Fleet,
) -> None:
    """Installation 11 has no GraphQL budget left until its reset: its job waits for it (the
    "limited until" mark, /metrics says until when) while installation 12's job is done."""
    fleet.start_run()
    fleet.start("w1")
    fleet.sandbox.set_installation_rate_limit(11, "graphql", remaining=0, reset_in_s=75)
    fleet.check_run("octo/a", 1, "lint")
    fleet.check_run("acme/c", 1, "lint")
    wait_for(lambda: says(fleet.world, "acme/c", 1, "lint"), 60, "installation 12 worked")
    assert not own(fleet.world, "octo/a", 1)
    wait_for(lambda: "installation_limited_until" in httpx.get(fleet.base + "/metrics").text
             and 'installation="11"' in httpx.get(fleet.base + "/metrics").text, 20,
             "/metrics names installation 11's limit")  # fmt: skip
    assert "installation 11 waits: GitHub rate-limited it" in fleet.log("w1"), fleet.log("w1")
    took = wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 120, "11 after its reset")
    assert took > 5, "installation 11 did not wait for its reset"
    assert len(own(fleet.world, "octo/a", 1)) == 1


def test_the_queue_going_away_holds_the_jobs_names_it_and_recovers(fleet: Fleet) -> None:
    """The queue's database is cut: /readyz 503 names the queue, a delivery's job is held by
    `run`; restored, the job is queued and worked: one comment, nothing lost."""
    fleet.start_run()
    fleet.start("w1")
    wait_for(lambda: httpx.get(fleet.base + "/readyz").status_code == 200, 40, "ready")
    wait_for(lambda: "Starting worker on queues" in fleet.log("w1"), 30, "the worker works")
    fleet.relay.cut()
    answer = httpx.get(fleet.base + "/readyz", timeout=20)
    assert answer.status_code == 503 and "queue unreachable" in answer.text, answer.text
    delivered = fleet.check_run("octo/a", 2, "during-outage")
    assert delivered.status_code == 202
    wait_for(lambda: "problem started: queue" in fleet.log("run"), 10, "run logs the problem")
    time.sleep(2)
    fleet.relay.restore()
    wait_for(lambda: says(fleet.world, "octo/a", 2, "during-outage"), 60, "worked after")
    wait_for(lambda: httpx.get(fleet.base + "/readyz").status_code == 200, 30, "ready again")
    assert "problem resolved: queue" in fleet.log("run")
    assert len(own(fleet.world, "octo/a", 2)) == 1


def test_metrics_name_queue_depth_latency_and_budget_by_installation(fleet: Fleet) -> None:
    fleet.start_run()
    fleet.check_run("octo/a", 1, "lint")
    text = httpx.get(fleet.base + "/metrics").text
    assert 'ci_status_bot_queue_jobs{status="todo"}' in text
    fleet.start("w1")
    wait_for(lambda: says(fleet.world, "octo/a", 1, "lint"), 30, "worked")

    def latency() -> bool:
        text = httpx.get(fleet.base + "/metrics").text
        return "ci_status_bot_job_latency_jobs 1.0" in text or (
            "ci_status_bot_job_latency_jobs" in text
            and "ci_status_bot_job_latency_jobs 0.0" not in text
        )

    wait_for(latency, 30, "a job latency")
    text = httpx.get(fleet.base + "/metrics").text
    assert re.search(r'ci_status_bot_installation_budget_remaining\{installation="11",'
                     r'resource="graphql"\} \d', text), text  # fmt: skip


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


def test_chaos_three_workers_killed_at_random_and_a_queue_restart_leave_one_current_comment(
    fleet: Fleet,
) -> None:
    """`run` and three workers; each round turns a new check red on pull request 1 of every
    repository (its webhook delivered to `run`), kills a random worker with SIGKILL at a random
    moment of the work that follows and starts another; once, the queue's database goes away
    and comes back. Within a bound, every pull request has exactly one comment, and those of
    pull request 1 name the last check."""
    import random

    chance = random.Random(CHAOS_SEED)
    fleet.start_run()
    for n in range(3):
        fleet.start(f"w{n}")
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
        if round_ == CHAOS_ROUNDS // 2:  # the queue's database restarts
            fleet.relay.cut()
            time.sleep(3)
            fleet.relay.restore()
    last = check
    wait_for(lambda: all(says(fleet.world, repo, 1, last) for repo in repos)
             and one_each(fleet.world), 150, "one current comment each")  # fmt: skip
    time.sleep(3)  # nothing more is written: still one each
    assert one_each(fleet.world)
    no_older_stamp_after_a_newer(fleet.sandbox)


def test_a_job_whose_worker_is_killed_mid_job_is_put_back_and_done_once(fleet: Fleet) -> None:
    """A worker is killed (SIGKILL) while its job waits on a slow GitHub answer: another
    worker puts the job back once the dead one's heartbeat is stale, and does it; one comment."""
    fleet.start_run()
    fleet.sandbox.fail(
        "POST", "/graphql", delay_s=30, times=-1, when="acme", transform=lambda payload: payload
    )  # a slow answer, the real one
    fleet.start("w1")
    fleet.check_run("acme/c", 2, "killed")
    wait_for(lambda: "Starting job" in fleet.log("w1") and "acme/c" in fleet.log("w1"), 60,
             "the worker took acme/c's job")  # fmt: skip
    time.sleep(1)
    fleet.kill("w1")
    fleet.sandbox.clear_failures()
    fleet.start("w2")
    wait_for(lambda: says(fleet.world, "acme/c", 2, "killed"), 90, "the job done by w2")
    logged = fleet.log("w2")
    assert "put back: its worker stopped beating its heartbeat" in logged or (
        "ended: its worker stopped beating its heartbeat" in logged
    ), logged
    time.sleep(2)
    assert len(own(fleet.world, "acme/c", 2)) == 1
