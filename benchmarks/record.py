"""Append a benchmark's own output to benchmarks/RESULTS.md as one dated entry.

    python benchmarks/cycle.py --prs 2000 --checks 60 --latency-ms 50 | tee /tmp/out.txt
    python benchmarks/record.py --section cycle --command "cycle.py --prs 2000 ..." /tmp/out.txt

The entry is the date (UTC), the command, the commit the tree is at (with "+ changes" when the
work tree differs from it) and the output verbatim, under the named benchmark's section
(created at the end when missing). Nothing is computed here: the figures are the script's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTIONS = {
    "cycle": "## The cycle: `benchmarks/cycle.py` and `benchmarks/warm.py`",
    "webhooks": "## The webhooks: `benchmarks/webhooks.py`",
    "server": "## The server under load: `benchmarks/server.py`",
    "action": "## The GitHub Action: `benchmarks/action.py`",
    "replicas": "## Several replicas: `benchmarks/replicas.py`",
    "report": "## The triage view: `benchmarks/report.py`",
    "installations": "## Many installations on the queue: `benchmarks/installations.py`",
}


def commit() -> str:
    """The commit of the tree, '+ changes' when the work tree is not clean."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{head} + changes" if git("status", "--porcelain", "--untracked-files=no") else head


def entry(command: str, output: str, now: datetime) -> str:
    """One dated entry: when, what ran, on which code, and what it printed."""
    fence = "```"
    while fence in output:
        fence += "`"
    return (
        f"### {now:%Y-%m-%d %H:%M} UTC · `{command}` · code at {commit()}\n\n"
        f"{fence}text\n{output.rstrip()}\n{fence}\n\n"
    )


def insert(text: str, heading: str, new: str) -> str:
    """`new` as the first entry under `heading` (newest first), the heading added if missing."""
    if heading not in text:
        return text.rstrip() + f"\n\n{heading}\n\n{new}"
    at = text.index(heading) + len(heading)
    return text[:at] + "\n\n" + new + text[at:].lstrip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", choices=sorted(SECTIONS), required=True)
    parser.add_argument("--command", required=True, help="the command line that printed it")
    parser.add_argument("output", help="the file holding what the benchmark printed ('-': stdin)")
    args = parser.parse_args(argv)
    output = sys.stdin.read() if args.output == "-" else Path(args.output).read_text("utf-8")
    new = entry(args.command, output, datetime.now(UTC))
    RESULTS.write_text(insert(RESULTS.read_text("utf-8"), SECTIONS[args.section], new), "utf-8")
    print(f"recorded in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
