"""Issue 15, items 5, 6 and 11: Read the Docs outages, error pages, the pre-2020 status name.

The real CLI against the sandbox: RTD answering 503 or 403 throughout, error pages that differ
per request, and the `continuous-documentation/read-the-docs` context. Time passes by moving
the state's own record of when reading began to fail (no test waits).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import (
    CONTEXT,
    REPO,
    RTD,
    bot_comments,
    cli,
    outside_allowlist,
    seed_case,
    write_config,
    writes,
)

from bot_sandbox import Sandbox, World

BUILD = 34894885
PENDING = "Read the Docs build is in progress!"
SUCCESS = "Read the Docs build succeeded!"
LEGACY = "continuous-documentation/read-the-docs"  # RTD's status name before April 2020
ANY_RTD = r"/projects/.*"  # every RTD API path (GitHub's paths start elsewhere)
_ray = itertools.count(0x7F3A9C2E10B4D000)


def cdn_403() -> str:
    """A CDN's block page: HTML whose Ray ID and time change with every answer."""
    ray = f"{next(_ray):x}"
    return (
        "<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head>"
        f"<body><h1>Sorry, you have been blocked</h1><p>Cloudflare Ray ID: {ray}</p>"
        f"<p>{datetime.now(UTC).isoformat()}</p></body></html>"
    )


def varying_404() -> dict[str, str]:
    """A JSON 404 whose detail differs per request (a request id in the text)."""
    return {"detail": f"No Project matches the given query (request {next(_ray):x})."}


@dataclass
class Env:
    world: World
    sandbox: Sandbox
    config: Path
    tmp: Path
    sha: str
    now: datetime

    @property
    def state(self) -> Path:
        return self.tmp / "state.sqlite3"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    world = World()
    now = datetime.now(UTC)
    sha = seed_case(world, now=now)
    with Sandbox(world) as sandbox:
        yield Env(world, sandbox, write_config(tmp_path, sandbox), tmp_path, sha, now)
        refused = outside_allowlist(sandbox)
        assert refused == [], f"requests outside the allowlist: {refused}"


def once(env: Env) -> subprocess.CompletedProcess[str]:
    result = cli("once", "--config", str(env.config))
    assert result.returncode == 0, result.stderr
    return result


def show(env: Env, number: int = 7430) -> dict[str, Any]:
    result = cli("show", f"{REPO}#{number}", "--format", "json", "--config", str(env.config))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def signal(report: dict[str, Any], name: str = CONTEXT) -> dict[str, Any]:
    return next(s for s in report["signals"] if s["name"] == name)


def comment(env: Env, number: int = 7430) -> str:
    """The bot's comment as read (dates' non-breaking spaces and hyphens made plain)."""
    body: str = bot_comments(env.world, number)[0]["body"]
    return body.replace("\u00a0", " ").replace("\u2011", "-")


def failing_since(env: Env, minutes: int) -> str:
    """Move the state's record of when reading RTD began to fail `minutes` back; that time."""
    moment = env.now - timedelta(minutes=minutes)
    with sqlite3.connect(env.state) as db:
        db.execute(
            "UPDATE source_reads SET failing_since = ? "
            "WHERE source = 'readthedocs' AND failing_since IS NOT NULL",
            (moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),),
        )
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def quiet_cycle(env: Env) -> None:
    """One more cycle of the same outage edits nothing."""
    env.sandbox.clear_requests()
    once(env)
    assert writes(env.sandbox) == [], "the comment changed from one cycle of the outage to the next"


def docs_pull(env: Env, number: int, *, build: int, state: str = "building") -> str:
    """A pull request whose RTD status names `build`, running on RTD."""
    sha = f"{number:040x}"
    env.world.add_pull(REPO, number, title="docs", author="dana", head_sha=sha)
    started = env.now - timedelta(minutes=10)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/{build}/", created_at=started,
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=build, commit=sha, version=str(number), state=state, success=None,
        created=started,
    )  # fmt: skip
    return sha


# --- item 5: an outage is never evidence about a build ----------------------------------------


def test_an_outage_never_says_rtd_did_not_give_the_build_a_new_status_names(env: Env) -> None:
    sha = docs_pull(env, 7450, build=111)
    once(env)
    assert "111" in comment(env, 7450) and "building" in comment(env, 7450)
    # RTD starts build 222 of the same commit and says so on GitHub; then RTD goes down.
    env.world.add_rtd_build(RTD, id=222, commit=None, version="7450", state="triggered",
                            success=None, created=env.now - timedelta(minutes=1))  # fmt: skip
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/222/",
        created_at=env.now - timedelta(minutes=1),
    )  # fmt: skip
    env.sandbox.fail("GET", ANY_RTD, 503, times=-1)
    once(env)
    body = comment(env, 7450)
    assert "did not give" not in body, body
    assert "HTTP 503" in body and "could not" in body.lower()
    docs = signal(show(env, 7450))
    assert docs["reconciliation"]["build_id"] is None  # no build is claimed for the status
    assert "did not give" not in docs["reconciliation"]["finding"]
    quiet_cycle(env)
    since = failing_since(env, 61)  # the outage has lasted an hour (> unverified_after 30)
    once(env)
    assert f"since {since}" in comment(env, 7450), comment(env, 7450)
    quiet_cycle(env)


def test_a_503_on_the_build_a_status_names_is_not_evidence_it_does_not_exist(env: Env) -> None:
    sha = f"{7451:040x}"
    env.world.add_pull(REPO, 7451, title="docs", author="dana", head_sha=sha)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/333/",
        created_at=env.now - timedelta(minutes=2),
    )  # fmt: skip
    # RTD records a build's commit only after cloning: the commit's list does not hold it yet.
    env.world.add_rtd_build(RTD, id=333, commit=None, version="7451", state="triggered",
                            success=None, created=env.now - timedelta(minutes=2))  # fmt: skip
    env.sandbox.fail("GET", rf"/projects/{RTD}/builds/333/", 503, times=-1)
    rec = signal(show(env, 7451))["reconciliation"]
    assert rec["build_id"] is None
    assert "did not give" not in rec["finding"], rec["finding"]
    assert "333" in rec["finding"] and "HTTP 503" in rec["finding"]


def test_rtd_s_own_404_for_the_named_build_is_its_answer_and_said_so(env: Env) -> None:
    sha = f"{7454:040x}"
    env.world.add_pull(REPO, 7454, title="docs", author="dana", head_sha=sha)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/444/",
        created_at=env.now - timedelta(minutes=2),
    )  # fmt: skip
    once(env)  # the sandbox holds no build 444: RTD's detail endpoint answers 404
    assert f"/projects/{RTD}/builds/444/" in [r.path for r in env.sandbox.requests]
    assert "names Read the Docs build 444, which Read the Docs did not give" in comment(env, 7454)
    env.sandbox.fail("GET", ANY_RTD, 503, times=-1)
    quiet_cycle(env)  # an outage after that answer changes nothing before the limit
    since = failing_since(env, 40)
    once(env)
    body = comment(env, 7454)
    assert "did not give" in body and f"could not be read since {since}" in body, body


def test_a_long_outage_after_rtd_listed_no_build_says_since_when(env: Env) -> None:
    sha = f"{7452:040x}"
    env.world.add_pull(REPO, 7452, title="docs", author="dana", head_sha=sha)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://{RTD}--7452.org.readthedocs.build/en/7452/",
        created_at=env.now - timedelta(minutes=5),
    )  # fmt: skip
    once(env)
    assert "lists no build" in comment(env, 7452)
    env.sandbox.fail("GET", ANY_RTD, 503, times=-1)
    quiet_cycle(env)  # the last good answer stands, unchanged, before the limit
    since = failing_since(env, 45)
    once(env)
    body = comment(env, 7452)
    assert f"could not be read since {since}" in body, body
    assert "lists no build" in body  # what it said when it was last read, with that time
    quiet_cycle(env)


# --- item 6: error pages are never quoted; a 403 keeps the last good evidence ------------------


def test_a_403_keeps_the_last_good_evidence_and_never_quotes_the_page(env: Env) -> None:
    env.world.set_rtd_build(RTD, BUILD, state="building", success=None)
    once(env)
    before = comment(env)
    env.sandbox.fail("GET", ANY_RTD, 403, times=-1, body=cdn_403,
                     headers={"Content-Type": "text/html"})  # fmt: skip
    for _ in range(2):
        env.sandbox.clear_requests()
        once(env)
        assert any(r.service == "rtd" for r in env.sandbox.requests)  # it was asked
        assert writes(env.sandbox) == [], "a 403 edited the comment"
        assert comment(env) == before
    report = show(env)  # it reads the state as the comment does: the last good evidence stands
    found = signal(report)["reconciliation"]
    assert (found["build_id"], found["build_state"]) == (BUILD, "building"), found
    assert "Cloudflare" not in json.dumps(report) and "Ray ID" not in json.dumps(report)
    since = failing_since(env, 31)
    once(env)
    body = comment(env)
    assert f"could not be read since {since}" in body, body
    assert "building" in body and str(BUILD) in body  # the last good evidence stands
    assert "HTTP 403" in body
    for page_text in ("Cloudflare", "Ray ID", "DOCTYPE", "<html", "blocked"):
        assert page_text not in body, page_text
    quiet_cycle(env)


def test_an_error_page_that_varies_per_request_edits_the_comment_once(env: Env) -> None:
    sha = f"{7453:040x}"
    env.world.add_pull(REPO, 7453, title="docs", author="dana", head_sha=sha)
    env.world.add_status(
        REPO, sha, context="docs/readthedocs.org:gone-docs", state="pending",
        description=PENDING, target_url="https://readthedocs.org/projects/gone-docs/builds/9/",
        created_at=env.now - timedelta(minutes=5),
    )  # fmt: skip
    env.sandbox.fail("GET", r"/projects/gone-docs/.*", 404, times=-1, body=varying_404)
    once(env)
    body = comment(env, 7453)
    assert "HTTP 404" in body and "given query" not in body and "No Project" not in body, body
    quiet_cycle(env)
    quiet_cycle(env)
    finding = signal(show(env, 7453), "docs/readthedocs.org:gone-docs")["reconciliation"]
    assert "No Project" not in finding["finding"] and "HTTP 404" in finding["finding"]


# --- item 11: the pre-2020 status name ----------------------------------------------------------


def test_the_pre_2020_context_is_settled_by_the_build_its_target_url_names(env: Env) -> None:
    sha = f"{7460:040x}"
    env.world.add_pull(REPO, 7460, title="old integration", author="olga", head_sha=sha)
    started = env.now - timedelta(hours=4)
    env.world.add_status(
        REPO, sha, context=LEGACY, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/45000001/", created_at=started,
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=45000001, commit=sha, version="7460", state="cancelled", success=False,
        created=started, finished=None, duration=0,
    )  # fmt: skip
    env.world.add_rtd_notification(RTD, 45000001, "build:user:cancelled")
    report = show(env, 7460)
    docs = signal(report, LEGACY)
    rec = docs["reconciliation"]
    assert rec is not None, docs
    assert (rec["provider"], rec["project"], rec["build_id"]) == ("readthedocs", RTD, 45000001)
    assert docs["state"] == "cancelled" and rec["divergent"] is True
    assert report["verdict"] == "incomplete"
    assert any(f"/projects/{RTD}/builds/" in r.path for r in env.sandbox.requests)


def test_the_pre_2020_context_without_a_project_in_target_url_says_why_it_was_not_checked(
    env: Env,
) -> None:
    sha = f"{7461:040x}"
    env.world.add_pull(REPO, 7461, title="old integration", author="olga", head_sha=sha)
    env.world.add_status(
        REPO, sha, context=LEGACY, state="pending", description=PENDING,
        target_url="https://example.org/somewhere/else",
        created_at=env.now - timedelta(minutes=5),
    )  # fmt: skip
    env.sandbox.clear_requests()
    report = show(env, 7461)
    rec = signal(report, LEGACY)["reconciliation"]
    assert rec is not None and rec["build_id"] is None
    assert "not checked" in rec["finding"] and "target_url" in rec["finding"]
    assert not [r for r in env.sandbox.requests if r.service == "rtd"]
    once(env)
    assert "not checked" in comment(env, 7461)


LEGACY_DATA = Path(__file__).parents[1] / "data" / "real" / "rtd-legacy"


@pytest.mark.parametrize(
    ("file", "checked"),
    [("send-build-status-pending.json", True), ("pr-builder-design-status.json", False)],
)
def test_rtd_s_own_pre_2020_status_bodies(env: Env, file: str, checked: bool) -> None:
    posted = json.loads((LEGACY_DATA / file).read_text(encoding="utf-8"))
    sha = f"{7462:040x}"
    env.world.add_pull(REPO, 7462, title="pip docs", author="olga", head_sha=sha)
    started = env.now - timedelta(minutes=20)
    env.world.add_status(
        REPO, sha, context=posted["context"], state=posted["state"],
        description=posted["description"], target_url=posted["target_url"], created_at=started,
    )  # fmt: skip
    env.world.add_rtd_build("pip", id=99999999, commit=sha, version="7462", state="finished",
                            success=True, created=started, finished=started)  # fmt: skip
    rec = signal(show(env, 7462), LEGACY)["reconciliation"]
    if checked:
        assert (rec["project"], rec["build_id"], rec["build_state"]) == ("pip", 99999999,
                                                                         "finished")  # fmt: skip
        assert "GitHub's status was not updated after the build finished" in rec["finding"]
    else:
        assert rec["build_id"] is None and "not checked" in rec["finding"]


def test_the_pre_2020_context_is_settled_by_the_latest_build_it_names_and_says_its_version(
    env: Env,
) -> None:
    """Issue 24 item 7: RTD's pre-2020 statuses were posted by branch builds: the build the
    status names settles it even when it is a `latest` build, and the finding says which
    version that build built."""
    sha = f"{7463:040x}"
    env.world.add_pull(REPO, 7463, title="old integration", author="olga", head_sha=sha)
    started = env.now - timedelta(hours=3)
    env.world.add_status(
        REPO, sha, context=LEGACY, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/45000003/", created_at=started,
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=45000003, commit=sha, version="latest", state="finished", success=False,
        created=started, finished=started + timedelta(minutes=3),
    )  # fmt: skip
    docs = signal(show(env, 7463), LEGACY)
    rec = docs["reconciliation"]
    assert rec is not None and rec["build_id"] == 45000003, docs
    assert docs["state"] == "failure"
    assert "version latest" in rec["finding"], rec["finding"]
