"""Codecov API v2 and the Azure DevOps build API, as the sandbox serves them.

Shapes follow the real services: Codecov's commit detail and commit uploads (codecov-api
api/public/v2/commit/serializers.py: CommitDetailSerializer, CommitUploadsSerializer; its
tests/test_api_commit_viewset.py: a private repository is 404 to an anonymous reader) and
Azure DevOps' Build (Builds - Get, api-version 7.1: status, result, sourceVersion,
triggerInfo, _links.web). Faults (429, 5xx, a redirect, HTML, a huge page, another commit)
are the server's `fail(...)` rules or `transform`s, as for every service.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot_sandbox.world import JSON, Answer, Call, World, rtd_iso

_REPO = re.compile(r"/(?P<service>[a-z_]+)/(?P<owner>[^/]+)/repos/(?P<repo>[^/]+)/")
_COMMIT = re.compile(
    r"/(?P<service>[a-z_]+)/(?P<owner>[^/]+)/repos/(?P<repo>[^/]+)/commits/(?P<sha>[^/]+)/"
)
_UPLOADS = re.compile(
    r"/(?P<service>[a-z_]+)/(?P<owner>[^/]+)/repos/(?P<repo>[^/]+)/commits/(?P<sha>[^/]+)/uploads/"
)
_BUILD = re.compile(r"/(?P<org>[^/]+)/(?P<project>[^/]+)/_apis/build/builds/(?P<id>\d+)")
SIGN_IN = (
    b"<!DOCTYPE html><html><head><title>Azure DevOps Services | Sign In</title></head>"
    b"<body>Sign in to your account</body></html>"
)


@dataclass
class CodecovCommit:
    """Codecov's record of one commit: its state and the uploads it received."""

    state: str  # complete | pending | error | skipped
    timestamp: datetime
    uploads: list[JSON] = field(default_factory=list)


@dataclass
class ProviderWorld:
    """What the fake Codecov and Azure DevOps know (kept on the World, under its lock)."""

    codecov_repos: dict[str, bool] = field(default_factory=dict)  # owner/name -> private
    codecov_commits: dict[tuple[str, str], CodecovCommit] = field(default_factory=dict)
    codecov_tokens: set[str] = field(default_factory=set)
    azure_builds: dict[tuple[str, str, int], JSON] = field(default_factory=dict)
    azure_private: set[tuple[str, str]] = field(default_factory=set)
    azure_tokens: set[str] = field(default_factory=set)


def providers(world: World) -> ProviderWorld:
    """The world's provider records (made on first use)."""
    with world.lock:
        found = getattr(world, "_providers", None)
        if found is None:
            found = ProviderWorld()
            world._providers = found  # type: ignore[attr-defined]
        return found


def add_codecov_commit(
    world: World,
    repo: str,
    sha: str,
    *,
    state: str,
    uploads: Sequence[tuple[str, datetime, datetime | None]] = (),
    private: bool = False,
) -> None:
    """Codecov's record of `sha`: its state and uploads as (state, created_at, updated_at)."""
    made = [
        _upload_json(repo, sha, i, state=s, created=c, updated=u)
        for i, (s, c, u) in enumerate(uploads)
    ]
    with world.lock:
        p = providers(world)
        p.codecov_repos[repo] = private
        p.codecov_commits[(repo, sha)] = CodecovCommit(state, world.now(), made)


def add_azure_build(
    world: World,
    org: str,
    project: str,
    build_id: int,
    *,
    commit: str,
    status: str,
    result: str | None = None,
    started: datetime | None = None,
    finished: datetime | None = None,
    pr_head: str | None = None,
    private: bool = False,
) -> JSON:
    """An Azure Pipelines build (Builds - Get shape, api-version 7.1)."""
    build = azure_build_json(
        org,
        project,
        build_id,
        commit=commit,
        status=status,
        result=result,
        started=started,
        finished=finished,
        pr_head=pr_head,
    )
    with world.lock:
        p = providers(world)
        p.azure_builds[(org, project, build_id)] = build
        if private:
            p.azure_private.add((org, project))
    return build


def _upload_json(
    repo: str, sha: str, index: int, *, state: str, created: datetime, updated: datetime | None
) -> JSON:
    return {
        "created_at": rtd_iso(created),
        "updated_at": rtd_iso(updated or created),
        "storage_path": f"v4/raw/{created:%Y-%m-%d}/{sha[:32].upper()}/{sha}/{index}.txt",
        "flags": ["unittests"],
        "provider": "github-actions",
        "build_code": str(9000000000 + index),
        "name": None,
        "job_code": None,
        "build_url": f"https://github.com/{repo}/actions/runs/{9000000000 + index}",
        "state": state,
        "env": None,
        "upload_type": "uploaded",
        "upload_extras": {},
        "totals": None,
    }


def _commit_json(repo: str, sha: str, rec: CodecovCommit) -> JSON:
    owner = repo.split("/", 1)[0]
    totals = {
        "files": 3,
        "lines": 24,
        "hits": 19,
        "misses": 5,
        "partials": 0,
        "coverage": 79.17,
        "branches": 0,
        "methods": 0,
        "sessions": len(rec.uploads),
        "complexity": 0.0,
        "complexity_total": 0.0,
        "complexity_ratio": 0,
        "diff": 0,
    }
    return {
        "commitid": sha,
        "message": "Change the thing",
        "timestamp": rtd_iso(rec.timestamp),
        "ci_passed": True,
        "author": {"service": "github", "username": owner, "name": owner},
        "branch": "feature",
        "totals": totals if rec.state == "complete" else None,
        "state": rec.state,
        "parent": None,
        "report": {"files": [], "totals": totals},
    }


def codecov_handle(call: Call) -> Answer:
    """Answer one Codecov API v2 request."""
    p = providers(call.world)
    scheme, _, token = call.headers.get("authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and token not in p.codecov_tokens:
        return Answer(401, {"detail": "Invalid token."})
    if call.method != "GET":
        return Answer(405, {"detail": f'Method "{call.method}" not allowed.'})
    with call.world.lock:
        return _codecov(call, p, authed=bool(token))


def _codecov(call: Call, p: ProviderWorld, *, authed: bool) -> Answer:
    for pattern in (_UPLOADS, _COMMIT, _REPO):
        found = pattern.fullmatch(call.path)
        if found is None:
            continue
        repo = f"{found.group('owner')}/{found.group('repo')}"
        private = p.codecov_repos.get(repo)
        if private is None or (private and not authed):
            return Answer(404, {"detail": "Not found."})
        if pattern is _REPO:
            return Answer(200, {"name": found.group("repo"), "private": private, "active": True})
        rec = p.codecov_commits.get((repo, found.group("sha")))
        if rec is None:
            return Answer(404, {"detail": "No Commit matches the given query."})
        if pattern is _COMMIT:
            return Answer(200, _commit_json(repo, found.group("sha"), rec))
        count = len(rec.uploads)
        page = {
            "count": count,
            "next": None,
            "previous": None,
            "results": rec.uploads,
            "total_pages": 1,
        }
        return Answer(200, page)
    return Answer(404, {"detail": "Not found."})


def azure_handle(call: Call) -> Answer:
    """Answer one Azure DevOps build API request."""
    p = providers(call.world)
    found = _BUILD.fullmatch(call.path) if call.method == "GET" else None
    if found is None:
        return Answer(404, raw=SIGN_IN, headers={"Content-Type": "text/html"})
    org, project = found.group("org"), found.group("project")
    authed = call.headers.get("authorization", "").lower().startswith("basic ")
    with call.world.lock:
        if (org, project) in p.azure_private and not authed:
            return Answer(203, raw=SIGN_IN, headers={"Content-Type": "text/html; charset=utf-8"})
        build = p.azure_builds.get((org, project, int(found.group("id"))))
    if build is None:
        return Answer(404, _azure_not_found(int(found.group("id"))))
    return Answer(200, build)


def _azure_not_found(build_id: int) -> JSON:
    return {
        "$id": "1",
        "innerException": None,
        "message": f"The requested build {build_id} could not be found.",
        "typeName": "Microsoft.TeamFoundation.Build.WebApi.BuildNotFoundException, "
        "Microsoft.TeamFoundation.Build2.WebApi",
        "typeKey": "BuildNotFoundException",
        "errorCode": 0,
        "eventId": 3000,
    }


def azure_build_json(
    org: str,
    project: str,
    build_id: int,
    *,
    commit: str,
    status: str,
    result: str | None,
    started: datetime | None,
    finished: datetime | None,
    pr_head: str | None,
) -> JSON:
    """Builds - Get's answer (the fields the bot reads, and the ones around them)."""
    api = f"https://dev.azure.com/{org}/{project}/_apis/build/Builds/{build_id}"
    web = f"https://dev.azure.com/{org}/{project}/_build/results?buildId={build_id}"
    trigger: dict[str, Any] = {}
    if pr_head is not None:
        trigger = {
            "pr.number": "42",
            "pr.sourceBranch": "refs/heads/feature",
            "pr.sourceSha": pr_head,
            "pr.sender.name": "octocat",
        }
    return {
        "_links": {
            "self": {"href": api},
            "web": {"href": web},
            "timeline": {"href": f"{api}/Timeline"},
        },
        "id": build_id,
        "buildNumber": f"20261201.{build_id % 100}",
        "status": status,
        "result": result,
        "queueTime": rtd_iso(started),
        "startTime": rtd_iso(started),
        "finishTime": rtd_iso(finished),
        "url": api,
        "definition": {"id": 2, "name": "CI", "type": "build", "revision": 62},
        "project": {
            "id": "95f275e6-c8a2-4844-9d3d-769e90005f8c",
            "name": project,
            "state": "wellFormed",
            "visibility": "public",
        },
        "uri": f"vstfs:///Build/Build/{build_id}",
        "sourceBranch": "refs/pull/42/merge" if pr_head else "refs/heads/main",
        "sourceVersion": commit,
        "triggerInfo": trigger,
        "priority": "normal",
        "reason": "pullRequest" if pr_head else "individualCI",
        "repository": {"id": "octo/repo", "type": "GitHub"},
        "keepForever": False,
        "retainedByRelease": False,
    }


def stick_codecov(world: World, fraction: float, *, seed: int = 0) -> list[int]:
    """Give `fraction` of the open heads a stuck Codecov status: `codecov/patch` pending on
    GitHub for three hours, Codecov's record pending with one upload (the benchmark's case)."""
    import random
    from datetime import timedelta

    rng = random.Random(seed)
    with world.lock:
        pulls = [
            (name, pull)
            for name in sorted(world.repos)
            for pull in sorted(world.repo(name).pulls.values(), key=lambda p: p.number)
            if pull.state == "open"
        ]
        if not pulls or fraction <= 0:
            return []
        chosen = rng.sample(pulls, min(len(pulls), max(1, round(fraction * len(pulls)))))
        since = world.now() - timedelta(hours=3)
        for name, pull in chosen:
            world.add_status(
                name, pull.head_sha, context="codecov/patch", state="pending",
                description="Waiting for status to be reported", created_at=since,
                target_url=f"https://app.codecov.io/gh/{name}/commit/{pull.head_sha}",
                creator="codecov[bot]",
            )  # fmt: skip
            upload = [("uploaded", since + timedelta(minutes=2), None)]
            add_codecov_commit(world, name, pull.head_sha, state="pending", uploads=upload)
        return sorted(pull.number for _, pull in chosen)
