"""Three `run` replicas on one real PostgreSQL (issue 18): kill -9 and a pause lose nothing.

Real subprocesses share three repositories of the sandbox by lease. Each round turns a new
check red on a pull request of every repository (the sandbox sends the signed check_run
deliveries to a live replica), kills a replica with SIGKILL at a random point of the writes
that follow, and starts a new one; within lease_seconds plus two intervals every comment
says so. Never a second comment; in the order GitHub received them, no comment's writes go
back to an older lease generation. Once, a replica is paused (SIGSTOP) past its lease and
resumed: it writes nothing stale.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import LOGIN, LOOPBACK, TOKEN, clean_env, free_port

from bot.render.stamp import generation_of
from bot_sandbox import Sandbox, World
from bot_sandbox.webhook_sender import WebhookSender

REPOS = ("octo/r0", "octo/r1", "octo/r2")
PULLS = (1, 2)
SECRET = "chaos-secret"
LEASE_S = 3.0
INTERVAL_S = 30  # the least a cycle interval may be; the takeover does not wait for it
ROUNDS = 10
SEED = int(os.environ.get("CHAOS_SEED", "18"))
COMMENT = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)")


def sha(repo: str, number: int) -> str:
    """A head sha per pull request."""
    return f"{REPOS.index(repo) + 1:x}{number:x}".ljust(40, "c")


def seed(world: World) -> None:
    """Three repositories, two green pull requests each."""
    world.add_user(login=LOGIN, token=TOKEN)
    done = datetime.now(UTC) - timedelta(hours=1)
    for repo in REPOS:
        world.add_repo(repo)
        for number in PULLS:
            head = sha(repo, number)
            world.add_pull(repo, number, title=f"pr {number}", author="alice", head_sha=head)
            world.add_check_run(
                repo, head, name="tests", app_slug="github-actions", workflow="ci",
                started_at=done, completed_at=done,
            )  # fmt: skip


class Replica:
    """One `ci-status-bot run` subprocess with its own port."""

    def __init__(self, folder: Path, sandbox: Sandbox, url: str) -> None:
        folder.mkdir(parents=True)
        self.port = free_port()
        lines = [
            "[github]", f'api_url = "{sandbox.github_url}"', f'token = "{TOKEN}"',
            "[readthedocs]", f'api_url = "{sandbox.rtd_url}"',
            f'business_api_url = "{sandbox.rtd_url}"', "max_retries = 1",
            "[state]", f'path = "{folder / "unused.sqlite3"}"', f'url = "{url}"',
            f"lease_seconds = {LEASE_S}",
            "[schedule]", f"interval_seconds = {INTERVAL_S}", "jitter_seconds = 0",
            "[server]", 'host = "127.0.0.1"', f"port = {self.port}",
            "[webhooks]", f'secrets = ["{SECRET}"]', "debounce_seconds = 0",
            "[policy]", "min_seconds_between_writes = 1",
            *(f'[[repos]]\nname = "{repo}"' for repo in REPOS),
        ]  # fmt: skip
        config = folder / "bot.toml"
        config.write_text("\n".join(lines) + "\n")
        self.log = (folder / "stderr.txt").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config)],
            env=clean_env(), stdout=subprocess.DEVNULL, stderr=self.log,
        )  # fmt: skip

    @property
    def webhook(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhook"

    def ready(self) -> bool:
        """Whether /readyz answers (200 or 503: it serves)."""
        try:
            return LOOPBACK.get(f"http://127.0.0.1:{self.port}/livez", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def fleet(tmp_path: Path, postgres_url: str) -> Iterator[tuple[World, Sandbox, list[Replica]]]:
    world = World()
    seed(world)
    replicas: list[Replica] = []
    with Sandbox(world) as sandbox:
        try:
            yield world, sandbox, replicas
        finally:
            for replica in replicas:
                if replica.proc.poll() is None:
                    os.kill(replica.proc.pid, signal.SIGCONT)
                replica.end()


def own(world: World, repo: str, number: int) -> list[dict[str, Any]]:
    return [
        c
        for c in world.comments(repo, number)
        if c["user"]["login"] == LOGIN and c["body"].startswith("<!-- ci-status-bot")
    ]


def wait_for(predicate: Any, timeout: float, what: str, *, why: Any = None) -> float:
    """Seconds until `predicate()`; past `timeout`, fail saying `what` and `why()`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            detail = f"\n{why()}" if why is not None else ""
            raise AssertionError(f"not within {timeout:.0f} s: {what}{detail}")
        time.sleep(0.1)
    return time.monotonic() - started


def report(world: World, replicas: list[Replica], check: str) -> str:
    """What a miss needs to be understood: the comments not current, what each replica did."""
    lines = []
    for repo in REPOS:
        for number in PULLS:
            comments = own(world, repo, number)
            if len(comments) != 1 or (number == 1 and f"`{check}`" not in comments[0]["body"]):
                lines.append(f"{repo}#{number}: {len(comments)} comments, not naming {check}")
    told = re.compile(r"lease|refresh|cycle:|held|problem|stopp|Traceback")
    for replica in replicas:
        state = "exited" if replica.proc.poll() is not None else "running or paused"
        log = Path(replica.log.name).read_text(encoding="utf-8").splitlines()
        lines.append(f"-- {replica.log.name} (pid {replica.proc.pid}, {state}):")
        lines.extend([line for line in log if told.search(line)][-15:])
    return "\n".join(lines)


def current(world: World, check: str) -> bool:
    """Every pull request 1 has one comment and it names `check`; the others have one."""
    for repo in REPOS:
        for number in PULLS:
            comments = own(world, repo, number)
            if len(comments) != 1:
                return False
            if number == 1 and f"`{check}`" not in comments[0]["body"]:
                return False
    return True


def assert_no_duplicate_and_no_older_stamp(world: World, sandbox: Sandbox) -> None:
    for repo in REPOS:
        for number in PULLS:
            assert len(own(world, repo, number)) == 1, f"{repo}#{number}: a second comment"
    seen: dict[str, int] = {}
    for request in sorted(sandbox.requests, key=lambda r: r.at):
        match = COMMENT.fullmatch(request.path)
        if request.method != "PATCH" or match is None or request.status >= 300:
            continue
        generation = generation_of(json.loads(request.body)["body"])
        assert generation is not None and generation >= 1
        before = seen.get(match["id"], 0)
        assert generation >= before, (
            f"comment {match['id']}: generation {generation} after {before}"
        )
        seen[match["id"]] = generation


def red(world: World, check: str) -> None:
    """A new failing check run on pull request 1 of every repository."""
    now = datetime.now(UTC)
    for repo in REPOS:
        world.add_check_run(
            repo, sha(repo, 1), name=check, app_slug="github-actions", workflow="chaos",
            conclusion="failure", started_at=now, completed_at=now,
        )  # fmt: skip


def test_kill_9_at_random_points_and_a_pause_past_the_lease(
    fleet: tuple[World, Sandbox, list[Replica]], tmp_path: Path, postgres_url: str
) -> None:
    world, sandbox, replicas = fleet
    rng = random.Random(SEED)
    for index in range(3):
        replicas.append(Replica(tmp_path / f"replica{index}", sandbox, postgres_url))
    wait_for(lambda: current(world, "tests"), 90, "every pull request commented once")
    live = list(replicas)
    sender = WebhookSender(live[0].webhook, SECRET).attach(world)
    bound = LEASE_S + 2 * INTERVAL_S
    took: list[float] = []
    try:
        for round_ in range(ROUNDS):
            victim = rng.choice(live)
            sender.url = next(r for r in live if r is not victim).webhook
            check = f"chaos-{round_}"
            red(world, check)
            time.sleep(rng.uniform(0.0, 2.0))  # somewhere in the writes that follow
            victim.proc.send_signal(signal.SIGKILL)
            victim.end()
            live.remove(victim)
            newcomer = Replica(tmp_path / f"replica{len(replicas)}", sandbox, postgres_url)
            replicas.append(newcomer)
            live.append(newcomer)
            took.append(wait_for(lambda c=check: current(world, c), bound, f"{check} shown",
                                 why=lambda c=check: report(world, replicas, c)))  # fmt: skip
            assert_no_duplicate_and_no_older_stamp(world, sandbox)
        paused = rng.choice(live)
        sender.url = next(r for r in live if r is not paused).webhook
        os.kill(paused.proc.pid, signal.SIGSTOP)
        time.sleep(LEASE_S + 1)  # past its lease: the others take its repositories over
        red(world, "chaos-paused")
        took.append(wait_for(lambda: current(world, "chaos-paused"), bound, "shown, one paused",
                             why=lambda: report(world, replicas, "chaos-paused")))  # fmt: skip
        os.kill(paused.proc.pid, signal.SIGCONT)
        time.sleep(LEASE_S)  # it resumes with stale plans: its writes must be refused
        assert current(world, "chaos-paused")
        assert_no_duplicate_and_no_older_stamp(world, sandbox)
        assert paused.proc.poll() is None  # it lives on, as a replica without those leases
    finally:
        sender.close()
    print(f"rounds worked again after {', '.join(f'{t:.1f}' for t in took)} s (bound {bound} s)")


def test_readyz_names_the_leases_and_a_webhook_to_either_replica_is_refreshed_by_the_holder(
    fleet: tuple[World, Sandbox, list[Replica]], tmp_path: Path, postgres_url: str
) -> None:
    world, sandbox, replicas = fleet
    first = Replica(tmp_path / "first", sandbox, postgres_url)
    replicas.append(first)
    wait_for(lambda: current(world, "tests"), 90, "every pull request commented once")
    base = f"http://127.0.0.1:{first.port}"
    answer = LOOPBACK.get(base + "/readyz", timeout=5)
    from bot.state.store import Store

    with Store.open(postgres_url) as store:
        epoch = store.epoch
    held = f"ready; leases held: {', '.join(REPOS)}; state epoch {epoch}\n"
    assert answer.status_code == 200 and answer.text == held, answer.text
    assert "ci_status_bot_leases_held 3.0" in LOOPBACK.get(base + "/metrics", timeout=5).text
    second = Replica(tmp_path / "second", sandbox, postgres_url)
    replicas.append(second)
    wait_for(second.ready, 60, "the second replica serves")
    # the first makes room within a third of the lease; the second takes what it gave up
    wait_for(
        lambda: "leases held: octo" in LOOPBACK.get(f"http://127.0.0.1:{second.port}/readyz").text,
        LEASE_S * 3, "the second replica holds a lease",
    )  # fmt: skip
    held = LOOPBACK.get(base + "/readyz", timeout=5).text
    assert held.startswith("ready; leases held: ") and held.count("octo/") <= 2
    sender = WebhookSender(second.webhook, SECRET).attach(world)  # every delivery to one
    try:
        started = time.monotonic()
        red(world, "hooked")
        # debounce_seconds (0) + 1 s and the writes' pacing when idle (3.9 s at load 20); the
        # bound is no scheduled polling cycle's. Still wall-clock: the holders' 'webhook
        # refresh:' lines once summed fewer than the three edits (a cycle after the lease
        # change above may have made one; not verified), so they cannot stand in for it.
        took = wait_for(lambda: current(world, "hooked"), INTERVAL_S / 2, "refreshed by holders",
                        why=lambda: report(world, replicas, "hooked"))  # fmt: skip
    finally:
        sender.close()
    print(f"webhook to one replica: every holder's comment current after {took:.1f} s")
    assert time.monotonic() - started < INTERVAL_S  # no polling cycle did it
    assert_no_duplicate_and_no_older_stamp(world, sandbox)


def test_a_replica_holding_nothing_while_another_holds_all_is_not_ready(
    fleet: tuple[World, Sandbox, list[Replica]], tmp_path: Path, postgres_url: str
) -> None:
    from bot.state.leases import Leases
    from bot.state.store import Store

    world, sandbox, replicas = fleet
    with Store.open(postgres_url) as store:
        hog = Leases(store, lease_seconds=3600, holder="another")
        assert sorted(hog.claim(list(REPOS))) == list(REPOS)
        replica = Replica(tmp_path / "starved", sandbox, postgres_url)
        replicas.append(replica)
        wait_for(replica.ready, 60, "it serves")
        readyz = f"http://127.0.0.1:{replica.port}/readyz"
        wait_for(lambda: "holds no lease" in LOOPBACK.get(readyz).text, 30, "not ready: no lease")
        assert LOOPBACK.get(readyz).status_code == 503
        assert not any(own(world, repo, n) for repo in REPOS for n in PULLS)  # it wrote nothing


def test_a_lost_database_is_a_problem_no_write_is_made_and_the_replica_recovers(
    fleet: tuple[World, Sandbox, list[Replica]], tmp_path: Path, postgres_url: str
) -> None:
    import psycopg

    world, sandbox, replicas = fleet
    replica = Replica(tmp_path / "alone", sandbox, postgres_url)
    replicas.append(replica)
    wait_for(lambda: current(world, "tests"), 90, "every pull request commented once")
    readyz = f"http://127.0.0.1:{replica.port}/readyz"
    name = postgres_url.rsplit("/", 1)[1]
    admin = os.environ["CISB_TEST_POSTGRES_URL"]

    def refuse(allowed: bool) -> None:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}')
            if not allowed:  # and cut the replica's open connections
                db.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )

    before = {(r, n): own(world, r, n)[0]["body"] for r in REPOS for n in PULLS}
    refuse(False)
    try:
        wait_for(lambda: LOOPBACK.get(readyz).status_code == 503, 30, "/readyz 503")
        assert "state unusable" in LOOPBACK.get(readyz).text
        red(world, "while-down")
        time.sleep(LEASE_S + 2)
        assert {(r, n): own(world, r, n)[0]["body"] for r in REPOS for n in PULLS} == before
    finally:
        refuse(True)
    wait_for(lambda: current(world, "while-down"), 60, "the change shown after recovery")
    wait_for(lambda: LOOPBACK.get(readyz).status_code == 200, 30, "/readyz 200 again")
    log = (tmp_path / "alone" / "stderr.txt").read_text()
    assert "problem started: leases" in log and "problem resolved: leases" in log
    assert "Traceback" not in log
    assert_no_duplicate_and_no_older_stamp(world, sandbox)


def _forged(body: str) -> str:
    """A maintainer's edit: a false green headline and the largest generation in the stamp."""
    from test_trust import forged_stamp

    lines = body.split("\n")
    lines[1] = forged_stamp(lines[1], generation=2**63 - 1)
    lines[2] = "### ✅ Passing · 5 passing"
    return "\n".join(lines)


@pytest.fixture
def second_database(postgres_url: str) -> Iterator[str]:
    """Another database on the same server: the state swapped under the replicas."""
    import psycopg

    name = postgres_url.rsplit("/", 1)[1] + "_swapped"
    base = os.environ["CISB_TEST_POSTGRES_URL"]
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_forged_stamp_and_a_swapped_database_freeze_no_comment(
    fleet: tuple[World, Sandbox, list[Replica]],
    tmp_path: Path,
    postgres_url: str,
    second_database: str,
) -> None:
    """Issue 24 in the chaos setting: a maintainer forges a false green with the largest
    generation into a comment the replicas keep; then the replicas are restarted on another,
    empty database (its generations start at 1 again, another epoch). Each time the next
    change is shown within lease_seconds plus two intervals, and there is never a second
    comment."""
    from bot.render.stamp import parse_stamp
    from bot.state.store import Store

    world, sandbox, replicas = fleet
    for index in range(2):
        replicas.append(Replica(tmp_path / f"replica{index}", sandbox, postgres_url))
    wait_for(lambda: current(world, "tests"), 90, "every pull request commented once")
    bound = LEASE_S + 2 * INTERVAL_S
    sender = WebhookSender(replicas[0].webhook, SECRET).attach(world)
    try:
        [target] = own(world, REPOS[0], 1)
        world.add_user(login="mallory")
        world.edit_comment(int(target["id"]), _forged(target["body"]), editor="mallory")
        red(world, "after-forgery")
        wait_for(lambda: current(world, "after-forgery"), bound, "shown after the forgery")
        [restored] = own(world, REPOS[0], 1)
        assert restored["id"] == target["id"] and "5 passing" not in restored["body"]
        assert_no_duplicate_and_no_older_stamp(world, sandbox)
        for replica in replicas:
            replica.end()
        sandbox.clear_requests()  # the new database's generations start again at 1
        swapped = [Replica(tmp_path / f"swapped{i}", sandbox, second_database) for i in range(2)]
        replicas.extend(swapped)
        sender.url = swapped[0].webhook
        red(world, "after-swap")
        wait_for(lambda: current(world, "after-swap"), bound + 30, "shown after the swap")
        assert_no_duplicate_and_no_older_stamp(world, sandbox)
    finally:
        sender.close()
    with Store.open(second_database) as store:
        epoch = store.epoch
    [after] = own(world, REPOS[0], 1)
    stamp = parse_stamp(after["body"])
    assert stamp is not None and stamp.epoch == epoch  # written under the new state's lease
