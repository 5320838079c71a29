"""The documented ways a state ends, each with the source that documents it (pure data).

This is the one table of them. A row quotes the remedy that fits it, linked to its source;
the bot never performs one (it retriggers nothing, comments nothing, pushes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from bot.core.model import Row, State

DCO_APP: Final = "dco"  # the DCO app's slug (dcoapp/app)
# The second source's provider name on a reconciled row (bot/sources/readthedocs writes it).
READTHEDOCS: Final = "readthedocs"


@dataclass(frozen=True, slots=True)
class Remedy:
    """What a source says ends a state, in markdown the bot wrote (a command in a code span),
    for rows of one app or second source in the given states."""

    words: str
    source_name: str
    source: str
    states: frozenset[State]
    app: str | None = None  # rows of this check-run app (slug)
    provider: str | None = None  # rows reconciled by this second source


REMEDIES: Final[tuple[Remedy, ...]] = (
    # dcoapp/app README.md (snapshot 83946bb, 2026-08-05): "blocks it until someone pushes a
    # signed-off revision of the commit"; "To re-run or create the DCO check on an open Pull
    # Request, submit a Pull Request review with `@dcoapp recheck` on its own line in the
    # review summary [or] an inline review comment" ("This can recover PRs stuck waiting for
    # status after an outage"). index.js checks on pull_request.synchronize, i.e. a push. A
    # plain conversation comment does not work: the app is not sent those (commit 8be4670).
    Remedy(
        words="The DCO app checks again on a new push, or on a pull request review with "
        "`@dcoapp recheck` on its own line",
        source_name="its README",
        source="https://github.com/dcoapp/app/blob/main/README.md",
        states=frozenset({State.ACTION_REQUIRED, State.FAILURE}),
        app=DCO_APP,
    ),
    # Read the Docs, "Pull request previews" (docs/user/pull-requests.rst): "We create and
    # build a new version when a pull request is opened, and rebuild the version whenever a
    # new commit is pushed." For the states nothing else ends (a cancelled build sends no
    # final status); a failed build's remedy is a fix, which no source here documents.
    Remedy(
        words="Read the Docs rebuilds a pull request “whenever a new commit is pushed”",
        source_name="its docs",
        source="https://docs.readthedocs.io/en/stable/pull-requests.html",
        states=frozenset({State.CANCELLED, State.STALE, State.UNKNOWN}),
        provider=READTHEDOCS,
    ),
)


def remedy_for(row: Row) -> Remedy | None:
    """The documented remedy for this row's app (or second source) and state, else None."""
    provider = row.reconciliation.provider if row.reconciliation is not None else None
    for remedy in REMEDIES:
        if row.state not in remedy.states:
            continue
        if remedy.app is not None and row.signal.app == remedy.app:
            return remedy
        if remedy.provider is not None and provider == remedy.provider:
            return remedy
    return None
