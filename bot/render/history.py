"""A failing row's history clauses: one short clause per fact present (never a label)."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from bot.core.model import FAILING_STATES, Attempt, BaseRecord, Elsewhere, History, State
from bot.render.escape import Md, code, safe_url, utc

# What an earlier attempt's state is called in a clause.
ATTEMPT_WORDS: Final = {
    State.SUCCESS: "passed",
    State.FAILURE: "failed",
    State.TIMED_OUT: "timed out",
    State.ACTION_REQUIRED: "needed action",
    State.CANCELLED: "was cancelled",
    State.SKIPPED: "was skipped",
    State.NEUTRAL: "ended neutral",
    State.PENDING: "was pending",
    State.STALE: "was pending",
    State.UNKNOWN: "ended in a state the bot does not know",
}
LISTED: Final = 3  # earlier attempts named one by one, at most


def history_clauses(history: History | None, repo_url: str = "") -> list[Md]:
    """The clauses a failing row adds for its history, in a fixed order."""
    if history is None:
        return []
    clauses = [attempts_clause(history.attempts)]
    if history.elsewhere is not None:
        clauses.append(elsewhere_clause(history.elsewhere))
    if history.base_branch is not None:
        clauses.append(base_branch_clause(history.base_branch, repo_url))
    return [c for c in clauses if c]


def _attempt(index: int, attempt: Attempt) -> str:
    url = safe_url(attempt.url) if attempt.url else None
    return f"[attempt {index}]({url})" if url else f"attempt {index}"


def attempts_clause(attempts: tuple[Attempt, ...]) -> Md:
    """ "passed on an earlier attempt of this commit", "also failed on 2 earlier attempts of
    this commit", or the earlier attempts one by one; "" where there were none."""
    if not attempts:
        return Md("")
    passed = [i for i, a in enumerate(attempts, 1) if a.state is State.SUCCESS]
    if passed:
        last = passed[-1]
        return Md(
            f"passed on an earlier attempt of this commit ({_attempt(last, attempts[last - 1])})"
        )
    if all(a.state in FAILING_STATES for a in attempts):
        many = len(attempts)
        said = "an earlier attempt" if many == 1 else f"{many} earlier attempts"
        return Md(f"also failed on {said} of this commit")
    shown = [f"{_attempt(i, a)} {ATTEMPT_WORDS[a.state]}" for i, a in enumerate(attempts, 1)][
        -LISTED:
    ]
    more = len(attempts) - len(shown)
    lead = f"{more} earlier attempts, then " if more else ""
    return Md(f"earlier attempts of this commit: {lead}{', '.join(shown)}")


def elsewhere_clause(elsewhere: Elsewhere) -> Md:
    """ "also failing on 7 of 41 open pull requests since 2026-10-05 10:02 UTC"."""
    since = f" since {utc(elsewhere.since)}" if elsewhere.since is not None else ""
    noun = "pull request" if elsewhere.of == 1 else "pull requests"
    return Md(f"also failing on {elsewhere.heads} of {elsewhere.of} open {noun}{since}")


def base_branch_clause(record: BaseRecord, repo_url: str = "") -> Md:
    """ "failed on 3 of the last 20 `main` commits" (the commits linked where known)."""
    count = "none" if record.failed == 0 else str(record.failed)
    noun = "commit" if record.of == 1 else "commits"
    what = f"the last {record.of} {code(record.branch)} {noun}"
    url = safe_url(f"{repo_url}/commits/{quote(record.branch, safe='/')}") if repo_url else None
    return Md(f"failed on {count} of [{what}]({url})" if url else f"failed on {count} of {what}")
