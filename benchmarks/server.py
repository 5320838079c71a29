"""Load benchmark of `run`'s HTTP server under hostile and busy clients (a script, not a test).

    python benchmarks/server.py                 # 2,000 PRs, a minute of load (RESULTS.md)
    python benchmarks/server.py --prs 50 --seconds 5 --slow 20 --rate 20 --pages 4   # CI size

The sandbox runs in its own process (`python -m bot_sandbox serve --scenario scale`, as in
benchmarks/cycle.py), its comments settled first as after the cold start (not measured); the
bot (`python -m bot run`, webhooks on, a cycle every 30 s) in another. For --seconds this
process then, all at once and only on 127.0.0.1:

- holds --slow connections that send half a request and nothing more (reopened when dropped);
- sends --rate signed `check_run` deliveries a second, each for a random open pull request;
- requests `/` and `/triage.json` --pages at a time, and `/livez` every 0.1 s;
- and, from a probe process of its own (one thread, started before this process lowers its
  priority: at the service's, as a kubelet's probe runs), `/livez` every 0.1 s again;

and prints the latency of `/livez` (both probes) and `/` (p50/p95/max: the time to the last
byte of the answer as sent, its bytes read raw with httpx's iter_raw, not decompressed: a
browser decodes in its own process), the bytes sent per answer and the Content-Encoding each
came in, whether a decoded page equals the identity page (checked once before the load, outside
the timed requests), the server's event-loop lag as its /metrics shows it, the bot's peak RSS,
deliveries accepted, the GraphQL queries and points spent, the cycles finished and failed, and,
with the load still on, the time from SIGTERM to exit. The last line is one JSON object;
`--before FILE` (an earlier run's last line, or its whole output) prints that run's figures
beside this one's.

The load generator (this process) runs at a lower priority than the bot and the sandbox
(`--nice 10`, os.nice after both started): on a 2-core machine its ~40 threads otherwise take
the cores from the service they measure. `--nice 0` measures as before issue 31. Its own
`/livez` probe is one of those threads: its figure includes the waits of a process at nice 10
on a busy machine and of its own GIL; the probe process's figure is the server's.
Targets: /livez p95 <= 100 ms, / p95 <= 150 ms, RSS <= 300 MB, no cycle failed, exit <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from cycle import ROOT, SandboxProcess, child_env, settle  # noqa: E402
from cycle import write_config as cycle_config  # noqa: E402
from webhooks import quantiles  # noqa: E402

from bot_sandbox.webhook_sender import sign  # noqa: E402

SECRET = "benchmark-server-secret"
TARGETS = {"livez_p95_ms": 100, "page_p95_ms": 150, "rss_mb": 300, "exit_s": 5}


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(info: dict[str, Any], folder: Path, port: int) -> Path:
    """benchmarks/cycle.py's configuration plus the server, webhooks and a 30 s interval."""
    path = cycle_config(info, folder)
    extra = (
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n\n'
        f'[webhooks]\nsecrets = ["{SECRET}"]\ndebounce_seconds = 10\n\n'
        "[schedule]\ninterval_seconds = 30\njitter_seconds = 0\n\n"
    )
    path.write_text(extra + path.read_text(encoding="utf-8"), encoding="utf-8")
    return path


class Load:
    """The clients: each kind in its own threads, all stopped by one Event."""

    def __init__(self, base: str, repo: str, prs: list[int]) -> None:
        self.base, self.repo, self.prs = base, repo, prs
        self.stop = threading.Event()
        self.stopping = threading.Event()  # the bot was sent SIGTERM
        self.livez: list[float] = []
        self.page: list[float] = []
        self.json: list[float] = []
        # per path: the answers' bytes as sent (encoded) and how many came in each encoding
        self.sent_bytes: dict[str, int] = {}
        self.encodings: dict[str, dict[str, int]] = {}
        self.errors: list[str] = []
        self.statuses: dict[int, int] = {}
        self.sent = 0
        self.slow_reopened = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, *, slow: int, rate: float, pages: int) -> None:
        """Start every kind of client."""
        self._spawn(self._slow, slow)
        senders = max(1, math.ceil(rate / 10))  # each waits for its answers
        for _ in range(senders):
            self._spawn(self._deliveries, rate / senders)
        for index in range(pages):
            self._spawn(self._pages, index)
        self._spawn(self._probe)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        """Stop the clients and wait for them."""
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _timed(self, client: httpx.Client, path: str, into: list[float]) -> None:
        """GET `path`, timed to the last byte of the answer as sent: its bytes are read raw
        (iter_raw: no decompression here; a browser decodes in its own process)."""
        started, size, encoding = time.monotonic(), 0, "identity"
        try:
            with client.stream("GET", self.base + path, timeout=30) as answer:
                for chunk in answer.iter_raw():
                    size += len(chunk)
            error = "" if answer.status_code == 200 else f"HTTP {answer.status_code}"
            encoding = answer.headers.get("content-encoding", "identity")
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        took = (time.monotonic() - started) * 1000
        if self.stopping.is_set():  # after the SIGTERM: nothing is counted
            return
        with self._lock:
            if error:
                self.errors.append(f"{path}: {error}")
                return
            into.append(took)
            self.sent_bytes[path] = self.sent_bytes.get(path, 0) + size
            counts = self.encodings.setdefault(path, {})
            counts[encoding] = counts.get(encoding, 0) + 1

    def _probe(self) -> None:
        with httpx.Client() as client:
            while not self.stop.wait(0.1):
                self._timed(client, "/livez", self.livez)

    def _pages(self, index: int) -> None:
        with httpx.Client() as client:
            while not self.stop.is_set():
                if index % 2 == 0:
                    self._timed(client, "/", self.page)
                else:
                    self._timed(client, "/triage.json", self.json)

    def _deliveries(self, rate: float) -> None:
        rng = random.Random()
        with httpx.Client() as client:
            started, sent = time.monotonic(), 0
            while not self.stop.is_set():
                wait = started + sent / rate - time.monotonic()
                if wait > 0 and self.stop.wait(wait):
                    return
                self._deliver(client, rng.choice(self.prs))
                sent += 1

    def _deliver(self, client: httpx.Client, number: int) -> None:
        payload = {
            "action": "completed",
            "repository": {"full_name": self.repo},
            "check_run": {"id": uuid.uuid4().int >> 80, "head_sha": "0" * 40,
                          "pull_requests": [{"number": number}]},
        }  # fmt: skip
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": "check_run",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(body, SECRET),
            "Content-Type": "application/json",
        }
        try:
            status = client.post(self.base + "/webhook", content=body, headers=headers).status_code
        except httpx.HTTPError:
            status = 0
        if self.stopping.is_set():
            return
        with self._lock:
            self.sent += 1
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def _slow(self, count: int) -> None:
        port = int(self.base.rsplit(":", 1)[1])
        held: list[socket.socket | None] = [None] * count
        while not self.stop.is_set():
            for index, sock in enumerate(held):
                if sock is not None and not _closed(sock):
                    continue
                if sock is not None:
                    sock.close()
                    self.slow_reopened += 1
                held[index] = _half_request(port)
            self.stop.wait(0.5)
        for sock in held:
            if sock is not None:
                sock.close()


def probe(base: str, seconds: float, every_s: float = 0.1) -> list[float]:
    """GET /livez every `every_s` for `seconds` on one kept-alive connection, each timed to
    the last byte of the answer (ms); a failed request counts as the time it took to fail."""
    import http.client

    host, port = base.removeprefix("http://").rsplit(":", 1)
    took: list[float] = []
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            connection.request("GET", "/livez")
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
        took.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, every_s - (time.monotonic() - started)))
    return took


def start_probe(base: str, seconds: float) -> subprocess.Popen[str]:
    """This script's --probe in a process of its own (at this process's priority now)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--probe", base, "--seconds", str(seconds)],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=child_env(),
    )  # fmt: skip


def _half_request(port: int) -> socket.socket | None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n")
    except OSError:
        return None
    return sock


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(0)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def decoded_page_check(base: str, tries: int = 5) -> dict[str, Any]:
    """Outside the timed load: `/` fetched as identity, then with gzip accepted (decoded
    here), then as identity again; where both identity pages are the same bytes (no new rows
    between), the decoded page must equal them."""
    found: dict[str, Any] = {"checked": False, "equal": None, "encoding": None}
    with httpx.Client(timeout=30) as client:
        for _ in range(tries):
            plain = client.get(base + "/", headers={"Accept-Encoding": "identity"})
            accepted = client.get(base + "/", headers={"Accept-Encoding": "gzip"})
            again = client.get(base + "/", headers={"Accept-Encoding": "identity"})
            if plain.content != again.content:
                continue  # a cycle's new rows came between: try again
            found["encoding"] = accepted.headers.get("content-encoding", "identity")
            found.update(checked=True, equal=accepted.content == plain.content)
            found["identity_bytes"] = len(plain.content)
            found["identity_was_identity"] = "content-encoding" not in plain.headers
            return found
    return found


def scale_numbers(count: int) -> list[int]:
    """The numbers of the scale scenario's open pull requests (bot_sandbox.seeds.seed_scale)."""
    return list(range(1000, 1000 + count))


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def metric_values(base: str, name: str) -> dict[str, float]:
    """One metric's samples by their label text."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(base + "/metrics", timeout=10).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))] = sample.value
    return found


def loop_lag(base: str) -> dict[str, float | None]:
    """The event-loop lag /metrics shows: samples, share over 10/100 ms, p95 (the bucket's
    upper bound) and the worst of the last minute (None: a bot without the metric)."""
    buckets = metric_values(base, "ci_status_bot_event_loop_lag_seconds_bucket")
    worst = metric_values(base, "ci_status_bot_event_loop_lag_max_seconds").get("")
    if not buckets:
        return {"samples": None, "p95_ms": None, "max_last_minute_ms": None}
    bounds = sorted((float(k.split("=", 1)[1]), v) for k, v in buckets.items() if "+Inf" not in k)
    total = buckets.get("le=+Inf", 0.0)
    p95 = next((le for le, n in bounds if total and n >= 0.95 * total), None)
    under = dict(bounds)
    return {
        "samples": total,
        "over_10ms": None if not total else round(1 - under.get(0.01, 0) / total, 4),
        "over_100ms": None if not total else round(1 - under.get(0.1, 0) / total, 4),
        "p95_ms": None if p95 is None else p95 * 1000,
        "max_last_minute_ms": None if worst is None else round(worst * 1000, 1),
    }


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Seconds until /readyz answers 200 (the first cycle finished)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the bot exited with {proc.returncode}")
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the bot was not ready within {timeout_s:.0f} s")


def ms(values: list[float]) -> dict[str, float | None]:
    """p50/p95/max of latencies in milliseconds."""
    return quantiles(values)


def measure(args: argparse.Namespace, folder: Path, log: IO[bytes]) -> dict[str, Any]:
    """Start the sandbox and the bot, load the server, stop the bot under load."""
    sandbox = SandboxProcess(args, log)
    try:
        info = sandbox.ready(600)
        port = free_port()
        config = write_config(info, folder, port)
        settled = settle(sandbox, config, folder / "state.sqlite3")
        print(f"sandbox: {info['prs']} open pull requests, {settled} comments settled",
              flush=True)  # fmt: skip
        bot = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT, env=child_env(),
        )  # fmt: skip
        try:
            return load_bot(args, bot, sandbox, info, f"http://127.0.0.1:{port}")
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
    finally:
        sandbox.stop()


def load_bot(
    args: argparse.Namespace,
    bot: subprocess.Popen[bytes],
    sandbox: SandboxProcess,
    info: dict[str, Any],
    base: str,
) -> dict[str, Any]:
    """The load itself, then SIGTERM with the load still on."""
    ready_s = wait_ready(base, bot, args.timeout)
    cycles_before = metric_values(base, "ci_status_bot_cycles_total")
    decoded = decoded_page_check(base)  # correctness, outside the timed load
    sandbox.control("POST", "reset-stats")
    prober = start_probe(base, args.seconds)  # before the priority below is lowered
    if args.nice:  # the load generator below the bot and the sandbox (started before this)
        os.nice(args.nice)
    load = Load(base, info["repo"], scale_numbers(info["prs"]))
    load.start(slow=args.slow, rate=args.rate, pages=args.pages)
    time.sleep(args.seconds)
    probed = json.loads(prober.communicate(timeout=60)[0] or "[]")
    cycles = metric_values(base, "ci_status_bot_cycles_total")
    dropped = metric_values(base, "ci_status_bot_http_connections_dropped_total")
    lag = loop_lag(base)
    rss = peak_rss_mb(bot.pid)
    stats = sandbox.control("GET", "stats")
    ready = httpx.get(base + "/readyz", timeout=10)
    load.stopping.set()
    sent = time.monotonic()
    bot.send_signal(signal.SIGTERM)
    try:
        bot.wait(timeout=30)
        exit_s: float | None = round(time.monotonic() - sent, 2)
    except subprocess.TimeoutExpired:
        exit_s = None
    load.join()
    graphql = {k: v for k, v in stats["by_route"].items() if "graphql" in k.lower()}
    finished = cycles.get("outcome=finished", 0) - cycles_before.get("outcome=finished", 0)
    failed = cycles.get("outcome=failed", 0) - cycles_before.get("outcome=failed", 0)
    return {
        "prs": info["prs"],
        "seconds": args.seconds,
        "load_nice": args.nice,
        "event_loop_lag": lag,
        "ready_after_s": round(ready_s, 1),
        "livez_ms": ms(load.livez),
        "livez_probe_ms": ms(probed),
        "livez_probe_requests": len(probed),
        "page_ms": ms(load.page),
        "triage_json_ms": ms(load.json),
        "requests": {"livez": len(load.livez), "page": len(load.page), "json": len(load.json)},
        "latency_is": "time to the last byte of the answer as sent (read raw, not decoded)",
        "mean_bytes_sent": {
            path: round(total / max(1, sum(load.encodings.get(path, {}).values())))
            for path, total in sorted(load.sent_bytes.items())
        },
        "content_encodings": load.encodings,
        "decoded_page_check": decoded,
        "errors": len(load.errors),
        "error_kinds": sorted(set(load.errors))[:10],
        "deliveries_sent": load.sent,
        "deliveries_accepted": load.statuses.get(202, 0),
        "delivery_statuses": {str(k): v for k, v in sorted(load.statuses.items())},
        "slow_connections": args.slow,
        "slow_connections_dropped": dropped,
        "graphql_queries": sum(graphql.values()),
        "graphql_points": stats["graphql_points"],
        "cycles_finished": finished,
        "cycles_failed": failed,
        "ready_at_the_end": ready.status_code == 200,
        "readyz_at_the_end": ready.text.strip()[:200],
        "bot_peak_rss_mb": rss,
        "sigterm_to_exit_s": exit_s,
    }


def verdicts(result: dict[str, Any]) -> dict[str, bool]:
    """Each target, met or not."""
    livez, page = result["livez_ms"]["p95"], result["page_ms"]["p95"]
    probed = result["livez_probe_ms"]["p95"]
    rss, exit_s = result["bot_peak_rss_mb"], result["sigterm_to_exit_s"]
    return {
        "livez_p95_le_100_ms": livez is not None and livez <= TARGETS["livez_p95_ms"],
        "livez_probe_p95_le_100_ms": probed is not None and probed <= TARGETS["livez_p95_ms"],
        "page_p95_le_150_ms": page is not None and page <= TARGETS["page_p95_ms"],
        "rss_le_300_mb": rss is not None and rss <= TARGETS["rss_mb"],
        "every_cycle_finished": result["cycles_failed"] == 0 and result["ready_at_the_end"],
        "exit_le_5_s": exit_s is not None and exit_s <= TARGETS["exit_s"],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The knobs (defaults: the full-size run of benchmarks/RESULTS.md)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prs", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load lasts")
    parser.add_argument("--slow", type=int, default=200, help="half-sent connections held")
    parser.add_argument("--rate", type=float, default=100.0, help="signed deliveries a second")
    parser.add_argument("--pages", type=int, default=20, help="/ and /triage.json at a time")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the sandbox's latency")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="for the first cycle")
    parser.add_argument("--log", default="", help="keep the bot's and the sandbox's log here")
    parser.add_argument(
        "--nice", type=int, default=10,
        help="the load generator's niceness increment (0: as before issue 31)",
    )  # fmt: skip
    parser.add_argument(
        "--before", type=Path, default=None,
        help="an earlier run's output (its JSON line): its figures printed beside this run's",
    )  # fmt: skip
    parser.add_argument("--probe", default="", help=argparse.SUPPRESS)  # the probe process
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run once and print the figures (last line: JSON)."""
    args = parse_args(argv)
    if args.probe:  # the probe process: its latencies as one JSON list
        print(json.dumps(probe(args.probe, args.seconds)))
        return 0
    before = last_json(args.before) if args.before is not None else None
    with tempfile.TemporaryDirectory() as tmp, Path(args.log or f"{tmp}/log").open("wb") as log:
        result = measure(args, Path(tmp), log)
    met = verdicts(result)
    print(f"load generator: this process, os.nice({args.nice}) after the bot and the sandbox "
          "started (they run at the shell's priority)")  # fmt: skip
    print("latency: time to the last byte of the answer as sent (read raw, not decompressed: "
          "a browser decodes in its own process)")  # fmt: skip
    if before is not None:
        print(f"before: {args.before} (load generator niceness {before.get('load_nice', 0)})")
    for line in figures(result, before):
        print(line)
    print(json.dumps({**result, "targets_met": met}))
    return 0  # figures, not a test: the targets met or missed are in the last line


def last_json(path: Path) -> dict[str, Any]:
    """The last JSON object line of an earlier run's output."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"{path}: no JSON line (the last line benchmarks/server.py prints)")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def figures(result: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """One line per figure: this run's, with the earlier run's beside it where given."""

    def side(now: str, key: Callable[[dict[str, Any]], str]) -> str:
        if before is None:
            return now
        try:
            was = key(before)
        except (KeyError, TypeError):
            was = "-"
        return f"{now}   (before: {was})"

    def lag(run: dict[str, Any]) -> str:
        found = run.get("event_loop_lag") or {}
        return (
            f"p95 <= {found.get('p95_ms')} ms, worst of the last minute "
            f"{found.get('max_last_minute_ms')} ms, {found.get('over_100ms')} of samples over "
            "100 ms"
            if found.get("samples")
            else "not measured (no metric)"
        )

    def deliveries(run: dict[str, Any]) -> str:
        return (
            f"{run['deliveries_accepted']} accepted of {run['deliveries_sent']} sent; GraphQL: "
            f"{run['graphql_queries']} queries, {run['graphql_points']} points"
        )

    def cycles(run: dict[str, Any]) -> str:
        return (
            f"{run['cycles_finished']:.0f} finished, {run['cycles_failed']:.0f} failed; /readyz "
            f"at the end: {run['readyz_at_the_end']!r}"
        )

    livez, page = TARGETS["livez_p95_ms"], TARGETS["page_p95_ms"]
    return [
        side(f"/livez ms  p50/p95/max: {_triple(result['livez_ms'])}   (target p95 <= {livez})",
             lambda r: _triple(r["livez_ms"])),
        side(f"/livez ms from a probe process at the service's priority: "
             f"{_triple(result['livez_probe_ms'])}",
             lambda r: _triple(r["livez_probe_ms"])),
        side(f"/      ms  p50/p95/max: {_triple(result['page_ms'])}   (target p95 <= {page})",
             lambda r: _triple(r["page_ms"])),
        side(f"/triage.json ms p50/p95/max: {_triple(result['triage_json_ms'])}",
             lambda r: _triple(r["triage_json_ms"])),
        side(f"requests answered: {result['requests']}", lambda r: str(r["requests"])),
        side(f"mean bytes sent per answer: {result['mean_bytes_sent']}",
             lambda r: str(r["mean_bytes_sent"])),
        side(f"Content-Encoding of the answers: {result['content_encodings']}",
             lambda r: str(r["content_encodings"])),
        side(f"decoded page equals the identity page: {_check(result['decoded_page_check'])}",
             lambda r: _check(r["decoded_page_check"])),
        side(f"event-loop lag (/metrics): {lag(result)}", lag),
        side(f"bot peak RSS: {result['bot_peak_rss_mb']} MB (target <= 300)",
             lambda r: f"{r['bot_peak_rss_mb']} MB"),
        side(f"deliveries: {deliveries(result)}", deliveries),
        side(f"cycles during the load: {cycles(result)}", cycles),
        side(f"SIGTERM to exit: {result['sigterm_to_exit_s']} s (target <= 5)",
             lambda r: f"{r['sigterm_to_exit_s']} s"),
    ]  # fmt: skip


def _check(found: dict[str, Any]) -> str:
    if not found.get("checked"):
        return "not checked (new rows between every try)"
    return f"{found['equal']} (the page came {found['encoding']}, {found['identity_bytes']} B)"


def _triple(q: dict[str, float | None]) -> str:
    return f"{q['p50']} / {q['p95']} / {q['max']}"


if __name__ == "__main__":
    sys.exit(main())
