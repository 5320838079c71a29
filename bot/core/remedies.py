"""The documented ways a state ends, each with the source that documents it (pure data).

This is the one table of them. A row quotes the remedy that fits it, linked to its source;
the bot never performs one (it retriggers nothing, comments nothing, pushes nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from bot.core.model import Row, State

DCO_APP: Final = "dco"  # the DCO app's slug (dcoapp/app)
ACTIONS_APP: Final = "github-actions"
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
    # who can make the move, where the source says it ("The author's move"): the row then
    # says it first; None where the source says what ends the state but not who does it
    who: str | None = None


# The DCO app's own check text (index.js, snapshot 83946bb): "You can also do this
# automatically by using the -s flag (i.e., `git commit -s`)" and, to sign off every commit of
# the branch, "In your local branch, run: `git rebase HEAD~${commitLength} --signoff`", then
# "Force push your changes". The count is the pull request's, read from its own check's text.
_DCO_REBASE: Final = re.compile(r"`git rebase HEAD~(\d{1,4}) --signoff`")
DCO_SIGN_OFF: Final = (
    "sign off the commits. The DCO app's check says how: `git commit -s` signs off a new "
    "commit; `git rebase HEAD~{commits} --signoff`, then a force push, signs off every commit "
    "of this branch"
)

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
        states=frozenset({State.FAILURE}),
        app=DCO_APP,
    ),
    # The app's action_required check is a missing or mismatched sign-off (lib/dco.js); its own
    # text says how the author fixes it (above). A push of the signed-off commits re-checks.
    Remedy(
        words=DCO_SIGN_OFF,
        source_name="its text",
        source="https://github.com/dcoapp/app/blob/main/index.js",
        states=frozenset({State.ACTION_REQUIRED}),
        app=DCO_APP,
        who="The author's move",
    ),
    # GitHub's docs, "Re-running workflows and jobs" ("Who can use this feature?"): "People with
    # write permissions to a repository can re-run workflows in the repository."
    Remedy(
        words="“People with write permissions to a repository can re-run workflows in the "
        "repository”",
        source_name="GitHub's docs",
        source="https://docs.github.com/en/actions/how-tos/managing-workflow-runs-and-deployments"
        "/managing-workflow-runs/re-running-workflows-and-jobs",
        states=frozenset({State.CANCELLED}),
        app=ACTIONS_APP,
        who="Someone with write access",
    ),
    # Read the Docs, "Pull request previews" (docs/user/pull-requests.rst): "We create and
    # build a new version when a pull request is opened, and rebuild the version whenever a
    # new commit is pushed." For the states nothing else ends (a cancelled build sends no
    # final status); a failed build's remedy is a fix, which no source here documents.
    # A cancelled build is not built again by itself (a queued one sends GitHub no final
    # status at all): a push builds the pull request again, so whoever can push makes the move.
    Remedy(
        words="Read the Docs rebuilds a pull request “whenever a new commit is pushed”",
        source_name="its docs",
        source="https://docs.readthedocs.io/en/stable/pull-requests.html",
        states=frozenset({State.CANCELLED}),
        provider=READTHEDOCS,
        who="Someone who can push to this branch",
    ),
    Remedy(
        words="Read the Docs rebuilds a pull request “whenever a new commit is pushed”",
        source_name="its docs",
        source="https://docs.readthedocs.io/en/stable/pull-requests.html",
        states=frozenset({State.STALE, State.UNKNOWN}),
        provider=READTHEDOCS,
    ),
)


def remedy_words(remedy: Remedy, row: Row) -> str:
    """The remedy's words for this row: the DCO app's rebase names the pull request's own
    commit count, as its check's text gives it ("N" where the text gives none)."""
    if remedy.words != DCO_SIGN_OFF:
        return remedy.words
    found = _DCO_REBASE.search(row.signal.summary or "")
    if found is None:
        return remedy.words.format(commits="N") + " (N: the pull request's commits)"
    return remedy.words.format(commits=found.group(1))


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
