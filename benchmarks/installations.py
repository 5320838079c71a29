"""Benchmark many installations of one App on the job queue (issue 30).

    python benchmarks/installations.py                      # 200 x 10 x 5 on 2 workers
    python benchmarks/installations.py --installations 10 --repos 3 --prs 2 --burst 10

The sandbox (in this process) knows `--installations` installations of the App, each with
`--repos` repositories of `--prs` green pull requests, each installation with a rate limit of
its own. A database of its own is made on the PostgreSQL server of CISB_TEST_POSTGRES_URL (or
--postgres-url) and dropped at the end. Then:

- settle: every pull request gets the comment the bot would write (rendered by the bot's own
  planning code, stored under the App's login through the sandbox's World, recorded in the
  state, the audit's write times moved back an hour): a cold start of 10,000 comments at 80
  writes a minute is not what is measured;
- `run` and `--workers` workers start; once every repository has been worked once, the
  sandbox's requests are counted over the next full pass of the schedule: the warm requests
  per installation (mean and max);
- three bursts of check_run deliveries, a minute apart (the minute's write budget whole
  again each time), latency measured from the delivery sent to the comment's edit received by
  the sandbox (whichever job made it: the delivery's, or a scheduled one of its repository):
  A, one delivery for each of `--burst` installations (p50, p95); C, the same but the first
  installation's (the others alone); B, the same others while the first installation is out
  of GitHub budget until long after and receives a delivery for every one of its pull
  requests. The rate-limited figure is the others' p95 in B against C (the same deliveries,
  the same writes), target <= 10 % worse; the same others' p95 in A against C is printed
  beside it as the run's noise.

Writes are paced as in production (80 a minute, 500 an hour, >= 1 s apart per worker), so a
burst of 100 edits takes more than a minute whatever the queue does. The last line printed is
one JSON object with the figures; exit 1 when a step does not finish in time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from psycopg.conninfo import conninfo_to_dict

from bot_sandbox import Sandbox, World
from bot_sandbox.webhook_sender import check_run_payload, sign

POSTGRES_ENV = "CISB_TEST_POSTGRES_URL"
SLUG, APP_ID, LOGIN = "ci-status-bot", 1, "ci-status-bot[bot]"
SECRET = "bench-secret"
COMMENT = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/\d+")
DONE = re.compile(r"job \d+ done \((?P<repo>[^,#]+), installation \d+\): schedule")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def head(iid: int, repo: int, number: int) -> str:
    """A head sha per pull request."""
    return f"{iid:08x}{repo:04x}{number:04x}".ljust(40, "a")


def repo_name(iid: int, repo: int) -> str:
    """The repositories of installation `iid`: org<iid>/r<j>."""
    return f"org{iid}/r{repo}"


def make_world(installations: int, repos: int, prs: int) -> World:
    """The App installed `installations` times, each on its own organisation's repositories."""
    world = World()
    done = datetime.now(UTC) - timedelta(hours=1)
    for iid in range(1, installations + 1):
        names = [repo_name(iid, j) for j in range(repos)]
        for j, name in enumerate(names):
            world.add_repo(name)
            for n in range(1, prs + 1):
                sha = head(iid, j, n)
                world.add_pull(name, n, title=f"pr {n}", author="alice", head_sha=sha)
                world.add_check_run(name, sha, name="tests", app_slug="github-actions",
                                    workflow="ci", started_at=done, completed_at=done)  # fmt: skip
        world.add_app(slug=SLUG, app_id=APP_ID, installation_id=iid, repos=names)
    return world


@contextmanager
def database(base: str) -> Iterator[str]:
    """A database of its own on the server of `base`, dropped afterwards."""
    name = f"cisb_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(base)
    auth = f"{params.get('user', '')}:{params.get('password', '')}@"
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    try:
        yield f"postgresql://{auth}{host}:{port}/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def write_config(folder: Path, sandbox: Sandbox, url: str, args: argparse.Namespace) -> Path:
    """The fleet's configuration: the App on every installation, the queue in `url`."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = folder / "app.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))  # fmt: skip
    lines = [
        "[github]", f'api_url = "{sandbox.github_url}"', 'installations = "all"',
        f"app_id = {APP_ID}", f'private_key_path = "{pem}"',
        "[readthedocs]", f'api_url = "{sandbox.rtd_url}"',
        f'business_api_url = "{sandbox.rtd_url}"', "max_retries = 1",
        "[state]", f'url = "{url}"', "lease_seconds = 10",
        "[queue]", f'url = "{url}"', f"jobs_per_worker = {args.jobs_per_worker}",
        "[schedule]", f"interval_seconds = {args.interval}", "jitter_seconds = 0",
        "[server]", 'host = "127.0.0.1"', f"port = {args.port}",
        "[webhooks]", f'secrets = ["{SECRET}"]',
        "[log]", 'level = "INFO"',
    ]  # fmt: skip
    config = folder / "bot.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


def settle(config: Path) -> int:
    """Every pull request gets the comment the bot would write, as after its cold start."""
    from bot import app as wiring
    from bot.core.model import PullSnapshot
    from bot.cycle.model import sha256
    from bot.settings import RepoSettings, load_settings
    from bot.state.store import Store, to_text

    settings = load_settings(str(config))
    clients = wiring.build_clients(settings, [])
    found = clients.github.installations
    assert found is not None
    directory = found.discover()
    url = settings.state.url.get_secret_value()
    count = 0
    with Store.open(url) as store:
        for iid, installed in sorted(directory.installations.items()):
            github = wiring.installation_github(settings, clients, iid)
            cycle = wiring.make_cycle(settings, replace(clients, github=github), store,
                                      dry_run=False, out=None)  # fmt: skip
            for name in installed.repos:
                repo = settings.configured_repo(name) or RepoSettings(name=name)
                read = github.open_pulls(name, now=wiring.now_utc(), required=store)
                for snapshot in [s for s in read if isinstance(s, PullSnapshot)]:
                    # true of a new world, and what spares the plan a listing of the comments
                    store.note_no_comment(name, snapshot.number, now=wiring.now_utc())
                    plan = cycle.rendered(cycle.plan(snapshot, repo))
                    made = WORLD.add_comment(name, snapshot.number, author=LOGIN, body=plan.body)
                    store.record_write(
                        name, snapshot.number, comment_id=made["id"], node_id=made["node_id"],
                        body_hash=sha256(plan.body), facts_key=plan.comment_key,
                        observed_at=plan.report.observed_at, head_sha=plan.report.head_sha,
                        action="adopted", now=wiring.now_utc(),
                    )  # fmt: skip
                    count += 1
    clients.close()
    earlier = to_text(datetime.now(UTC) - timedelta(hours=2))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE audit SET at = %s", (earlier,))
    return count


WORLD: World  # set by main: the settle step stores comments in it


class Fleet:
    """`run` and the workers, as subprocesses; their logs in files."""

    def __init__(self, folder: Path, config: Path) -> None:
        self.folder, self.config = folder, config
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, command: str, name: str) -> None:
        log = self.folder / f"{name}.log"
        self.logs.append(log)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CI_STATUS_BOT_")}
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "bot", command, "--config", str(self.config)],
            env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"),
        ))  # fmt: skip

    def worked(self) -> list[str]:
        """Every repository a worker finished a schedule job of, in order."""
        return [m["repo"] for log in self.logs for m in DONE.finditer(log.read_text())]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `predicate()` holds; SystemExit(1) naming `what` past `timeout`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            print(f"not within {timeout:.0f} s: {what}", file=sys.stderr)
            raise SystemExit(1)
        time.sleep(0.25)
    return time.monotonic() - started


def per_installation(sandbox: Sandbox, world: World) -> dict[int, int]:
    """GitHub requests recorded, by the installation whose token sent them."""
    counts: dict[int, int] = {}
    for request in sandbox.requests:
        if request.service != "github":
            continue
        _, _, token = request.headers.get("authorization", "").partition(" ")
        rec = world.token_record(token.strip())
        if rec is not None and rec.installation_id is not None:
            counts[rec.installation_id] = counts.get(rec.installation_id, 0) + 1
    return counts


def warm_pass(
    fleet: Fleet, sandbox: Sandbox, world: World, repos: int, timeout: float
) -> dict[int, int]:
    """Requests by installation over one full pass of the schedule, after a first one."""
    wait_for(lambda: len(set(fleet.worked())) >= repos, timeout, "a first pass of the schedule")
    time.sleep(2)
    done_before = len(fleet.worked())
    sandbox.clear_requests()
    wait_for(lambda: len(fleet.worked()) - done_before >= repos, timeout, "a warm pass")
    return per_installation(sandbox, world)


def latencies(sandbox: Sandbox, sent: dict[str, float], world: World) -> list[tuple[int, float]]:
    """Webhook received -> comment written, per delivered pull request whose comment was
    edited since (by its own job or by a scheduled job of its repository that came first)."""
    found: dict[str, float] = {}
    for request in sandbox.requests:
        match = COMMENT.fullmatch(request.path)
        if request.method != "PATCH" or match is None or request.status >= 300:
            continue
        repo = match["repo"]
        if repo in sent and request.at >= sent[repo]:
            found[repo] = min(found.get(repo, request.at), request.at)
    installation = {r: int(r.split("/")[0].removeprefix("org")) for r in found}
    return [(installation[r], found[r] - sent[r]) for r in found]


def percentile(values: Sequence[float], fraction: float) -> float:
    from bot.service.queue import percentile as nearest_rank

    return nearest_rank(values, fraction)


def deliver(world: World, port: int, repo: str, number: int, check: str) -> None:
    """A new failing check on one pull request's head, and its check_run delivery to `run`."""
    now = datetime.now(UTC)
    iid, j = int(repo.split("/")[0].removeprefix("org")), int(repo.split("/r")[1])
    run = world.add_check_run_record(
        repo, head(iid, j, number), name=check, app_slug="github-actions",
        workflow="ci", conclusion="failure", started_at=now, completed_at=now,
    )  # fmt: skip
    body = json.dumps(check_run_payload(world, "completed", run)).encode()
    headers = {"X-GitHub-Event": "check_run", "X-GitHub-Delivery": str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(body, SECRET),
               "Content-Type": "application/json"}  # fmt: skip
    answer = httpx.post(f"http://127.0.0.1:{port}/webhook", content=body, headers=headers)
    assert answer.status_code == 202, answer.text


def burst(world: World, port: int, installations: Sequence[int], check: str) -> dict[str, float]:
    """One new failing check on each installation's first pull request, and its delivery; when
    each delivery was sent, by repository."""
    sent: dict[str, float] = {}
    for iid in installations:
        sent[repo_name(iid, 0)] = time.time()
        deliver(world, port, repo_name(iid, 0), 1, check)
    return sent


def run_all(args: argparse.Namespace, folder: Path, url: str) -> dict[str, Any]:
    global WORLD
    world = WORLD = make_world(args.installations, args.repos, args.prs)
    figures: dict[str, Any] = {"installations": args.installations, "repos": args.repos,
                               "prs": args.prs, "workers": args.workers}  # fmt: skip
    with Sandbox(world) as sandbox:
        sandbox.installation_limits = True  # each installation has its own budget
        args.port, args.url = free_port(), url
        config = write_config(folder, sandbox, url, args)
        began = time.monotonic()
        settled = settle(config)
        print(f"settled: {settled} comments in {time.monotonic() - began:.0f} s", flush=True)
        fleet = Fleet(folder, config)
        try:
            fleet.start("run", "run")
            for n in range(args.workers):
                fleet.start("worker", f"worker{n}")
            total = args.installations * args.repos
            counts = warm_pass(fleet, sandbox, world, total, args.timeout)
            values = [counts.get(i, 0) for i in range(1, args.installations + 1)]
            figures["warm_requests_per_installation"] = {
                "mean": round(sum(values) / len(values), 2), "max": max(values),
            }  # fmt: skip
            print(f"warm requests per installation (one pass of the schedule): mean "
                  f"{sum(values) / len(values):.1f}, max {max(values)}", flush=True)  # fmt: skip
            figures.update(bursts(world, sandbox, args))
        finally:
            fleet.stop()
            if args.keep_logs:
                import shutil

                Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                for log in fleet.logs:
                    shutil.copy(log, Path(args.keep_logs) / log.name)
    return figures


def queue_depth(url: str) -> dict[str, int]:
    """The queue's jobs waiting (todo, also those held for later) and running (doing)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
        ).fetchall()
    found = {"todo": 0, "doing": 0}
    found.update({str(status): int(n) for status, n in rows if status in found})
    return found


def one_burst(
    world: World,
    sandbox: Sandbox,
    args: argparse.Namespace,
    installations: Sequence[int],
    check: str,
    *,
    measured: Sequence[int],
    extra: Sequence[tuple[str, int]] = (),
) -> tuple[list[tuple[int, float]], dict[str, Any]]:
    """One burst: a delivery for each of `installations` (and one per `extra` pull request,
    not measured); the latencies of the `measured` installations' deliveries, and what the
    queue held when it began."""
    depth = queue_depth(args.url)
    sent = burst(world, args.port, installations, check)
    for repo, number in extra:  # more deliveries, for other pull requests
        deliver(world, args.port, repo, number, check)
    wanted = set(measured)
    took = wait_for(lambda: len([1 for i, _ in latencies(sandbox, sent, world) if i in wanted])
                    >= len(wanted), args.timeout, f"the comments of burst {check}")  # fmt: skip
    found = [(i, s) for i, s in latencies(sandbox, sent, world) if i in wanted]
    return found, {"queued_before": depth["todo"], "running_before": depth["doing"],
                   "written_in_s": round(took, 1)}  # fmt: skip


def bursts(world: World, sandbox: Sandbox, args: argparse.Namespace) -> dict[str, Any]:
    """Three bursts, a minute apart (the minute's write budget whole again each time):

    A. one delivery for each of `--burst` installations: the burst's p50 and p95;
    C. the same deliveries but the first installation's: the others alone, as many writes as
       in B (a quiet repeat, which also shows the run-to-run noise against A);
    B. the same others, while the first installation is out of GitHub budget until long after
       and receives a delivery for every one of its pull requests.
    The rate-limited figure is the others' p95 in B against C: the same deliveries, the same
    writes; the only difference is the rate-limited installation and its jobs."""
    chosen = list(range(1, min(args.burst, args.installations) + 1))
    limited, others = chosen[0], chosen[1:]
    figures: dict[str, Any] = {}
    found, state_a = one_burst(world, sandbox, args, chosen, "burst-a", measured=chosen)
    first = [s for _, s in found]
    p50, p95 = percentile(first, 0.5), percentile(first, 0.95)
    print(f"burst of {len(chosen)} webhook deliveries: job latency p50 {p50:.1f} s, p95 "
          f"{p95:.1f} s (all written in {state_a['written_in_s']:.0f} s; the queue held "
          f"{state_a['queued_before']} jobs when it came)", flush=True)  # fmt: skip
    figures["burst"] = {"deliveries": len(chosen), "p50_s": round(p50, 2),
                        "p95_s": round(p95, 2), **state_a}  # fmt: skip
    a_others = percentile([s for i, s in found if i != limited], 0.95)
    time.sleep(61)
    quiet, state_c = one_burst(world, sandbox, args, others, "burst-c", measured=others)
    time.sleep(61)
    for resource in ("core", "graphql"):
        sandbox.set_installation_rate_limit(limited, resource, remaining=0, reset_in_s=3600)
    hammer = [(repo_name(limited, j), n) for j in range(args.repos) for n in range(1, args.prs + 1)]
    second, state_b = one_burst(world, sandbox, args, chosen, "burst-b", measured=others,
                                extra=hammer[1:])  # fmt: skip
    base_p95 = percentile([s for _, s in quiet], 0.95)
    with_p95 = percentile([s for _, s in second], 0.95)
    worse = 100.0 * (with_p95 - base_p95) / base_p95 if base_p95 else 0.0
    noise = 100.0 * (a_others - base_p95) / base_p95 if base_p95 else 0.0
    print(f"one installation rate-limited (and sent {len(hammer)} deliveries): the "
          f"{len(others)} others' p95 {with_p95:.1f} s against {base_p95:.1f} s in a quiet "
          f"burst of the same deliveries ({worse:+.1f} %; target <= +10 %); the same others in "
          f"the first burst: {a_others:.1f} s ({noise:+.1f} %: the noise)", flush=True)  # fmt: skip
    figures["rate_limited"] = {
        "others": len(others), "limited_deliveries": len(hammer),
        "others_p95_s": round(with_p95, 2), "quiet_p95_s": round(base_p95, 2),
        "worse_percent": round(worse, 1), "first_burst_others_p95_s": round(a_others, 2),
        "noise_percent": round(noise, 1), "quiet": state_c, "limited": state_b,
    }  # fmt: skip
    return figures


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installations", type=int, default=200)
    parser.add_argument("--repos", type=int, default=10, help="repositories per installation")
    parser.add_argument("--prs", type=int, default=5, help="pull requests per repository")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs-per-worker", type=int, default=4)
    parser.add_argument("--burst", type=int, default=100, help="webhook deliveries at once")
    parser.add_argument("--interval", type=int, default=120, help="the schedule's interval")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step")
    parser.add_argument("--postgres-url", default=os.environ.get(POSTGRES_ENV, ""))
    parser.add_argument("--keep-logs", default="", help="copy the processes' logs to this folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the figures, the last line as JSON."""
    args = parse_args(argv)
    if not args.postgres_url:
        print(f"no PostgreSQL server: set {POSTGRES_ENV} or --postgres-url", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, database(args.postgres_url) as url:
        figures = run_all(args, Path(tmp), url)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
