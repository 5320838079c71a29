"""Azure Pipelines as a source (bot.sources.base): its settings, allowlist, reads and probe."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Final
from urllib.parse import quote

from bot.core.evidence import Evidence, evidence_key
from bot.core.model import PullSnapshot, Signal
from bot.guard import Allowance, Guard
from bot.settings import RepoSettings, Settings
from bot.sources.azure_pipelines.rows import AzureLookup
from bot.sources.azure_pipelines.rules import (
    FINAL_STATUS,
    LABEL,
    NAME,
    Build,
    BuildRef,
    asked_about,
    build_ref,
    dump,
    load,
    parse_build,
)
from bot.sources.base import Connection, Kind, RecordOf, Said, Source, SourcesState, Wiring
from bot.sources.cache import Records
from bot.sources.http import JsonApi, JsonConnection

API_VERSION: Final = "7.1"
# The one read endpoint, below api_url: one build of one project.
PATHS: Final = (r"/[A-Za-z0-9][A-Za-z0-9-]{0,49}/[^/]+/_apis/build/builds/\d+",)


class AzureClient(JsonConnection):
    """The Azure DevOps build API, shared by every cycle of a process."""

    name, label, KEY = NAME, LABEL, "azure_pipelines"

    def source(self, store: SourcesState | None) -> Source:
        """Azure Pipelines as one cycle asks it."""
        return AzurePipelines(self, store)

    def build(self, ref: BuildRef) -> Build:
        """One build's record, by its organization, project and id."""
        project = quote(ref.project, safe="")
        path = f"/{ref.org}/{project}/_apis/build/builds/{ref.build_id}"
        return parse_build(self.api.get(path, {"api-version": API_VERSION}), ref.build_id)


class AzurePipelines:
    """The Azure Pipelines signals of a head, settled by the build each one names."""

    name, label, docs = NAME, LABEL, False

    def __init__(self, client: AzureClient, store: SourcesState | None) -> None:
        self.client = client
        self.records: Records[Build] = Records(
            NAME, store, dump=dump, load=load, final=lambda b: b.status == FINAL_STATUS
        )

    @property
    def requests(self) -> int:
        """Requests made to Azure DevOps so far."""
        return self.client.requests

    def recognises(self, signal: Signal) -> bool:
        """An Azure Pipelines signal GitHub still shows queued or running."""
        return asked_about(signal)

    def asks(self, signal: Signal) -> bool:
        """An Azure Pipelines signal GitHub still shows queued or running."""
        return asked_about(signal)

    def evidence(
        self,
        snapshot: PullSnapshot,
        repo: RepoSettings,
        *,
        now: datetime,
        asked: tuple[Signal, ...],
    ) -> Mapping[str, Evidence]:
        """The record of the build each pending Azure signal of the head names (each once)."""
        if not asked:
            return {}
        self.records.begin()
        found: dict[str, Evidence] = {}
        for signal in asked:
            ref = build_ref(signal.url)
            if ref is None:
                continue
            looked = self.records.look(
                f"{ref.org}/{ref.project}#{ref.build_id}",
                lambda ref=ref: self.client.build(ref),  # type: ignore[misc]
                now=now,
                posted=None,  # a build's record, once completed, never changes
            )
            found[evidence_key(signal)] = AzureLookup(
                ref, snapshot.head_sha, looked.record, looked.read_at, looked.failure,
                looked.failing_since, looked.status, self.client.api.has_token,
            )  # fmt: skip
        return found


def allowances(settings: Settings) -> tuple[Allowance, ...]:
    """The build endpoint below the configured api_url."""
    return (Allowance.of(NAME, LABEL, (settings.azure_pipelines.api_url,), PATHS),)


def _api(settings: Settings, guard: Guard, *, wiring: Wiring | None = None) -> JsonApi:
    cfg = settings.azure_pipelines
    pat = cfg.token.get_secret_value()
    token = base64.b64encode(f":{pat}".encode()).decode() if pat else ""
    return JsonApi(
        source=NAME, label="Azure DevOps", api_url=cfg.api_url, guard=guard, token=token,
        scheme="Basic", timeout_s=cfg.timeout_seconds,
        max_retries=cfg.max_retries if wiring is not None else 0,
        stop=wiring.stop if wiring is not None else None,
        sleep=wiring.sleep if wiring is not None else None,
    )  # fmt: skip


def connect(settings: Settings, wiring: Wiring) -> Connection | None:
    """The Azure DevOps client ([azure_pipelines]; None when it is disabled)."""
    if not settings.azure_pipelines.enabled:
        return None
    return AzureClient(_api(settings, wiring.guard, wiring=wiring))


def probe(settings: Settings, guard: Guard) -> Iterator[Said]:
    """check-config: what can be checked without a build id (the settings; reads nothing)."""
    cfg = settings.azure_pipelines
    if not cfg.enabled:
        yield Said("note", "azure_pipelines.enabled", "false: Azure DevOps is never asked")
    elif not cfg.token.get_secret_value():
        yield Said("note", "azure_pipelines.token", f"not set: {cfg.api_url} is read "
                   "anonymously (public projects only)")  # fmt: skip
    else:
        yield Said("note", "azure_pipelines.token", "set: sent only to "
                   f"{cfg.api_url}; it is checked on the first build read")  # fmt: skip


def final(payload: str) -> bool:
    """Whether a record kept in the state is final (the comment may carry it)."""
    record = load(payload)
    return record is not None and record.status == FINAL_STATUS


def record_of(key: str, payload: str) -> RecordOf | None:
    """The commits a kept build is of: its sourceVersion and the pull request head it merged
    (where its key names that build)."""
    build = load(payload)
    if build is None or not key.endswith(f"#{build.id}"):
        return None
    return RecordOf(frozenset(c for c in (build.source_version, build.pr_source_sha) if c))


KIND: Final = Kind(
    NAME, LABEL, allowances=allowances, connect=connect, probe=probe, final=final,
    record_of=record_of,
)  # fmt: skip
