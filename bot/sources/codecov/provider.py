"""Codecov as a source (bot.sources.base): its settings, allowlist, reads and probe."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Final
from urllib.parse import quote, urlsplit

from bot.core.evidence import Evidence, evidence_key
from bot.core.model import PullSnapshot, Signal
from bot.guard import Allowance, Guard
from bot.settings import RepoSettings, Settings
from bot.sources.base import Connection, Kind, RecordOf, Said, Source, SourcesState, Wiring
from bot.sources.cache import Records
from bot.sources.codecov.rows import CodecovLookup
from bot.sources.codecov.rules import (
    FINAL_STATES,
    LABEL,
    MAX_UPLOADS,
    NAME,
    CommitRecord,
    asked_about,
    dump,
    load,
    owner_repo,
    parse_commit,
    parse_uploads,
)
from bot.sources.http import JsonApi, JsonConnection, SourceError

# The read endpoints, below api_url: a repository (check-config), a commit and its uploads.
PATHS: Final = (
    r"/[a-z_]+/[^/]+/repos/[^/]+/",
    r"/[a-z_]+/[^/]+/repos/[^/]+/commits/[0-9a-f]{40}/",
    r"/[a-z_]+/[^/]+/repos/[^/]+/commits/[0-9a-f]{40}/uploads/",
)
_SITES: Final = {"api.codecov.io": "https://app.codecov.io"}  # the API -> the commit pages
_SHORT: Final = {"github": "gh", "github_enterprise": "ghe"}


def _part(text: str) -> str:
    return quote(text, safe="")


class CodecovClient(JsonConnection):
    """Codecov's API v2 for one git host (`service`), shared by every cycle of a process."""

    name, label, KEY = NAME, LABEL, "codecov"

    def __init__(self, api: JsonApi, *, service: str) -> None:
        super().__init__(api)
        self.service = service

    def source(self, store: SourcesState | None) -> Source:
        """Codecov as one cycle asks it."""
        return Codecov(self, store)

    def repo_path(self, repo: str) -> str:
        """The path of a repository below api_url."""
        owner, name = owner_repo(repo)
        return f"/{self.service}/{_part(owner)}/repos/{_part(name)}"

    def commit(self, repo: str, sha: str) -> CommitRecord:
        """Codecov's record of exactly `sha`, with one page of its uploads."""
        base = f"{self.repo_path(repo)}/commits/{sha}"
        commit, state = parse_commit(self.api.get(base + "/"), sha)
        page = self.api.get(base + "/uploads/", {"page_size": MAX_UPLOADS})
        uploads, count = parse_uploads(page)
        return CommitRecord(commit, state, uploads, count)

    def page(self, repo: str, sha: str) -> str | None:
        """Codecov's own page for the commit, where its site is known."""
        site = _SITES.get(urlsplit(self.api.api_url).hostname or "")
        short = _SHORT.get(self.service)
        if site is None or short is None:
            return None
        owner, name = owner_repo(repo)
        return f"{site}/{short}/{_part(owner)}/{_part(name)}/commit/{sha}"


class Codecov:
    """The Codecov signals of a head, settled by Codecov's record of that exact commit."""

    name, label, docs = NAME, LABEL, False

    def __init__(self, client: CodecovClient, store: SourcesState | None) -> None:
        self.client = client
        self.records: Records[CommitRecord] = Records(
            NAME, store, dump=dump, load=load, final=lambda r: r.state in FINAL_STATES
        )

    @property
    def requests(self) -> int:
        """Requests made to Codecov so far."""
        return self.client.requests

    def recognises(self, signal: Signal) -> bool:
        """A Codecov signal GitHub still shows pending."""
        return asked_about(signal)

    def asks(self, signal: Signal) -> bool:
        """A Codecov signal GitHub still shows pending."""
        return asked_about(signal)

    def evidence(
        self,
        snapshot: PullSnapshot,
        repo: RepoSettings,
        *,
        now: datetime,
        asked: tuple[Signal, ...],
    ) -> Mapping[str, Evidence]:
        """Codecov's record of the head for each of its pending signals (one read per head)."""
        if not asked:
            return {}
        sha, name = snapshot.head_sha, snapshot.repo
        self.records.begin()
        times = [t for s in asked if (t := s.created_at or s.started_at) is not None]
        posted = max(times, default=None)
        looked = self.records.look(
            f"{self.client.service}/{name}@{sha}",
            lambda: self.client.commit(name, sha),
            now=now,
            posted=posted,
        )
        lookup = CodecovLookup(
            project=name, record=looked.record, read_at=looked.read_at, failure=looked.failure,
            failing_since=looked.failing_since, status=looked.status,
            has_token=self.client.api.has_token, page=self.client.page(name, sha),
        )  # fmt: skip
        return {evidence_key(s): lookup for s in asked}


def allowances(settings: Settings) -> tuple[Allowance, ...]:
    """Codecov's read endpoints below its api_url."""
    return (Allowance.of(NAME, LABEL, (settings.codecov.api_url,), PATHS),)


def connect(settings: Settings, wiring: Wiring) -> Connection | None:
    """The Codecov client ([codecov]; None when it is disabled)."""
    cfg = settings.codecov
    if not cfg.enabled:
        return None
    return CodecovClient(_api(settings, wiring.guard, wiring=wiring), service=cfg.service)


def _api(settings: Settings, guard: Guard, *, wiring: Wiring | None = None) -> JsonApi:
    cfg = settings.codecov
    return JsonApi(
        source=NAME, label=LABEL, api_url=cfg.api_url, guard=guard,
        token=cfg.token.get_secret_value(), timeout_s=cfg.timeout_seconds,
        max_retries=cfg.max_retries if wiring is not None else 0,
        stop=wiring.stop if wiring is not None else None,
        sleep=wiring.sleep if wiring is not None else None,
    )  # fmt: skip


def probe(settings: Settings, guard: Guard) -> Iterator[Said]:
    """check-config: whether Codecov answers for each configured repository (reads only)."""
    cfg = settings.codecov
    if not cfg.enabled:
        yield Said("note", "codecov.enabled", "false: Codecov is never asked")
        return
    token = bool(cfg.token.get_secret_value())
    if not token:
        yield Said("note", "codecov.token", f"not set: {cfg.api_url} is read anonymously "
                   "(public repositories only)")  # fmt: skip
    client = CodecovClient(_api(settings, guard), service=cfg.service)
    try:
        for index, repo in enumerate(settings.repos):
            yield _probe_repo(client, f"repos[{index}].name", repo.name, token=token)
    finally:
        client.close()


def _probe_repo(client: CodecovClient, key: str, repo: str, *, token: bool) -> Said:
    try:
        client.api.get(client.repo_path(repo) + "/")
    except SourceError as exc:
        if exc.status == 404 and not token:
            return Said("note", key, f"{repo}: Codecov shows no such repository without a "
                        "token: private (set codecov.token), or not on Codecov")  # fmt: skip
        if exc.status in (401, 403, 404):
            return Said("problem", key, f"{repo}: {exc}")
        return Said("unverified", key, f"{repo}: Codecov could not be asked ({exc})")
    return Said("ok", key, f"{repo}: Codecov answers for it at {client.api.api_url}")


def final(payload: str) -> bool:
    """Whether a record kept in the state is final (the comment may carry it)."""
    record = load(payload)
    return record is not None and record.state in FINAL_STATES


def record_of(key: str, payload: str) -> RecordOf | None:
    """The commit a kept record is of (the record's own, which its key names too)."""
    record = load(payload)
    if record is None or not key.endswith(f"@{record.commit}"):
        return None
    return RecordOf(frozenset({record.commit}))


KIND: Final = Kind(
    NAME, LABEL, allowances=allowances, connect=connect, probe=probe, final=final,
    record_of=record_of,
)  # fmt: skip
