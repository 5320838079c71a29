"""The docs-provider seam: what a docs provider (Read the Docs, ...) gives the cycle and the core.

A provider recognises its own commit statuses and reads, for one head, the evidence that
settles them (bot.core.evidence.Evidence: it becomes a row, or a note about the head). The
cycle asks every configured provider; the core never knows which one answered. A second
provider is a folder beside readthedocs/, a settings block, an allowlist entry and one line
in app.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from bot.core.evidence import Evidence
from bot.core.model import PullSnapshot, Signal
from bot.settings import RepoSettings


class DocsProvider(Protocol):
    """One source of docs-build evidence."""

    @property
    def requests(self) -> int:
        """Requests made to the provider so far (the cycle's summary counts them)."""

    def recognises(self, signal: Signal) -> bool:
        """Whether `signal` is a status of this provider naming a project it can be asked about."""

    def evidence(
        self, snapshot: PullSnapshot, repo: RepoSettings, *, now: datetime
    ) -> Mapping[str, Evidence]:
        """The evidence for the head's statuses, by context (reads the provider and its cache)."""
