"""Benchmark one bot cycle against the loopback sandbox, next to a naive REST poller.

    python benchmarks/cycle.py --prs 2000 --checks 60 --latency-ms 50
    python benchmarks/cycle.py --prs 50 --checks 10 --latency-ms 0      # the CI size
    python benchmarks/cycle.py --prs 2000 --checks 60 --skip-naive --failing-fraction 0.05
                                        # 5 % of heads failing (default: most heads fail)
    python benchmarks/cycle.py ... --no-history   # the same without a failure's history
                                        # (issue 27: its warm cycle within +5 points)

It starts the sandbox in its own process (`python -m bot_sandbox serve --scenario scale`,
every answer delayed by --latency-ms), writes a temporary TOML configuration pointing the
bot at it, and runs the real bot, `python -m bot once --config CFG`, four times:

- cold: empty state;
- warm: right after, nothing changed in the sandbox;
- stateless: the same, with no state at all (`state.path = ""`, run in an empty folder, as a
  scheduled GitHub Actions job would): everything it needs comes from the comments' stamps,
  so it must write nothing; what it costs beyond warm is what the state's caches save;
- changed: after the sandbox's control API gave --change-fraction of the heads a new
  check state.

Then benchmarks/warm.py runs three cycles in ONE process, as `run` does (the reports of one
cycle kept for the next): "rebuilt" (no report kept yet: every pull request parsed,
reconciled and keyed, what every cycle did before), "reused" (nothing changed) and "changed"
(--change-fraction of the heads changed first); their CPU is printed side by side with the
naive poller's (the CPU ratio naive/reused and the request ratio).

Then (unless --skip-naive) it runs benchmarks/naive.py over the same sandbox: PyGithub,
per open pull request: list check runs, combined status, list issue comments.

Issue 16's own requests are printed apart per run: the merge base's compares (REST) and
its commits' checks (GraphQL CommitContexts), and the failing runs' annotations (GraphQL
CheckRunAnnotations).

Sandbox statistics are reset before each run; GitHub requests by kind, GraphQL points (the
sandbox charges GitHub's cost formula), Read the Docs requests and writes come from them.
Wall time, CPU (user+sys) and peak RSS are those of the child process (os.wait4).

Writes are paced by the bot (>= 1 s apart, <= 80 a minute, <= 500 an hour), so a cold
cycle over many pull requests writes part of its comments and defers the rest; the later
cycles then create some of the deferred comments (carry-over) within what is left of the
budgets. A create in the warm or changed cycle is carry-over; an edit is a changed fact
(which includes pending signals turning stale with time). The table shows the writes the
bot had recorded in the hour before each cycle, which is what its hourly budget counts.

The sandbox's REST rate limit (5,000/h, as on GitHub) is shared by all runs and not reset
between them; the naive poller runs last and stops when it is rate-limited, and the
requests of its full sweep are then projected from the pull requests it read.

The last line printed is one JSON object: prs, checks, latency_ms, cold, warm, changed,
naive (null with --skip-naive), each run holding github_requests, graphql_points,
rtd_requests, writes, wall_s, cpu_s, peak_rss_mb and details. Exit status 1 when a child
failed (the measurements are still printed), 2 when the sandbox could not be started.
All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
NAIVE = Path(__file__).resolve().with_name("naive.py")
WARM = Path(__file__).resolve().with_name("warm.py")
RUNS = ("cold", "warm", "stateless", "changed", "naive")
SERVICE_RUNS = ("rebuilt", "reused", "changed")
GITHUB_REST_PER_HOUR = 5000
NAIVE_REST_LIMIT = 1_000_000
_SUMMARY = re.compile(
    r"comments created (?P<created>\d+), edited (?P<edited>\d+), left (?P<left>\d+), "
    r"deferred (?P<deferred>\d+)"
)


@dataclass(frozen=True)
class Child:
    """A finished child process: exit code, output, and what it cost."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    timed_out: bool


def child_env() -> dict[str, str]:
    """The environment of every child: no proxies, no CI_STATUS_BOT_* overrides."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CI_STATUS_BOT_") and k.lower() not in ("http_proxy", "https_proxy")
    }
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def run_child(cmd: Sequence[str], *, timeout_s: float, cwd: Path = ROOT) -> Child:
    """Run a command to completion (killed after timeout_s); its own rusage via os.wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=child_env()
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Child(
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
            timed_out=killed.is_set(),
        )


class SandboxProcess:
    """`python -m bot_sandbox serve` in its own process, and its control API."""

    def __init__(self, args: argparse.Namespace, log: IO[bytes], extra: Sequence[str] = ()) -> None:
        cmd = [
            sys.executable, "-m", "bot_sandbox", "serve", "--host", "127.0.0.1", "--port", "0",
            "--latency-ms", str(args.latency_ms), "--scenario", "scale",
            "--prs", str(args.prs), "--checks", str(args.checks), "--seed", str(args.seed),
            *_failing(args), *extra,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=ROOT,
            env=child_env(),
        )  # fmt: skip
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.info: dict[str, Any] = {}

    def ready(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the sandbox's JSON line (its URLs, token and repository)."""
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if readable else b""
        if not line:
            raise RuntimeError(f"the sandbox printed no address line within {timeout_s:.0f} s")
        self.info = json.loads(line)
        for key in ("github_url", "rtd_url", "control_url"):
            host = urlsplit(self.info[key]).hostname
            if host != "127.0.0.1":
                raise RuntimeError(f"the sandbox's {key} is not on 127.0.0.1: {self.info[key]}")
        return self.info

    def control(self, method: str, name: str, payload: Any = None) -> Any:
        """Call /_sandbox/<name> and return its JSON answer."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self.info['control_url']}/{name}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with self._opener.open(request, timeout=60) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        """Terminate the sandbox process (kill it if it does not stop)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _failing(args: argparse.Namespace) -> list[str]:
    """The sandbox's --failing-fraction, where one was given."""
    fraction = getattr(args, "failing_fraction", None)
    return [] if fraction is None else ["--failing-fraction", str(fraction)]


BOT_CODE = ("bot", "templates")


def bot_commit() -> str | None:
    """The last commit that changed the bot's code (sandbox excluded); "+dirty" if edited since."""
    try:
        last = subprocess.run(
            ["git", "log", "-1", "--format=%h", "HEAD", "--", *BOT_CODE],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        diff = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *BOT_CODE], cwd=ROOT)
    except OSError:
        return None
    if last.returncode != 0 or not last.stdout.strip():
        return None
    return last.stdout.strip() + ("+dirty" if diff.returncode != 0 else "")


POLICY: dict[str, str] = {}  # [policy] keys every configuration written carries (--no-history)


def write_config(info: dict[str, Any], folder: Path, *, stateless: bool = False) -> Path:
    """A TOML configuration pointing the bot at the sandbox, its state in `folder` (none at
    all with `stateless`)."""
    q = json.dumps  # a JSON string is a valid TOML basic string for these values
    state = "" if stateless else str(folder / "state.sqlite3")
    text = (
        f"[github]\napi_url = {q(info['github_url'])}\ntoken = {q(info['token'])}\n\n"
        f"[readthedocs]\napi_url = {q(info['rtd_url'])}\n"
        f"business_api_url = {q(info['rtd_url'])}\n\n"
        f"[codecov]\napi_url = {q(info['codecov_url'])}\n\n"
        f"[azure_pipelines]\napi_url = {q(info['azure_url'])}\n\n"
        f"[state]\npath = {q(state)}\n\n"
        '[log]\nformat = "text"\nlevel = "INFO"\n\n'
        "[policy]\n"
        + "".join(f"{k} = {v}\n" for k, v in POLICY.items())
        + f"\n[[repos]]\nname = {q(info['repo'])}\n"
    )
    path = folder / ("bot-stateless.toml" if stateless else "bot.toml")
    path.write_text(text, encoding="utf-8")
    return path


def _audit(state: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on the bot's state (none before the state exists)."""
    if not state.exists():
        return []
    db = sqlite3.connect(f"{state.as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(query, args).fetchall()
    finally:
        db.close()


def last_audit_id(state: Path) -> int:
    """The id of the newest row of the bot's write audit (0 when there is none)."""
    rows = _audit(state, "SELECT max(id) FROM audit")
    return int(rows[0][0] or 0) if rows else 0


def writes_last_hour(state: Path) -> int:
    """Comment writes the bot recorded in the last hour (what its hourly budget counts)."""
    since = datetime.fromtimestamp(time.time() - 3600, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    query = "SELECT count(*) FROM audit WHERE at >= ? AND action IN ('created', 'edited')"
    rows = _audit(state, query, since)
    return int(rows[0][0]) if rows else 0


def write_times(state: Path, after_id: int) -> list[datetime]:
    """When the bot recorded its comment writes (created/edited) after audit row `after_id`."""
    rows = _audit(
        state,
        "SELECT at FROM audit WHERE id > ? AND action IN ('created', 'edited') ORDER BY id",
        after_id,
    )
    return [datetime.fromisoformat(r[0]) for r in rows]


def required_pairs(state: Path) -> dict[str, int]:
    """(base branch, name) pairs in the bot's required cache: known, and how many required."""
    try:
        rows = _audit(
            state,
            "SELECT count(*), count(required), coalesce(sum(required), 0) FROM required_checks",
        )
    except sqlite3.OperationalError:  # a state written before the cache existed
        return {}
    if not rows:
        return {}
    total, said, required = rows[0]
    try:
        sets = _audit(state, "SELECT count(*) FROM required_sets")[0][0]
    except (sqlite3.OperationalError, IndexError):  # a state written before the sets existed
        sets = 0
    return {"cached": total, "said": said, "required": required, "base_branches_read": sets}


def pacing(times: list[datetime]) -> dict[str, Any]:
    """Most writes in any 60-s window and the closest two writes, from the bot's audit.

    The audit stores times to the second, so a gap of 0 s proves two writes < 1 s apart.
    """
    stamps = [t.timestamp() for t in times]
    most, start = 0, 0
    for end, at in enumerate(stamps):
        while at - stamps[start] >= 60:
            start += 1
        most = max(most, end - start + 1)
    gaps = [b - a for a, b in pairwise(stamps)]
    return {
        "writes_60s_window_max": most,
        "min_write_gap_s": min(gaps) if gaps else None,
        "write_pairs_same_second": sum(1 for g in gaps if g == 0),
    }


def measure(child: Child, stats: dict[str, Any]) -> dict[str, Any]:
    """One run's numbers: the sandbox's statistics and the child's costs."""
    github: dict[str, int] = {}
    rtd: dict[str, int] = {}
    provider: dict[str, int] = {}  # Codecov and Azure DevOps (issue 25), by service and route
    for key, count in stats["by_route"].items():
        service, _, kind = key.partition(" ")
        if service in ("codecov", "azure"):
            provider[f"{service} {kind}"] = count
        else:
            (rtd if service == "rtd" else github)[kind] = count
    per_minute = stats.get("writes_per_minute") or {}
    return {
        "github_requests": sum(github.values()),
        "graphql_points": stats["graphql_points"],
        "rtd_requests": sum(rtd.values()),
        "writes": stats["writes"],
        "wall_s": round(child.wall_s, 2),
        "cpu_s": round(child.cpu_s, 2),
        "peak_rss_mb": round(child.peak_rss_mb, 1),
        "requests_by_kind": github,
        "graphql_by_query": stats.get("by_query", {}),
        "rtd_requests_by_kind": rtd,
        "provider_requests": sum(provider.values()),
        "provider_requests_by_kind": provider,
        "writes_per_minute": per_minute,
        "writes_per_minute_max": max(per_minute.values(), default=0),
        "exit_code": child.returncode,
        "timed_out": child.timed_out,
    }


def bot_cycle(
    sandbox: SandboxProcess, config: Path, state: Path, *, timeout_s: float, cwd: Path = ROOT
) -> dict[str, Any]:
    """Reset the sandbox's statistics, run `python -m bot once` in `cwd`, measure it."""
    sandbox.control("POST", "reset-stats")
    before = last_audit_id(state)
    hour_used = writes_last_hour(state)
    commit = bot_commit()
    child = run_child(
        [sys.executable, "-m", "bot", "once", "--config", str(config)],
        timeout_s=timeout_s,
        cwd=cwd,
    )
    result = measure(child, sandbox.control("GET", "stats"))
    lines = [ln for ln in child.stdout.splitlines() if ln.startswith("cycle:")]
    result["summary"] = lines[-1] if lines else ""
    found = _SUMMARY.search(result["summary"])
    for key in ("created", "edited", "left", "deferred"):
        result[key] = int(found[key]) if found else None
    result.update(pacing(write_times(state, before)))
    result["writes_in_last_hour_at_start"] = hour_used
    result["required_pairs"] = required_pairs(state)
    result["bot_commit"] = commit
    kinds = result["requests_by_kind"]
    result["writes_created"] = kinds.get("POST comments.create", 0)
    result["writes_edited"] = kinds.get("PATCH comments.edit", 0)
    problems = [
        ln for ln in child.stderr.splitlines() if ln.split(" ", 2)[1:2] in (["warning"], ["error"])
    ]
    result["log_warnings"] = len(problems)
    if problems:
        result["log_warnings_first"] = problems[:5]
    if child.returncode != 0:
        result["stderr_tail"] = child.stderr.strip().splitlines()[-5:]
    return result


def stateless_cycle(
    sandbox: SandboxProcess, info: dict[str, Any], folder: Path, timeout_s: float
) -> dict[str, Any]:
    """The warm cycle again with no state at all, in an empty folder that must stay empty."""
    runner = folder / "runner"
    runner.mkdir()
    config = write_config(info, folder, stateless=True)
    print("running the stateless cycle (no state, an empty folder)...", flush=True)
    result = bot_cycle(sandbox, config, folder / "none.sqlite3", timeout_s=timeout_s, cwd=runner)
    result["files_left"] = sorted(p.name for p in runner.iterdir())
    return result


def settle(sandbox: SandboxProcess, config: Path, state: Path) -> int:
    """Bring the state to what it is once the cold start has been written out.

    A cold start of 2,000 comments takes the bot over four hours (500 writes an hour, >= 1 s
    apart), so the warm and changed cycles would otherwise measure only that backlog. Here
    the bot's own planning code renders each comment the cold cycle deferred; the sandbox
    stores it under the bot's login (its control API, not a GitHub write); the state records
    it as the bot would; and the audit's write times move back an hour, as if that hour had
    passed. Nothing of this is measured.
    """
    from bot.app import build_clients, make_cycle, now_utc
    from bot.core.history import FailingIndex
    from bot.core.model import PullSnapshot
    from bot.cycle.model import sha256
    from bot.settings import load_settings
    from bot.state.store import Store

    settings = load_settings(str(config))
    repo = settings.repos[0]
    clients = build_clients(settings, settings.repos)
    with Store.open(state) as store:
        cycle = make_cycle(settings, clients, store, dry_run=False)
        read = clients.github.open_pulls(repo.name, now=now_utc(), required=store)
        snapshots = [s for s in read if isinstance(s, PullSnapshot)]
        index = FailingIndex()  # as a pass has it: every open head (a failure's `elsewhere`)
        for snapshot in snapshots:
            index.add(snapshot)
        cycle.reports.index[repo.name] = index
        plans = [
            cycle.rendered(p) for s in snapshots if (p := cycle.plan(s, repo)).action != "leave"
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
    clients.close()
    with sqlite3.connect(state) as db:
        rows = db.execute("SELECT id, at FROM audit").fetchall()
        for row_id, at in rows:
            earlier = datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ") - timedelta(hours=1)
            db.execute(
                "UPDATE audit SET at = ? WHERE id = ?",
                (earlier.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), row_id),
            )
    return len(plans)


def required_signals(config: Path, state: Path) -> dict[str, int]:
    """Signals by `required` as the cycle's read fills them from the state's cache (read-only)."""
    from bot.app import build_clients, now_utc
    from bot.core.model import PullSnapshot
    from bot.core.required import expected_signals, with_required
    from bot.settings import load_settings
    from bot.state.readonly import open_read_only

    settings = load_settings(str(config))
    clients = build_clients(settings, settings.repos)
    counts = {"true": 0, "false": 0, "null": 0, "expected": 0}
    word = {True: "true", False: "false", None: "null"}
    try:
        with open_read_only(state) as cache:
            for repo in settings.repos:
                for snap in clients.github.open_pulls(repo.name, now=now_utc(), required=cache):
                    if isinstance(snap, PullSnapshot):
                        checks = snap.required_checks
                        signals = with_required(snap.signals, checks)
                        for signal in signals:
                            counts[word[signal.required]] += 1
                        counts["expected"] += len(expected_signals(signals, checks, repo.expected))
    finally:
        clients.close()
    return counts


def naive_poll(
    sandbox: SandboxProcess, *, prs: int, lift_limit: bool, timeout_s: float
) -> dict[str, Any]:
    """Reset the sandbox's statistics, run benchmarks/naive.py, measure it.

    The sandbox's REST rate limit (5,000/h, like GitHub's) is shared with the bot's cycles.
    With `lift_limit` it is raised first so the poller finishes its sweep; otherwise the
    poller stops when it runs out, and the requests a full sweep would take are projected
    from the pull requests it did read.
    """
    sandbox.control("POST", "reset-stats")
    core = sandbox.control("GET", "stats")["rate_limit"]["core"]
    if lift_limit:
        sandbox.control("POST", "rate-limit", {"resource": "core", "limit": NAIVE_REST_LIMIT})
    info = sandbox.info
    child = run_child(
        [sys.executable, str(NAIVE), "--github-url", info["github_url"],
         "--token", info["token"], "--repo", info["repo"]],
        timeout_s=timeout_s,
    )  # fmt: skip
    result = measure(child, sandbox.control("GET", "stats"))
    result["rest_remaining_at_start"] = core["remaining"]
    lines = child.stdout.strip().splitlines()
    read = json.loads(lines[-1]) if child.returncode == 0 and lines else {}
    result["read"] = read
    result["rate_limited"] = bool(read.get("rate_limited"))
    result["pulls_read"] = read.get("pulls")
    if result["rate_limited"] and read.get("pulls"):
        per_pull = result["github_requests"] / read["pulls"]
        result["projected_full_sweep_github_requests"] = round(per_pull * prs)
    result["over_github_rest_hourly_limit"] = result["github_requests"] > GITHUB_REST_PER_HOUR
    if child.returncode != 0:
        result["stderr_tail"] = child.stderr.strip().splitlines()[-5:]
    return result


def service_cycles(
    sandbox: SandboxProcess, config: Path, args: argparse.Namespace
) -> dict[str, Any] | None:
    """benchmarks/warm.py over the warm state: three cycles of one process, measured."""
    print("running three cycles in one process (rebuilt, reused, changed)...", flush=True)
    child = run_child(
        [sys.executable, str(WARM), "--config", str(config), "--control-url",
         sandbox.info["control_url"], "--change-fraction", str(args.change_fraction)],
        timeout_s=args.timeout,
    )  # fmt: skip
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        return {"exit_code": child.returncode, "stderr_tail": child.stderr.splitlines()[-5:]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["exit_code"] = child.returncode
    result["process_cpu_s"] = round(child.cpu_s, 2)
    return result


def service_report(results: dict[str, dict[str, Any] | None]) -> list[str]:
    """The one-process cycles side by side, with the naive poller's CPU and requests."""
    service, naive = results.get("service"), results.get("naive")
    if not service or service.get("exit_code") != 0:
        return [f"one-process cycles failed: {service}"]
    rows = [
        (label, [service[name][key] for name in SERVICE_RUNS])
        for label, key in (
            ("CPU s (the cycle)", "cpu_s"),
            ("wall s", "wall_s"),
            ("GitHub requests", "github_requests"),
            ("GraphQL points", "graphql_points"),
            ("writes (POST/PATCH)", "writes"),
            ("heads changed first", "changed_heads"),
        )
    ]
    out = [
        "one process, cycles as `run` keeps them (benchmarks/warm.py):",
        table(rows, SERVICE_RUNS),
    ]
    reused, rebuilt, changed = service["reused"], service["rebuilt"], service["changed"]
    share = changed["changed_heads"] / max(1, rebuilt["pulls_seen"])
    changed_target = 1.5 + share * rebuilt["cpu_s"]
    out.append(
        "THE TARGET FIGURE (issue 19): the warm cycle, nothing changed, in the process that ran "
        "the last cycle (`run`): the 'reused' column"
    )
    out.append(
        f"warm cycle (reused) CPU {reused['cpu_s']:.2f} s (target <= 1.5, stretch <= 1.0); "
        f"previous approach (reports rebuilt every cycle) {rebuilt['cpu_s']:.2f} s in the same "
        f"run: {_ratio(rebuilt['cpu_s'], reused['cpu_s'])}x"
    )
    out.append(
        f"warm cycle (reused): {reused['github_requests']} requests, {reused['graphql_points']} "
        f"points (targets <= 45 / <= 45), {reused['writes']} writes (target 0); peak RSS "
        f"{service['peak_rss_mb']} MB (target <= 250); imports {service['imports_cpu_s']} s CPU "
        "(once per process, not in any cycle)"
    )
    out.append(
        f"changed cycle ({changed['changed_heads']} heads, {share:.1%}): CPU {changed['cpu_s']:.2f}"
        f" s (target <= 1.5 + {share:.1%} of the rebuilt cycle's {rebuilt['cpu_s']:.2f} s = "
        f"{changed_target:.2f} s)"
    )
    if naive is not None:
        out.append(
            f"naive poller / warm cycle (reused): CPU {naive['cpu_s']:.2f} / {reused['cpu_s']:.2f}"
            f" s = {_ratio(naive['cpu_s'], reused['cpu_s'])}x (target >= 20), GitHub requests "
            f"{naive['github_requests']} / {reused['github_requests']} = "
            f"{_ratio(naive['github_requests'], reused['github_requests'])}x (target >= 100)"
        )
    warm = results.get("warm")
    if warm is not None:
        out.append(
            f"a warm `once` (a fresh process: imports, the reports the state kept, issue 31): "
            f"{warm['cpu_s']:.2f} s CPU, the whole process: "
            f"{_ratio(warm['cpu_s'], reused['cpu_s'])}x the warm cycle inside `run` "
            f"({reused['cpu_s']:.2f} s; target <= 2x)"
        )
    for name in SERVICE_RUNS:
        out.append(f"{name}: {service[name]['summary']}")
    return out


def _ratio(top: float, bottom: float) -> str:
    return f"{top / bottom:.1f}" if bottom else "-"


def naive_ratio(results: dict[str, dict[str, Any] | None]) -> dict[str, float | None]:
    """Naive/warm GitHub requests: measured, and projected to a full sweep when rate-limited."""
    naive, warm = results.get("naive"), results.get("warm")
    if naive is None or warm is None or not warm["github_requests"]:
        return {"naive_over_warm_github_requests": None}
    out: dict[str, float | None] = {
        "naive_over_warm_github_requests": round(
            naive["github_requests"] / warm["github_requests"], 2
        )
    }
    projected = naive.get("projected_full_sweep_github_requests")
    if projected:
        out["naive_over_warm_github_requests_projected"] = round(
            projected / warm["github_requests"], 2
        )
    return out


# -- output ------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def table(rows: list[tuple[str, list[Any]]], columns: Sequence[str]) -> str:
    """A plain text table: one label column, then one column per run."""
    head = ["", *columns]
    body = [[label, *(_cell(v) for v in values)] for label, values in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])

    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *(fmt(r) for r in body)])


def report(results: dict[str, dict[str, Any] | None]) -> str:
    """The readable summary of every run."""
    runs = [name for name in RUNS if results.get(name) is not None]
    got = {name: results[name] or {} for name in runs}

    def row(label: str, key: str) -> tuple[str, list[Any]]:
        return label, [got[name].get(key) for name in runs]

    rows = [
        row("GitHub requests", "github_requests"),
        row("GraphQL points", "graphql_points"),
        row("Read the Docs requests", "rtd_requests"),
        row("Codecov + Azure DevOps requests", "provider_requests"),
        row("writes (POST/PATCH)", "writes"),
        row("  comments created", "writes_created"),
        row("  comments edited", "writes_edited"),
        row("deferred (bot summary)", "deferred"),
        row("writes in the hour before", "writes_in_last_hour_at_start"),
        row("writes max / calendar minute", "writes_per_minute_max"),
        row("writes max / any 60 s (audit)", "writes_60s_window_max"),
        row("write pairs in one second", "write_pairs_same_second"),
        row("rate limited (REST 5,000/h)", "rate_limited"),
        row("wall s", "wall_s"),
        row("CPU s (user+sys)", "cpu_s"),
        row("peak RSS MB", "peak_rss_mb"),
        row("exit code", "exit_code"),
    ]
    filled = got.get("warm", {}).get("required_signals")
    if filled:
        rows.append(
            (
                "warm: signals required/optional/null (never reported)",
                [f"{filled['true']}/{filled['false']}/{filled['null']}"
                 f" ({filled.get('expected', 0)})" if n == "warm" else "" for n in runs],
            )
        )  # fmt: skip
    kinds = sorted({k for name in runs for k in got[name]["requests_by_kind"]})
    kinds_rtd = sorted({k for name in runs for k in got[name]["rtd_requests_by_kind"]})
    rows.append(("GitHub requests by kind:", ["" for _ in runs]))
    rows += [(f"  {k}", [got[n]["requests_by_kind"].get(k, 0) for n in runs]) for k in kinds]
    queries = sorted({q for name in runs for q in got[name].get("graphql_by_query", {})})
    rows.append(("GraphQL requests by query:", ["" for _ in runs]))
    rows += [
        (f"  {q}", [got[n].get("graphql_by_query", {}).get(q, 0) for n in runs]) for q in queries
    ]
    rows.append(("merge base (issue 16): compare + CommitContexts", [
        got[n]["requests_by_kind"].get("GET compare", 0)
        + got[n].get("graphql_by_query", {}).get("CommitContexts", 0)
        for n in runs
    ]))  # fmt: skip
    rows += feature_rows(got, runs)
    rows.append(("Read the Docs requests by kind:", ["" for _ in runs]))
    rows += [
        (f"  {k}", [got[n]["rtd_requests_by_kind"].get(k, 0) for n in runs]) for k in kinds_rtd
    ]
    return table(rows, runs)


def feature_rows(got: dict[str, dict[str, Any]], runs: list[str]) -> list[tuple[str, list[Any]]]:
    """Issue 16's own requests per run, apart: the merge base's compares (REST), its
    commits' checks (GraphQL CommitContexts) and the failing runs' annotations (GraphQL)."""

    def count(name: str, kind: str, key: str) -> int:
        return int(got[name].get(key, {}).get(kind, 0))

    return [
        ("  merge base: compare (REST)",
         [count(n, "GET compare", "requests_by_kind") for n in runs]),
        ("  merge base: CommitContexts (GraphQL)",
         [count(n, "CommitContexts", "graphql_by_query") for n in runs]),
        ("annotations (issue 16): CheckRunAnnotations (GraphQL)",
         [count(n, "CheckRunAnnotations", "graphql_by_query") for n in runs]),
        ("history (issue 27): CheckAttempts (GraphQL)",
         [count(n, "CheckAttempts", "graphql_by_query") for n in runs]),
        ("  history: BranchHistory (GraphQL)",
         [count(n, "BranchHistory", "graphql_by_query") for n in runs]),
        ("  history: statuses (REST)",
         [count(n, "GET statuses.list", "requests_by_kind") for n in runs]),
    ]  # fmt: skip


def notes(results: dict[str, dict[str, Any] | None]) -> list[str]:
    """Sentences on carry-over, the cold cycle's pacing and the naive/warm ratio."""
    out: list[str] = []
    previous: dict[str, Any] | None = None
    for name in ("cold", "warm", "stateless", "changed"):
        run = results.get(name)
        if run is None:
            continue
        out.append(f"{name} summary: {run['summary'] or '(no summary line)'}")
        if name == "stateless":
            out.extend(_stateless_notes(run, results.get("warm")))
            continue
        if previous is not None and previous.get("deferred"):
            out.append(
                f"  {run['writes_created']} of its {run['writes']} writes are carry-over creates "
                f"(the previous cycle deferred {previous['deferred']}); "
                f"{run['writes_edited']} are edits of changed facts"
            )
        for line in run.get("log_warnings_first", []) + run.get("stderr_tail", []):
            out.append(f"  stderr: {line}")
        previous = run
    out.append(
        "Codecov + Azure DevOps requests per cycle (issue 25): "
        + ", ".join(
            f"{n} {results[n]['provider_requests']}"  # type: ignore[index]
            for n in ("cold", "warm", "stateless", "changed")
            if results.get(n) is not None
        )
    )
    commits = {n: r.get("bot_commit") for n, r in results.items() if r and n in RUNS[:4]}
    if len(set(commits.values())) > 1:
        out.append(f"WARNING: the bot's code changed during the benchmark: {commits}")
    cold = results.get("cold")
    if cold is not None:
        out.append(
            f"cold cycle: at most {cold['writes_per_minute_max']} writes in a calendar minute "
            f"(sandbox), {cold['writes_60s_window_max']} in any 60-s window (bot audit, to the "
            f"second); closest writes {_cell(cold['min_write_gap_s'])} s apart by the audit"
        )
    naive, warm = results.get("naive"), results.get("warm")
    ratios = naive_ratio(results)
    if naive is not None and warm is not None and ratios["naive_over_warm_github_requests"]:
        out.append(
            f"naive/warm GitHub requests: {naive['github_requests']} / {warm['github_requests']}"
            f" = {ratios['naive_over_warm_github_requests']:.1f}x"
        )
    if naive is not None:
        out.append(f"naive poller read: {json.dumps(naive['read'])}")
    if naive is not None and naive["over_github_rest_hourly_limit"]:
        out.append(
            f"  the naive sweep sent {naive['github_requests']} REST requests: more than "
            f"GitHub's {GITHUB_REST_PER_HOUR}/h for one token (the sandbox's limit was lifted)"
        )
    if naive is not None and naive["rate_limited"]:
        out.append(
            f"  the naive poller hit the REST rate limit after {naive['pulls_read']} pull "
            f"requests ({naive['rest_remaining_at_start']} REST requests were left after the "
            f"bot's cycles); a full sweep would take about "
            f"{naive.get('projected_full_sweep_github_requests')} requests, "
            f"{ratios.get('naive_over_warm_github_requests_projected')}x the warm cycle"
        )
    for line in (naive or {}).get("stderr_tail", []):
        out.append(f"  naive stderr: {line}")
    return out


def _stateless_notes(run: dict[str, Any], warm: dict[str, Any] | None) -> list[str]:
    """What the stateless run cost beyond the warm one, by kind: what the state's caches save."""
    out = [f"  stateless: {run['writes']} writes; files left in its folder: {run['files_left']}"]
    if warm is None:
        return out
    out.append(
        f"  stateless - warm: GitHub requests {run['github_requests'] - warm['github_requests']:+d}"
        f", GraphQL points {run['graphql_points'] - warm['graphql_points']:+d}, Read the Docs "
        f"requests {run['rtd_requests'] - warm['rtd_requests']:+d}"
    )
    for key in ("requests_by_kind", "rtd_requests_by_kind"):
        for kind in sorted(set(run[key]) | set(warm[key])):
            more = run[key].get(kind, 0) - warm[key].get(kind, 0)
            if more:
                out.append(f"    {kind}: {more:+d}")
    return out


# -- issue 31's figures, against their targets (and an earlier run's beside them) -------


def _get(line: dict[str, Any], *path: str) -> Any:
    value: Any = line
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _div(top: Any, bottom: Any) -> float | None:
    if not isinstance(top, int | float) or not isinstance(bottom, int | float) or not bottom:
        return None
    return float(top) / float(bottom)


def _minus(top: Any, bottom: Any) -> int | None:
    if not isinstance(top, int) or not isinstance(bottom, int):
        return None
    return top - bottom


def _changed_bound(line: dict[str, Any]) -> float | None:
    rebuilt, changed = _get(line, "service", "rebuilt"), _get(line, "service", "changed")
    if not isinstance(rebuilt, dict) or not isinstance(changed, dict):
        return None
    share = changed.get("changed_heads", 0) / max(1, rebuilt.get("pulls_seen", 1))
    return 1.5 + share * float(rebuilt.get("cpu_s", 0.0))


# (figure, how it is read from a run's JSON line, the target's words, whether a value meets it)
Figure = tuple[str, Any, str, Any]
FIGURES: tuple[Figure, ...] = (
    ("warm `once` CPU / warm cycle in `run` CPU (x)",
     lambda j: _div(_get(j, "warm", "cpu_s"), _get(j, "service", "reused", "cpu_s")),
     "<= 2.0", lambda v, j: v <= 2.0),
    ("stateless warm: GitHub requests", lambda j: _get(j, "stateless", "github_requests"),
     "<= 45", lambda v, j: v <= 45),
    ("stateless warm: GraphQL points", lambda j: _get(j, "stateless", "graphql_points"),
     "<= 45", lambda v, j: v <= 45),
    ("stateless warm: Read the Docs requests", lambda j: _get(j, "stateless", "rtd_requests"),
     "(those of warm)", lambda v, j: True),
    ("  of them for a final record (beyond warm's)",
     lambda j: _minus(_get(j, "stateless", "rtd_requests"), _get(j, "warm", "rtd_requests")),
     "0", lambda v, j: v <= 0),
    ("stateless warm: annotation queries",
     lambda j: _get(j, "stateless", "graphql_by_query", "CheckRunAnnotations") or 0,
     "0", lambda v, j: v == 0),
    ("stateless warm: compares", lambda j: _get(j, "stateless", "requests_by_kind",
                                                "GET compare") or 0,
     "0", lambda v, j: v == 0),
    ("stateless warm: writes", lambda j: _get(j, "stateless", "writes"), "0", lambda v, j: v == 0),
    ("changed cycle in `run`: CPU s", lambda j: _get(j, "service", "changed", "cpu_s"),
     "<= its bound", lambda v, j: (b := _changed_bound(j)) is not None and v <= b),
    ("  its bound (1.5 s + share of the rebuilt)", _changed_bound, "", lambda v, j: True),
    ("service peak RSS MB", lambda j: _get(j, "service", "peak_rss_mb"), "<= 250",
     lambda v, j: v <= 250),
    ("naive / warm cycle in `run` CPU (x)",
     lambda j: _div(_get(j, "naive", "cpu_s"), _get(j, "service", "reused", "cpu_s")),
     ">= 20", lambda v, j: v >= 20),
)  # fmt: skip


def json_line(text: str) -> dict[str, Any] | None:
    """The last JSON object line of a run's printed output (None: none)."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def figures(after: dict[str, Any], before: dict[str, Any] | None = None) -> list[str]:
    """Issue 31's figures of this run against their targets, an earlier run's beside them."""

    def value(line: dict[str, Any] | None, read: Any) -> Any:
        try:
            return None if line is None else read(line)
        except (TypeError, KeyError):
            return None

    rows: list[tuple[str, list[Any]]] = []
    for label, read, target, meets in FIGURES:
        now = value(after, read)
        met = "" if not target or now is None else ("yes" if meets(now, after) else "NO")
        cells = [value(before, read)] if before is not None else []
        rows.append((label, [*cells, now, target, met]))
    columns = [*(["before"] if before is not None else []), "after", "target", "met"]
    head = "ISSUE 31'S FIGURES (this run"
    if before is not None:
        head += f"; before: the run of commit {before.get('bot_commit')}"
    out = [head + f"; after: commit {after.get('bot_commit')}):", table(rows, columns)]
    out.append(
        "  'for a final record' = the stateless run's Read the Docs requests beyond the warm "
        "run's (the warm state keeps every final record: what it still asks is not final)"
    )
    return out


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="benchmarks/cycle.py",
        description="Cold, warm and changed bot cycles and a naive poller against the sandbox.",
    )
    parser.add_argument("--prs", type=int, default=2000, help="open pull requests")
    parser.add_argument("--checks", type=int, default=60, help="contexts per head")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="delay of every answer")
    parser.add_argument("--seed", type=int, default=0, help="the sandbox's random seed")
    parser.add_argument("--change-fraction", type=float, default=0.05, help="heads changed")
    parser.add_argument(
        "--failing-fraction", type=float, default=None,
        help="heads that fail (one failing check run each; default: each check run fails "
        "with 3%% chance, most heads of 60 checks)",
    )  # fmt: skip
    parser.add_argument(
        "--codecov-fraction", type=float, default=0.0,
        help="heads given a stuck Codecov status before the cold cycle (codecov/patch pending "
        "on GitHub, Codecov's record pending with one upload; default: none)",
    )  # fmt: skip
    parser.add_argument("--skip-naive", action="store_true", help="do not run the naive poller")
    parser.add_argument(
        "--no-history", action="store_true",
        help="run the bot with `[policy] history = false` (issue 27: compare the points)",
    )  # fmt: skip
    parser.add_argument(
        "--keep-rate-limit",
        action="store_true",
        help="run the naive poller within what is left of the sandbox's 5,000/h REST limit "
        "(default: lift the limit first so it finishes its sweep)",
    )
    parser.add_argument(
        "--before", type=Path, default=None,
        help="an earlier run's printed output: its figures are shown beside this run's",
    )  # fmt: skip
    parser.add_argument(
        "--after", type=Path, default=None,
        help="with --before: run nothing, print the figures of this earlier output beside it",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds before a child is killed"
    )
    return parser.parse_args(argv)


def run_all(args: argparse.Namespace, folder: Path) -> dict[str, dict[str, Any] | None]:
    """Start the sandbox, run the three cycles and the naive poller; always stop the sandbox."""
    results: dict[str, dict[str, Any] | None] = dict.fromkeys(RUNS)
    with open(folder / "sandbox.log", "wb") as log:
        sandbox = SandboxProcess(args, log)
        try:
            info = sandbox.ready(timeout_s=min(args.timeout, 600.0))
            print(f"sandbox: {info['github_url']} repo {info['repo']}", flush=True)
            config, state = write_config(info, folder), folder / "state.sqlite3"
            if args.codecov_fraction > 0:
                payload = {"fraction": args.codecov_fraction, "seed": 2}
                stuck = len(sandbox.control("POST", "codecov", payload)["stuck"])
                print(f"sandbox: {stuck} heads hold a stuck Codecov status", flush=True)
            for name in ("cold", "warm", "stateless", "changed"):
                if name == "stateless":
                    results[name] = stateless_cycle(sandbox, info, folder, args.timeout)
                    continue
                if name == "warm":
                    print("settling: the comments the cold cycle deferred...", flush=True)
                    settled = settle(sandbox, config, state)
                    print(f"settled: {settled} comments", flush=True)
                changed = 0
                if name == "changed":
                    payload = {"fraction": args.change_fraction, "seed": 1}
                    changed = len(sandbox.control("POST", "change", payload)["changed"])
                    print(f"sandbox: changed {changed} heads", flush=True)
                print(f"running the {name} cycle...", flush=True)
                result = bot_cycle(sandbox, config, state, timeout_s=args.timeout)
                result["changed_heads"] = changed
                results[name] = result
                if name == "warm":  # not measured: the stats are reset before the next run
                    result["required_signals"] = required_signals(config, state)
            results["service"] = service_cycles(sandbox, config, args)
            if not args.skip_naive:
                print("running the naive poller...", flush=True)
                results["naive"] = naive_poll(
                    sandbox,
                    prs=args.prs,
                    lift_limit=not args.keep_rate_limit,
                    timeout_s=args.timeout,
                )
        finally:
            sandbox.stop()
    text = (folder / "sandbox.log").read_text(encoding="utf-8", errors="replace").strip()
    if text:
        print("sandbox stderr (last lines):", *text.splitlines()[-10:], sep="\n  ")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    before = None
    if args.before is not None:
        before = json_line(args.before.read_text(encoding="utf-8"))
        if before is None:
            print(f"benchmark: {args.before} holds no JSON line of a run", file=sys.stderr)
            return 2
    if args.after is not None:
        after = json_line(args.after.read_text(encoding="utf-8"))
        if after is None:
            print(f"benchmark: {args.after} holds no JSON line of a run", file=sys.stderr)
            return 2
        print("\n".join(figures(after, before)))
        return 0
    if args.no_history:  # every configuration written says so
        POLICY["history"] = "false"
    commit = bot_commit()
    print(f"bot: {sys.executable} -m bot, code of commit {commit}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ci-status-bot-bench-") as tmp:
        try:
            results = run_all(args, Path(tmp))
        except (RuntimeError, OSError) as exc:
            log = (Path(tmp) / "sandbox.log").read_text(encoding="utf-8", errors="replace")
            print(f"benchmark: {exc}\n{log[-2000:]}", file=sys.stderr)
            return 2
    print()
    print(report(results))
    print()
    print("\n".join(notes(results)))
    print()
    print("\n".join(service_report(results)))
    line: dict[str, Any] = {"prs": args.prs, "checks": args.checks, "latency_ms": args.latency_ms}
    line["failing_fraction"] = args.failing_fraction
    line["history"] = not args.no_history
    line["codecov_fraction"] = args.codecov_fraction
    line["bot_commit"] = commit
    line.update(results)
    line.update(naive_ratio(results))
    print()
    print("\n".join(figures(line, before)))
    print(json.dumps(line, sort_keys=False))
    failed = any(r is not None and r.get("exit_code") != 0 for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
