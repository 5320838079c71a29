"""Issue 28, item 6, as a person sees it: a first run on a terminal says how far its writes are
on stderr; a dry run's summary says what it would write."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta

from support import REPO, Env, clean_env, cli, seed_case, writes

from bot_sandbox import World


def seed(world: World, count: int, *, now: datetime) -> None:
    """The seed case and `count - 1` green pull requests: `count` comments to create."""
    seed_case(world, now=now)
    for number in range(1, count):
        sha = hashlib.sha1(str(number).encode()).hexdigest()
        world.add_pull(REPO, number, title=f"pull {number}", author="bob", head_sha=sha)
        done = now - timedelta(hours=1)
        world.add_check_run(REPO, sha, name="lint", app_slug="github-actions", workflow="ci",
                            started_at=done, completed_at=done)  # fmt: skip


def test_a_dry_runs_summary_says_what_it_would_create(env: Env) -> None:
    seed(env.world, 7, now=env.now)
    result = cli("once", "--config", str(env.config), "--dry-run", sleep=env.waits)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": would create the status comment") == 7
    summary = result.stdout.splitlines()[-1]
    assert "comments would create 7, would edit 0, would leave 0" in summary, summary
    assert "created 0" not in summary
    assert writes(env.sandbox) == []


def test_a_first_run_on_a_terminal_counts_its_writes_on_stderr(env: Env) -> None:
    import pty

    seed(env.world, 3, now=env.now)
    main, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "once", "--config", str(env.config)],
        stdout=subprocess.PIPE, stderr=secondary, env=clean_env(), timeout=120, check=False,
    )  # fmt: skip
    os.close(secondary)
    err = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(main)
    assert proc.returncode == 0, err
    said = err.decode("utf-8")
    assert re.search(r"comment 2 of 3 · ~\d+ s left at GitHub's 1 write/s", said), said
    assert said.endswith("\r\x1b[K")  # the line is cleared once the writes are done
    assert b"comment " not in proc.stdout  # stdout keeps only the summary
    assert "created 3" in proc.stdout.decode()
