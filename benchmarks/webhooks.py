"""Benchmark the webhook fast path: bursts of check events, then quiet, against the sandbox.

    python benchmarks/webhooks.py                      # 2,000 PRs: 1,000 events on 200 over
                                                       # 10 s, then 25 on 5 over 2 s
    python benchmarks/webhooks.py --prs 100 --burst 50 --burst-prs 10 --burst-seconds 2 \
        --debounce 2                                   # the CI size (about a minute)

The sandbox (a World seeded with --prs open pull requests of --checks contexts each) runs in
this process and sends real, signed webhook deliveries (bot_sandbox/webhook_sender.py) to the
real bot, `python -m bot run`, in its own process. Nothing of the settle is measured:

0. settle: the bot's own cycle (same configuration, same state file, real writes to the
   sandbox; only its write pacing lifted) runs until a cycle writes nothing, so the state
   and the comments are what the bot itself leaves after its cold start, with everything a
   cold cycle learns (the required set and `isRequired`, merge bases, docs builds, the
   stamps' times). The audit then moves back an hour: the write budgets start fresh.
   The service is started over that state, and its first cycle must write nothing: if it
   creates, edits or defers anything the benchmark stops with "FAIL: ..." (exit 1), naming
   the pull requests and showing how the first changed comment differs.

Then, measured:

1. webhooks: for each burst size, --burst check runs are added over --burst-seconds on
   --burst-prs pull requests, then (other pull requests) --small-burst over
   --small-burst-seconds on --small-burst-prs (25 on 5 over 2 s; 0 PRs: none). Each event
   is a new check run with its own name, so the comment shows when it is in; every 0.1 s
   this process reads the comments and notes, per event, when its name first appears in the
   pull request's comment: the event-to-comment latency, against the bound
   `debounce_seconds` + 5 s + 1 s per pull request in the burst (the bot's writes are >= 1 s
   apart); one line per burst says PASS or MISS. Also when the batched read covering the
   event happened (event-to-read latency, before write pacing).
2. polling, for comparison: the bot is stopped, the first burst's kind is made again without
   webhooks, and one full cycle (`python -m bot once`) does the same refresh.

The last line printed is one JSON object with the figures: the settle's cycles, the
service's first cycle, per burst latency p50/p95/max (s) and its bound, GitHub requests and
GraphQL points (per refreshed pull request), GraphQL queries, writes, refreshes held (write
budget, rate limit), duplicate comments (must be 0), and the targets. All traffic stays on
127.0.0.1. Exit 1 when the first cycle wrote, an event never reached its comment, or a
comment was duplicated; a latency MISS is a figure, not a failure.
"""

from __future__ import annotations

import argparse
import difflib
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
from bot.state.store import to_text  # noqa: E402
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


class SettleError(RuntimeError):
    """The bot's own cycles did not reach a state in which a cycle writes nothing."""


class FirstCycleWrote(RuntimeError):
    """The measured service's first cycle wrote: the settled state is not what it would write."""


# The settle runs the bot's own cycle; only its write pacing is lifted (GitHub's limits are
# the sandbox's to keep, and it keeps none): 2,000 comments in one cold cycle, not four hours.
UNPACED = {"max_writes_per_minute": 10**9, "max_writes_per_hour": 10**9,
           "min_seconds_between_writes": 0.0}  # fmt: skip


def own_bodies(world: World) -> dict[int, str]:
    """The bot's comment body on each pull request of the scale repository."""
    with world.lock:
        return {
            rec.number: rec.body
            for rec in world.comment_recs.values()
            if rec.author == LOGIN and rec.repo == SCALE_REPO and not rec.deleted
            and rec.body.startswith(MARKER)
        }  # fmt: skip


def settle(world: World, config: Path, *, rounds: int = 4) -> dict[str, Any]:
    """The state the bot itself leaves after its cold start (not measured).

    The bot's own cycle (`make_cycle`, the benchmark's configuration and state file, real
    writes to the sandbox) runs until one cycle writes nothing: the first creates every
    comment and learns what a cold cycle learns (the required set and `isRequired`, the
    merge bases, the docs builds, the first-seen times the stamps carry); each later one is
    a fresh process's cycle (no reports kept), as the service's first will be. Only the write
    pacing is lifted. Then the audit moves back an hour: the cold start happened over an
    hour ago, so the service's write budgets start fresh.
    """
    from bot.app import build_clients, make_cycle
    from bot.settings import load_settings
    from bot.state.store import Store

    loaded = load_settings(str(config), environ={})
    settings = loaded.model_copy(update={"policy": loaded.policy.model_copy(update=UNPACED)})
    state = Path(settings.state.path)
    lines: list[str] = []
    with Store.open(state) as store:
        for _ in range(rounds):
            clients = build_clients(settings, settings.repos)
            try:
                cycle = make_cycle(settings, clients, store, dry_run=False, out=None)
                summary = cycle.run(settings.repos)
            finally:
                clients.close()
            lines.append(summary.line())
            if summary.failed:
                raise SettleError(f"the settle cycle failed: {summary.line()}")
            if len(lines) > 1 and summary.created + summary.edited + summary.deferred == 0:
                break
        else:
            raise SettleError(
                f"{rounds} cycles of the bot and each still wrote; the last: {lines[-1]}"
            )
    with sqlite3.connect(state) as db:
        db.execute("UPDATE audit SET at = ?", (to_text(datetime.now(UTC) - timedelta(hours=1)),))
    return {"comments": len(own_bodies(world)), "cycles": lines}


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

    @staticmethod
    def refreshed(lines: list[str]) -> list[int]:
        """Pull requests seen by each webhook refresh logged in `lines`."""
        found = []
        for line in lines:
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


@dataclass(frozen=True)
class Size:
    """One measured burst: `events` check runs on `prs` pull requests over `seconds`."""

    events: int
    prs: int
    seconds: float

    def bound(self, debounce: float) -> float:
        """The event-to-comment p95 allowed: the debounce, 5 s, and one second per pull
        request in the burst (the bot's writes are >= 1 s apart, GitHub's write pacing)."""
        return debounce + 5 + self.prs

    def label(self) -> str:
        """e.g. "25 events on 5 PRs over 2 s"."""
        return f"{self.events} events on {self.prs} PRs over {self.seconds:g} s"


_FIRST = re.compile(
    r"comments created (?P<created>\d+), edited (?P<edited>\d+), left (?P<left>\d+), "
    r"deferred (?P<deferred>\d+)"
)


def first_cycle(bot: Bot, sandbox: Sandbox, world: World, before: dict[int, str],
                timeout_s: float) -> dict[str, Any]:  # fmt: skip
    """The service's first cycle, over the settled state: it must write nothing.

    Raises FirstCycleWrote, naming what it wrote and how the first changed body differs
    from the settled one, when it created, edited or deferred anything (or failed).
    """
    bot.wait_line("cycle:", timeout_s)
    line = next(text for _, text in bot.lines if "cycle:" in text)
    summary = line[line.index("cycle:") :].removesuffix(" event=cycle")
    counts = {k: int(v) for k, v in m.groupdict().items()} if (m := _FIRST.search(line)) else {}
    stats = sandbox.stats()
    wrote = counts.get("created", 1) + counts.get("edited", 1) + counts.get("deferred", 1)
    if wrote or stats["writes"] or "could not process" in summary or "refused" in summary:
        raise FirstCycleWrote(first_cycle_report(bot, world, before, summary, stats["writes"]))
    return {
        "summary": summary,
        "writes": stats["writes"],
        "github_requests": sum(v for k, v in stats["by_route"].items() if k.startswith("github ")),
        "graphql_points": stats["graphql_points"],
    }


def first_cycle_report(bot: Bot, world: World, before: dict[int, str], summary: str,
                       writes: int) -> str:  # fmt: skip
    """What the first cycle wrote, and where the first changed comment differs."""
    after = own_bodies(world)
    changed = sorted(n for n in after.keys() | before.keys() if after.get(n) != before.get(n))
    written = [text.split(" on ", 1)[-1].split()[0] for _, text in bot.lines
               if "comment edited on" in text or "comment created on" in text]  # fmt: skip
    text = [
        "FAIL: the service's first cycle over the settled state wrote to GitHub, so the "
        "settle and the bot disagree and the webhook figures would measure the write "
        "budget, not the fast path.",
        f"  its summary: {summary}",
        f"  writes the sandbox saw: {writes}; comments changed: {len(changed)}"
        f" (first: {', '.join(f'#{n}' for n in changed[:10]) or 'none'})",
        f"  logged: {', '.join(written[:10]) or 'no write logged'}",
    ]
    if changed:
        number = changed[0]
        diff = difflib.unified_diff(
            before.get(number, "").splitlines(), after.get(number, "").splitlines(),
            f"settled #{number}", f"after the first cycle #{number}", lineterm="", n=0,
        )  # fmt: skip
        text += ["  " + d for d in list(diff)[:40]]
    return "\n".join(text)


def measure(args: argparse.Namespace, world: World, sandbox: Sandbox, bot: Bot,
            sender: WebhookSender, pulls: list[int], size: Size, *, tag: str,
            seed: int) -> dict[str, Any]:  # fmt: skip
    """One burst delivered as webhooks to the running bot, until its comments show it all."""
    first_line, first_sent = len(bot.lines), len(sender.sent)
    sandbox.reset_stats()
    sandbox.clear_requests()
    burst = Burst()
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(world, burst, stop), daemon=True)
    watcher.start()
    made = make_burst(
        world, pulls, events=size.events, seconds=size.seconds, tag=tag, rng=random.Random(seed)
    )
    burst.numbers, burst.names, burst.at = made.numbers, made.names, made.at
    sender.wait_idle(120)
    deadline = time.monotonic() + args.timeout
    while len(burst.seen) < len(burst.names) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(args.quiet_seconds)  # quiet: nothing more should happen
    stop.set()
    watcher.join()
    stats = stats_of(sandbox)
    reads = read_times(sandbox)
    read_latency = [next((t for t in reads if t >= at), math.inf) - at for at in burst.at]
    lines = [text for _, text in bot.lines[first_line:]]
    refreshed = bot.refreshed(lines)
    statuses = [d.status for d in sender.sent[first_sent:]]
    latency = quantiles([burst.seen[i] - burst.at[i] for i in burst.seen])
    bound = size.bound(args.debounce)
    p95 = latency["p95"]
    return {
        "events": len(burst.names),
        "prs": len(set(burst.numbers)),
        "burst_seconds": size.seconds,
        "deliveries": len(statuses),
        "deliveries_accepted": statuses.count(202),
        "events_in_comment": len(burst.seen),
        "latency_s": latency,
        "bound_s": bound,
        "p95_within_bound": p95 is not None and p95 <= bound,
        "read_latency_s": quantiles([x for x in read_latency if x != math.inf]),
        "refreshes": len(refreshed),
        "refreshed_pulls": sum(refreshed),
        "refreshes_held": [t[t.index("held") :] for t in lines if "webhook refresh held" in t],
        "polling_cycles": sum(1 for t in lines if "cycle:" in t),
        **stats,
        "github_requests_per_refreshed_pull": round(
            stats["github_requests"] / max(1, sum(refreshed)), 3
        ),
        "graphql_points_per_refreshed_pull": round(
            stats["graphql_points"] / max(1, sum(refreshed)), 3
        ),
        "batched_reads_allowed": sum(math.ceil(n / 50) for n in refreshed),
        "duplicate_comments": duplicates(world, pulls),
    }


def verdict_line(size: Size, figures: dict[str, Any], debounce: float) -> str:
    """One line: the burst, its event-to-comment latency and the bound, PASS or MISS."""
    lat = figures["latency_s"]
    verdict = "PASS" if figures["p95_within_bound"] else "MISS"
    shown = f"{figures['events_in_comment']} of {figures['events']} events in their comment"
    return (
        f"burst of {size.label()}: {shown}; event -> comment p50 / p95 / max "
        f"{lat['p50']} / {lat['p95']} / {lat['max']} s; bound debounce {debounce:g} s + 5 s + "
        f"{size.prs} x 1 s = {figures['bound_s']:g} s: {verdict}"
    )


def webhook_run(args: argparse.Namespace, world: World, sandbox: Sandbox, config: Path,
                sizes: list[tuple[Size, list[int]]], log: IO[str]) -> dict[str, Any]:  # fmt: skip
    """Phase 1: start the service over the settled state, check its first cycle writes
    nothing, then deliver each burst as webhooks and measure it."""
    port = int(re.search(r"port = (\d+)", config.read_text())[1])  # type: ignore[index]
    before = own_bodies(world)
    sandbox.reset_stats()
    sandbox.clear_requests()
    bot = Bot(config, log)
    try:
        first = first_cycle(bot, sandbox, world, before, args.timeout)
        print(f"the service's first cycle wrote nothing: {first['summary']}", flush=True)
        sender = WebhookSender(f"http://127.0.0.1:{port}/webhook", SECRET).attach(world)
        bursts = []
        for index, (size, pulls) in enumerate(sizes):
            figures = measure(
                args, world, sandbox, bot, sender, pulls, size, tag=f"w{index}",
                seed=args.seed + 10 * index,
            )  # fmt: skip
            print(verdict_line(size, figures, args.debounce), flush=True)
            bursts.append(figures)
        sender.close()
        shutdown_s = bot.stop()
    finally:
        if bot.proc.poll() is None:
            bot.proc.kill()
    return {"first_cycle": first, "bursts": bursts, "shutdown_s": shutdown_s}


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


def sizes_of(args: argparse.Namespace, open_numbers: list[int]) -> list[tuple[Size, list[int]]]:
    """The measured bursts and their pull requests: --burst on --burst-prs, then the small
    burst (--small-burst on --small-burst-prs, other pull requests) unless it is the same."""
    rng = random.Random(args.seed)
    first = Size(args.burst, min(args.burst_prs or max(1, args.prs // 10), len(open_numbers)),
                 args.burst_seconds)  # fmt: skip
    pulls = sorted(rng.sample(open_numbers, first.prs))
    sizes = [(first, pulls)]
    small = Size(args.small_burst, args.small_burst_prs, args.small_burst_seconds)
    if small.events and small.prs and small != first:
        rest = sorted(set(open_numbers) - set(pulls)) or open_numbers
        sizes.append((small, sorted(rng.sample(rest, min(small.prs, len(rest))))))
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Run both phases and print the figures (last line: JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prs", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--burst", type=int, default=1000, help="check events in the burst")
    parser.add_argument("--burst-prs", type=int, default=None, help="default: prs / 10")
    parser.add_argument("--burst-seconds", type=float, default=10.0)
    parser.add_argument("--small-burst", type=int, default=25, help="events of the second burst")
    parser.add_argument("--small-burst-prs", type=int, default=5, help="0: no second burst")
    parser.add_argument("--small-burst-seconds", type=float, default=2.0)
    parser.add_argument("--debounce", type=float, default=10.0)
    parser.add_argument("--quiet-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-polling", action="store_true")
    args = parser.parse_args(argv)
    world = World()
    t0 = time.monotonic()
    seed_scale(world, prs=args.prs, checks=args.checks, rng_seed=args.seed)
    sizes = sizes_of(args, sorted(world.repo(SCALE_REPO).pulls))
    with Sandbox(world) as sandbox, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = write_config(sandbox, folder, port=free_port(), debounce=args.debounce)
        try:
            settled = settle(world, config)
        except SettleError as exc:
            print(f"FAIL: {exc}", file=sys.stderr, flush=True)
            return 1
        print(f"seeded {args.prs} pull requests and settled {settled['comments']} comments "
              f"in {time.monotonic() - t0:.0f} s, by {len(settled['cycles'])} cycles of the bot "
              "(pacing lifted):", flush=True)  # fmt: skip
        for line in settled["cycles"]:
            print(f"  {line}", flush=True)
        with (folder / "bot.log").open("w", encoding="utf-8") as log:
            try:
                hooks = webhook_run(args, world, sandbox, config, sizes, log)
            except FirstCycleWrote as exc:
                print(str(exc), file=sys.stderr, flush=True)
                return 1
        print("webhooks: " + json.dumps(hooks), flush=True)
        polled = None
        if not args.skip_polling:
            polled = polling_run(args, world, sandbox, config, sizes[0][1])
            print("polling: " + json.dumps(polled), flush=True)
    bursts = hooks["bursts"]
    targets = {
        "first_cycle_writes_nothing": hooks["first_cycle"]["writes"] == 0,
        **{f"p95_le_bound_{b['events']}_on_{b['prs']}": b["p95_within_bound"] for b in bursts},
        "le_1_graphql_read_per_50_refreshed": all(
            b["batched_reads"] <= b["batched_reads_allowed"] for b in bursts
        ),
        "no_duplicates": all(b["duplicate_comments"] == 0 for b in bursts)
        and (polled is None or polled["duplicate_comments"] == 0),
    }
    result = {
        "prs": args.prs,
        "checks": args.checks,
        "debounce_seconds": args.debounce,
        "settle": settled,
        "webhooks": hooks,
        "polling": polled,
        "targets": targets,
    }
    print(json.dumps(result))
    complete = all(b["events_in_comment"] == b["events"] for b in bursts)
    return 0 if complete and targets["no_duplicates"] else 1


if __name__ == "__main__":
    sys.exit(main())
