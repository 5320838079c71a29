"""What Read the Docs' answers mean (pure): its statuses, their project and host, the settling
build. The `evidence` module beside it reads and caches; `rows` turns a lookup into a row."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from bot.core.evidence import HEAD_KEY
from bot.core.model import Kind, Signal

FINAL_STATES: Final = frozenset({"finished", "cancelled"})
# The key, among a pull request's RTD lookups, of the one made for `repos[].rtd_project` on a
# head with no RTD status: reported as a note, never as a signal (evidence about the head).
PROJECT_KEY: Final = HEAD_KEY + "rtd_project"
INVALID_SLUG: Final = "not a valid project slug"

_CONTEXT: Final = re.compile(r"docs/readthedocs(?:\.(org|com))?:(.*)", re.DOTALL)
# RTD slugs are made by slugify: lower-case letters, digits, hyphens (underscores in old ones)
_SLUG: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}")
_BUILD_PAGE: Final = re.compile(r"/projects/(?P<slug>[^/]+)/builds/(?P<id>\d+)/?")


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


def project_of(context: str) -> tuple[str, str] | None:
    """(host, slug) of a Read the Docs status context with a valid slug, else None."""
    target = target_of(context)
    return (target.host, target.slug) if target is not None and target.valid else None


def is_rtd_status(signal: Signal) -> bool:
    """A commit status Read the Docs posts (`docs/readthedocs...`), valid or not."""
    return signal.kind is Kind.STATUS and signal.name.startswith("docs/readthedocs")


def needs_notes(build: RtdBuild) -> bool:
    """Why a build ended is asked only for a cancelled or failed one."""
    return build.state == "cancelled" or (build.state == "finished" and build.success is False)
