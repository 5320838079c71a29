"""Read the Docs as a docs provider (bot.docs.provider.DocsProvider)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from bot.core.evidence import Evidence
from bot.core.model import PullSnapshot, Signal
from bot.docs.readthedocs.client import RtdApi
from bot.docs.readthedocs.evidence import evidence
from bot.docs.readthedocs.rules import project_of
from bot.settings import RepoSettings
from bot.state.ports import RtdCache


class ReadTheDocs:
    """The RTD statuses of a head, settled by the builds RTD lists for that exact commit."""

    def __init__(self, api: RtdApi, state: RtdCache | None = None) -> None:
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

    def evidence(
        self, snapshot: PullSnapshot, repo: RepoSettings, *, now: datetime
    ) -> Mapping[str, Evidence]:
        """What RTD says about each RTD status of the head (and `repos[].rtd_project`)."""
        return evidence(
            snapshot,
            rtd_project=repo.rtd_project,
            api=self.api,
            now=now,
            store=self.state,
        )
