"""What Azure Pipelines' signals and the Azure DevOps build record mean (pure): the build a
check run or status names, and its record parsed without trusting a field."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from bot.core.jsontext import loads
from bot.core.model import Kind, Signal, State, parse_optional_time
from bot.core.reconcile import github_state
from bot.sources.http import SourceError

NAME: Final = "azure-pipelines"
LABEL: Final = "Azure Pipelines"
APP: Final = "azure-pipelines"  # the Azure Pipelines GitHub App's slug
_ORG: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,49}")
_PROJECT: Final = re.compile(r"(?!\.\.?$)[^/\\\x00-\x1f#?&%]{1,64}")  # never . or ..
_SHA: Final = re.compile(r"[0-9a-f]{40}")
# the build's status (BuildStatus) and result (BuildResult), as the API spells them
FINAL_STATUS: Final = "completed"
RESULTS: Final = {
    "succeeded": State.SUCCESS,
    "partiallySucceeded": State.NEUTRAL,
    "failed": State.FAILURE,
    "canceled": State.CANCELLED,
}


class AzureBad(SourceError):
    """Azure DevOps answered something this bot cannot read as the build's record."""


class BuildRef(NamedTuple):
    """The build a signal's URL names: organization, project, build id."""

    org: str
    project: str
    build_id: int


@dataclass(frozen=True, slots=True)
class Build:
    """One Azure Pipelines build, as the build API reported it."""

    id: int
    status: str  # notStarted, inProgress, completed, cancelling, postponed (raw)
    result: str | None  # succeeded, partiallySucceeded, failed, canceled, none (raw)
    source_version: str  # the commit it built
    pr_source_sha: str | None = None  # a pull request build's head (triggerInfo pr.sourceSha)
    number: str | None = None  # buildNumber
    started: datetime | None = None
    finished: datetime | None = None
    url: str | None = None  # _links.web.href

    def builds(self, head: str) -> bool:
        """Whether this build is of `head` (its sourceVersion, or the PR head it merged)."""
        return head in (self.source_version, self.pr_source_sha)


def build_ref(url: str | None) -> BuildRef | None:
    """The build a dev.azure.com/<org>/<project> or <org>.visualstudio.com/<project> build
    page names (`buildId=`), else None."""
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if parts.scheme != "https":
        return None
    if host == "dev.azure.com" and len(segments) >= 3:
        org, project, rest = segments[0], segments[1], segments[2:]
    elif host.endswith(".visualstudio.com") and len(segments) >= 2:
        org, project, rest = host.removesuffix(".visualstudio.com"), segments[0], segments[1:]
    else:
        return None
    ids = parse_qs(parts.query).get("buildId", [])
    if not rest or rest[0] != "_build" or len(ids) != 1 or not re.fullmatch(r"\d{1,12}", ids[0]):
        return None
    if not _ORG.fullmatch(org) or not _PROJECT.fullmatch(project):
        return None
    return BuildRef(org, project, int(ids[0]))


def is_azure(signal: Signal) -> bool:
    """A check run of the Azure Pipelines app, or a status, whose URL names an Azure build."""
    if signal.kind is Kind.CHECK_RUN and signal.app != APP:
        return False
    return signal.kind is not Kind.EXPECTED and build_ref(signal.url) is not None


def asked_about(signal: Signal) -> bool:
    """Azure DevOps is asked only about Azure signals GitHub still shows queued or running."""
    return github_state(signal) is State.PENDING and is_azure(signal)  # most have ended


def _time(value: Any) -> datetime | None:
    try:
        return parse_optional_time(value) if isinstance(value, str) or value is None else None
    except ValueError:
        return None


def _text(value: Any, limit: int = 100) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def parse_build(data: dict[str, Any], build_id: int) -> Build:
    """One build record; raises AzureBad for another build, or one without its fields."""
    if data.get("id") != build_id:
        raise AzureBad(f"Azure DevOps answered with another record than build {build_id}")
    status, version = data.get("status"), data.get("sourceVersion")
    if not isinstance(status, str) or not re.fullmatch(r"[A-Za-z]{1,40}", status):
        raise AzureBad(f"build {build_id}'s record has no status")
    if not isinstance(version, str) or not version:
        raise AzureBad(f"build {build_id}'s record has no sourceVersion")
    trigger = data.get("triggerInfo")
    pr_sha = trigger.get("pr.sourceSha") if isinstance(trigger, dict) else None
    links = data.get("_links")
    web = links.get("web") if isinstance(links, dict) else None
    href = web.get("href") if isinstance(web, dict) else None
    result = _text(data.get("result"), 40)
    return Build(
        id=build_id,
        status=status,
        result=result if result and re.fullmatch(r"[A-Za-z]{1,40}", result) else None,
        source_version=version[:64],
        pr_source_sha=pr_sha if isinstance(pr_sha, str) and _SHA.fullmatch(pr_sha) else None,
        number=_text(data.get("buildNumber")),
        started=_time(data.get("startTime")),
        finished=_time(data.get("finishTime")),
        url=href if isinstance(href, str) and href.startswith("https://") else None,
    )


# --- the cache's text form ----------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def dump(build: Build) -> str:
    """A build as JSON text for the state."""
    return json.dumps(
        {
            "id": build.id, "status": build.status, "result": build.result,
            "sourceVersion": build.source_version,
            "triggerInfo": {"pr.sourceSha": build.pr_source_sha},
            "buildNumber": build.number, "startTime": _iso(build.started),
            "finishTime": _iso(build.finished), "_links": {"web": {"href": build.url}},
        }
    )  # fmt: skip


def load(text: str) -> Build | None:
    """A kept or carried build, or None when it cannot be read back, whatever it holds (it is
    then asked again)."""
    try:
        data = loads(text)
        return parse_build(data, int(data["id"]))
    except Exception:  # nested too deep, 1e400 for an id, any field of any type: none
        return None
