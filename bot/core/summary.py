"""What one cycle saw, wrote and spent (`Summary`), what it spent on GitHub (`Usage`): data."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.core.remedies import READTHEDOCS


@dataclass
class Usage:
    """What the bot spent on GitHub: requests by kind, GraphQL points, and what is left."""

    requests: Counter[str] = field(default_factory=Counter)
    graphql_points: int = 0
    remaining: dict[str, int] = field(default_factory=dict)
    reset_at: dict[str, datetime] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All GitHub requests sent."""
        return sum(self.requests.values())


@dataclass
class Summary:
    """What one cycle saw, wrote and spent."""

    pulls_seen: int = 0
    skipped: int = 0
    created: int = 0
    edited: int = 0
    left: int = 0
    deferred: int = 0
    refused: int = 0  # planned writes GitHub refused (a rate limit on a write or its re-read)
    deleted: int = 0  # the bot's own later comments deleted (never two comments on a PR)
    reused: int = 0  # reports reused as an earlier pass (or process) built them
    # marked comments another login wrote (a changed token's old ones), by login: never edited
    foreign: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # owner/name[#N] -> what went wrong
    rate_limited_s: float | None = None
    verdicts: dict[str, str] = field(default_factory=dict)  # owner/name#N -> verdict
    heads: dict[str, str] = field(default_factory=dict)  # owner/name#N -> head sha (open PRs)
    github_requests: int = 0
    graphql_points: int = 0
    rtd_requests: int = 0
    dry_run: bool = False  # the comments were shown, not written: created means would create
    # requests to each second source, by its name, and its name in words (bot.sources)
    source_requests: dict[str, int] = field(default_factory=dict)
    source_labels: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """The one-line cycle summary."""
        if self.dry_run:
            comments = (
                f"comments would create {self.created}, would edit {self.edited}, "
                f"would leave {self.left}"
            )
        else:
            comments = (
                f"comments created {self.created}, edited {self.edited}, left {self.left}, "
                f"deferred {self.deferred}"
            )
        text = (
            f"cycle: {self.pulls_seen} pull requests seen, {self.skipped} skipped by policy; "
            f"{comments}; GitHub requests {self.github_requests} "
            f"({self.graphql_points} GraphQL points), Read the Docs requests {self.rtd_requests}"
        )
        for name, count in self.source_requests.items():
            if count and name != READTHEDOCS:  # Read the Docs' count is said above, always
                text += f", {self.source_labels.get(name, name)} requests {count}"
        if self.deleted:
            text += f"; deleted {self.deleted} later comments of the bot's own (never two)"
        if self.deferred:
            text += f"; {self.deferred} writes carried to the next cycle (write pacing)"
        if self.refused:
            text += f"; GitHub refused {self.refused} planned writes (rate limit)"
        if self.foreign:
            text += "; " + foreign_words(self.foreign)
        if self.failed:
            text += f"; could not process: {', '.join(self.failed)}"
        return text


def foreign_words(foreign: Mapping[str, int]) -> str:
    """ "2 marked comments written by another login (old-bot: 2), never edited by this one:
    a changed token's? delete them" (the logins in order)."""
    total = sum(foreign.values())
    logins = ", ".join(f"{login}: {count}" for login, count in sorted(foreign.items()))
    return (
        f"{total} marked comments written by another login ({logins}), never edited by this "
        "one: left by an earlier token? delete them"
    )
