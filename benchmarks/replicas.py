"""Benchmark several `run` replicas on one PostgreSQL against one process (issue 18).

    python benchmarks/replicas.py --prs 2000 --repos 20 --checks 20
    python benchmarks/replicas.py --prs 200 --repos 20 --checks 5      # a small size

It starts the sandbox (`python -m bot_sandbox serve --scenario scale --repos N`, the pull
requests spread over octo/big-00 ... octo/big-NN) and creates a database of its own on the
PostgreSQL server of CISB_TEST_POSTGRES_URL (or --postgres-url), dropped at the end. Then:

- settle: every pull request gets the comment the bot would write, stored through the
  sandbox's control API and recorded in the state as adopted (as benchmarks/cycle.py does
  after a cold start), so what follows measures the steady state, not a cold backlog;
- one process: `python -m bot once` over every repository, twice (the first fills the
  caches the settle step left empty); the second one's GitHub requests;
- replicas: --replicas `python -m bot run` processes on the same database. Once the leases
  are spread and every repository has been worked, the sandbox's statistics are reset and
  the next cycle of every replica is measured: until every pull request of every repository
  has been reconciled again (the triage table's `updated_at`, written at every reconcile).
  Their total GitHub requests, and the ratio to one process's;
- kill -9: one replica is killed with SIGKILL; timed until the other replicas hold its
  leases, until its repositories have been worked again, and until every repository has;
- duplicates: the bot's comments per pull request, listed through the sandbox's REST API
  after everything (the sandbox's REST limit is lifted first); more than one is a duplicate.

The last line printed is one JSON object with the figures. Exit status 1 when a figure is
out of bounds (a duplicate, ratio > 1.2, or a step that did not happen in time), 2 when the
sandbox or the database could not be set up. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
from cycle import SandboxProcess, child_env, measure, run_child
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_ENV = "CISB_TEST_POSTGRES_URL"
MARKER = "<!-- ci-status-bot"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stamp_now() -> str:
    """Now in the state's time format (fixed-width ISO-8601 UTC text, sorts as time does)."""
    from bot.state.store import to_text

    return to_text(datetime.now(UTC))


@contextmanager
def database(base: str) -> Iterator[str]:
    """A fresh database on the server of `base`, dropped afterwards (with its connections)."""
    host = conninfo_to_dict(base).get("host", "127.0.0.1")
    if host not in ("127.0.0.1", "localhost"):
        raise RuntimeError(f"the PostgreSQL server is not on loopback: {host}")
    name = f"cisb_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def write_config(
    info: dict[str, Any], folder: Path, url: str, args: argparse.Namespace, port: int = 0
) -> Path:
    """A TOML configuration: the sandbox, the shared PostgreSQL state, every repository."""
    q = json.dumps  # a JSON string is a valid TOML basic string for these values
    lines = [
        "[github]", f"api_url = {q(info['github_url'])}", f"token = {q(info['token'])}",
        "[readthedocs]", f"api_url = {q(info['rtd_url'])}",
        f"business_api_url = {q(info['rtd_url'])}",
        "[state]", f"path = {q(str(folder / 'unused.sqlite3'))}", f"url = {q(url)}",
        f"lease_seconds = {args.lease_seconds}",
        "[schedule]", f"interval_seconds = {args.interval}", "jitter_seconds = 0",
        "[server]", 'host = "127.0.0.1"', f"port = {port or free_port()}",
        "[log]", 'format = "text"', 'level = "INFO"',
        *(f"[[repos]]\nname = {q(repo)}" for repo in info["repos"]),
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def settle(sandbox: SandboxProcess, config: Path) -> int:
    """Give every pull request the comment the bot would write (control API) and record it."""
    from bot.app import build_clients, make_cycle, now_utc
    from bot.core.model import PullSnapshot
    from bot.cycle.model import sha256
    from bot.settings import load_settings
    from bot.state.store import Store

    settings = load_settings(str(config))
    clients = build_clients(settings, settings.repos)
    total = 0
    try:
        with Store.open(settings.state.url.get_secret_value()) as store:
            cycle = make_cycle(settings, clients, store, dry_run=False)
            for repo in settings.repos:
                read = clients.github.open_pulls(repo.name, now=now_utc(), required=store)
                snaps = [s for s in read if isinstance(s, PullSnapshot)]
                plans = [
                    cycle.rendered(p) for s in snaps if (p := cycle.plan(s, repo)).action != "leave"
                ]
                items = [
                    {"repo": repo.name, "number": p.report.number, "author": clients.login,
                     "body": p.body, "id": p.comment_id}
                    for p in plans
                ]  # fmt: skip
                made = sandbox.control("POST", "comments", items)["comments"] if items else []
                for plan, comment in zip(plans, made, strict=True):
                    store.record_write(
                        repo.name, plan.report.number, comment_id=comment["id"],
                        node_id=comment["node_id"], body_hash=sha256(plan.body),
                        facts_key=plan.comment_key, observed_at=plan.report.observed_at,
                        head_sha=plan.report.head_sha, action="adopted", now=now_utc(),
                    )  # fmt: skip
                total += len(plans)
    finally:
        clients.close()
    return total


class Replica:
    """One `python -m bot run` process with its own configuration and log."""

    def __init__(
        self, info: dict[str, Any], folder: Path, url: str, args: argparse.Namespace
    ) -> None:
        config = write_config(info, folder, url, args)
        self.log: IO[bytes] = (folder / "stderr.txt").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, cwd=ROOT,
            env=child_env(),
        )  # fmt: skip

    def end(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and close its log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """Rows of a query on the shared state (none while its tables do not exist yet)."""
    with psycopg.connect(url, autocommit=True) as db:
        try:
            return list(db.execute(query).fetchall())
        except psycopg.errors.UndefinedTable:
            return []


def worked_since(url: str, since: str) -> set[str]:
    """Repositories every pull request of which was reconciled after `since`."""
    found = rows(url, "SELECT repo, min(updated_at) FROM triage GROUP BY repo")
    return {repo for repo, last in found if last > since}


def holders(url: str) -> dict[str, str]:
    """Each repository's lease holder, while its lease is unexpired."""
    now = stamp_now()
    found = rows(url, "SELECT repo, holder, expires_at FROM leases")
    return {repo: holder for repo, holder, until in found if holder and until > now}


def wait_for(check: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until `check()` holds (polled every 0.1 s), None when not within timeout_s."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            return None
        time.sleep(0.1)
    return round(time.monotonic() - started, 2)


def duplicates(sandbox: SandboxProcess, info: dict[str, Any]) -> dict[str, int]:
    """The bot's comments per pull request through the REST API: none, one, more."""
    sandbox.control("POST", "rate-limit", {"resource": "core", "limit": 1_000_000})
    counts = {"none": 0, "one": 0, "more": 0}
    headers = {"Authorization": f"token {info['token']}"}
    with httpx.Client(base_url=info["github_url"], headers=headers, trust_env=False) as http:
        for number in range(1000, 1000 + int(info["prs"])):
            repo = info["repos"][(number - 1000) % len(info["repos"])]
            answer = http.get(f"/repos/{repo}/issues/{number}/comments", params={"per_page": 100})
            answer.raise_for_status()
            mine = [
                c
                for c in answer.json()
                if c["user"]["login"] == info["login"] and c["body"].startswith(MARKER)
            ]
            counts["none" if not mine else "one" if len(mine) == 1 else "more"] += 1
    return counts


def run_all(args: argparse.Namespace, folder: Path, base: str) -> dict[str, Any]:
    """Every step; the sandbox, the replicas and the database are always cleaned up."""
    out: dict[str, Any] = {"prs": args.prs, "repos": args.repos, "checks": args.checks}
    replicas: list[Replica] = []
    with open(folder / "sandbox.log", "wb") as log, database(base) as url:
        sandbox = SandboxProcess(args, log, extra=["--repos", str(args.repos)])
        try:
            info = sandbox.ready(timeout_s=600)
            repos = set(info["repos"])
            print(f"sandbox: {info['github_url']}, {len(repos)} repositories", flush=True)
            config = write_config(info, folder / "once", url, args)
            print("settling: every pull request's comment...", flush=True)
            out["settled_comments"] = settle(sandbox, config)
            print("running one process's cycles (once, twice; the second is measured)...",
                  flush=True)  # fmt: skip
            run_child([sys.executable, "-m", "bot", "once", "--config", str(config)],
                      timeout_s=args.timeout)  # fmt: skip
            sandbox.control("POST", "reset-stats")
            child = run_child(
                [sys.executable, "-m", "bot", "once", "--config", str(config)],
                timeout_s=args.timeout,
            )
            one = measure(child, sandbox.control("GET", "stats"))
            out["one_process"] = _short(one)
            print(f"starting {args.replicas} replicas...", flush=True)
            started = stamp_now()
            for index in range(args.replicas):
                replicas.append(Replica(info, folder / f"replica{index}", url, args))
            print(f"waiting for the leases to spread (at most {args.timeout:.0f} s)...", flush=True)
            spread = wait_for(
                lambda: (
                    worked_since(url, started) == repos
                    and set(holders(url)) == repos
                    and len(set(holders(url).values())) == args.replicas
                ),
                args.timeout,
            )
            out["startup_s"] = spread
            if spread is None:
                raise TimeoutError("the replicas did not spread the leases and work every repo")
            time.sleep(1.0)  # the start-up cycles' last requests
            sandbox.control("POST", "reset-stats")
            since = stamp_now()
            print("measuring the replicas' next cycle...", flush=True)
            out["replica_cycle_s"] = wait_for(
                lambda: worked_since(url, since) == repos, args.interval * 2 + args.timeout / 10
            )
            time.sleep(1.0)
            many = sandbox.control("GET", "stats")
            out["replicas"] = _short(measure(child, many)) | {
                "per_replica_leases": sorted(
                    list(holders(url).values()).count(h) for h in set(holders(url).values())
                )
            }
            single = out["one_process"]["github_requests"]
            total = out["replicas"]["github_requests"]
            out["ratio"] = round(total / single, 3) if single else None
            out["kill"] = kill_one(replicas, url, repos, args)
            out["duplicates"] = duplicates(sandbox, info)
        finally:
            for replica in replicas:
                replica.end()
            sandbox.stop()
    return out


def kill_one(
    replicas: list[Replica], url: str, repos: set[str], args: argparse.Namespace
) -> dict[str, Any]:
    """SIGKILL the replica holding the most leases; time the takeover and the work."""
    held = holders(url)
    victim = max(replicas, key=lambda r: sum(f":{r.proc.pid}:" in h for h in held.values()))
    lost = {repo for repo, h in held.items() if f":{victim.proc.pid}:" in h}
    print(f"kill -9 of the replica holding {len(lost)} repositories...", flush=True)
    killed = stamp_now()
    victim.proc.send_signal(signal.SIGKILL)
    started = time.monotonic()
    bound = args.lease_seconds + 2 * args.interval + 60

    def taken() -> bool:
        now = holders(url)
        return all(r in now and f":{victim.proc.pid}:" not in now[r] for r in lost)

    def after_kill(check: Callable[[], bool]) -> float | None:
        left = bound - (time.monotonic() - started)
        return None if wait_for(check, left) is None else round(time.monotonic() - started, 2)

    result: dict[str, Any] = {"repos_lost": len(lost), "bound_s": bound}
    result["leases_taken_s"] = after_kill(taken)
    result["its_repos_worked_s"] = after_kill(lambda: lost <= worked_since(url, killed))
    result["every_repo_worked_s"] = after_kill(lambda: worked_since(url, killed) == repos)
    return result


def _short(run: dict[str, Any]) -> dict[str, Any]:
    """The figures of a run that this benchmark reports."""
    keys = ("github_requests", "graphql_points", "rtd_requests", "writes", "requests_by_kind")
    return {k: run[k] for k in keys}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="benchmarks/replicas.py",
        description="Replicas on PostgreSQL: warm-cycle requests, kill -9 takeover, duplicates.",
    )
    parser.add_argument("--prs", type=int, default=2000, help="open pull requests in all")
    parser.add_argument("--repos", type=int, default=20, help="repositories they spread over")
    parser.add_argument("--checks", type=int, default=20, help="contexts per head")
    parser.add_argument("--replicas", type=int, default=3, help="`run` processes")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of every answer")
    parser.add_argument("--seed", type=int, default=0, help="the sandbox's random seed")
    parser.add_argument("--lease-seconds", type=float, default=5.0, help="the replicas' lease")
    parser.add_argument("--interval", type=int, default=30, help="the replicas' cycle interval")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_ENV, ""),
        help=f"an admin URL of a loopback server (default ${POSTGRES_ENV})",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per step")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # clean up
    if not args.postgres_url:
        print(
            f"benchmark: no PostgreSQL server (--postgres-url or {POSTGRES_ENV})", file=sys.stderr
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="ci-status-bot-replicas-") as tmp:
        try:
            out = run_all(args, Path(tmp), args.postgres_url)
        except (RuntimeError, OSError, psycopg.Error) as exc:
            if hasattr(exc, "read"):  # an HTTPError of the control API: its answer
                print(exc.read().decode(errors="replace"), file=sys.stderr)
            log = (Path(tmp) / "sandbox.log").read_text(encoding="utf-8", errors="replace")
            print(f"benchmark: {exc}\n{log[-2000:]}", file=sys.stderr)
            return 2
    one, many, kill = out["one_process"], out["replicas"], out["kill"]
    print(f"one process, warm cycle: {one['github_requests']} GitHub requests "
          f"({one['graphql_points']} GraphQL points, {one['writes']} writes)")  # fmt: skip
    print(f"{args.replicas} replicas, next cycle: {many['github_requests']} GitHub requests "
          f"({many['graphql_points']} GraphQL points, {many['writes']} writes), "
          f"leases per replica {many['per_replica_leases']}; ratio {out['ratio']}")  # fmt: skip
    print(f"kill -9 of a replica holding {kill['repos_lost']} repositories: leases taken after "
          f"{kill['leases_taken_s']} s, its repositories worked after "
          f"{kill['its_repos_worked_s']} s, every repository after "
          f"{kill['every_repo_worked_s']} s (bound {kill['bound_s']} s)")  # fmt: skip
    print(f"bot comments per pull request: {out['duplicates']}")
    print(json.dumps(out))
    ok = (
        out["duplicates"]["more"] == 0
        and out["ratio"] is not None
        and out["ratio"] <= 1.2
        and None not in (kill["leases_taken_s"], kill["every_repo_worked_s"])
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
