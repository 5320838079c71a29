"""Benchmark the GitHub Action's command against GITHUB_TOKEN's hourly budget.

    python benchmarks/action.py --prs 200 --checks 20  # full size (benchmarks/RESULTS.md)
    python benchmarks/action.py --prs 20 --checks 5 --latency-ms 0  # the CI size

It starts the sandbox in its own process (`python -m bot_sandbox serve --scenario scale`,
with `--actions-token`: a workflow's GITHUB_TOKEN, an installation token that GET /user
refuses and whose comments are by github-actions[bot]), puts every pull request's comment in
place as the bot would have posted it (the bot's own planning code renders each one; the
sandbox stores it through its control API, not as a measured write), then runs the action's
last step exactly as action.yml writes it (tests/e2e/test_action.py runs it the same way),
each time in a new empty workspace and runner temp, as a scheduled job has:

- stateless, nothing changed: no state at all (no cache);
- stateless, changed: after --change-fraction of the heads got a new check state;
- cached, nothing changed: the state folder of the previous run restored (actions/cache).

For each run it prints GitHub requests (REST and GraphQL apart), GraphQL points and writes,
from the sandbox's statistics (reset before each run), then the hour at a 15-minute schedule
(4 runs) against GITHUB_TOKEN's 1,000 REST requests and 1,000 GraphQL points an hour per
repository. The last line is one JSON object. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]
from cycle import SandboxProcess, bot_commit, child_env  # noqa: E402
from support import action_step  # noqa: E402  (action.yml's own step, parsed: as the tests)

ACTIONS_TOKEN = "ghs_benchmark-workflow-token"
ACTIONS_LOGIN = "github-actions[bot]"
RUNS_PER_HOUR = 4  # cron "*/15 * * * *"
BUDGET = 1000  # GITHUB_TOKEN: REST requests and GraphQL points, an hour per repository


def workspace_config(info: dict[str, Any], workspace: Path) -> str:
    """The repository's .github/ci-status-bot.toml: no secret in it (the token is an input)."""
    q = json.dumps
    path = workspace / ".github" / "ci-status-bot.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"[github]\napi_url = {q(info['github_url'])}\n\n"
        f"[readthedocs]\napi_url = {q(info['rtd_url'])}\n"
        f"business_api_url = {q(info['rtd_url'])}\n\n"
        f"[[repos]]\nname = {q(info['repo'])}\n",
        encoding="utf-8",
    )
    return ".github/ci-status-bot.toml"


def settle(info: dict[str, Any], folder: Path) -> tuple[int, list[dict[str, Any]]]:
    """Every pull request's comment in place, as the bot posts it (not measured)."""
    from bot.app import build_clients, make_cycle, now_utc
    from bot.core.model import PullSnapshot
    from bot.settings import Settings
    from bot.state.store import Store

    settings = Settings.model_validate(
        {
            "github": {"api_url": info["github_url"], "token": ACTIONS_TOKEN},
            "readthedocs": {"api_url": info["rtd_url"], "business_api_url": info["rtd_url"]},
            "repos": [{"name": info["repo"]}],
        }
    )
    repo = settings.repos[0]
    clients = build_clients(settings, settings.repos)
    with Store.open(folder / "settle.sqlite3") as store:
        # A pass first (a dry run: nothing written), as the bot's own runs make one: a failure's
        # history counts the other open pull requests failing the same check ("also failing on
        # 2 of 39 open pull requests"), which only a pass over the whole listing knows; planned
        # alone, a pull request's comment lacks that line and the measured run edits it.
        make_cycle(settings, clients, store, dry_run=True, out=None).run(settings.repos)
        cycle = make_cycle(settings, clients, store, dry_run=False)
        read = clients.github.open_pulls(repo.name, now=now_utc(), required=store)
        snapshots = [s for s in read if isinstance(s, PullSnapshot)]
        plans = [cycle.rendered(cycle.plan(s, repo)) for s in snapshots]
    clients.close()
    items = [
        {"repo": repo.name, "number": p.report.number, "author": clients.login, "body": p.body}
        for p in plans
    ]
    return len(items), items


def run_action(info: dict[str, Any], folder: Path, name: str, state_dir: str) -> dict[str, Any]:
    """The action's step in a new workspace and runner temp; what it cost."""
    workspace, temp = folder / f"{name}-work", folder / f"{name}-temp"
    workspace.mkdir()
    temp.mkdir()
    inputs = {"config": workspace_config(info, workspace), "github-token": ACTIONS_TOKEN}
    if state_dir:
        inputs["state-dir"] = state_dir
    command, step_env = action_step(inputs)
    env = {**child_env(), **step_env, "GITHUB_ACTION_PATH": str(ROOT), "RUNNER_TEMP": str(temp)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-c", command], cwd=workspace, env=env, capture_output=True, text=True,
        timeout=3600, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    return {"exit_code": done.returncode, "wall_s": round(wall, 2),
            "summary": (done.stdout.strip().splitlines() or [""])[-1],
            "stderr_tail": done.stderr.strip().splitlines()[-3:]}  # fmt: skip


def costs(stats: dict[str, Any]) -> dict[str, Any]:
    """GitHub requests (REST and GraphQL apart), points and writes from the sandbox's stats."""
    github = {
        k.partition(" ")[2]: v for k, v in stats["by_route"].items() if k.startswith("github ")
    }
    graphql = sum(v for k, v in github.items() if "graphql" in k)
    return {
        "rest_requests": sum(github.values()) - graphql,
        "graphql_requests": graphql,
        "graphql_points": stats["graphql_points"],
        "writes": stats["writes"],
        "requests_by_kind": github,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="benchmarks/action.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--prs", type=int, default=200, help="open pull requests")
    parser.add_argument("--checks", type=int, default=20, help="contexts per head")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of every answer")
    parser.add_argument("--seed", type=int, default=0, help="the sandbox's random seed")
    parser.add_argument("--change-fraction", type=float, default=0.05, help="heads changed")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    print(f"bot: code of commit {bot_commit()}; the action's step from action.yml", flush=True)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ci-status-bot-action-") as tmp:
        folder = Path(tmp)
        with open(folder / "sandbox.log", "wb") as log:
            sandbox = SandboxProcess(args, log, extra=["--actions-token", ACTIONS_TOKEN])
            try:
                info = sandbox.ready(timeout_s=600)
                count, items = settle(info, folder)
                sandbox.control("POST", "comments", items)
                print(f"settled: {count} comments by {ACTIONS_LOGIN}", flush=True)
                cache = str(folder / "cache")
                plan = [
                    ("stateless, nothing changed", "", 0.0),
                    ("stateless, changed", "", args.change_fraction),
                    ("cache filled (not counted)", cache, 0.0),
                    ("cached, nothing changed", cache, 0.0),
                ]
                for index, (name, state_dir, fraction) in enumerate(plan):
                    changed = 0
                    if fraction:
                        payload = {"fraction": fraction, "seed": 1}
                        changed = len(sandbox.control("POST", "change", payload)["changed"])
                    sandbox.control("POST", "reset-stats")
                    run = run_action(info, folder, f"run{index}", state_dir)
                    run.update(costs(sandbox.control("GET", "stats")))
                    run["changed_heads"] = changed
                    results[name] = run
            finally:
                sandbox.stop()
    del results["cache filled (not counted)"]
    print()
    print(f"{args.prs} open pull requests x {args.checks} checks, token: a workflow's GITHUB_TOKEN")
    header = f"{'run':<28} {'REST':>6} {'GraphQL':>8} {'points':>7} {'writes':>7} {'wall s':>7}"
    print(header)
    for name, run in results.items():
        print(
            f"{name:<28} {run['rest_requests']:>6} {run['graphql_requests']:>8} "
            f"{run['graphql_points']:>7} {run['writes']:>7} {run['wall_s']:>7}"
        )
    print()
    for name, run in results.items():
        rest_hour = run["rest_requests"] * RUNS_PER_HOUR
        points_hour = run["graphql_points"] * RUNS_PER_HOUR
        print(
            f"{name}: x{RUNS_PER_HOUR} an hour = {rest_hour} REST requests and {points_hour} "
            f"GraphQL points, of GITHUB_TOKEN's {BUDGET} and {BUDGET} an hour per repository "
            f"({100 * rest_hour / BUDGET:.1f}% and {100 * points_hour / BUDGET:.1f}%)"
        )
        if run["exit_code"] != 0:
            print(f"  exit {run['exit_code']}: {run['stderr_tail']}")
    line = {"prs": args.prs, "checks": args.checks, "runs_per_hour": RUNS_PER_HOUR, **results}
    print(json.dumps(line))
    return 1 if any(r["exit_code"] != 0 for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
