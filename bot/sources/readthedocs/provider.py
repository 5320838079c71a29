"""Read the Docs as a source (bot.sources.base): its client, reads, probe and kind."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from bot.core.evidence import Evidence
from bot.core.model import PullSnapshot, Signal
from bot.core.remedies import READTHEDOCS
from bot.guard import Allowance
from bot.settings import RepoSettings, Settings
from bot.sources.base import Connection, Kind, SourcesState, Wiring
from bot.sources.readthedocs.client import RtdApi
from bot.sources.readthedocs.evidence import evidence, final_payload, record_of
from bot.sources.readthedocs.probe import probe
from bot.sources.readthedocs.rules import is_rtd_status, project_of
from bot.state.ports import SourceReads

CREDENTIAL_KEYS: Final = ("readthedocs:org", "readthedocs:com", "readthedocs:self")
LABEL: Final = "Read the Docs"
# The read endpoints, below each site's API root: the token's own projects (check-config:
# whether the site accepts it), a commit's builds, one build, a build's notifications.
PATHS: Final = (
    r"/projects/",
    r"/projects/[^/]+/builds/",
    r"/projects/[^/]+/builds/\d+/",
    r"/projects/[^/]+/builds/\d+/notifications/",
)


class ReadTheDocs:
    """The RTD statuses of a head, settled by the builds RTD lists for that exact commit."""

    name, label, docs = READTHEDOCS, LABEL, True

    def __init__(self, api: RtdApi, state: SourceReads | None = None) -> None:
        """Read through `api`; cache in `state` (none: `show`; a read-only one keeps nothing)."""
        self.api, self.state = api, state

    @property
    def requests(self) -> int:
        """Requests made to Read the Docs so far."""
        return self.api.requests

    def recognises(self, signal: Signal) -> bool:
        """A `docs/readthedocs[.org|.com]:<slug>` status with a valid slug, or a pre-2020
        `continuous-documentation/read-the-docs` one whose target_url names its project."""
        return project_of(signal.name, signal.url) is not None

    def asks(self, signal: Signal) -> bool:
        """A status Read the Docs posts (one with a bad slug is answered so, unasked)."""
        return is_rtd_status(signal)

    def evidence(
        self,
        snapshot: PullSnapshot,
        repo: RepoSettings,
        *,
        now: datetime,
        asked: tuple[Signal, ...],
    ) -> Mapping[str, Evidence]:
        """What RTD says about each RTD status of the head (and `repos[].rtd_project`)."""
        return evidence(
            snapshot,
            asked,
            rtd_project=repo.rtd_project,
            api=self.api,
            now=now,
            store=self.state,
        )


class RtdConnection:
    """Read the Docs' client, shared by every cycle of a process (bot.sources.base.Connection)."""

    name, label = READTHEDOCS, LABEL

    def __init__(self, api: RtdApi) -> None:
        self.api = api

    @property
    def requests(self) -> int:
        """Requests made to Read the Docs so far."""
        return self.api.requests

    def problems(self) -> Mapping[str, str]:
        """The Read the Docs sites that refused the credential (401/403) in their last read."""
        return {f"readthedocs:{site}": why for site, why in self.api.refused.items()}

    def problem_keys(self) -> tuple[str, ...]:
        """Every key `problems` may use."""
        return CREDENTIAL_KEYS

    def source(self, store: SourcesState | None) -> ReadTheDocs:
        """Read the Docs as one cycle asks it."""
        return ReadTheDocs(self.api, store)

    def close(self) -> None:
        """Close the connections."""
        self.api.close()


def api_urls(settings: Settings) -> dict[str, str]:
    """Each RTD site's API root: .org (api_url), .com (business_api_url), a self-hosted one."""
    cfg = settings.readthedocs
    return {"org": cfg.api_url, "com": cfg.business_api_url, "self": cfg.api_url}


def connect(settings: Settings, wiring: Wiring) -> Connection:
    """The Read the Docs client: each site's own token, sent only to that site."""
    cfg = settings.readthedocs
    rtd = RtdApi(
        api_urls=api_urls(settings),
        tokens={
            "org": cfg.token.get_secret_value(),
            "com": cfg.business_token.get_secret_value(),
            "self": cfg.token.get_secret_value(),
        },
        guard=wiring.guard,
        timeout_s=cfg.timeout_seconds,
        max_retries=cfg.max_retries,
        stop=wiring.stop,
        sleep=wiring.sleep,
    )
    return RtdConnection(rtd)


def allowances(settings: Settings) -> tuple[Allowance, ...]:
    """Read the Docs' read endpoints below each site's API root (`api_urls`)."""
    return (Allowance.of(READTHEDOCS, LABEL, tuple(api_urls(settings).values()), PATHS),)


KIND: Final = Kind(
    READTHEDOCS, LABEL, allowances=allowances, connect=connect, probe=probe,
    final=final_payload, record_of=record_of,
)  # fmt: skip
