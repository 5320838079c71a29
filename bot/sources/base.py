"""The sources contract: what a second source (Read the Docs, Codecov, Azure Pipelines, ...)
declares, and everything the rest of the bot asks of one.

A provider is one folder beside readthedocs/ holding a `Kind` (what it is: its name and
label, its allowlist entries, how it is built from its settings block, its online probe for
`check-config`), a `Connection` (its client, shared by every cycle of a process: its request
count and its credential problems) and a `Source` (what one cycle asks: which signals it
recognises, which of a head's signals it is asked about (`asks`: from the signal alone, so
the cycle keeps the answer while a head's signals are the very same) and, for one head, the
evidence that settles those, `bot.core.evidence.Evidence`: a row, or a note about the
head). bot/app.py lists the kinds once (`SOURCES`); the guard, check-config, the scheduler,
/metrics, the summary and the comment go through this contract and never name a provider.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple, Protocol

from bot.core.evidence import Evidence
from bot.core.model import PullSnapshot, Signal
from bot.guard import Allowance, Guard
from bot.retry import Sleep
from bot.settings import RepoSettings, Settings
from bot.state.ports import SourceReads

Outcome = Literal["ok", "note", "problem", "unverified"]


class RecordOf(NamedTuple):
    """What a provider says a record it keeps is of (`Kind.record_of`): the commits it is a
    record of, and when its own payload says it was read (None: it keeps no time of its own)."""

    commits: frozenset[str]
    read_at: datetime | None = None


class Said(NamedTuple):
    """One line a provider's probe gives `check-config`: outcome, configuration key, words."""

    outcome: Outcome
    key: str
    text: str


class SourcesState(SourceReads, Protocol):
    """What a provider may keep in the state (a read-only state keeps nothing)."""


class Source(Protocol):
    """One provider as one cycle asks it."""

    name: str  # `reconciliation.provider` and the metrics label: "codecov"
    label: str  # its name in words: "Codecov"
    docs: bool  # its unsettled signals count as stuck docs builds in the triage rows

    @property
    def requests(self) -> int:
        """Requests made to the provider so far (the cycle's summary counts them)."""

    def recognises(self, signal: Signal) -> bool:
        """Whether `signal` is one of this provider's that it can be asked about."""

    def asks(self, signal: Signal) -> bool:
        """Whether this provider is asked about `signal` (pure: from the signal alone)."""

    def evidence(
        self,
        snapshot: PullSnapshot,
        repo: RepoSettings,
        *,
        now: datetime,
        asked: tuple[Signal, ...],
    ) -> Mapping[str, Evidence]:
        """The evidence for `asked` (the head's signals it `asks` about, in their order), by
        `evidence_key` (or HEAD_KEY...: a note)."""


class Connection(Protocol):
    """One provider's client, built once per process from its settings block."""

    name: str
    label: str

    @property
    def requests(self) -> int:
        """Requests made to the provider so far."""

    def problems(self) -> Mapping[str, str]:
        """Open credential problems (a 401/403 to the bot's token), by key: /readyz, metrics."""

    def problem_keys(self) -> tuple[str, ...]:
        """Every key `problems` may use (the metrics keep each at 0 while it is not open)."""

    def source(self, store: SourcesState | None) -> Source:
        """The provider as a cycle asks it, keeping its reads in `store` (None: nothing)."""

    def close(self) -> None:
        """Release connections."""


@dataclass(frozen=True)
class Wiring:
    """What every provider's client is built with: the guard, how waits wait, the stop."""

    guard: Guard
    stop: threading.Event
    sleep: Sleep | None = None


@dataclass(frozen=True)
class Kind:
    """What a provider is, before anything is built: bot/app.py lists these once."""

    name: str
    label: str
    # its allowlist entries (hosts, paths) for bot/guard.py, from its settings block
    allowances: Callable[[Settings], tuple[Allowance, ...]]
    # its client (None: its settings block disables it)
    connect: Callable[[Settings, Wiring], Connection | None]
    # `check-config`'s online questions to it (reads only; never raises)
    probe: Callable[[Settings, Guard], Iterator[Said]]
    # whether a record it keeps in the state (its payload) is final: nothing the provider says
    # about it can change, so the comment may carry it to a run with no state (issue 31)
    final: Callable[[str], bool] = lambda _payload: False
    # what a record kept under `key` (its payload) is of: the commits it concerns (Read the
    # Docs: its key's and payload's commit; Codecov: its record's commit; Azure: the build's
    # sourceVersion or pull request head) and its own read time. A record a comment carried is
    # given to a state only where it is of that comment's head and read no later than now; None
    # (the default: the provider cannot tell) gives none
    record_of: Callable[[str, str], RecordOf | None] = lambda _key, _payload: None
