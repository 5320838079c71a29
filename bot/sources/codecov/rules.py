"""What Codecov's signals and its API v2 answers mean (pure): which signals are Codecov's,
its commit record and uploads, parsed without trusting a field (bad input: CodecovBad)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from bot.core.jsontext import loads
from bot.core.model import Kind, Signal, State, parse_optional_time
from bot.core.reconcile import github_state
from bot.sources.http import SourceError

NAME: Final = "codecov"
LABEL: Final = "Codecov"
APP: Final = "codecov"  # the Codecov GitHub App's slug (its check runs)
# codecov/patch, codecov/project, codecov/project/<flag>, codecov/patch/<flag>, codecov/changes
_CONTEXT: Final = re.compile(
    r"codecov/(?:patch|project)(?:/[A-Za-z0-9_.\-]{1,100})?|codecov/changes"
)
# Codecov's processing states of a commit (codecov-api core/models.py Commit.CommitStates)
FINAL_STATES: Final = frozenset({"complete", "error", "skipped"})
_SHA: Final = re.compile(r"[0-9a-f]{40}")
MAX_UPLOADS: Final = 100  # one page of uploads is read (its `count` says how many there are)


class CodecovBad(SourceError):
    """Codecov answered something this bot cannot read as its record of the head."""


@dataclass(frozen=True, slots=True)
class Upload:
    """One upload Codecov received for the commit."""

    state: str
    created_at: datetime | None
    updated_at: datetime | None
    provider: str | None = None  # the CI that sent it (e.g. "github-actions")
    build_url: str | None = None


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """Codecov's record of one exact commit: its processing state and its uploads."""

    commit: str
    state: str  # complete | pending | error | skipped (raw)
    uploads: tuple[Upload, ...] = ()
    upload_count: int = 0  # how many uploads Codecov holds (its `count`: may exceed one page)

    @property
    def last_upload(self) -> datetime | None:
        """When the newest upload arrived."""
        return max((u.created_at for u in self.uploads if u.created_at), default=None)

    @property
    def processed_at(self) -> datetime | None:
        """When Codecov last finished with an upload (its newest update)."""
        times = [u.updated_at or u.created_at for u in self.uploads]
        return max((t for t in times if t is not None), default=None)


def is_codecov(signal: Signal) -> bool:
    """A Codecov status, or a check run of the Codecov app, by its documented names."""
    if signal.kind is Kind.CHECK_RUN and signal.app != APP:
        return False
    return signal.kind is not Kind.EXPECTED and _CONTEXT.fullmatch(signal.name) is not None


def asked_about(signal: Signal) -> bool:
    """Codecov is asked only about its signals that GitHub still shows pending."""
    return github_state(signal) is State.PENDING and is_codecov(signal)  # most have ended


def owner_repo(repo: str) -> tuple[str, str]:
    """GitHub's owner/name as Codecov's path names them."""
    owner, _, name = repo.partition("/")
    return owner, name


def _time(value: Any) -> datetime | None:
    try:
        return parse_optional_time(value) if isinstance(value, str) or value is None else None
    except ValueError:
        return None


def parse_commit(data: dict[str, Any], head: str) -> tuple[str, str]:
    """(commit, state) of a commit record; raises CodecovBad for another commit or no state."""
    commit, state = data.get("commitid"), data.get("state")
    if not isinstance(commit, str) or not _SHA.fullmatch(commit):
        raise CodecovBad("Codecov's commit record has no commit id")
    if commit != head:
        raise CodecovBad(f"Codecov answered with its record of commit {commit[:7]}, not this head")
    if not isinstance(state, str) or not re.fullmatch(r"[a-z_]{1,40}", state):
        raise CodecovBad("Codecov's commit record has no state")
    return commit, state


def parse_uploads(data: dict[str, Any]) -> tuple[tuple[Upload, ...], int]:
    """The uploads of one page and how many Codecov holds; raises CodecovBad when malformed."""
    results, count = data.get("results"), data.get("count")
    if not isinstance(results, list):
        raise CodecovBad("Codecov's upload list has no results")
    uploads = tuple(_upload(u) for u in results[:MAX_UPLOADS])
    total = count if isinstance(count, int) and count >= len(uploads) else len(uploads)
    return uploads, total


def _upload(item: Any) -> Upload:
    if not isinstance(item, dict) or not isinstance(item.get("state"), str):
        raise CodecovBad("an upload in Codecov's list has no state")
    return Upload(
        state=str(item["state"])[:40],
        created_at=_time(item.get("created_at")),
        updated_at=_time(item.get("updated_at")),
        provider=item["provider"] if isinstance(item.get("provider"), str) else None,
        build_url=item["build_url"] if isinstance(item.get("build_url"), str) else None,
    )


# --- the cache's text form ----------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def dump(record: CommitRecord) -> str:
    """A record as JSON text for the state."""
    uploads = [
        {
            "state": u.state,
            "created_at": _iso(u.created_at),
            "updated_at": _iso(u.updated_at),
            "provider": u.provider,
            "build_url": u.build_url,
        }
        for u in record.uploads
    ]
    return json.dumps(
        {"commit": record.commit, "state": record.state, "uploads": uploads,
         "count": record.upload_count}
    )  # fmt: skip


def load(text: str) -> CommitRecord | None:
    """A kept or carried record, or None when it cannot be read back, whatever it holds (it is
    then asked again)."""
    try:
        data = loads(text)
        uploads, _count = parse_uploads({"results": data["uploads"], "count": data["count"]})
        return CommitRecord(str(data["commit"]), str(data["state"]), uploads, int(data["count"]))
    except Exception:  # nested too deep, 1e400 for a count, any field of any type: none
        return None
