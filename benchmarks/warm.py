"""Cycles of one long-running bot process (what `run` does between its cycles), measured.

    python benchmarks/warm.py --config CFG --control-url URL [--change-fraction 0.05]

Run by benchmarks/cycle.py against its sandbox, after the state is warm. In one process,
with the clients `run` keeps between cycles, it runs:

- rebuilt: a cycle whose process has no report of the last cycle: every pull request is
  parsed, reconciled and keyed again (what every cycle did before issue 19; the reports the
  state keeps for a next process, issue 31, are dropped first so that none is reused);
- reused: the next cycle, nothing changed: the reports of the last cycle are reused;
- changed: the control API gives --change-fraction of the heads a new check state first.

For each: CPU seconds of the process during the cycle (time.process_time), wall seconds,
GitHub requests, GraphQL points and writes (the sandbox's statistics, reset before each
cycle). Peak RSS of the process at the end (its own VmHWM). One JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def control(url: str, method: str, name: str, payload: Any = None) -> Any:
    """Call the sandbox's /_sandbox/<name> and return its JSON answer."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        f"{url}/{name}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=60) as answer:
        return json.loads(answer.read())


def peak_rss_mb() -> float:
    """This process's own peak resident set (VmHWM), in MB. Not getrusage's ru_maxrss: Linux
    carries that across fork and exec, so a child's starts at its parent's resident set, and
    benchmarks/cycle.py (warm.py's parent) has settled the sandbox's comments in its own process
    (a parent of 400 MB gives a child of 13 MB a ru_maxrss of 413 MB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--control-url", required=True)
    parser.add_argument("--change-fraction", type=float, default=0.05)
    args = parser.parse_args(argv)
    started = time.process_time()
    from bot.app import build_clients, make_cycle, open_store
    from bot.settings import load_settings

    settings = load_settings(args.config)
    imports_s = time.process_time() - started
    clients = build_clients(settings, settings.repos)
    store = open_store(settings)
    results: dict[str, Any] = {"imports_cpu_s": round(imports_s, 2)}
    try:
        for name in ("rebuilt", "reused", "changed"):
            changed = 0
            if name == "rebuilt":  # nothing kept from an earlier process: every report built
                for repo in settings.repos:
                    store.forget_reports(repo.name, keep=())
            if name == "changed":
                payload = {"fraction": args.change_fraction, "seed": 2}
                changed = len(control(args.control_url, "POST", "change", payload)["changed"])
            control(args.control_url, "POST", "reset-stats")
            cpu, wall = time.process_time(), time.perf_counter()
            summary = make_cycle(settings, clients, store, dry_run=False, out=None).run(
                settings.repos
            )
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            stats = control(args.control_url, "GET", "stats")
            others = ("rtd ", "codecov ", "azure ")  # second sources: not GitHub's budget
            github = sum(n for k, n in stats["by_route"].items() if not k.startswith(others))
            sources = sum(n for k, n in stats["by_route"].items() if k.startswith(others[1:]))
            results[name] = {
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "github_requests": github,
                "provider_requests": sources,
                "graphql_points": stats["graphql_points"],
                "writes": stats["writes"],
                "changed_heads": changed,
                "pulls_seen": summary.pulls_seen,
                "summary": summary.line(),
            }
    finally:
        store.close()
        clients.close()
    results["peak_rss_mb"] = peak_rss_mb()
    # what it printed before: getrusage's figure, which starts at the parent's resident set
    results["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
