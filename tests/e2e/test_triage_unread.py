"""Issue 15, item 7: triage rows of a repository that can no longer be read are not "as of now".

A real `once` reads two repositories; then one of them can no longer be read (its access was
removed: GitHub answers NOT_FOUND, as it does for a renamed or hidden repository). Every
triage format marks that repository's rows with when they were last read, and says since when
and why the repository could not be read; the other repository's rows stay unmarked.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from datetime import datetime, timedelta
from html.parser import HTMLParser

import pytest
from support import REPO, Env, cli, seed_case

from bot_sandbox import World
from bot_sandbox.world import RepoRec

OTHER = "octo/other"


@pytest.fixture
def world(now: datetime) -> World:
    world = World()
    seed_case(world, now=now)
    world.add_repo(OTHER)
    world.add_pull(OTHER, 5, title="other pull", author="bob", head_sha="5" * 40)
    done = now - timedelta(hours=1)
    world.add_check_run(OTHER, "5" * 40, name="lint", app_slug="github-actions",
                        workflow="ci", started_at=done, completed_at=done)  # fmt: skip
    return world


@pytest.fixture
def env(env: Env) -> Env:
    """Both repositories configured, after one real `once`."""
    env.config.write_text(env.config.read_text() + f'[[repos]]\nname = "{OTHER}"\n')
    result = cli("once", "--config", str(env.config), sleep=env.waits)
    assert result.returncode == 0, result.stderr
    return env


def report(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    result = cli("report", "--config", str(env.config), *args)
    assert result.returncode == 0, result.stderr
    return result


def pulls(env: Env) -> dict[str, dict[str, object]]:
    doc = json.loads(report(env, "--format", "json").stdout)
    return {f"{p['repo']}#{p['number']}": p for p in doc["pulls"]}


def age_rows(env: Env, hours: int) -> datetime:
    """Pretend the first cycle read every row `hours` ago (the state's own times)."""
    then = env.now - timedelta(hours=hours)
    with sqlite3.connect(env.state) as db:
        db.execute("UPDATE triage SET updated_at = ?", (then.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),))
    return then


def lose_access(env: Env) -> RepoRec:
    """The token can no longer see REPO; one more `once` reads what it can. The lost record."""
    with env.world.lock:
        lost = env.world.repos.pop(REPO)
    result = cli("once", "--config", str(env.config))
    assert result.returncode == 1 and REPO in result.stderr, result.stderr
    return lost


def test_every_row_says_when_it_was_read(env: Env) -> None:
    rows = pulls(env)
    for row in rows.values():
        read_at = datetime.fromisoformat(str(row["read_at"]))
        assert abs(read_at - env.now) < timedelta(minutes=2)
        assert row["not_read"] is None


def test_rows_of_a_repository_that_cannot_be_read_carry_when_they_were_last_read(
    env: Env,
) -> None:
    then = age_rows(env, 3)
    lose_access(env)
    rows = pulls(env)
    lost, kept = rows[f"{REPO}#7430"], rows[f"{OTHER}#5"]
    assert datetime.fromisoformat(str(lost["read_at"])) == then.replace(microsecond=0)
    not_read = lost["not_read"]
    assert isinstance(not_read, dict), lost
    assert abs(datetime.fromisoformat(not_read["since"]) - env.now) < timedelta(minutes=2)
    assert "Could not resolve to a Repository" in not_read["reason"]
    assert kept["not_read"] is None  # the readable repository's row is as of this cycle
    assert abs(datetime.fromisoformat(str(kept["read_at"])) - env.now) < timedelta(minutes=2)
    last_read = then.strftime("%Y-%m-%d %H:%M UTC").replace(" ", "\u00a0")

    table = report(env, "--format", "table").stdout
    said = " ".join(table.split())  # wrapped at 80 columns
    assert re.search(rf"{REPO} could not be read since .*; its rows are as last read", said)
    line = next(x for x in table.splitlines() if f"{REPO}#7430" in x)
    assert "last read" in table and then.strftime("%m-%d %H:%M") in table, table
    assert f"{OTHER}#5" in table and line

    markdown = report(env, "--format", "markdown").stdout
    row = next(x for x in markdown.splitlines() if "#7430" in x and x.startswith("|"))
    assert "last read" in row and (last_read in row or then.strftime("%H:%M") in row), row
    other = next(x for x in markdown.splitlines() if f"{OTHER}#5" in x or "other#5" in x)
    assert "last read" not in other
    assert "could not be read since" in markdown

    page = report(env, "--format", "html").stdout
    parser = _Rows()
    parser.feed(page)
    assert parser.rows[f"{REPO}#7430"].get("data-read-at"), parser.rows
    assert "data-not-read" in parser.rows[f"{REPO}#7430"]
    assert "data-not-read" not in parser.rows[f"{OTHER}#5"]
    assert "could not be read since" in page and "last read" in page


def test_the_marks_go_once_the_repository_is_read_again(env: Env) -> None:
    lost = lose_access(env)
    assert pulls(env)[f"{REPO}#7430"]["not_read"] is not None
    with env.world.lock:
        env.world.repos[REPO] = lost
    result = cli("once", "--config", str(env.config))
    assert result.returncode == 0, result.stderr
    assert all(p["not_read"] is None for p in pulls(env).values())
    assert "last read" not in report(env, "--format", "table").stdout


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str | None]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and found.get("data-pull"):
            self.rows[str(found["data-pull"])] = found
