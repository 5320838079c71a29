"""Render a Report as the status comment: the views, the Renderer, the templates (jinja2)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Final

import jinja2

from bot.core import annotations as run_annotations
from bot.core import base as merge_base
from bot.core import facts, merge_queue, queue_sources, remedies, required
from bot.core.base import base_finding, unverified_finding
from bot.core.model import (
    FAILING_STATES,
    INCOMPLETE_STATES,
    MARKER,
    Annotation,
    BaseCheck,
    History,
    Kind,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
    format_utc,
    group_of,
)
from bot.core.remedies import DCO_APP, remedy_for, remedy_words
from bot.core.required import rules_words
from bot.render import escape, queue, stamp
from bot.render.escape import (
    QUOTE_LIMIT,
    TEXT_LIMIT,
    Md,
    clean,
    code,
    first_line,
    is_blank,
    prose,
    quoted,
    safe_url,
    short_sha,
    utc,
)
from bot.render.history import history_clauses
from bot.render.stamp import Stamp, carried_line, carried_of, stamp_of, with_carried, with_stamp

COMMENT_LIMIT: Final = 65_536
TEMPLATE_NAME: Final = "status_comment.md.j2"
FINDING_LIMIT: Final = 1000
LINK_LIMIT: Final = 2048  # a longer URL is not linked (it would crowd every row out)

GLYPHS: Final[dict[Verdict, str]] = {
    Verdict.FAILING: "❌",
    Verdict.PENDING: "⏳",
    Verdict.INCOMPLETE: "⚪",
    Verdict.PASSING: "✅",
}
# Whose move it is, where the verdict word alone would mislead: incomplete is not "running".
# A claim, said only where every signal that is not passing is in a state no source changes
# by itself (settled_for_good); otherwise the headline is "Incomplete" and its counts.
FINAL_NOTE: Final = " — nothing will finish on its own"
NEVER_REPORTED: Final = "never reported"
# Whose move it is, from the merge base's facts (interface.md 4b): said first on the row.
AUTHORS_MOVE: Final = "The author's move"
NOT_HERE: Final = "Not this pull request's move"
STATE_WORDS: Final[dict[State, str]] = {
    State.FAILURE: "failed",
    State.ACTION_REQUIRED: "action required",
    State.TIMED_OUT: "timed out",
    State.CANCELLED: "cancelled",
    State.STALE: "stale",
    State.UNKNOWN: "unknown",
    State.PENDING: "pending",
    State.SUCCESS: "passed",
    State.SKIPPED: "skipped",
    State.NEUTRAL: "neutral",
}
# Rows in the contract's order: failing, incomplete (cancelled, stale, unknown), pending,
# then passing rows that differ from GitHub; required before optional inside each.
_ROW_RANK: Final[dict[State, int]] = {
    **dict.fromkeys(FAILING_STATES, 0),
    State.CANCELLED: 1,
    State.STALE: 2,
    State.UNKNOWN: 3,
    State.PENDING: 4,
}
_COUNTED: Final = (
    ("cancelled", frozenset({State.CANCELLED})),
    ("stale", frozenset({State.STALE})),
    ("unknown", frozenset({State.UNKNOWN})),
    ("pending", frozenset({State.PENDING})),
)
# Every module whose code decides the comment's text: the Renderer's fingerprint hashes them.
_OUTPUT_MODULES: Final = (
    sys.modules[__name__],
    escape,
    stamp,
    facts,
    merge_base,
    required,
    remedies,
    run_annotations,
    queue,
    merge_queue,
    queue_sources,
)
# Said once, at the foot: GitHub notifies the first version of a comment, never an edit.
_EDITED_NOTE: Final = (
    "Edited in place when the facts change; a notification shows the first version."
)
# The headline names this many failing signals at most; more are counted.
HEADLINE_NAMES: Final = 2
HEADLINE_NAME_LIMIT: Final = 60  # characters of a name in the headline; a cut ends in "…"
HEADLINE_TELL_LIMIT: Final = 40  # of what tells two signals of one name apart (the event …)
# Apps whose check's own first sentence says what it found (the DCO app's "There is one commit
# incorrectly signed off."): quoted in the headline when it is whole within the limit.
HEADLINE_WORDS_APPS: Final = frozenset({DCO_APP})
HEADLINE_WORDS_LIMIT: Final = 80
_SENTENCE: Final = re.compile(r"(.+?[.!?])(?=\s|$)")


class TemplateInvalid(ValueError):
    """A status-comment template that cannot be used (the CLI exits 2 naming it)."""


# --- the comment's rows -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowView:
    """One row of the comment, every field already markdown."""

    glyph: Md
    name: Md  # the name verbatim in a code span, linked to its details page when there is one
    state: Md  # "cancelled", "failed", ...
    note: Md  # "GitHub still shows pending", or why a signal is stale; "" when nothing
    required: Md  # "required" where GitHub says so; else "" (optional rows are not marked)
    since: Md  # "since 2026-10-05 09:12 UTC", "first seen …"; "" with no time
    said: Md  # what the sources said, on the row's second line; "" when nothing


@dataclass(frozen=True, slots=True)
class CommentView:
    """Everything the template prints, already markdown (Md)."""

    glyph: Md
    verdict: Md
    counts: Md  # the headline after the verdict: one or two failing names, then the counts
    head: Md
    draft: bool
    observed: Md
    edited: Md  # that the comment is edited in place (said once, at the foot)
    rows: tuple[RowView, ...]
    passing: tuple[Md, ...]  # passing signals not shown as rows, one name each
    passing_more: bool  # some passing signals are shown as rows (they differ from GitHub)
    notes: tuple[Md, ...]


def comment_view(report: Report) -> CommentView:
    """Turn a report into the comment's markdown pieces (pure)."""
    shown = sorted(
        (row for row in report.rows if is_row(row)),
        key=lambda row: (_ROW_RANK.get(row.state, 5), _required_rank(row.signal.required)),
    )
    passing = [row for row in report.rows if not is_row(row)]
    tell = told_apart(report.rows)
    short_tell = told_apart(report.rows, limit=HEADLINE_TELL_LIMIT)
    commit = safe_url(report.commit_url)
    sha = f"`{short_sha(report.head_sha)}`"
    return CommentView(
        glyph=Md(GLYPHS[report.verdict]),
        verdict=Md(verdict_words(report)),
        counts=Md(
            headline(report.rows, tell=short_tell, verdict=report.verdict)
            + queue.headline_clause(report)
        ),
        head=Md(f"[{sha}]({commit})" if commit else sha),
        draft=report.draft,
        observed=utc(report.observed_at),
        edited=Md(_EDITED_NOTE),
        rows=_row_views(report, shown, tell=tell),
        passing=tuple(_passing_name(row, tell.get(row.signal)) for row in passing),
        passing_more=len(passing)
        < sum(1 for r in report.rows if group_of(r.state) is Verdict.PASSING),
        notes=tuple(prose(note, FINDING_LIMIT) for note in report.notes),
    )


def _row_views(
    report: Report, shown: Sequence[Row], *, tell: dict[Signal, Md]
) -> tuple[RowView, ...]:
    """The rows shown, in order; a failing row whose app's own words the headline quotes does
    not repeat them."""
    quoted = [
        row
        for row in headline_named(report.rows, report.verdict)
        if row.state in FAILING_STATES and _app_words(row.signal) is not None
    ]
    return tuple(
        row_view(
            row,
            report.stale_after,
            tell=tell.get(row.signal),
            repo_url=repo_url(report),
            quoted_above=row in quoted,
            observed=report.observed_at,
        )
        for row in shown
    )


def verdict_words(report: Report) -> str:
    """ "Failing", "Pending", "Incomplete — nothing will finish on its own", "Passing"; a
    pending verdict that waits for a context never reported is "Waiting" (GitHub's own word:
    "Expected — Waiting for status to be reported")."""
    if report.verdict is Verdict.PENDING and any(never_reported(r) for r in report.rows):
        return "Waiting"
    # a headline that names the cancelled signals says it with their state word; their rows
    # say who can move them
    final = settled_for_good(report) and not headline_named(report.rows, report.verdict)
    return report.verdict.value.capitalize() + (FINAL_NOTE if final else "")


def settled_for_good(report: Report) -> bool:
    """An incomplete verdict nothing will settle by itself: something was reported, all of it
    was read, and every signal that is not passing is cancelled (GitHub's conclusion, or the
    build Read the Docs cancelled) or a check run GitHub itself concluded `stale`.

    Not so for a pending signal turned stale by age (GitHub still shows it running: it may
    finish), a required context never reported (a workflow may yet report it), an unknown
    state (no source says what it is), no signals at all (seconds after a push, before the
    suites exist) or a truncated read (the signals not read may be running)."""
    if report.verdict is not Verdict.INCOMPLETE or report.truncated or not report.rows:
        return False
    return all(
        row.state is State.CANCELLED
        or (
            row.state is State.STALE
            and row.signal.kind is Kind.CHECK_RUN
            and row.signal.github_state == "stale"
            and row.reconciliation is None
        )
        for row in report.rows
        if group_of(row.state) is not Verdict.PASSING
    )


def told_apart(rows: Sequence[Row], *, limit: int = TEXT_LIMIT) -> dict[Signal, Md]:
    """What tells apart signals that share a name: the event, the workflow file, the app or
    the kind, whichever differs (e.g. " (`push`)"); signals with a name of their own get none.
    Each value is cut at `limit` characters."""
    by_name: dict[str, list[Signal]] = {}
    for row in rows:
        by_name.setdefault(row.signal.name, []).append(row.signal)
    told: dict[Signal, Md] = {}
    for group in by_name.values():
        if len(group) < 2:
            continue
        fields = [f for f in _TELLING if len({f(s) for s in group}) > 1] or _TELLING[-1:]
        for signal in group:
            parts = [code(value, limit) for f in fields if (value := f(signal))]
            told[signal] = Md(f" ({', '.join(parts)})" if parts else "")
    return told


_TELLING: Final[tuple[Callable[[Signal], str | None], ...]] = (
    lambda s: s.event,
    lambda s: s.workflow_path,
    lambda s: s.app,
    lambda s: s.kind.value,
)


def repo_url(report: Report) -> str:
    """The repository's web URL, from the pull request's ("…/owner/name/pull/7" -> "…/name")."""
    head, sep, _ = report.url.rpartition("/pull/")
    return head if sep else ""


def is_row(row: Row) -> bool:
    """True when a signal gets its own row: not passing, or passing but differing from GitHub."""
    if group_of(row.state) is not Verdict.PASSING:
        return True
    return row.reconciliation is not None and row.reconciliation.divergent


def headline(
    rows: Sequence[Row],
    *,
    tell: dict[Signal, Md] | None = None,
    verdict: Verdict = Verdict.FAILING,
) -> Md:
    """After the verdict: at most two signals named ("`tests (3.12)` failed (required)",
    "`DCO` (required) never reported", "`docs` cancelled") — the failing ones, then those that
    never reported, then (in an incomplete verdict) the other stuck ones; a group that does not
    fit beside the named is counted, as is every group after it; then the other counts."""
    named = headline_named(rows, verdict)
    parts = [_headline_name(row, (tell or {}).get(row.signal)) for row in named]
    others = [row for row in rows if row not in named]
    if others or not parts:
        parts.append(headline_counts(others))
    return Md(" · ".join(parts))


def headline_named(rows: Sequence[Row], verdict: Verdict) -> list[Row]:
    """The rows the headline names (at most HEADLINE_NAMES), in the order it names them."""
    groups = {
        Verdict.FAILING: (_failing(rows), _never_reported(rows)),
        Verdict.PENDING: (_never_reported(rows),),
        Verdict.INCOMPLETE: (_never_reported(rows), _stuck(rows)),
    }.get(verdict, ())
    named: list[Row] = []
    for group in groups:
        if not group:
            continue
        if len(named) + len(group) > HEADLINE_NAMES:
            break
        named.extend(group)
    return named


def _by_required(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: _required_rank(row.signal.required))


def _failing(rows: Sequence[Row]) -> list[Row]:
    return _by_required([row for row in rows if row.state in FAILING_STATES])


def _never_reported(rows: Sequence[Row]) -> list[Row]:
    """Required (or expected) contexts nothing reported, still waited for."""
    return _by_required([row for row in rows if never_reported(row)])


def _stuck(rows: Sequence[Row]) -> list[Row]:
    """Incomplete rows (cancelled, stale, unknown) other than those never reported."""
    return _by_required(
        [row for row in rows if row.state in INCOMPLETE_STATES and not never_reported(row)]
    )


def never_reported(row: Row) -> bool:
    """A context required (or expected) that no check run or status of the head carries."""
    return row.signal.kind is Kind.EXPECTED and group_of(row.state) is not Verdict.PASSING


def _headline_name(row: Row, tell: Md | None) -> str:
    """One signal in the headline: its name (cut), its state, its marks, and for some apps
    their own first sentence: "`DCO` action required: “There is one commit …”"; one that never
    reported: "`tests (3.12)` (required) never reported"."""
    on_base = row.base is not None and row.base.also_failing
    marks = [
        w
        for w, on in (("required", row.signal.required), ("also on the merge base", on_base))
        if on
    ]
    name = f"{code(row.signal.name, HEADLINE_NAME_LIMIT)}{tell or ''}"
    if never_reported(row):
        return f"{name}{' (required)' if row.signal.required else ''} {NEVER_REPORTED}"
    text = f"{name} {STATE_WORDS[row.state]}"
    text += f" ({', '.join(marks)})" if marks else ""
    words = _app_words(row.signal) if row.state in FAILING_STATES else None
    return text + (f": {words}" if words else "")


def _app_words(signal: Signal) -> Md | None:
    """The app's own first sentence (its check's title, else its summary's first meaningful
    line) where it says more than the name and is whole within HEADLINE_WORDS_LIMIT."""
    if signal.app not in HEADLINE_WORDS_APPS:
        return None
    said = frozenset({signal.name.strip().casefold()})
    for text in (signal.description, first_meaningful_line(signal.summary, said=said)):
        line = clean(text, COMMENT_LIMIT).strip()
        match = _SENTENCE.match(line)
        sentence = match.group(1) if match else line
        if sentence and sentence.casefold() not in said and len(sentence) <= HEADLINE_WORDS_LIMIT:
            return quoted(sentence, HEADLINE_WORDS_LIMIT)
    return None


def headline_counts(rows: Sequence[Row]) -> Md:
    """The counts in plain words: "1 failing (1 required) · 1 never reported · 1 pending ·
    6 passing"; a context never reported is counted as that, not as pending or stale."""
    if not rows:
        return Md("nothing reported")
    parts: list[str] = []
    failing = [row for row in rows if row.state in FAILING_STATES]
    if failing:
        required = sum(1 for row in failing if row.signal.required)
        on_base = sum(1 for row in failing if row.base is not None and row.base.also_failing)
        said = [f"{required} required"] if required else []
        said += [f"{on_base} also on the merge base"] if on_base else []
        parts.append(f"{len(failing)} failing" + (f" ({', '.join(said)})" if said else ""))
    never = sum(1 for row in rows if never_reported(row))
    if never:
        parts.append(f"{never} {NEVER_REPORTED}")
    for word, states in _COUNTED:
        count = sum(1 for row in rows if row.state in states and not never_reported(row))
        if count:
            parts.append(f"{count} {word}")
    passing = sum(1 for row in rows if group_of(row.state) is Verdict.PASSING)
    if passing:
        parts.append(f"{passing} passing")
    return Md(" · ".join(parts))


def row_view(
    row: Row,
    stale_after: timedelta,
    *,
    tell: Md | None = None,
    repo_url: str = "",
    quoted_above: bool = False,
    observed: datetime | None = None,
) -> RowView:
    """One signal's row: name, state, required, since, and what the sources said, led by whose
    move it is where the facts say it; `tell` follows the name where another signal shares it
    (the event, the workflow file); `quoted_above`: the headline quotes the app's own words."""
    if row.signal.kind is Kind.EXPECTED:
        return _expected_view(row, stale_after, tell=tell, observed=observed)
    signal = row.signal
    note, stale_by_age = _row_note(row, stale_after)
    said, lead = _github_said(row, repo_url, stale_by_age=stale_by_age, quoted_above=quoted_above)
    source_said, details = _source_said(row, note)
    said.extend(source_said)
    name = code(signal.name)
    first = with_remedy(Md(" — ".join(said)), row, lead=lead)
    return RowView(
        glyph=Md(GLYPHS[group_of(row.state)]),
        name=Md((f"[{name}]({details})" if details else name) + (tell or "")),
        state=Md(STATE_WORDS[row.state]),
        note=Md(note),
        required=Md("required" if signal.required else ""),
        since=_since(row),
        said=Md("  \n  ".join(filter(None, [first, *annotation_lines(row)]))),
    )


def _github_said(
    row: Row, repo_url: str, *, stale_by_age: bool, quoted_above: bool
) -> tuple[list[str], str | None]:
    """What a row says from GitHub's side (the source's text, the finding, the merge base, the
    history), and whose move it is where the merge base says so."""
    rec = row.reconciliation
    said: list[str] = []
    if not (rec is not None and rec.divergent) and not quoted_above:
        said.extend(_source_text(row.signal))  # GitHub's text describes what the source settled
    if row.finding and not stale_by_age:  # the stale sentence is the note and the since
        said.append(prose(row.finding, FINDING_LIMIT))
    lead, clause = (
        base_move(row.base, repo_url, only_here=_only_here(row.history))
        if row.base is not None
        else (None, None)
    )
    said.extend(filter(None, [clause]))
    said.extend(history_clauses(row.history, repo_url))
    return said, lead


def _source_said(row: Row, note: str) -> tuple[list[str], Md | None]:
    """What a second source's reconciliation adds to a row (its finding, a link to its record
    where the name links elsewhere), and where the row's name links."""
    signal, rec = row.signal, row.reconciliation
    details = _link(signal.url)
    if rec is None:
        return [], details
    finding = rec.finding
    if rec.divergent:  # "GitHub's status says failure." is on the row already
        finding = finding.removeprefix(f"GitHub's status says {signal.github_state}. ")
        if finding.endswith(f"; {note}."):  # and so is "GitHub still shows pending"
            finding = finding.removesuffix(f"; {note}.") + "."
    said: list[str] = [prose(finding, FINDING_LIMIT)]
    build = _link(rec.build_url)
    if build and details and build != details:
        said.append(f"[{rec.link_label or 'record'}]({build})")
    return said, details or build


def _row_note(row: Row, stale_after: timedelta) -> tuple[str, bool]:
    """What follows the state ("GitHub still shows pending"), and whether the row is stale by
    age alone (then the note says the limit, unless a second source's finding does)."""
    signal, rec = row.signal, row.reconciliation
    github_pending = _github_pending(signal)
    stale_by_age = row.state is State.STALE and github_pending and row.since is not None
    limit = f"the {int(stale_after.total_seconds() // 60)}-minute limit"
    if rec is not None and rec.divergent:
        shows = "still shows" if github_pending else "shows"
        return f"GitHub {shows} {_state_words(signal.github_state)}", stale_by_age
    if stale_by_age:  # stale is the bot's judgement of its age: GitHub's state is not final
        shows = f"GitHub still shows {_state_words(signal.github_state)}"
        # a second source's finding (a build stuck on RTD) may explain the staleness itself
        explained = rec is not None and limit in rec.finding
        return (shows if explained else f"{shows}, longer than {limit}"), True
    return "", False


def annotation_lines(row: Row) -> tuple[Md, ...]:
    """The row's quoted annotations, one a line: `path:line`, then the message's first line
    verbatim in a code span (source text: nothing in it is live)."""
    lines = []
    for annotation in row.annotations or ():
        said = first_line(annotation.message)
        message = code(said, QUOTE_LIMIT) if said else ""
        location = _location(annotation)
        if location or message:
            lines.append(Md(": ".join(filter(None, (location, message)))))
    return tuple(lines)


def _location(annotation: Annotation) -> Md:
    """`path:line` in a code span; "line 7" where the path shows nothing; "" with neither."""
    start, end = annotation.start_line, annotation.end_line
    lines = "" if start is None else f"{start}" + (f"-{end}" if end not in (None, start) else "")
    if is_blank(annotation.path):
        return Md(f"line {lines}" if lines else "")
    return code(f"{annotation.path}:{lines}" if lines else annotation.path)


def _expected_view(
    row: Row, stale_after: timedelta, *, tell: Md | None, observed: datetime | None
) -> RowView:
    """A context that never reported: that GitHub does not merge without it and which rule
    requires it; since when the head is known, unless the head line says that minute."""
    signal = row.signal
    limit = f"the {int(stale_after.total_seconds() // 60)}-minute limit"
    rules = rules_words(signal.rules, code)
    if signal.required:
        said = f"GitHub does not allow merging until it reports: it is {rules}."
    else:
        said = rules[:1].upper() + rules[1:] + "."
    if signal.app_id is not None:
        app = f"`{signal.app}`" if signal.app else f"the app with id {signal.app_id}"
        said += f" Only a check of {app} satisfies the rule."
        if signal.description:
            said += " " + signal.description
    if row.since is None:
        since = Md("GitHub gives no time for it")
    elif observed is not None and format_utc(row.since) == format_utc(observed):
        since = Md("")  # the head line dates it: said once
    else:
        since = Md(f"this head known to this bot since {utc(row.since)}")
    stale = row.state is State.STALE
    return RowView(
        glyph=Md(GLYPHS[group_of(row.state)]),
        name=Md(code(signal.name) + (tell or "")),
        state=Md("not reported on this commit"),
        note=Md(f"longer than {limit}" if stale else ""),
        required=Md("required" if signal.required else ""),
        since=since,
        said=with_remedy(Md(said), row),
    )


def with_remedy(said: Md, row: Row, *, lead: str | None = None) -> Md:
    """What the sources said, led by whose move it is (`lead`, or the documented remedy that
    names who makes it) and ending with any other documented remedy for the row's state,
    linked to its source: quoted, never performed."""
    remedy = remedy_for(row)
    link = _link(remedy.source) if remedy is not None else None
    sentence = ""
    if remedy is not None and link is not None:
        sentence = f"{remedy_words(remedy, row)} ([{remedy.source_name}]({link}))."
        if remedy.who is not None and lead is None:
            lead, sentence = f"**{remedy.who}:** {sentence}", ""
    if said and sentence and not said.endswith(_SENTENCE_ENDS):
        said = Md(f"{said}.")  # the sources' text ends as a sentence before the remedy's
    return Md(" ".join(part for part in (lead, said, sentence) if part))


_SENTENCE_ENDS: Final = (".", "!", "?", ".”", "!”", "?”")


def base_clause(base: BaseCheck, repo_url: str) -> Md:
    """What the same signal reported on the merge base, or why not known, in one sentence
    (whose move it is, where that says it); "" where it did not run there and nothing shows
    that it runs on the base branch's commits (the DCO app, a pull request's own status)."""
    lead, clause = base_move(base, repo_url)
    return Md(" ".join(part for part in (lead, clause) if part))


def _only_here(history: History | None) -> bool:
    """No fact of the failure's history points away from this change: no earlier attempt of
    this head passed, it fails on no other open head and on no recent base-branch commit."""
    if history is None:
        return True
    passed = any(group_of(a.state) is Verdict.PASSING for a in history.attempts)
    elsewhere = history.elsewhere is not None and history.elsewhere.heads > 0
    on_branch = history.base_branch is not None and history.base_branch.failed > 0
    return not (passed or elsewhere or on_branch)


def base_move(
    base: BaseCheck, repo_url: str, *, only_here: bool = True
) -> tuple[str | None, str | None]:
    """(whose move it is, from the merge base's facts; the clause that says what else is known
    there): passed there, so the author's — unless its history says otherwise (`only_here`
    False: then only the clause); failing there too, so not this pull request's."""
    if base.commit is None or base.error is not None:
        return None, prose(base_finding(base) or "", FINDING_LIMIT)
    sha = f"`{short_sha(base.commit)}`"
    link = _link(f"{repo_url}/commit/{base.commit}") if repo_url else None
    commit = f"[{sha}]({link})" if link else sha
    # once a re-read of the merge base's checks has failed for the policy's limit: since when
    # (what is said is GitHub's last good answer)
    said = unverified_finding(base)
    unverified = "" if said is None else f" {prose(said, FINDING_LIMIT)}"
    if base.state is State.SUCCESS and only_here:
        lead = f"**{AUTHORS_MOVE}:** it passed on the merge base {commit}, so this change fails it."
        return lead + unverified, None
    if base.also_failing:
        since = f" since {utc(base.since)}" if base.since is not None else ""
        word = STATE_WORDS[base.state] if base.state is not None else ""
        lead = f"**{NOT_HERE}:** it also {word} on the merge base {commit}{since}."
        return lead + unverified, None
    if base.state is None and not base.workflow_ran:
        return None, unverified.strip() or None
    what = "not run" if base.state is None else STATE_WORDS[base.state]
    clause = f"{what} on the merge base {commit}"
    return None, f"{clause}.{unverified}" if unverified else clause


def first_meaningful_line(text: str | None, *, said: frozenset[str] = frozenset()) -> str | None:
    """The first line of a check summary that says something not yet said (headings last)."""
    # Skipped: rules, fences, tags, table rows, and lines already said (case-insensitively).
    # A line that shows nothing once cleaned (U+200B, a Hangul filler) is no line at all.
    lines = [clean(line, COMMENT_LIMIT).strip() for line in (text or "").splitlines()]
    said = frozenset(clean(words, COMMENT_LIMIT).strip() for words in said)  # compared alike
    headings: list[str] = []
    for index, line in enumerate(lines):
        after = lines[index + 1] if index + 1 < len(lines) else ""
        stripped = line.lstrip("#>-+ \t").strip()
        if len(stripped) > 4 and stripped[:2] == stripped[-2:] and stripped[:2] in ("**", "__"):
            stripped = stripped[2:-2].strip()  # a line in bold is the line
        stripped = stripped.lstrip("* ")
        if not stripped or not any(c.isalnum() for c in stripped):
            continue
        if stripped.startswith(("```", "~~~", "<", "|")) or stripped.casefold() in said:
            continue
        if line.startswith("#") or (after and set(after) <= set("=-")):
            headings.append(stripped)
            continue
        return stripped
    return headings[0] if headings else None


def _source_text(signal: Signal) -> list[str]:
    said: list[str] = []
    seen = {signal.name.strip().casefold()}
    description = (signal.description or "").strip()
    if not is_blank(description) and description.casefold() not in seen:
        seen.add(description.casefold())
        said.append(quoted(description))
    line = first_meaningful_line(signal.summary, said=frozenset(seen))
    if line:
        said.append(quoted(line))
    return said


def _since(row: Row) -> Md:
    if row.since is None and row.state is State.PENDING:  # a queued run: never a made-up time
        return Md("GitHub gives no time for it")
    if row.since is None or _since_in_finding(row):
        return Md("")
    if row.since_source is SinceSource.FIRST_SEEN:
        return Md(f"first seen by this bot {utc(row.since)}")
    return Md(f"since {utc(row.since)}")


def _since_in_finding(row: Row) -> bool:
    """The bot's own second-source finding states the row's since as its own: Read the Docs'
    running build "as building since <the same minute>" (the row would say it twice). Only
    that sentence counts, never a quoted title or the merge-base clause that shows the minute."""
    rec = row.reconciliation
    if rec is None or rec.build_created is None or row.since is None:
        return False
    when = format_utc(rec.build_created)
    return when == format_utc(row.since) and f" as {rec.build_state} since {when}" in rec.finding


def _link(url: str | None) -> Md | None:
    safe = safe_url(url)
    return safe if safe is not None and len(safe) <= LINK_LIMIT else None


def _state_words(raw: str) -> Md:
    """GitHub's raw state in words ("in_progress" -> "in progress"); anything odd escaped."""
    if re.fullmatch(r"[a-z_]{1,40}", raw):
        return Md(raw.replace("_", " "))
    return prose(raw, 40, line_start=False)


def _passing_name(row: Row, tell: Md | None = None) -> Md:
    name = Md(code(row.signal.name) + (tell or ""))
    return name if row.state is State.SUCCESS else Md(f"{name} ({STATE_WORDS[row.state]})")


def _required_rank(required: bool | None) -> int:
    return 0 if required else (2 if required is False else 1)


def _github_pending(signal: Signal) -> bool:
    if signal.kind is Kind.STATUS:
        return signal.github_state == "pending"
    return signal.github_state in ("queued", "in_progress", "waiting", "pending", "requested")


# --- the renderer -------------------------------------------------------------------------


def _finalize(value: object) -> object:
    """Every {{ }} of a template: markdown built here as it is, anything else escaped."""
    if isinstance(value, Md):
        return value
    if value is None:
        return ""
    return prose(value, FINDING_LIMIT)


class Renderer:
    """Renders reports with one jinja2 Environment; a user template folder is searched first.

    Templates receive markdown built by this module (Md); anything else a template prints is
    escaped as untrusted text, and the marker is the body's first line whatever it renders.
    """

    def __init__(self, template_dir: Path | None = None) -> None:
        """Build the Environment over the user's folder (if given) and the packaged templates."""
        self.template_dir = template_dir
        loaders: list[jinja2.BaseLoader] = []
        if template_dir is not None:
            loaders.append(jinja2.FileSystemLoader(template_dir))
        loaders.append(jinja2.FileSystemLoader(default_template_dir()))
        self._loader = jinja2.ChoiceLoader(loaders)
        self._env = jinja2.Environment(
            loader=self._loader,
            autoescape=False,
            finalize=_finalize,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self._env.filters.update(
            md=prose, prose=prose, code=code, quoted=quoted, url=safe_url, utc=utc, short=short_sha
        )

    @cached_property
    def fingerprint(self) -> str:
        """A sha256 of the modules that shape the comment and of every template in use."""
        digest = hashlib.sha256()
        for module in _OUTPUT_MODULES:
            digest.update(Path(module.__file__ or "").read_bytes())
        for name in sorted(n for n in self._env.list_templates() if n.endswith(".j2")):
            source, _, _ = self._loader.get_source(self._env, name)
            digest.update(f"\0{name}\0{source}".encode())
        return digest.hexdigest()

    def validate(self) -> None:
        """Raise TemplateInvalid unless the template renders and puts the marker first."""
        if self.template_dir is not None and not self.template_dir.is_dir():
            raise TemplateInvalid(f"{self.template_dir} is not a folder")
        try:
            template = self._env.get_template(TEMPLATE_NAME)
            raw = self._raw(sample_report(), comment_view(sample_report()), shown=None)
        except jinja2.TemplateError as exc:
            raise TemplateInvalid(f"{TEMPLATE_NAME}: {exc.__class__.__name__}: {exc}") from exc
        first = raw.split("\n", 1)[0].strip()
        if first != MARKER:
            raise TemplateInvalid(
                f"{template.filename}: the first line must be the marker {MARKER} "
                f"(write {{{{ marker }}}} on the first line); it renders {first[:60]!r}"
            )

    def markdown(self, report: Report, *, generation: int = 0, epoch: str = "") -> str:
        """Render the status comment, shrinking it to stay within GitHub's 65,536 characters;
        its stamp records `generation` (the lease's; 0 without one) and the state's `epoch`.
        The carried line (what never changes for the head) takes only the room the comment
        leaves: it gives way before any row does."""
        body = self._fitting(report, stamp_of(report, generation=generation, epoch=epoch))
        line = carried_line(carried_of(report), room=COMMENT_LIMIT - len(body) - 1)
        return with_carried(body, line)

    def _fitting(self, report: Report, stamp: Stamp) -> str:
        view = comment_view(report)
        body = self._render(report, view, stamp, shown=None)
        if len(body) <= COMMENT_LIMIT:
            return body
        view = _without_passing_names(view)
        body = self._render(report, view, stamp, shown=None)
        if len(body) <= COMMENT_LIMIT:
            return body
        return self._render(report, view, stamp, shown=self._fitting_rows(report, view, stamp))

    def _fitting_rows(self, report: Report, view: CommentView, stamp: Stamp) -> int:
        low, high = 0, len(view.rows)
        while low < high:
            mid = (low + high + 1) // 2
            if len(self._render(report, view, stamp, shown=mid)) <= COMMENT_LIMIT:
                low = mid
            else:
                high = mid - 1
        return low

    def _render(self, report: Report, view: CommentView, stamp: Stamp, *, shown: int | None) -> str:
        """The template's output with the marker as its first line, and only there."""
        body = self._raw(report, view, shown=shown).removeprefix(MARKER).replace(MARKER, "")
        return with_stamp(f"{MARKER}\n{body.lstrip(chr(10))}", stamp)

    def _raw(self, report: Report, view: CommentView, *, shown: int | None) -> str:
        rows = view.rows if shown is None else view.rows[:shown]
        template = self._env.get_template(TEMPLATE_NAME)
        return template.render(
            marker=Md(MARKER),
            report=report,
            view=view,
            rows=rows,
            hidden=len(view.rows) - len(rows),
            passing_count=sum(1 for row in report.rows if not is_row(row)),
            queue=queue.queue_view(report, repo_url(report)),  # None: not in a merge queue
            br=Md("  "),  # a hard line break before a row's second line
            last_line=Md("This bot reads CI state and retriggers nothing."),
        )


def _without_passing_names(view: CommentView) -> CommentView:
    return dataclasses.replace(view, passing=())


def renderer_for(template_dir: str) -> Renderer:
    """The comment renderer of `render.template_dir`: that folder's templates first ("": the
    packaged ones only)."""
    return Renderer(Path(template_dir) if template_dir else None)


def default_template_dir() -> Path:
    """Return the packaged templates' folder (`bot.templates`, or templates/ in a checkout)."""
    spec = importlib.util.find_spec("bot.templates")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "templates"


def sample_report() -> Report:
    """A fixed report with every kind of row and hostile text (template validation)."""
    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    hostile = "@everyone #1 <b>x</b> :tada:"
    signals = (
        Signal("tests", Kind.CHECK_RUN, "failure", app="github-actions", completed_at=at,
               description=hostile, required=True),
        Signal("ci/x", Kind.STATUS, "pending", created_at=at, required=False),
        Signal("DCO", Kind.CHECK_RUN, "success", app="dco", completed_at=at),
    )  # fmt: skip
    rows = (
        Row(signals[0], State.FAILURE, at, SinceSource.GITHUB),
        Row(signals[1], State.PENDING, at, SinceSource.GITHUB),
        Row(signals[2], State.SUCCESS, at, SinceSource.GITHUB),
    )
    return Report(
        repo="example/sample",
        number=1,
        title=hostile,
        url="https://github.com/example/sample/pull/1",
        head_sha="0" * 40,
        draft=False,
        observed_at=at,
        verdict=Verdict.FAILING,
        rows=rows,
    )
