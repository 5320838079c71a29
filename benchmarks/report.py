"""Benchmark `ci-status-bot report` on a state holding many pull requests' last reports.

    python benchmarks/report.py                 # 2,000 pull requests, 20 signals each
    python benchmarks/report.py --prs 200 --runs 1

It fills a temporary state through the same code a cycle uses (bot.triage.keeper.TriageKeeper with
reconciled reports, and a recorded comment per pull request), then times the real command
line, `python -m bot report --format json` and `--format table` (and markdown, html), as
child processes: wall time from start to exit, interpreter start-up included, the median of
--runs. The target is under a second for 2,000 pull requests. The last line printed is one
JSON object with the figures. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.facts import facts_key
from bot.core.model import Kind, PullSnapshot, Report, Row, Signal, SinceSource, State, Verdict
from bot.state.readonly import open_read_only
from bot.state.store import Store
from bot.triage.formats import PageRenderer, markdown, table, triage_json
from bot.triage.keeper import TriageKeeper, stored_entries
from bot.triage.rows import ordered

TARGET_S = 1.0
STATES = (State.SUCCESS,) * 14 + (State.PENDING, State.FAILURE, State.STALE, State.SKIPPED,
                                  State.CANCELLED, State.NEUTRAL)  # fmt: skip


def _report(number: int, repo: str, *, signals: int, now: datetime) -> Report:
    """A reconciled report whose signals mix states by the pull request's number."""
    rows = []
    for index in range(signals):
        state = STATES[(number * 7 + index * 3) % len(STATES)] if number % 3 else State.SUCCESS
        signal = Signal(name=f"tests ({index})", kind=Kind.CHECK_RUN, github_state=state.value,
                        app="github-actions", required=index % 5 == 0)  # fmt: skip
        since = now - timedelta(minutes=(number * 13 + index) % 600)
        rows.append(Row(signal, state, since, SinceSource.GITHUB))
    verdict = _verdict([row.state for row in rows])
    return Report(
        repo=repo, number=number, title=f"Change number {number}: " + "words " * (number % 12),
        url=f"https://github.com/{repo}/pull/{number}",
        head_sha=hashlib.sha1(f"{repo}#{number}".encode()).hexdigest(), draft=number % 4 == 0,
        observed_at=now - timedelta(minutes=number % 90), verdict=verdict, rows=tuple(rows),
    )  # fmt: skip


def _verdict(states: list[State]) -> Verdict:
    if State.FAILURE in states:
        return Verdict.FAILING
    if State.PENDING in states:
        return Verdict.PENDING
    if {State.STALE, State.CANCELLED} & set(states):
        return Verdict.INCOMPLETE
    return Verdict.PASSING


def fill(path: Path, *, prs: int, signals: int, repos: int) -> None:
    """Keep `prs` reports and their comments in a new state, as cycles would."""
    now = datetime.now(UTC)
    with Store.open(path) as store:
        keeper = TriageKeeper(store, clock=lambda: now, docs=())
        for index in range(prs):
            repo, number = f"octo/repo{index % repos}", 1000 + index
            report = _report(number, repo, signals=signals, now=now)
            snapshot = PullSnapshot(repo=repo, number=number, title=report.title,
                                    author=f"user{index % 37}", draft=report.draft,
                                    head_sha=report.head_sha, url=report.url)  # fmt: skip
            keeper.pull_done(snapshot, report, facts_key(report))
            store.record_write(repo, number, comment_id=5_000_000 + index, body_hash="-",
                               facts_key="-", observed_at=now, head_sha=report.head_sha,
                               action="created", now=now - timedelta(hours=2))  # fmt: skip


def in_process(state: Path, fmt: str, *, runs: int) -> float:
    """Median seconds to read the state, order the view and format it (imports excluded)."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        with open_read_only(state) as store:
            view = ordered(stored_entries(store))
        now = datetime.now(UTC)
        if fmt == "json":
            triage_json(view, now=now)
        elif fmt == "table":
            table(view, now=now)
        elif fmt == "markdown":
            markdown(view, now=now)
        else:
            PageRenderer().render(view, now=now)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def time_report(config: Path, fmt: str, *, runs: int) -> tuple[float, int]:
    """Median wall seconds of `report --format fmt`, and the size of its output."""
    times, size = [], 0
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "bot", "report", "--config", str(config), "--format", fmt],
            capture_output=True, check=True,
        )  # fmt: skip
        times.append(time.perf_counter() - began)
        size = len(done.stdout)
    return statistics.median(times), size


def main() -> int:
    """Fill a state, time the formats, print a table and a JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--prs", type=int, default=2000)
    parser.add_argument("--signals", type=int, default=20)
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        state, config = Path(folder) / "state.sqlite3", Path(folder) / "bot.toml"
        began = time.perf_counter()
        fill(state, prs=args.prs, signals=args.signals, repos=args.repos)
        fill_s = time.perf_counter() - began
        config.write_text(f'[state]\npath = "{state}"\n', encoding="utf-8")
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import bot.cli"], check=True)
        import_s = time.perf_counter() - began
        formats = ("json", "table", "markdown", "html")
        inner = {fmt: in_process(state, fmt, runs=args.runs) for fmt in formats}
        figures = {fmt: time_report(config, fmt, runs=args.runs) for fmt in formats}
    print(f"report on {args.prs} pull requests ({args.signals} signals each, {args.repos} "
          f"repositories); state filled in {fill_s:.1f} s; medians of {args.runs}")  # fmt: skip
    print(f"{'format':<10} {'in-process s':>12} {'command s':>10} {'output KB':>10}")
    for fmt, (wall, size) in figures.items():
        print(f"{fmt:<10} {inner[fmt]:>12.2f} {wall:>10.2f} {size / 1024:>10.0f}")
    print(f"the command's start-up alone (python -c 'import bot.cli'): {import_s:.2f} s")
    met = all(inner[fmt] < TARGET_S for fmt in ("json", "table"))
    whole = all(figures[fmt][0] < TARGET_S for fmt in ("json", "table"))
    print(f"target, json and table under {TARGET_S:.0f} s: in-process {'met' if met else 'MISSED'}"
          f"; whole command {'met' if whole else 'missed'}")  # fmt: skip
    summary = {"prs": args.prs, "signals": args.signals, "import_s": round(import_s, 3),
               **{f"{fmt}_in_process_s": round(inner[fmt], 3) for fmt in formats},
               **{f"{fmt}_command_s": round(wall, 3) for fmt, (wall, _) in figures.items()},
               "target_met": met, "target_met_whole_command": whole}  # fmt: skip
    print(json.dumps(summary))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
