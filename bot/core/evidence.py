"""The seam between the core and a second source (a docs provider): evidence about a head.

A provider's evidence settles the row of a status it recognises (`row`), or, under a key that
starts with HEAD_KEY (no context contains a NUL), is about the head as a whole (`note`). The
core calls only these two methods; what the evidence holds is the provider's own data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, NamedTuple, Protocol

from bot.core.model import Kind, Policy, Row, Signal, SinceSource, State

HEAD_KEY: Final = "\0"
RUN_KEY: Final = "\x01"  # a check run's evidence key starts so (no context contains it)
# The clock's resolution: a pending signal is stale from its limit plus one tick on.
TICK: Final = timedelta(microseconds=1)


def evidence_key(signal: Signal) -> str:
    """The key a provider's evidence for `signal` is given under: a status's context (as
    ever), a check run's identity key (a check run and a status may share a name)."""
    return signal.name if signal.kind is Kind.STATUS else RUN_KEY + signal.key


class Since(NamedTuple):
    """When a signal entered its GitHub state, and who said so."""

    at: datetime | None
    source: SinceSource


@dataclass(frozen=True, slots=True)
class Judge:
    """The policy and the time one reconciliation is judged against."""

    policy: Policy
    now: datetime
    # The times at which a judgement made here would come out otherwise (a limit crossed).
    crossings: list[datetime] = field(default_factory=list, compare=False)

    def aged(self, state: State, since: datetime | None) -> State:
        """A pending state older than the limit becomes STALE; anything else is unchanged."""
        if state is not State.PENDING or since is None:
            return state
        if self.now - since > self.policy.stale_after:
            return State.STALE
        self.crossings.append(since + self.policy.stale_after + TICK)
        return state

    @property
    def limit(self) -> str:
        """The limit in words, e.g. "the 120-minute limit"."""
        return f"the {int(self.policy.stale_after.total_seconds() // 60)}-minute limit"

    def unverified(self, since: datetime | None) -> datetime | None:
        """Since when a source cannot be read, once that has lasted the policy's limit."""
        if since is None:
            return None
        if self.now - since < self.policy.unverified_after:
            self.crossings.append(since + self.policy.unverified_after)
            return None
        return since

    def valid_until(self) -> datetime | None:
        """The first time a judgement made here would change (None: no judgement ages)."""
        return min(self.crossings, default=None)


class Evidence(Protocol):
    """What a provider learned about one status (or the head): it becomes a row or a note."""

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        """The row of `signal` (a status of pull request `number`) this evidence settles."""

    def note(self, *, number: int, judge: Judge) -> str:
        """The note this evidence about the head as a whole makes."""
