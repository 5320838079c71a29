"""The triage view's formats: the terminal table, markdown, the JSON document and the page."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import jinja2

from bot.core.model import as_utc, format_utc
from bot.render.comment import default_template_dir
from bot.render.escape import cell_code, iso_utc, md, safe_url, short_sha
from bot.triage.rows import (
    COUNT_GROUPS,
    VERDICTS,
    TriageEntry,
    not_read_dict,
    shortlist,
    totals,
    unread_repos,
    unsettled_dict,
)

TRIAGE_SCHEMA: Final = "ci-status-bot.triage/v1"
PAGE_TEMPLATE: Final = "triage.html.j2"
_COLOURS: Final = {"failing": "31", "incomplete": "35", "pending": "33", "passing": "32"}


def pull_dict(entry: TriageEntry) -> dict[str, Any]:
    """One pull request in the ci-status-bot.triage/v1 shape (raw source text)."""
    oldest = entry.oldest_unsettled
    return {
        "repo": entry.repo,
        "number": entry.number,
        "title": entry.title,
        "author": entry.author,
        "draft": entry.draft,
        "head_sha": entry.head_sha,
        "verdict": entry.verdict.value,
        "counts": {group: entry.counts.get(group, 0) for group in COUNT_GROUPS},
        "required_failing": list(entry.required_failing),
        "failing": list(entry.failing),
        "never_reported": list(entry.never_reported),
        "required_never_reported": list(entry.required_never_reported),
        "failing_on_base": list(entry.failing_on_base),
        "in_merge_queue": entry.in_merge_queue,
        "merge_queue_stuck": list(entry.merge_queue_stuck),
        "oldest_unsettled": None if oldest is None else unsettled_dict(oldest),
        "observed_at": iso_utc(entry.observed_at),
        "comment_url": entry.comment_url,
        "read_at": iso_utc(entry.read_at),
        "not_read": not_read_dict(entry.not_read),
    }


def triage_document(entries: Sequence[TriageEntry], *, now: datetime) -> dict[str, Any]:
    """The ci-status-bot.triage/v1 document of entries already in order."""
    return {
        "schema": TRIAGE_SCHEMA,
        "generated_at": iso_utc(now),
        "pulls": [pull_dict(e) for e in entries],
    }


def triage_json(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The triage document as text: one pull request a line (fast to write, easy to diff)."""
    document = triage_document(entries, now=now)
    pulls = document.pop("pulls")
    head = json.dumps(document, ensure_ascii=False)[:-1]
    lines = [json.dumps(p, ensure_ascii=False) for p in pulls]
    body = ",\n".join(lines)
    return f'{head}, "pulls": [\n{body}\n]}}' if lines else f'{head}, "pulls": []}}'


def _clean(text: str | None) -> str:
    """One line of printable text (no control or format characters from untrusted titles)."""
    value = "" if text is None else text
    if value.isprintable():  # no control, format, surrogate or private-use character
        return value
    return "".join(
        " " if c in "\n\r\t" else c
        for c in value
        if c in "\n\r\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co")
    )


def _cell(text: str, width: int) -> str:
    """Cut to `width` (with an ellipsis) and pad."""
    if len(text) > width:
        text = text[: max(0, width - 1)] + "…"
    return text.ljust(width)


def _short_time(value: datetime | None) -> str:
    return "" if value is None else as_utc(value).strftime("%m-%d %H:%M")


def _waiting(entry: TriageEntry) -> str:
    oldest = entry.oldest_unsettled
    if oldest is None:
        return ""
    return f"{oldest.state} {_short_time(oldest.since)}".rstrip()


def table(
    entries: Sequence[TriageEntry], *, now: datetime, width: int = 100, colour: bool = False
) -> str:
    """The terminal table: one line per pull request, titles cut to fit `width` columns."""
    pull_width = max([len("PULL"), *(len(e.label) for e in entries)])
    fixed = 13 + 1 + pull_width + 1 + 1 + 1 + 12 + 1 + 19 + 1 + 10 + 1
    title_width = max(10, width - fixed)
    header = (
        f"{'VERDICT':<13} {'PULL':<{pull_width}} {'D':1} {' F  P  I  OK':<12} "
        f"{'WAITING SINCE (UTC)':<19} {'AUTHOR':<10} TITLE"
    )
    lines = [header]
    for e in entries:
        verdict = "failing (req)" if e.urgency == "failing-required" else e.verdict.value
        counts = "{:>2} {:>2} {:>2} {:>3}".format(*(e.counts.get(g, 0) for g in COUNT_GROUPS))
        shown = verdict.ljust(13)
        if colour:
            shown = f"\x1b[{_COLOURS[e.verdict.value]}m{shown}\x1b[0m"
        line = (
            f"{shown} {e.label:<{pull_width}} {'d' if e.draft else ' '} {counts:<12} "
            f"{_waiting(e):<19} {_cell(_clean(e.author), 10)} "
            f"{_cell(_clean(e.title), title_width).rstrip()}"
        )
        lines.append(line)
        lines.extend(_named_lines(e, width))
        if e.not_read is not None:
            lines.append(f"{'':13}   last read {_short_time(e.read_at)} UTC".rstrip())
    t = totals(entries)
    counted = ", ".join(f"{n} {v}" for v, n in t.verdicts.items())
    for repo, why in unread_repos(entries).items():
        lines.append(
            _cell(
                f"{_clean(repo)} {_not_read_sentence(why.since)}: {_clean(why.reason)}", width
            ).rstrip()
        )
    lines.append(f"{t.total} open pull requests: {counted}.")
    if t.never_reported:
        lines.append(f"{t.never_reported} with a required check that never reported.")
    lines.append(
        f"{t.failing_required} failing a required check; {_docs_builds(t.docs_stuck)} stale, "
        f"cancelled or unknown; as of {format_utc(now)}."
    )
    return "\n".join(lines) + "\n"


def _names(
    names: tuple[str, ...],
    show: Callable[[str], str],
    *,
    required: tuple[str, ...] = (),
    on_base: tuple[str, ...] = (),
) -> str:
    """The first names (required ones, and those failing on the merge base too, marked), then
    "+N" for the rest."""
    shown, more = shortlist(names)
    text = ", ".join(show(n) + _marks(n in required, n in on_base) for n in shown)
    return text + (f" +{more}" if more else "")


def _marks(required: bool, on_base: bool) -> str:
    words = [w for w, on in (("required", required), ("also on the merge base", on_base)) if on]
    return f" ({', '.join(words)})" if words else ""


def _named_lines(e: TriageEntry, width: int) -> list[str]:
    """The lines of names under a row: what fails, what never reported, what waits; on one
    line when it fits `width`, else one line each (each cut to fit)."""
    indent = " " * 16
    parts = _named_parts(e)
    joined = indent + " · ".join(parts)
    if len(joined) <= width or len(parts) <= 1:
        return [_cell(joined, width).rstrip()] if parts else []
    return [_cell(indent + part, width).rstrip() for part in parts]


def _named_parts(e: TriageEntry) -> list[str]:
    parts = []
    if e.failing:
        failing = _names(e.failing, _clean, required=e.required_failing, on_base=e.failing_on_base)
        parts.append(f"failing: {failing}")
    if e.never_reported:
        never = _names(e.never_reported, _clean, required=e.required_never_reported)
        parts.append(f"never reported: {never}")
    if e.oldest_unsettled is not None:
        parts.append(f"waiting: {_clean(e.oldest_unsettled.name)}")
    return parts


_GLYPHS: Final = {"failing": "❌", "pending": "⏳", "incomplete": "⚪", "passing": "✅"}


def _md_name(name: str) -> str:
    """A check's name verbatim as GitHub renders it in a table cell (a code span)."""
    return cell_code(name, 80)


def _md_link(text: str, url: str | None) -> str:
    safe = safe_url(url)
    return f"[{text}]({safe})" if safe else text


def markdown(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The view as a markdown table that pastes into an issue (untrusted text escaped)."""
    t = totals(entries)
    counted = " · ".join(f"{_GLYPHS[v]} {n} {v}" for v, n in t.verdicts.items())
    lines = [
        f"### CI triage · {t.total} open pull requests · {counted}",
        f"{t.failing_required} failing a required check · {t.never_reported} with a required "
        f"check never reported · {_docs_builds(t.docs_stuck)} stale, cancelled or unknown · "
        f"as of {format_utc(now)}",
        "",
        "| | pull | title | author | failing | pending | incomplete | passing "
        "| failing checks | never reported | oldest unsettled | head | observed | comment |",
        "|---|---|---|---|--:|--:|--:|--:|---|---|---|---|---|---|",
    ]
    for e in entries:
        oldest = e.oldest_unsettled
        unsettled = (
            ""
            if oldest is None
            else f"{_md_name(oldest.name)} {oldest.state}"
            + (f" since {format_utc(oldest.since)}" if oldest.since else "")
        )
        cells = [
            _GLYPHS[e.verdict.value] + (" draft" if e.draft else ""),
            _md_link(f"{md(e.repo)}#{e.number}", e.url),
            md(e.title, 80),
            md(e.author or ""),
            *(str(e.counts.get(g, 0)) for g in COUNT_GROUPS),
            _names(e.failing, _md_name, required=e.required_failing, on_base=e.failing_on_base),
            _names(e.never_reported, _md_name, required=e.required_never_reported),
            unsettled,
            f"`{short_sha(e.head_sha)}`",
            format_utc(e.observed_at) + _md_last_read(e),
            _md_link("comment", e.comment_url) if e.comment_url else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    unread = unread_repos(entries)
    if unread:
        lines.append("")
    for repo, why in unread.items():
        lines.append(f"- {md(repo)} {_not_read_sentence(why.since)}: {md(why.reason, 200)}")
    lines += ["", "This bot reads CI state and retriggers nothing."]
    return "\n".join(lines) + "\n"


class PageRenderer:
    """The triage page: one self-contained HTML file from a jinja2 template (autoescaped)."""

    def __init__(self) -> None:
        """Build the autoescaping Environment over the packaged templates."""
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(default_template_dir()),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters.update(utc=format_utc, short=short_sha, iso=iso_utc, url=safe_url)
        self._env.globals.update(not_read_sentence=_not_read_sentence, shortlist=shortlist)

    def render(
        self,
        entries: Sequence[TriageEntry],
        *,
        now: datetime,
        refresh_seconds: int = 0,
        freshness: Freshness | None = None,
    ) -> str:
        """The page for entries already in order; it re-reads itself every `refresh_seconds`.

        With `freshness` (the service's page) "as of" is when its data was read, and the page
        says so before the first cycle, after a failed one and while GitHub's budget is out.
        """
        as_of = now if freshness is None else data_time(entries, freshness)
        return self._env.get_template(PAGE_TEMPLATE).render(
            entries=entries,
            unread=unread_repos(entries),
            totals=totals(entries),
            verdicts=VERDICTS,
            now=as_of,
            waiting=freshness is not None and freshness.last_finished is None and not entries,
            notes=freshness_notes(entries, freshness),
            refresh_seconds=refresh_seconds,
            schema=TRIAGE_SCHEMA,
        )


@dataclass(frozen=True, slots=True)
class Freshness:
    """How current the served page's data is: what the service knows of its own cycles."""

    started_at: datetime  # when the service started
    last_finished: datetime | None = None  # the last cycle that finished
    failed_at: datetime | None = None  # a cycle failed after that one
    exhausted: tuple[tuple[str, datetime | None], ...] = ()  # GitHub budgets at 0, until when


def data_time(entries: Sequence[TriageEntry], freshness: Freshness | None) -> datetime | None:
    """When the view's data was read: the last finished cycle, else the newest row's read."""
    if freshness is not None and freshness.last_finished is not None:
        return freshness.last_finished
    times = [e.read_at for e in entries if e.read_at is not None]
    return max(times, default=None)


def freshness_notes(entries: Sequence[TriageEntry], freshness: Freshness | None) -> list[str]:
    """What the page says about its data's age (pure): before the first cycle, after a failed
    cycle, while GitHub's budget is exhausted. Nothing when the last cycle simply finished."""
    if freshness is None:
        return []
    notes = []
    started = format_utc(freshness.started_at)
    read = data_time(entries, freshness)
    data = "" if read is None else f"; the data was read at {format_utc(read)}"
    if freshness.last_finished is None:
        if entries:
            notes.append(
                f"No cycle has finished since the service started at {started}: these rows "
                f"are kept from an earlier run{data}."
            )
        else:
            notes.append(
                f"No cycle has finished yet (the service started at {started}); the pull "
                "requests appear here when the first one does."
            )
    if freshness.failed_at is not None:
        notes.append(f"The last cycle failed at {format_utc(freshness.failed_at)}{data}.")
    for resource, until in freshness.exhausted:
        when = "" if until is None else f" until {format_utc(until)}"
        notes.append(f"GitHub's {resource} budget is exhausted{when}{data}.")
    return notes


def _not_read_sentence(since: datetime) -> str:
    """What a repository's marked rows mean, said once per repository in every format."""
    return f"could not be read since {format_utc(since)}; its rows are as last read"


def _md_last_read(entry: TriageEntry) -> str:
    if entry.not_read is None or entry.read_at is None:
        return ""
    return f" · **last read {format_utc(entry.read_at)}**"


def _docs_builds(count: int) -> str:
    """ "1 docs build" / "2 docs builds"."""
    return f"{count} docs build" if count == 1 else f"{count} docs builds"
