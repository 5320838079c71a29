"""The Read the Docs evidence for a head: which projects to ask, the state's cache, the reads.

`evidence()` returns, for each Read the Docs status of a head, what RTD says about the build
that settles it (an RtdLookup); `client` is the HTTP transport, `rules` what answers mean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from bot.core.jsontext import loads
from bot.core.model import PullSnapshot, Signal, parse_optional_time
from bot.core.remedies import READTHEDOCS
from bot.sources.base import RecordOf
from bot.sources.cache import NoReads
from bot.sources.readthedocs.client import RtdApi, RtdError
from bot.sources.readthedocs.rows import RtdLookup
from bot.sources.readthedocs.rules import (
    FINAL_STATES,
    INVALID_SLUG,
    LEGACY_UNCHECKED,
    PROJECT_KEY,
    RtdBuild,
    Settled,
    describe_status,
    named_build,
    needs_notes,
    settling,
    status_target,
)
from bot.state.ports import SourceRead, SourceReads

NOT_FOUND: Final = 404  # RTD's answer that a build does not exist (or is not visible)
_Key = tuple[str, str, str]  # a read's site, project and commit


def record_key(host: str, project: str, commit: str) -> str:
    """A read's key in the state (source "readthedocs") and in a comment's carried line:
    compact JSON of its site, project and commit."""
    return json.dumps([host, project, commit], separators=(",", ":"))


def record_of(key: str, payload: str) -> RecordOf | None:
    """The commit a kept read is of and when it was read: where its key names the site,
    project and commit the read itself holds; None for a key or payload that is not a read's."""
    try:
        parts = loads(key)
    except ValueError:  # not JSON, or nested past any key's depth: not a read's key
        return None
    read = _load(payload)
    if read is None or parts != [read.host, read.project, read.commit]:
        return None
    return RecordOf(frozenset({read.commit}), read.read_at)


@dataclass(frozen=True, slots=True)
class CommitRead:
    """What one RTD site said about one project and one exact commit: the cache's unit."""

    host: str
    project: str
    commit: str
    read_at: datetime
    builds: tuple[RtdBuild, ...] = ()  # the commit's builds (all versions) + builds a status named
    notes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # read notifications by id
    missing: frozenset[int] = frozenset()  # builds asked for by id that RTD answered 404 for

    def find(self, build_id: int | None) -> RtdBuild | None:
        """The build with this id, if read."""
        return next((b for b in self.builds if b.id == build_id), None)


def _lookup(
    read: CommitRead,
    ask: _Ask,
    *,
    unverified_since: datetime | None = None,
    failure: str | None = None,
) -> RtdLookup:
    """The lookup of one ask from one read: the builds, and why its settling build ended."""
    chosen = _settled(read, ask).build
    notes = None if chosen is None else read.notes.get(chosen.id)
    return RtdLookup(
        project=read.project,
        commit=read.commit,
        fetched_at=read.read_at,
        builds=read.builds,
        notifications=notes or (),
        notifications_read=chosen is None or notes is not None or not needs_notes(chosen),
        unverified_since=unverified_since,
        failure=failure,
    )


def _settled(read: CommitRead, ask: _Ask) -> Settled:
    return settling(read.builds, commit=read.commit, version=ask.version, named=ask.named)


@dataclass(frozen=True, slots=True)
class _Ask:
    """One question to RTD: a status (or the configured project) of one head."""

    host: str
    slug: str
    version: str
    named: int | None
    posted: datetime | None  # when GitHub's status was posted: a cached read older than it is old


def evidence(
    snapshot: PullSnapshot,
    statuses: Sequence[Signal],
    *,
    rtd_project: str,
    api: RtdApi,
    now: datetime,
    store: SourceReads | None = None,
) -> dict[str, RtdLookup]:
    """What RTD says about each Read the Docs status of the head (`statuses`: those of its
    signals `is_rtd_status` says are), by context (one call per PR).

    The context's own slug is asked; `rtd_project` only when the head has no RTD status at all
    (under PROJECT_KEY). Final evidence comes from the state's cache; a failed read (429, 5xx,
    timeout) leaves the last good evidence standing, marked since when it could not be read.
    A read-only state (a dry run) drops what is kept.
    """
    asks: dict[str, _Ask] = {}
    answers: dict[str, RtdLookup] = {}
    version = str(snapshot.number)
    for signal in statuses:
        target = status_target(signal.name, signal.url)
        if target is None or not target.valid:
            why = INVALID_SLUG if target is not None else LEGACY_UNCHECKED
            answers[signal.name] = RtdLookup(
                "" if target is None else target.slug, snapshot.head_sha, now, error=why
            )
            continue
        named = named_build(signal.url, target.slug)
        asks[signal.name] = _Ask(target.host, target.slug, version, named, signal.created_at)
    if rtd_project and not answers and not asks:
        asks[PROJECT_KEY] = _Ask("org", rtd_project, version, None, None)
    session = _Session(api, store if store is not None else NoReads(), now=now)
    for key, ask in asks.items():
        answers[key] = session.lookup(ask, snapshot.head_sha)
    return answers


class _Session:
    """The reads of one pull request: each (host, project, commit) is read at most once."""

    def __init__(self, api: RtdApi, store: SourceReads, *, now: datetime) -> None:
        self.api, self.store, self.now = api, store, now
        self.fresh: dict[_Key, CommitRead] = {}
        self.failed: dict[_Key, tuple[datetime, str]] = {}

    def lookup(self, ask: _Ask, commit: str) -> RtdLookup:
        """The settled lookup for one ask: cached, freshly read, or the last good one.

        Any failure to read (an outage, a 403 or 404 page, a timeout) is not evidence: the last
        good answer stands, marked since when reading fails; with none, the row says what failed.
        """
        key = (ask.host, ask.slug, commit)
        stored = self.store.get_source_read(READTHEDOCS, record_key(*key))
        last = _load(stored.payload) if stored is not None and stored.payload else None
        read, failure = self.fresh.get(key), self.failed.get(key)
        if read is None and failure is None:
            if last is not None and _final_for(last, ask):
                return _lookup(last, ask)
            try:
                read = self._read(ask, commit)
            except RtdError as exc:
                failure = self._failed(key, stored, exc)
        if read is not None:
            try:
                return _lookup(self._complete(read, ask, last), ask)
            except _NamedUnread as exc:
                failure = self._failed(key, stored, exc)
        assert failure is not None
        return _last_good(last, ask, commit, failure, now=self.now)

    def _failed(self, key: _Key, stored: SourceRead | None, exc: RtdError) -> tuple[datetime, str]:
        """Note a failed read (in the state; a read-only one drops it); since when and what."""
        self.failed[key] = _failing(stored, exc, now=self.now)
        self.store.source_read_failed(
            READTHEDOCS, record_key(*key), now=self.now, failure=_failure(exc)
        )
        return self.failed[key]

    def _read(self, ask: _Ask, commit: str) -> CommitRead:
        builds = self.api.commit_builds(ask.host, ask.slug, commit)
        read = CommitRead(ask.host, ask.slug, commit, self.now, builds)
        self.fresh[(ask.host, ask.slug, commit)] = read
        return read

    def _complete(self, read: CommitRead, ask: _Ask, last: CommitRead | None) -> CommitRead:
        """Read the build the status names and why the settling build ended, where needed.

        RTD's 404 for the named build is its answer (kept); any other failure to read it
        raises _NamedUnread: the commit's list alone says nothing about that build.
        """
        key = (read.host, read.project, read.commit)
        if ask.named is not None and read.find(ask.named) is None and ask.named not in read.missing:
            try:
                read = _with(
                    read, builds=(*read.builds, self.api.build(ask.host, ask.slug, ask.named))
                )
            except RtdError as exc:
                if exc.status != NOT_FOUND:
                    raise _NamedUnread(exc, ask.named) from exc
                read = _with(read, missing=read.missing | {ask.named})
            self.fresh[key] = read
        build = _settled(read, ask).build
        if build is not None and needs_notes(build) and build.id not in read.notes:
            kept = last.notes.get(build.id) if last is not None else None
            try:
                notes = (
                    kept
                    if kept is not None
                    else self.api.notifications(ask.host, ask.slug, build.id)
                )
                read = _with(read, notes={**read.notes, build.id: notes})
            except RtdError:
                pass  # the build evidence stands; the row says its notifications were not read
        self.fresh[key] = read
        self.store.put_source_read(READTHEDOCS, record_key(*key), payload=_dump(read), now=self.now)
        return read


class _NamedUnread(RtdError):
    """The build a status names could not be read (not RTD's 404: an outage, a 403, ...)."""

    def __init__(self, cause: RtdError, build_id: int) -> None:
        super().__init__(str(cause), status=cause.status)
        self.cause, self.build_id = cause, build_id


def _last_good(
    last: CommitRead | None,
    ask: _Ask,
    commit: str,
    failure: tuple[datetime, str],
    *,
    now: datetime,
) -> RtdLookup:
    """RTD cannot be read now: the last good answer stands, if it speaks about this status.

    A last answer read before the status named its build says nothing about that build (an
    outage is never evidence that RTD "did not give" it): then only the failure is told.
    """
    since, what = failure
    speaks = last is not None and (
        ask.named is None or last.find(ask.named) is not None or ask.named in last.missing
    )
    if last is None or not speaks:
        return RtdLookup(ask.slug, commit, now, error=what, unverified_since=since)
    return _lookup(last, ask, unverified_since=since, failure=what)


def _failure(exc: RtdError) -> str:
    """What failed, in words that do not change from one answer to the next (no retry-after,
    no body): the status code and what it means, and which build when it was the named one."""
    said = str(exc) if exc.status is None else describe_status(exc.status)
    if isinstance(exc, _NamedUnread):
        return f"{said} for build {exc.build_id}, which the status names"
    return said


def _failing(stored: SourceRead | None, exc: RtdError, *, now: datetime) -> tuple[datetime, str]:
    """Since when and how reading fails: the first failure of the run stands."""
    if stored is not None and stored.failing_since is not None:
        return stored.failing_since, stored.failure or _failure(exc)
    return now, _failure(exc)


def _final_for(read: CommitRead, ask: _Ask) -> bool:
    """Whether a cached read settles this ask for good: nothing RTD says about it can change."""
    if ask.posted is not None and ask.posted > read.read_at:
        return False  # GitHub heard from RTD after this was read
    if ask.named is not None and read.find(ask.named) is None:
        return False
    build = _settled(read, ask).build
    return (
        build is not None
        and build.state in FINAL_STATES
        and (build.id in read.notes or not needs_notes(build))
    )


def final_payload(text: str) -> bool:
    """Whether a kept read is final whatever is asked of it: every build it holds finished
    and, where a build's end is explained by notifications, those were read."""
    read = _load(text)
    return (
        read is not None
        and bool(read.builds)
        and all(
            b.state in FINAL_STATES and (b.id in read.notes or not needs_notes(b))
            for b in read.builds
        )
    )


def _with(
    read: CommitRead,
    *,
    builds: tuple[RtdBuild, ...] | None = None,
    notes: Mapping[int, tuple[str, ...]] | None = None,
    missing: frozenset[int] | None = None,
) -> CommitRead:
    return CommitRead(
        read.host,
        read.project,
        read.commit,
        read.read_at,
        read.builds if builds is None else builds,
        read.notes if notes is None else notes,
        read.missing if missing is None else missing,
    )


# --- the cache's text form ----------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dump(read: CommitRead) -> str:
    """A read as JSON text for the state."""
    builds = [
        {
            "id": b.id,
            "project": b.project,
            "commit": b.commit,
            "state": b.state,
            "success": b.success,
            "version": b.version,
            "created": _iso(b.created),
            "finished": _iso(b.finished),
            "duration": b.duration,
            "url": b.url,
        }
        for b in read.builds
    ]
    notes = {str(k): list(v) for k, v in read.notes.items()}
    return json.dumps(
        {
            "host": read.host,
            "project": read.project,
            "commit": read.commit,
            "read_at": _iso(read.read_at),
            "builds": builds,
            "notes": notes,
            "missing": sorted(read.missing),
        }
    )


def _load(text: str) -> CommitRead | None:
    """A stored or carried read, or None when the text cannot be read back, whatever it holds
    (it is then read again)."""
    try:
        data = loads(text)
        builds = tuple(
            RtdBuild(
                id=int(b["id"]),
                project=str(b["project"]),
                commit=b["commit"],
                state=str(b["state"]),
                success=b["success"],
                version=b["version"],
                created=parse_optional_time(b["created"]),
                finished=parse_optional_time(b["finished"]),
                duration=b["duration"],
                url=b["url"],
            )
            for b in data["builds"]
        )
        notes = {int(k): tuple(str(i) for i in v) for k, v in data["notes"].items()}
        missing = frozenset(int(i) for i in data.get("missing", ()))  # absent before issue 15
        read_at = parse_optional_time(data["read_at"])
        if read_at is None:
            return None
        return CommitRead(
            str(data["host"]),
            str(data["project"]),
            str(data["commit"]),
            read_at,
            builds,
            notes,
            missing,
        )
    except Exception:  # nested too deep, 1e400 for an id, any field of any type: not a read
        return None
