"""Read the Docs API v3 routes of the sandbox (builds, one build, its notifications)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from bot_sandbox.world import (
    JSON,
    RTD_STATE_NAMES,
    Answer,
    Call,
    RtdBuildRec,
    RtdProjectRec,
    rtd_build_json,
    rtd_iso,
    rtd_version_json,
)

FINAL_STATES = {"finished", "cancelled"}
DEFAULT_LIMIT = 10
MAX_LIMIT = 100

_PROJECTS = re.compile(r"/projects/")
_BUILDS = re.compile(r"/projects/(?P<slug>[^/]+)/builds/")
_BUILD = re.compile(r"/projects/(?P<slug>[^/]+)/builds/(?P<id>\d+)/")
_NOTES = re.compile(r"/projects/(?P<slug>[^/]+)/builds/(?P<id>\d+)/notifications/")
_TRIGGER = re.compile(r"/projects/(?P<slug>[^/]+)/versions/(?P<version>[^/]+)/builds/")
_VERSIONS = re.compile(r"/projects/(?P<slug>[^/]+)/versions/")
_VERSION = re.compile(r"/projects/(?P<slug>[^/]+)/versions/(?P<version>[^/]+)/")


def not_found() -> Answer:
    """RTD's 404."""
    return Answer(404, {"detail": "Not found."})


def route_kind(method: str, path: str) -> str:
    """A short name of the endpoint, for statistics."""
    for pattern, kind in (
        (_PROJECTS, "rtd.projects.list"),
        (_NOTES, "rtd.notifications"),
        (_BUILD, "rtd.build"),
        (_BUILDS, "rtd.builds.list"),
        (_TRIGGER, "rtd.trigger-build"),
        (_VERSION, "rtd.version"),
        (_VERSIONS, "rtd.versions.list"),
    ):
        if pattern.fullmatch(path):
            return kind
    return "rtd.unknown"


def handle(call: Call) -> Answer:
    """Answer one RTD API v3 request."""
    world = call.world
    scheme, _, token = call.headers.get("authorization", "").partition(" ")
    presented = scheme.lower() == "token" and bool(token)
    # A token RTD does not know is refused on every endpoint (once the world knows any).
    if presented and world.rtd_tokens and token not in world.rtd_tokens:
        return Answer(401, {"detail": "Invalid token."})
    if not presented and (world.rtd_require_token or _PROJECTS.fullmatch(call.path)):
        return Answer(401, {"detail": "Authentication credentials were not provided."})
    with world.lock:
        return _dispatch(call)


def _dispatch(call: Call) -> Answer:
    path = call.path
    if call.method == "POST" and (found := _TRIGGER.fullmatch(path)):
        return _trigger(call, found.group("slug"), found.group("version"))
    if call.method != "GET":
        return Answer(405, {"detail": f'Method "{call.method}" not allowed.'})
    if _PROJECTS.fullmatch(path):  # the projects the token's user maintains
        projects = sorted(call.world.rtd_projects)
        return Answer(200, _page(call, [{"slug": p, "name": p} for p in projects]))
    if found := _VERSION.fullmatch(path) or _VERSIONS.fullmatch(path):
        return _versions(call, found)
    for pattern in (_NOTES, _BUILD, _BUILDS):
        found = pattern.fullmatch(path)
        if found is None:
            continue
        proj = call.world.rtd_projects.get(found.group("slug"))
        if proj is None:
            return not_found()
        if pattern is _BUILDS:
            return _list_builds(call, proj)
        build = proj.builds.get(int(found.group("id")))
        if build is None:
            return not_found()
        if pattern is _BUILD:
            return Answer(200, rtd_build_json(proj, build))
        notes = proj.notifications.get(build.id, [])
        return Answer(200, _page(call, notes))
    return not_found()


def _versions(call: Call, found: re.Match[str]) -> Answer:
    """The versions endpoints: pull request versions (type external) are hidden there, as on RTD."""
    proj = call.world.rtd_projects.get(found.group("slug"))
    if proj is None:
        return not_found()
    shown = sorted(v for v, kind in proj.versions.items() if kind != "external")
    if "version" not in found.groupdict():
        return Answer(200, _page(call, [rtd_version_json(proj, v) for v in shown]))
    slug = found.group("version")
    return Answer(200, rtd_version_json(proj, slug)) if slug in shown else not_found()


def _truthy(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    return value.lower() in ("true", "1", "yes", "on")


def _list_builds(call: Call, proj: RtdProjectRec) -> Answer:
    builds: list[RtdBuildRec] = list(proj.builds.values())
    commit = call.arg("commit")
    if commit:
        builds = [b for b in builds if b.commit == commit]
    running = _truthy(call.arg("running"))
    if running is not None:
        builds = [b for b in builds if (b.state not in FINAL_STATES) == running]
    builds.sort(key=lambda b: (b.created, b.id), reverse=True)
    return Answer(200, _page(call, [rtd_build_json(proj, b) for b in builds]))


def _page(call: Call, items: Sequence[JSON]) -> JSON:
    limit = max(1, min(MAX_LIMIT, call.int_arg("limit", DEFAULT_LIMIT)))
    offset = max(0, call.int_arg("offset", 0))
    chosen = list(items[offset : offset + limit])

    def link(new_offset: int) -> str:
        query: list[tuple[str, Any]] = [
            (k, v) for k, vs in call.query.items() if k not in ("limit", "offset") for v in vs
        ]
        query.append(("limit", limit))
        if new_offset > 0:
            query.append(("offset", new_offset))
        return f"{call.rtd_url}{call.path}?{urlencode(query)}"

    return {
        "count": len(items),
        "next": link(offset + limit) if offset + limit < len(items) else None,
        "previous": link(max(0, offset - limit)) if offset > 0 else None,
        "results": chosen,
    }


def _trigger(call: Call, slug: str, version: str) -> Answer:
    """POST .../versions/{v}/builds/: answered like RTD (202), nothing is started or stored."""
    proj = call.world.rtd_projects.get(slug)
    if proj is None:
        return not_found()
    now = call.world.now()
    api = f"https://readthedocs.org/api/v3/projects/{slug}"
    build = RtdBuildRec(
        id=call.world.next_id("rtd"),
        project=slug,
        commit=None,
        version=version,
        state="triggered",
        success=None,
        created=now,
        finished=None,
        duration=None,
    )
    build_json = rtd_build_json(proj, build)
    return Answer(
        202,
        {
            "build": build_json,
            "project": {
                "created": rtd_iso(now),
                "default_branch": "main",
                "default_version": "latest",
                "id": 1,
                "language": {"code": "en", "name": "English"},
                "_links": {
                    "_self": f"{api}/",
                    "builds": f"{api}/builds/",
                    "versions": f"{api}/versions/",
                },
                "modified": rtd_iso(now),
                "name": slug,
                "slug": slug,
                "privacy_level": "public",
                "external_builds_privacy_level": "public",
                "urls": {"builds": f"https://{proj.site}/projects/{slug}/builds/"},
            },
            "triggered": True,
            "version": {
                "active": True,
                "hidden": False,
                "built": True,
                "id": 2,
                "identifier": None,
                "_links": {
                    "_self": f"{api}/versions/{version}/",
                    "builds": f"{api}/versions/{version}/builds/",
                },
                "ref": None,
                "slug": version,
                "type": "external",
                "verbose_name": version,
                "privacy_level": "public",
            },
        },
    )


__all__ = ["RTD_STATE_NAMES", "handle", "not_found", "route_kind"]
