"""Benchmark the webhook fast path: a burst of check events, then quiet, against the sandbox.

    python benchmarks/webhooks.py                      # 2,000 PRs, 1,000 events on 200 over 10 s
    python benchmarks/webhooks.py --prs 100 --burst 50 --burst-prs 10 --burst-seconds 2 \
        --debounce 2                                   # the CI size (about a minute)

The sandbox (a World seeded with --prs open pull requests of --checks contexts each) runs in
this process and sends real, signed webhook deliveries (bot_sandbox/webhook_sender.py) to the
real bot, `python -m bot run`, in its own process. First the state is settled (every
comment present, as after the cold start; nothing of this is measured) and the bot's first
cycle finds nothing to write. Then:

1. webhooks: --burst check runs are added over --burst-seconds on --burst-prs pull requests
   (each event a new check run with its own name, so the comment shows when it is in);
   every 0.1 s this process reads the comments and notes, per event, when its name first
   appears in the pull request's comment: the event-to-comment latency. Also when the
   batched read covering the event happened (event-to-read latency, before write pacing).
2. polling, for comparison: the bot is stopped, the same kind of burst is made without
   webhooks, and one full cycle (`python -m bot once`) does the same refresh.

The last line printed is one JSON object with both runs' figures: latency p50/p95/max (s),
GitHub requests and GraphQL points (per refreshed pull request), GraphQL queries, writes,
duplicate comments (must be 0), and the targets. Writes are paced by the bot as always
(>= 1 s apart, <= 80 a minute), which bounds how fast 200 comments can change.
All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.core.model import MARKER  # noqa: E402
from bot_sandbox import Sandbox, World  # noqa: E402
from bot_sandbox.seeds import LOGIN, SCALE_REPO, seed_scale  # noqa: E402
from bot_sandbox.webhook_sender import WebhookSender  # noqa: E402

SECRET = "benchmark-webhook-secret"
_SEEN = re.compile(r"(?P<seen>\d+) pull requests seen")
_QUERY_NAME = re.compile(rb"query (\w+)")


def child_env() -> dict[str, str]:
    """No proxies and no CI_STATUS_BOT_* overrides for the bot."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CI_STATUS_BOT_")}
    env.pop("http_proxy", None)
    env.pop("https_proxy", None)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(sandbox: Sandbox, folder: Path, *, port: int, debounce: float) -> Path:
    """The bot's configuration: the sandbox, webhooks on, polling as the 900 s backstop."""
    q = json.dumps
    text = (
        f'[github]\napi_url = {q(sandbox.github_url)}\ntoken = "sandbox-token"\n\n'
        f"[readthedocs]\napi_url = {q(sandbox.rtd_url)}\n"
        f"business_api_url = {q(sandbox.rtd_url)}\n\n"
        f"[schedule]\ninterval_seconds = 900\njitter_seconds = 0\n\n"
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n\n'
        f"[webhooks]\nsecrets = [{q(SECRET)}]\ndebounce_seconds = {debounce}\n\n"
        f"[state]\npath = {q(str(folder / 'state.sqlite3'))}\n\n"
        '[log]\nformat = "text"\nlevel = "INFO"\n\n'
        f"[[repos]]\nname = {q(SCALE_REPO)}\n"
    )
    path = folder / "bot.toml"
    path.write_text(text, encoding="utf-8")
    return path


def settle(world: World, config: Path) -> int:
    """Every comment present and recorded, as after the cold start (not measured).

    The bot's own planning code renders each comment; it is put straight into the world
    under the bot's login (not a GitHub write); the state records it as adopted; the audit
    moves back an hour so the write budgets start fresh.
    """
    from bot.app import build_clients, make_cycle, now_utc
    from bot.cycle import sha256
    from bot.settings import load_settings
    from bot.state.store import Store

    settings = load_settings(str(config), environ={})
    repo = settings.repos[0]
    clients = build_clients(settings, settings.repos)
    state = Path(settings.state.path)
    with Store.open(state) as store:
        cycle = make_cycle(settings, clients, store, dry_run=False)
        snapshots = list(clients.github.open_pulls(repo.name, now=now_utc()))
        plans = [cycle.rendered(cycle.plan(s, repo)) for s in snapshots]
        for plan in plans:
            made = world.add_comment(repo.name, plan.report.number, author=LOGIN, body=plan.body)
            store.record_write(
                repo.name, plan.report.number, comment_id=made["id"], node_id=made["node_id"],
                body_hash=sha256(plan.body), facts_key=plan.comment_key,
                observed_at=plan.report.observed_at, head_sha=plan.report.head_sha,
                action="adopted", now=now_utc(),
            )  # fmt: skip
    clients.close()
    with sqlite3.connect(state) as db:
        earlier = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        db.execute("UPDATE audit SET at = ?", (earlier,))
    return len(plans)


@dataclass
class Burst:
    """Events made in the world: their check names, pull requests and times."""

    names: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    seen: dict[int, float] = field(default_factory=dict)  # event index -> first in a comment


def make_burst(
    world: World, pulls: list[int], *, events: int, seconds: float, tag: str, rng: random.Random
) -> Burst:
    """`events` new check runs spread evenly over `seconds` on `pulls` (each at least once)."""
    burst = Burst()
    order = [pulls[i % len(pulls)] for i in range(events)]
    rng.shuffle(order)
    start = time.time()
    for index, number in enumerate(order):
        delay = start + index * seconds / max(1, events) - time.time()
        if delay > 0:
            time.sleep(delay)
        sha = world.pull(SCALE_REPO, number).head_sha
        name = f"{tag}{index:04d}x"
        now = datetime.now(UTC)
        conclusion = "failure" if rng.random() < 0.2 else "success"
        burst.names.append(name)
        burst.numbers.append(number)
        burst.at.append(time.time())
        world.add_check_run(
            SCALE_REPO, sha, name=name, app_slug="github-actions", workflow="burst",
            conclusion=conclusion, started_at=now, completed_at=now,
        )  # fmt: skip
    return burst


def bodies(world: World, numbers: set[int]) -> dict[int, list[str]]:
    """The bot's own comment bodies on these pull requests."""
    with world.lock:
        found: dict[int, list[str]] = {n: [] for n in numbers}
        for rec in world.comment_recs.values():
            own = rec.author == LOGIN and rec.body.startswith(MARKER) and not rec.deleted
            if own and rec.repo == SCALE_REPO and rec.number in numbers:
                found[rec.number].append(rec.body)
        return found


def watch(world: World, burst: Burst, stop: threading.Event) -> None:
    """Every 0.1 s: which events show in their pull request's comment now."""
    numbers = set(burst.numbers) if burst.numbers else set()
    while not stop.is_set():
        now = time.time()
        current = bodies(world, numbers | set(burst.numbers))
        for index in range(len(burst.names)):
            if index in burst.seen:
                continue
            texts = current.get(burst.numbers[index], [])
            if any(burst.names[index] in text for text in texts):
                burst.seen[index] = now
        stop.wait(0.1)


def quantiles(values: list[float]) -> dict[str, float | None]:
    """p50, p95 and max, rounded."""
    if not values:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(p95, 2),
        "max": round(ordered[-1], 2),
    }


def stats_of(sandbox: Sandbox) -> dict[str, Any]:
    """GitHub requests, GraphQL points and queries, writes since the last reset."""
    stats = sandbox.stats()
    github = {k: v for k, v in stats["by_route"].items() if k.startswith("github ")}
    queries = [r for r in sandbox.requests if r.graphql_operation == "query"]
    return {
        "github_requests": sum(github.values()),
        "graphql_points": stats["graphql_points"],
        "graphql_queries": len(queries),
        "batched_reads": sum(1 for r in queries if b"PullsByNumber" in r.body),
        "graphql_queries_by_name": dict(
            Counter(m[1].decode() if (m := _QUERY_NAME.search(r.body)) else "?" for r in queries)
        ),
        "writes": stats["writes"],
        "requests_by_kind": github,
    }


def duplicates(world: World, numbers: list[int]) -> int:
    """Pull requests with more than one comment of the bot."""
    return sum(1 for texts in bodies(world, set(numbers)).values() if len(texts) > 1)


class Bot:
    """`python -m bot run` in its own process; its log is read as it comes."""

    def __init__(self, config: Path, log: IO[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, cwd=ROOT, env=child_env(),
        )  # fmt: skip
        self.lines: list[tuple[float, str]] = []
        self._log = log
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.time(), line.rstrip("\n")))
            self._log.write(line)

    def wait_line(self, text: str, timeout_s: float) -> None:
        """Wait for a log line containing `text`."""
        deadline = time.monotonic() + timeout_s
        while not any(text in line for _, line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not log {text!r} (exit {self.proc.poll()})")
            time.sleep(0.1)

    def refreshed(self) -> list[int]:
        """Pull requests seen by each webhook refresh."""
        found = []
        for _, line in self.lines:
            if "webhook refresh:" in line and (m := _SEEN.search(line)):
                found.append(int(m["seen"]))
        return found

    def stop(self) -> float:
        """SIGTERM; seconds until it exited."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self._thread.join(timeout=5)
        return round(time.monotonic() - started, 2)


def read_times(sandbox: Sandbox) -> list[float]:
    """When each batched read of marked pull requests was received."""
    return sorted(
        r.at
        for r in sandbox.requests
        if r.graphql_operation == "query" and b"PullsByNumber" in r.body
    )


def webhook_run(args: argparse.Namespace, world: World, sandbox: Sandbox, config: Path,
                pulls: list[int], log: IO[str]) -> dict[str, Any]:  # fmt: skip
    """Phase 1: the burst delivered as webhooks to a running bot."""
    port = int(re.search(r"port = (\d+)", config.read_text())[1])  # type: ignore[index]
    bot = Bot(config, log)
    try:
        bot.wait_line("cycle:", args.timeout)
        sender = WebhookSender(f"http://127.0.0.1:{port}/webhook", SECRET).attach(world)
        sandbox.reset_stats()
        sandbox.clear_requests()
        burst = Burst()
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(world, burst, stop), daemon=True)
        watcher.start()
        made = make_burst(
            world, pulls, events=args.burst, seconds=args.burst_seconds, tag="w",
            rng=random.Random(args.seed),
        )  # fmt: skip
        burst.numbers, burst.names, burst.at = made.numbers, made.names, made.at
        sender.wait_idle(120)
        deadline = time.monotonic() + args.timeout
        while len(burst.seen) < len(burst.names) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(args.quiet_seconds)  # quiet: nothing more should happen
        stop.set()
        watcher.join()
        sender.close()
        stats = stats_of(sandbox)
        reads = read_times(sandbox)
        read_latency = [next((t for t in reads if t >= at), math.inf) - at for at in burst.at]
        shutdown_s = bot.stop()
    finally:
        if bot.proc.poll() is None:
            bot.proc.kill()
    latency = [burst.seen[i] - burst.at[i] for i in burst.seen]
    refreshed = sum(bot.refreshed())
    statuses = [d.status for d in sender.sent]
    return {
        "events": len(burst.names),
        "deliveries": len(sender.sent),
        "deliveries_accepted": statuses.count(202),
        "events_in_comment": len(burst.seen),
        "latency_s": quantiles(latency),
        "read_latency_s": quantiles([x for x in read_latency if x != math.inf]),
        "refreshes": len(bot.refreshed()),
        "refreshed_pulls": refreshed,
        **stats,
        "github_requests_per_refreshed_pull": round(
            stats["github_requests"] / max(1, refreshed), 3
        ),
        "graphql_points_per_refreshed_pull": round(stats["graphql_points"] / max(1, refreshed), 3),
        "batched_reads_allowed": sum(math.ceil(n / 50) for n in bot.refreshed()),
        "duplicate_comments": duplicates(world, pulls),
        "shutdown_s": shutdown_s,
    }


def polling_run(args: argparse.Namespace, world: World, sandbox: Sandbox, config: Path,
                pulls: list[int]) -> dict[str, Any]:  # fmt: skip
    """Phase 2: the same kind of burst, no webhooks, one full polling cycle."""
    burst = make_burst(
        world, pulls, events=args.burst, seconds=0, tag="p", rng=random.Random(args.seed + 1)
    )
    sandbox.reset_stats()
    sandbox.clear_requests()
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-m", "bot", "once", "--config", str(config)],
        capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=args.timeout,
        check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    current = bodies(world, set(pulls))
    shown = sum(
        1
        for name, number in zip(burst.names, burst.numbers, strict=True)
        if any(name in text for text in current[number])
    )
    stats = stats_of(sandbox)
    summary = [ln for ln in child.stdout.splitlines() if ln.startswith("cycle:")]
    changed = len(set(pulls))
    return {
        "exit_code": child.returncode,
        "summary": summary[-1] if summary else child.stderr.strip()[-300:],
        "wall_s": round(wall, 2),
        "events_in_comment": shown,
        **stats,
        "github_requests_per_changed_pull": round(stats["github_requests"] / changed, 3),
        "graphql_points_per_changed_pull": round(stats["graphql_points"] / changed, 3),
        "duplicate_comments": duplicates(world, pulls),
        "latency_note": "a polled change waits for the next cycle: up to interval_seconds "
        "plus this cycle's wall time",
    }


def main(argv: list[str] | None = None) -> int:
    """Run both phases and print the figures (last line: JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prs", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--burst", type=int, default=1000, help="check events in the burst")
    parser.add_argument("--burst-prs", type=int, default=None, help="default: prs / 10")
    parser.add_argument("--burst-seconds", type=float, default=10.0)
    parser.add_argument("--debounce", type=float, default=10.0)
    parser.add_argument("--quiet-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-polling", action="store_true")
    args = parser.parse_args(argv)
    burst_prs = args.burst_prs or max(1, args.prs // 10)
    world = World()
    t0 = time.monotonic()
    seed_scale(world, prs=args.prs, checks=args.checks, rng_seed=args.seed)
    rng = random.Random(args.seed)
    open_numbers = sorted(world.repo(SCALE_REPO).pulls)
    pulls = sorted(rng.sample(open_numbers, min(burst_prs, len(open_numbers))))
    with Sandbox(world) as sandbox, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = write_config(sandbox, folder, port=free_port(), debounce=args.debounce)
        settled = settle(world, config)
        print(f"seeded {args.prs} pull requests and settled {settled} comments "
              f"in {time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
        with (folder / "bot.log").open("w", encoding="utf-8") as log:
            hooks = webhook_run(args, world, sandbox, config, pulls, log)
        print("webhooks: " + json.dumps(hooks), flush=True)
        polled = None if args.skip_polling else polling_run(args, world, sandbox, config, pulls)
        if polled is not None:
            print("polling: " + json.dumps(polled), flush=True)
    p95 = hooks["latency_s"]["p95"]
    targets = {
        "p95_latency_le_debounce_plus_5": p95 is not None and p95 <= args.debounce + 5,
        "le_1_graphql_read_per_50_refreshed": hooks["batched_reads"]
        <= hooks["batched_reads_allowed"],
        "no_duplicates": hooks["duplicate_comments"] == 0
        and (polled is None or polled["duplicate_comments"] == 0),
    }
    result = {
        "prs": args.prs,
        "checks": args.checks,
        "burst_events": args.burst,
        "burst_prs": len(pulls),
        "burst_seconds": args.burst_seconds,
        "debounce_seconds": args.debounce,
        "webhooks": hooks,
        "polling": polled,
        "targets": targets,
    }
    print(json.dumps(result))
    complete = hooks["events_in_comment"] == hooks["events"]
    return 0 if complete and targets["no_duplicates"] else 1


if __name__ == "__main__":
    sys.exit(main())
