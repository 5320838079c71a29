"""What Read the Docs' answers mean (pure): its statuses, their project and host, the settling
build. The `evidence` module beside it reads and caches; `rows` turns a lookup into a row."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from bot.core.evidence import HEAD_KEY
from bot.core.model import Kind, Signal

FINAL_STATES: Final = frozenset({"finished", "cancelled"})
# The key, among a pull request's RTD lookups, of the one made for `repos[].rtd_project` on a
# head with no RTD status: reported as a note, never as a signal (evidence about the head).
PROJECT_KEY: Final = HEAD_KEY + "rtd_project"
INVALID_SLUG: Final = "not a valid project slug"

# Read the Docs' status name before April 2020 (one name for every project, on .org and .com:
# readthedocs/readthedocs.org 00ea459 renamed it); its target_url names the project.
LEGACY_CONTEXT: Final = "continuous-documentation/read-the-docs"
LEGACY_UNCHECKED: Final = (
    f"not checked: `{LEGACY_CONTEXT}` is Read the Docs' status name from before 2020, which "
    "names no project, and its target_url is neither a Read the Docs build page "
    "(https://readthedocs.org/projects/<slug>/builds/<id>/) nor a pull request preview "
    "(https://<slug>--<number>.org.readthedocs.build/)"
)

_CONTEXT: Final = re.compile(r"docs/readthedocs(?:\.(org|com))?:(.*)", re.DOTALL)
# RTD slugs are made by slugify: lower-case letters, digits, hyphens (underscores in old ones)
_SLUG: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}")
_BUILD_PAGE: Final = re.compile(r"/projects/(?P<slug>[^/]+)/builds/(?P<id>\d+)/?")
# The sites' dashboards (build pages) and pull request previews, by the host they are on
_DASHBOARDS: Final = {
    "readthedocs.org": "org",
    "app.readthedocs.org": "org",
    "readthedocs.com": "com",
    "app.readthedocs.com": "com",
}
_PREVIEW: Final = re.compile(r"(?P<slug>.+)--\d+\.(?P<site>org|com)\.readthedocs\.build")
# What an HTTP status from Read the Docs means, in words that never change between answers
_MEANINGS: Final = {
    401: "the token was not accepted",
    403: "access refused: a private project, or an address refused without a token",
    404: "no such project or build is visible",
    429: "too many requests",
}


@dataclass(frozen=True, slots=True)
class RtdBuild:
    """One Read the Docs build of a commit, as RTD API v3 reported it."""

    id: int
    project: str
    commit: str
    state: str  # RTD's state code: triggered, cloning, ..., finished, cancelled (raw)
    success: bool | None
    version: str | None = None
    created: datetime | None = None
    finished: datetime | None = None
    duration: int | None = None
    url: str | None = None  # urls.build


@dataclass(frozen=True, slots=True)
class Target:
    """The Read the Docs site and project a status context names."""

    host: str  # "org" (api_url), "com" (business_api_url), "self" (a self-hosted RTD at api_url)
    slug: str
    valid: bool  # False for a hostile or malformed slug: never asked about


def target_of(context: str) -> Target | None:
    """The site and project of a `docs/readthedocs[.org|.com]:<slug>` context, else None."""
    match = _CONTEXT.fullmatch(context)
    if match is None:
        return None
    slug = match.group(2)
    return Target(match.group(1) or "self", slug, _SLUG.fullmatch(slug) is not None)


def legacy_target(url: str | None) -> Target | None:
    """The site and project the target_url of a pre-2020 RTD status names, else None."""
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    page = _BUILD_PAGE.fullmatch(parts.path)
    if host in _DASHBOARDS and page is not None:
        slug = page.group("slug")
        return Target(_DASHBOARDS[host], slug, _SLUG.fullmatch(slug) is not None)
    preview = _PREVIEW.fullmatch(host)
    if preview is not None and parts.scheme == "https":
        slug = preview.group("slug")
        return Target(preview.group("site"), slug, _SLUG.fullmatch(slug) is not None)
    return None


def status_target(context: str, url: str | None) -> Target | None:
    """The site and project of a Read the Docs status (either name) and its target_url."""
    return legacy_target(url) if context == LEGACY_CONTEXT else target_of(context)


def describe_status(status: int) -> str:
    """What Read the Docs answering `status` means, the same words for every such answer."""
    if status in _MEANINGS:
        meaning = _MEANINGS[status]
    elif status >= 500:
        meaning = "a server error"
    else:
        meaning = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    return f"Read the Docs answered HTTP {status}" + (f" ({meaning})" if meaning else "")


def named_build(url: str | None, slug: str) -> int | None:
    """The build id a status's target_url names (`.../projects/<slug>/builds/<id>/`), if any."""
    if not url:
        return None
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    match = _BUILD_PAGE.search(path)
    if match is None or match.group("slug") != slug:
        return None
    return int(match.group("id"))


class Settled(NamedTuple):
    """Which build settles one RTD status, and the builds around it."""

    build: RtdBuild | None  # the settling build; None when RTD lists none for the status
    candidates: tuple[RtdBuild, ...]  # the settling build first, then its version's other builds
    others: tuple[RtdBuild, ...]  # builds of the same commit for other versions: never settle
    named: bool  # the settling build is the one the status's target_url names
    version: str  # the pull request's own RTD version: its number
    missing: int | None = None  # the build the status names, not read for this commit


def settling(
    builds: Sequence[RtdBuild], *, commit: str, version: str, named: int | None
) -> Settled:
    """The rule: the build the status names, else the newest build of the PR's own version.

    Only builds of the exact commit count (a build a status names may still have no commit:
    RTD fills it in after cloning). Builds of other versions never settle; they are listed.
    """
    exact = [b for b in builds if b.commit == commit]
    own = [b for b in exact if b.version == version]
    chosen = next((b for b in builds if b.id == named), None) if named is not None else None
    if named is not None and (chosen is None or (chosen.commit and chosen.commit != commit)):
        # The status names a build that was not read for this commit: no other build may
        # stand in for it (an older success must not settle a newer build's status).
        others = tuple(b for b in exact if b.version != version)
        return Settled(None, tuple(own), others, False, version, missing=named)
    if chosen is None:
        chosen = own[0] if own else None
    candidates = () if chosen is None else (chosen, *(b for b in own if b.id != chosen.id))
    others = tuple(b for b in exact if b.version != version and b not in candidates)
    return Settled(chosen, candidates, others, chosen is not None and chosen.id == named, version)


def project_of(context: str, url: str | None = None) -> tuple[str, str] | None:
    """(host, slug) of a Read the Docs status with a valid slug, else None (the pre-2020 name
    is told its project by `url`, its target_url)."""
    target = status_target(context, url)
    return (target.host, target.slug) if target is not None and target.valid else None


def is_rtd_status(signal: Signal) -> bool:
    """A commit status Read the Docs posts (`docs/readthedocs...`, or its pre-2020 name)."""
    return signal.kind is Kind.STATUS and (
        signal.name.startswith("docs/readthedocs") or signal.name == LEGACY_CONTEXT
    )


def needs_notes(build: RtdBuild) -> bool:
    """Why a build ended is asked only for a cancelled or failed one."""
    return build.state == "cancelled" or (build.state == "finished" and build.success is False)
