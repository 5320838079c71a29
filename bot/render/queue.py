"""A queued pull request's merge-queue section of the comment, and its JSON (pure).

The queue waits for the base branch's required checks on the merge-group commit, not on the
head: the section names each required context missing or failing there, one row each, and
never calls the entry passing while one is missing there (no check at all there included).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from bot.core.merge_queue import minutes_between, queue_verdict
from bot.core.model import QueueFinding, QueueState, Report, Signal, Verdict
from bot.core.queue_sources import documented_for
from bot.core.reconcile import github_state
from bot.core.required import rules_words
from bot.render.escape import (
    Md,
    code,
    iso_utc,
    prose,
    quoted,
    safe_url,
    short_sha,
    utc,
)

GLYPHS: Final[dict[Verdict, str]] = {
    Verdict.FAILING: "❌",
    Verdict.PENDING: "⏳",
    Verdict.INCOMPLETE: "⚪",
    Verdict.PASSING: "✅",
}
STATE_WORDS: Final[dict[QueueState, str]] = {
    QueueState.QUEUED: "queued",
    QueueState.AWAITING_CHECKS: "awaiting checks",
    QueueState.MERGEABLE: "mergeable",
    QueueState.UNMERGEABLE: "unmergeable",
    QueueState.LOCKED: "locked",
}
QUOTE_WORDS: Final = 300  # characters of a source's documented words quoted on a row
NOTE_LIMIT: Final = 1000  # characters of an error's words in a note


@dataclass(frozen=True, slots=True)
class QueueView:
    """The merge-queue section, every field already markdown."""

    line: Md  # glyph, state, when queued, the merge-group commit, what it lacks, the timeout
    rows: tuple[Md, ...]  # one per required context missing or failing there
    notes: tuple[Md, ...]  # what could not be read, said once each


def queue_view(report: Report, repo_url: str = "") -> QueueView | None:
    """The section of a queued pull request's comment (None: not queued)."""
    found = report.merge_queue
    if found is None:
        return None
    entry = found.entry
    verdict = queue_verdict(found)
    state = STATE_WORDS.get(entry.state) or f"in state {code(entry.raw_state or 'unknown')}"
    parts = [f"{GLYPHS[verdict]} **Merge queue**: {state}"]
    if entry.enqueued_at is not None:
        parts[0] += f", queued {utc(entry.enqueued_at)}"
    commit = _commit(entry.commit, repo_url) if entry.commit else None
    if commit:
        parts.append(f"merge-group commit {commit}")
    parts.extend(_summary(found, verdict))
    if found.timeout_minutes is not None:
        parts.append(f"the queue gives up after {found.timeout_minutes} min")
    sha = f"`{short_sha(entry.commit)}`" if entry.commit else "the merge-group commit"
    minutes = minutes_between(entry.enqueued_at, report.observed_at)
    rows = tuple(_failing_row(s, sha) for s in found.failing) + tuple(
        _missing_row(s, sha, found, minutes, report.observed_at) for s in found.missing
    )
    return QueueView(Md(" · ".join(parts)), rows, _notes(found, sha))


def headline_clause(report: Report) -> str:
    """What the headline adds for a queued pull request whose merge-group commit lacks or
    fails a required context ("" otherwise): the head's verdict is never the whole story."""
    found = report.merge_queue
    if found is None or found.entry.error is not None or found.commit_error is not None:
        return ""
    said = [f"{len(found.failing)} failing"] if found.failing else []
    said += [f"{len(found.missing)} not reported"] if found.missing else []
    return f" · merge queue: {', '.join(said)} on the merge-group commit" if said else ""


def _commit(sha: str, repo_url: str) -> Md:
    short = f"`{short_sha(sha)}`"
    link = safe_url(f"{repo_url}/commit/{sha}") if repo_url else None
    return Md(f"[{short}]({link})" if link else short)


def _summary(found: QueueFinding, verdict: Verdict) -> list[str]:
    """What the merge-group commit carries, in counts: never "passed" while one is missing."""
    if found.entry.error is not None or found.commit_error is not None:
        return ["not verified"]
    said: list[str] = []
    if found.failing:
        said.append(f"{len(found.failing)} failing there")
    if found.missing:
        said.append(f"{len(found.missing)} not reported there")
    if found.checks == 0:
        said.append("no check or status reported there")
    if found.pending:
        said.append(f"{len(found.pending)} pending there")
    if verdict is Verdict.PASSING:
        said.append(
            f"every required check passed there ({found.passed})"
            if found.passed
            else "nothing is required there"
        )
    return said


def _missing_row(
    signal: Signal, sha: str, found: QueueFinding, minutes: int | None, observed: datetime
) -> Md:
    """ "⏳ `DCO` · required · not reported on merge-group commit `abc1234`, queued 41 min ago
    as of 14:03 UTC; the queue gives up after 60 min" — then the rule, and what a source
    documents about the provider."""
    said = f"not reported on merge-group commit {sha}"
    if minutes is not None:
        said += f", queued {minutes} min ago as of {utc(observed)}"
    if found.timeout_minutes is not None:
        said += f"; the queue gives up after {found.timeout_minutes} min"
    rules = rules_words(signal.rules, code)
    second = [rules[:1].upper() + rules[1:] + "."] if rules else []
    documented = documented_for(signal)
    link = safe_url(documented.source) if documented is not None else None
    if documented is not None and link is not None:
        words = quoted(documented.words, QUOTE_WORDS)
        second.append(f"{words} ([{code(documented.source_name)}]({link}))")
    mark = " · required" if signal.required else ""
    line = f"⏳ {code(signal.name)}{mark} · {said}"
    return Md(line + ("  \n  " + " ".join(second) if second else ""))


def _failing_row(signal: Signal, sha: str) -> Md:
    """ "❌ [`tests`](…) · failed on merge-group commit `abc1234` · required"."""
    name = code(signal.name)
    url = safe_url(signal.url)
    linked = f"[{name}]({url})" if url else name
    state = github_state(signal).value.replace("_", " ")
    words = "failed" if state == "failure" else state
    mark = " · required" if signal.required else ""
    said = quoted(signal.description) if signal.description else ""
    line = f"❌ {linked} · {words} on merge-group commit {sha}{mark}"
    return Md(line + (f"  \n  {said}" if said else ""))


def _notes(found: QueueFinding, sha: str) -> tuple[Md, ...]:
    """Each thing that could not be read, once: nothing here is guessed."""
    notes: list[str] = []
    entry = found.entry
    if entry.error is not None:
        notes.append(f"{_words(entry.error)}; what the queue tests is not known.")
    elif found.commit_error is not None:
        error = _words(found.commit_error)
        if entry.commit is None:
            notes.append(f"{error}: whether the required checks reported there is not known.")
        else:
            notes.append(
                f"The checks of merge-group commit {sha} were not read ({error}): whether the "
                "required checks reported there is not known."
            )
    if found.truncated:
        notes.append(
            "GitHub reported more checks on the merge-group commit than were read: a required "
            "check missing there cannot be named."
        )
    if not found.required_read and entry.error is None:
        notes.append("The base branch's required checks were not read: the merge-group commit "
                     "is not checked against them.")  # fmt: skip
    if found.timeout_error is not None:
        notes.append(f"The queue's time limit is not known: {_words(found.timeout_error)}.")
    return tuple(Md(n) for n in notes)


def _words(error: str) -> Md:
    """An error's words as prose (what GitHub said may hold anything), no final period."""
    return prose(error.strip().rstrip("."), NOTE_LIMIT, line_start=False)


def queue_dict(found: QueueFinding | None) -> dict[str, Any] | None:
    """interface.md's `merge_queue` (null when the pull request is not queued)."""
    if found is None:
        return None
    entry = found.entry
    errors = [e for e in (entry.error, found.commit_error, found.timeout_error) if e]
    return {
        "state": entry.raw_state or None,
        "position": entry.position,
        "enqueued_at": iso_utc(entry.enqueued_at),
        "commit": entry.commit,
        "base_commit": entry.base_commit,
        "timeout_minutes": found.timeout_minutes,
        "verdict": queue_verdict(found).value,
        "checks": None if entry.error or found.commit_error else found.checks,
        "missing": [s.name for s in found.missing],
        "failing": [s.name for s in found.failing],
        "pending": [s.name for s in found.pending],
        "errors": errors,
    }
