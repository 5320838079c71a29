"""Issue 7, Read the Docs side, and the dry run: the real CLI against the sandbox, per defect."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import (
    CONTEXT,
    LOGIN,
    REPO,
    RTD,
    SEED_SHA,
    TESTS,
    Env,
    bot_comments,
    cli,
    seed_case,
    writes,
)

from bot.core.model import MARKER
from bot_sandbox import Sandbox, World

BUILD = 34894885
SUCCESS = "Read the Docs build succeeded!"
FAILED = "Read the Docs build failed!"
PENDING = "Read the Docs build is in progress!"
# RTD's own 429 text (rest_framework throttling); the seconds change from one answer to the next
THROTTLED = "Request was throttled. Expected available in {} seconds."


@pytest.fixture
def world(now: datetime) -> World:
    world = World()
    seed_case(world, now=now)
    return world


def once(env: Env, *extra: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    return cli("once", "--config", str(config or env.config), *extra, sleep=env.waits)


def show(env: Env, number: int = 7430, config: Path | None = None) -> dict[str, Any]:
    result = cli(
        "show",
        f"{REPO}#{number}",
        "--format",
        "json",
        "--config",
        str(config or env.config),
        sleep=env.waits,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def signal(report: dict[str, Any], name: str = CONTEXT) -> dict[str, Any]:
    return next(s for s in report["signals"] if s["name"] == name)


def plain(markdown: str) -> str:
    """The comment's text as read: dates' non-breaking spaces and hyphens made plain."""
    return markdown.replace("\u00a0", " ").replace("\u2011", "-")


def rtd_requests(env: Env) -> list[str]:
    return [r.path for r in env.sandbox.requests if r.service == "rtd"]


def with_lines(config: Path, *lines: str, section: str | None = None) -> Path:
    """A copy of the config with lines added to the last [[repos]] entry (or to a [section])."""
    text = config.read_text(encoding="utf-8")
    config = config.with_name(f"with-{len(list(config.parent.glob('with-*')))}.toml")
    if section is None:
        text += "\n".join(lines) + "\n"
    else:
        text = text.replace(f"[{section}]\n", f"[{section}]\n" + "\n".join(lines) + "\n", 1)
    config.write_text(text, encoding="utf-8")
    return config


# --- defect 2: which build settles the status ------------------------------------------------


def test_a_newer_branch_build_of_the_same_commit_never_settles_the_pr_status(env: Env) -> None:
    env.world.add_rtd_build(
        RTD, id=34899999, commit=SEED_SHA, version="latest", state="finished", success=True,
        created=env.now - timedelta(hours=1), finished=env.now - timedelta(minutes=55),
    )  # fmt: skip
    docs = signal(show(env))
    assert docs["state"] == "cancelled"
    rec = docs["reconciliation"]
    assert (rec["build_id"], rec["build_state"], rec["divergent"]) == (BUILD, "cancelled", True)
    assert "build:user:cancelled" in rec["finding"]
    assert "34899999" in rec["finding"] and "latest" in rec["finding"]  # mentioned, not used


def test_without_a_build_in_target_url_the_newest_build_of_the_pr_version_settles(
    env: Env,
) -> None:
    sha = "c" * 40
    env.world.add_pull(REPO, 7440, title="docs", author="carol", head_sha=sha)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="success", description=SUCCESS,
        target_url=f"https://{RTD}--7440.org.readthedocs.build/en/7440/",
        created_at=env.now - timedelta(minutes=30),
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=40000001, commit=sha, version="7440", state="finished", success=False,
        created=env.now - timedelta(minutes=40), finished=env.now - timedelta(minutes=35),
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=40000002, commit=sha, version="latest", state="finished", success=True,
        created=env.now - timedelta(minutes=20), finished=env.now - timedelta(minutes=15),
    )  # fmt: skip
    docs = signal(show(env, 7440))
    rec = docs["reconciliation"]
    assert docs["state"] == "failure" and rec["build_id"] == 40000001 and rec["divergent"]


def test_the_build_target_url_names_settles_even_when_not_listed_for_the_commit(
    env: Env,
) -> None:
    # A freshly triggered build has commit null (RTD's own POST fixture): the commit filter
    # does not list it, so its detail is read.
    env.world.add_rtd_build(
        RTD, id=34900001, commit=None, version="7430", state="triggered", success=None,
        created=env.now - timedelta(minutes=2),
    )  # fmt: skip
    env.world.add_status(
        REPO, SEED_SHA, context=CONTEXT, state="pending", description=PENDING,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/34900001/",
        created_at=env.now - timedelta(minutes=2),
    )  # fmt: skip
    docs = signal(show(env))
    assert docs["state"] == "pending"
    assert docs["reconciliation"]["build_id"] == 34900001
    assert f"/projects/{RTD}/builds/34900001/" in rtd_requests(env)


# --- defect 3: slugs and hosts ----------------------------------------------------------------


def test_each_context_is_settled_with_its_own_slug_not_rtd_project(env: Env) -> None:
    config = with_lines(env.config, f'rtd_project = "{RTD}"')
    env.world.add_status(
        REPO, SEED_SHA, context="docs/readthedocs.org:other-docs", state="pending",
        description=PENDING, target_url="https://readthedocs.org/projects/other-docs/builds/51/",
        created_at=env.now - timedelta(minutes=20),
    )  # fmt: skip
    env.world.add_rtd_build(
        "other-docs", id=51, commit=SEED_SHA, version="7430", state="finished", success=False,
        created=env.now - timedelta(minutes=20), finished=env.now - timedelta(minutes=18),
    )  # fmt: skip
    report = show(env, config=config)
    other = signal(report, "docs/readthedocs.org:other-docs")
    assert other["reconciliation"]["project"] == "other-docs"
    assert (other["state"], other["reconciliation"]["build_id"]) == ("failure", 51)
    assert signal(report)["reconciliation"]["build_id"] == BUILD


def test_rtd_project_is_asked_only_for_a_head_without_any_rtd_status(env: Env) -> None:
    config = with_lines(env.config, f'rtd_project = "{RTD}"')
    sha = "d" * 40
    env.world.add_pull(REPO, 7441, title="no docs status", author="dave", head_sha=sha)
    at = env.now - timedelta(minutes=30)
    env.world.add_check_run(REPO, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at)
    env.world.add_rtd_build(
        RTD, id=41000001, commit=sha, version="7441", state="cancelled", success=False,
        created=at, duration=0,
    )  # fmt: skip
    report = show(env, 7441, config=config)
    assert [s["name"] for s in report["signals"]] == ["DCO"]  # no invented GitHub signal
    assert report["verdict"] == "passing"
    note = next(n for n in report["notes"] if "41000001" in n)
    assert RTD in note and "cancelled" in note and "no Read the Docs status" in note
    plain = show(env, 7441)  # without rtd_project nothing is asked
    assert not any("41000001" in n for n in plain["notes"])


def test_hostile_slug_is_that_signal_s_could_not_verify_and_never_a_request(env: Env) -> None:
    for bad in (
        "docs/readthedocs.org:../x",
        "docs/readthedocs.org:a b",
        "docs/readthedocs.com:a/b",
    ):
        env.world.add_status(
            REPO, SEED_SHA, context=bad, state="pending", description=PENDING,
            created_at=env.now - timedelta(minutes=5),
        )  # fmt: skip
    env.world.add_pull(REPO, 7442, title="other", author="bob", head_sha="e" * 40)
    result = once(env)
    assert result.returncode == 0, result.stderr
    report = show(env)
    for bad in (
        "docs/readthedocs.org:../x",
        "docs/readthedocs.org:a b",
        "docs/readthedocs.com:a/b",
    ):
        rec = signal(report, bad)["reconciliation"]
        assert rec["build_id"] is None and "not a valid project slug" in rec["finding"]
    assert all(p.startswith(f"/projects/{RTD}/") for p in rtd_requests(env))
    assert len(bot_comments(env.world, 7430)) == 1 and len(bot_comments(env.world, 7442)) == 1


def test_self_hosted_context_is_asked_at_api_url(env: Env) -> None:
    # RTD's own default status name (self-hosted instances): docs/readthedocs:<slug>
    env.world.add_status(
        REPO, SEED_SHA, context=f"docs/readthedocs:{RTD}", state="pending", description=PENDING,
        target_url=f"https://docs.example.org/projects/{RTD}/builds/{BUILD}/",
        created_at=env.now - timedelta(minutes=5),
    )  # fmt: skip
    docs = signal(show(env), f"docs/readthedocs:{RTD}")
    assert docs["state"] == "cancelled" and docs["reconciliation"]["build_id"] == BUILD


@pytest.fixture
def business(env: Env) -> Iterator[Sandbox]:
    """A second Read the Docs (the .com site) with a project of the same slug as .org's."""
    world = World()
    world.rtd_require_token = True
    world.add_rtd_token("biz-token")
    env.world.rtd_require_token = True
    env.world.add_rtd_token("org-token")
    with Sandbox(world) as sandbox:
        yield sandbox


def test_org_and_com_are_asked_with_their_own_token_and_cached_apart(
    env: Env, business: Sandbox
) -> None:
    text = env.config.read_text(encoding="utf-8").replace(
        f'business_api_url = "{env.sandbox.rtd_url}"', f'business_api_url = "{business.rtd_url}"'
    )
    env.config.write_text(text, encoding="utf-8")
    tokens = ('token = "org-token"', 'business_token = "biz-token"')
    env.config = with_lines(env.config, *tokens, section="readthedocs")
    com = f"docs/readthedocs.com:{RTD}"
    env.world.add_status(
        REPO, SEED_SHA, context=com, state="success", description=SUCCESS,
        target_url=f"https://{RTD}--7430.com.readthedocs.build/en/7430/",
        created_at=env.now - timedelta(hours=4),
    )  # fmt: skip
    business.world.add_rtd_build(
        RTD, id=77, commit=SEED_SHA, version="7430", state="finished", success=False,
        created=env.now - timedelta(hours=4), finished=env.now - timedelta(hours=4),
    )  # fmt: skip
    for _ in range(2):  # the second cycle reads the cache
        result = once(env)
        assert result.returncode == 0, result.stderr
        body = bot_comments(env.world, 7430)[0]["body"]
        assert "77" in body and "ailing" in body
    org_auth = {r.headers.get("authorization") for r in env.sandbox.requests if r.service == "rtd"}
    com_auth = {r.headers.get("authorization") for r in business.requests}
    assert org_auth == {"Token org-token"} and com_auth == {"Token biz-token"}
    report = show(env)
    assert signal(report, com)["state"] == "failure"
    assert signal(report)["state"] == "cancelled"


# --- defect 4: GitHub failure + RTD cancelled -------------------------------------------------


def test_failure_on_github_with_a_cancelled_build_is_cancelled_and_says_what_rtd_reported(
    env: Env,
) -> None:
    sha = "f" * 40
    env.world.add_pull(REPO, 7443, title="cancelled while running", author="erin", head_sha=sha)
    started = env.now - timedelta(minutes=30)
    env.world.add_status(
        REPO, sha, context=CONTEXT, state="failure", description=FAILED,
        target_url=f"https://readthedocs.org/projects/{RTD}/builds/43000001/", created_at=started,
    )  # fmt: skip
    env.world.add_rtd_build(
        RTD, id=43000001, commit=sha, version="7443", state="cancelled", success=False,
        created=started, finished=started + timedelta(minutes=2), duration=120,
    )  # fmt: skip
    env.world.add_rtd_notification(RTD, 43000001, "build:user:cancelled")
    env.world.add_rtd_build(
        RTD, id=43000002, commit=sha, version="latest", state="finished", success=False,
        created=started + timedelta(minutes=5), finished=started + timedelta(minutes=8),
    )  # fmt: skip
    report = show(env, 7443)
    docs = signal(report)
    rec = docs["reconciliation"]
    assert docs["state"] == "cancelled" and rec["divergent"] is True
    assert rec["build_id"] == 43000001 and rec["notification"] == "build:user:cancelled"
    assert "failure" in rec["finding"] and "cancelled" in rec["finding"]
    assert "build:user:cancelled" in rec["finding"]
    assert "running build is cancelled" in rec["finding"]
    assert report["verdict"] == "incomplete"


# --- defect 9: a failed read of Read the Docs is not a new fact --------------------------------


def test_rtd_outage_edits_nothing_until_unverified_after_then_says_since_when(env: Env) -> None:
    env.world.set_rtd_build(RTD, BUILD, state="building", success=None)
    assert once(env).returncode == 0
    body = bot_comments(env.world, 7430)[0]["body"]
    for seconds in (57, 41):
        env.sandbox.clear_failures()
        env.sandbox.fail(
            "GET", rf"/projects/{RTD}/builds/", 429, times=-1,
            body={"detail": THROTTLED.format(seconds)}, headers={"Retry-After": "0"},
        )  # fmt: skip
        env.sandbox.clear_requests()
        result = once(env)
        assert result.returncode == 0, result.stderr
        assert writes(env.sandbox) == [], "the comment was edited for a failed read"
        assert bot_comments(env.world, 7430)[0]["body"] == body
    with sqlite3.connect(env.state) as db:  # the outage began 31 minutes ago
        db.execute(
            "UPDATE source_reads SET failing_since = ? WHERE source = 'readthedocs'",
            ((env.now - timedelta(minutes=31)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),),
        )
    assert once(env).returncode == 0
    edited = plain(bot_comments(env.world, 7430)[0]["body"])
    since = (env.now - timedelta(minutes=31)).strftime("%Y-%m-%d %H:%M UTC")
    assert f"could not be read since {since}" in edited
    assert "throttled" not in edited and "seconds" not in edited
    assert "building" in edited and "34894885" in edited  # the last good evidence stands
    env.sandbox.clear_requests()
    assert once(env).returncode == 0
    assert writes(env.sandbox) == [], "the comment changed from one cycle of the outage to the next"


def test_a_500_on_notifications_keeps_the_build_evidence(env: Env) -> None:
    env.sandbox.fail("GET", rf"/projects/{RTD}/builds/{BUILD}/notifications/", 500, times=-1)
    docs = signal(show(env))
    rec = docs["reconciliation"]
    assert (docs["state"], rec["build_id"], rec["build_state"]) == ("cancelled", BUILD, "cancelled")
    assert "notifications" in rec["finding"] and "could not be read" in rec["finding"]


# --- defect 10 (issue 7) and item 10 (issue 8): the dry run ------------------------------------


def test_dry_run_adopts_like_the_real_run_and_the_comment_keeps_its_observed_time(
    env: Env,
) -> None:
    assert once(env).returncode == 0
    comment = bot_comments(env.world, 7430)[0]
    env.state.unlink()  # the state is lost; the comment on GitHub is not
    dry = once(env, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "octo/omni#7430: would adopt" in dry.stdout, dry.stdout
    assert not env.state.exists()
    env.sandbox.clear_requests()
    real = once(env)
    assert real.returncode == 0, real.stderr
    assert writes(env.sandbox) == [], "a lost state re-dated the comment"
    assert bot_comments(env.world, 7430)[0]["body"] == comment["body"]
    stamp = comment["body"].splitlines()[1]
    assert stamp.startswith("<!-- ci-status-bot:stamp v2 ") and stamp.endswith(" -->")


def test_dry_run_predicts_edit_when_only_the_comment_knows_it_and_costs_no_more(
    env: Env,
) -> None:
    assert once(env).returncode == 0
    env.state.unlink()
    env.world.add_check_run(
        REPO, SEED_SHA, name="lint", app_slug="github-actions", workflow="lint",
        conclusion="failure", started_at=env.now, completed_at=env.now,
    )  # fmt: skip
    env.sandbox.clear_requests()
    dry = once(env, "--dry-run")
    assert "octo/omni#7430: would edit" in dry.stdout, dry.stdout
    dry_cost = len(env.sandbox.requests)
    env.sandbox.clear_requests()
    real = once(env)
    assert "edited 1" in real.stdout and "created 0" in real.stdout
    assert dry_cost <= len(env.sandbox.requests)


def test_dry_run_reads_the_rtd_cache_of_the_state(env: Env) -> None:
    assert once(env).returncode == 0  # the cancelled build is final: cached
    env.sandbox.clear_requests()
    dry = once(env, "--dry-run")
    assert dry.returncode == 0 and "would leave" in dry.stdout
    assert rtd_requests(env) == []


def _read_only(*paths: Path) -> None:
    """Make paths read-only, even for root (whom file modes do not stop): chattr +i."""
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip("running as root without chattr: a read-only file cannot be made")


def _writable(*paths: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True, check=False)
    for path in paths:
        path.chmod(stat.S_IRWXU)


def test_dry_run_works_on_a_read_only_state_and_writes_nothing(env: Env) -> None:
    assert once(env).returncode == 0
    env.world.add_check_run(
        REPO, SEED_SHA, name="lint", app_slug="github-actions", workflow="lint",
        conclusion="failure", started_at=env.now, completed_at=env.now,
    )  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="ro-state-"))
    state = folder / "state.sqlite3"
    shutil.copy(env.state, state)
    config = folder / "bot.toml"
    text = env.config.read_text(encoding="utf-8").replace(str(env.state), str(state))
    config.write_text(text, encoding="utf-8")
    before = state.read_bytes()
    env.sandbox.clear_requests()
    try:
        _read_only(state, folder)
        result = cli("once", "--dry-run", "--config", str(config))
    finally:
        _writable(state, folder)
    try:
        assert result.returncode == 0, result.stderr
        assert "octo/omni#7430: would edit" in result.stdout
        assert state.read_bytes() == before
        assert sorted(p.name for p in folder.iterdir()) == ["bot.toml", "state.sqlite3"]
        assert writes(env.sandbox) == []
    finally:
        shutil.rmtree(folder)


def test_marker_and_login_decide_what_the_dry_run_adopts(env: Env) -> None:
    env.world.add_user(login="mallory", token="mallory-token")
    env.world.add_comment(REPO, 7430, body=MARKER + "\nnot the bot's", author="mallory")
    dry = once(env, "--dry-run")
    assert "octo/omni#7430: would create" in dry.stdout, dry.stdout
    assert LOGIN not in {c["user"]["login"] for c in env.world.comments(REPO, 7430)}


# --- the sandbox's Read the Docs holds to the real payloads (tests/data/real/rtd) ------------

REAL = TESTS / "data" / "real" / "rtd"


def real(name: str) -> Any:
    """One of Read the Docs' own API v3 test responses (see tests/data/real/rtd/PROVENANCE.md)."""
    return json.loads((REAL / name).read_text(encoding="utf-8"))


def shape(value: Any) -> Any:
    """Keys (recursively) and JSON types; lists by their first item."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def sandbox_get(env: Env, path: str, **params: Any) -> Any:
    return httpx.get(env.sandbox.rtd_url + path, params=params, timeout=10).json()


def test_sandbox_build_shapes_are_rtd_s_own(env: Env) -> None:
    listing = sandbox_get(env, f"/projects/{RTD}/builds/", commit=SEED_SHA)
    assert shape(listing) == {**shape(real("projects-builds-list.json")), "results": listing and [
        shape(real("projects-builds-list.json")["results"][0]) | {"finished": "NoneType"}
    ]}  # fmt: skip
    env.world.set_rtd_build(RTD, BUILD, state="finished", success=True, finished=env.now)
    detail = sandbox_get(env, f"/projects/{RTD}/builds/{BUILD}/")
    assert shape(detail) == shape(real("projects-builds-detail.json"))
    notes = sandbox_get(env, f"/projects/{RTD}/builds/{BUILD}/notifications/")
    assert shape(notes) == shape(real("projects-builds-notifications-list.json"))
    assert (
        notes["results"][0]["message"]
        == real("projects-builds-notifications-list.json")["results"][0]["message"]
    )
    env.world.add_rtd_build(RTD, id=3, commit=None, version="v1.0", state="triggered",
                            success=None)  # fmt: skip
    triggered = sandbox_get(env, f"/projects/{RTD}/builds/3/")
    assert shape(triggered) == shape(real("projects-versions-builds-list_POST.json")["build"])
    empty = sandbox_get(env, f"/projects/{RTD}/builds/", commit="0" * 40)
    assert empty == real("projects-list-empty.json")


def test_sandbox_hides_pull_request_versions_like_rtd(world: World, sandbox: Sandbox) -> None:
    # (not through `env`: the bot itself never asks the versions endpoints; `world` holds the
    # seed case)
    def get(path: str, **params: Any) -> Any:
        return httpx.get(sandbox.rtd_url + path, params=params, timeout=10).json()

    sha = SEED_SHA
    world.add_rtd_build(RTD, id=5, commit=sha, version="latest", state="finished", success=True)
    versions = get(f"/projects/{RTD}/versions/")
    assert [(v["slug"], v["type"]) for v in versions["results"]] == [("latest", "branch")]
    assert get(f"/projects/{RTD}/versions/latest/")["type"] == "branch"
    assert get(f"/projects/{RTD}/versions/7430/") == {"detail": "Not found."}
    both = get(f"/projects/{RTD}/builds/", commit=sha)["results"]
    assert sorted(b["version"] for b in both) == ["7430", "latest"]  # one commit, two versions
