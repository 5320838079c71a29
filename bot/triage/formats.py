"""The triage view's formats: the terminal table, markdown, the JSON document and the page."""

from __future__ import annotations

import json
import textwrap
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import jinja2

from bot.core.model import as_utc, format_utc
from bot.render.comment import default_template_dir
from bot.render.escape import cell_code, iso_utc, md, safe_url, short_sha
from bot.triage.bycheck import by_check, row_checks
from bot.triage.rows import (
    COUNT_GROUPS,
    QUIET_WHEN_NONE,
    VERDICTS,
    Named,
    TriageEntry,
    in_order,
    labels,
    named_dict,
    not_read_dict,
    plural,
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
        "incomplete": [named_dict(n) for n in entry.incomplete],
        "pending": [named_dict(n) for n in entry.pending],
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


STUCK_IN_QUEUE: Final = "stuck in the merge queue"  # required contexts the merge group lacks
NARROW: Final = 80  # the terminal table's width where none is known
INDENT: Final = "    "  # the names under a row
_VERDICT_WIDTH: Final = 10  # "incomplete"
_PULL_WIDTH: Final = 24  # a longer owner/name#N is cut in the repository's name
_AUTHOR_WIDTH: Final = 8


def table(
    entries: Sequence[TriageEntry],
    *,
    now: datetime,
    width: int = NARROW,
    colour: bool = False,
    wide: bool = False,
) -> str:
    """The terminal table: a line per pull request that fits `width` (80 columns by default;
    titles cut with an ellipsis), the signals it names on their own indented lines under it,
    then the summary. `wide`: every column (head, observed, comment) and nothing cut."""
    if wide:
        width = 10**6
    pulls = [_pull_label(e, None if wide else _PULL_WIDTH) for e in entries]
    pull_width = max([len("PULL"), *(len(p) for p in pulls)])
    lines = [_header(pull_width, wide=wide)]
    fixed = _VERDICT_WIDTH + 1 + pull_width + 3 + 12 + 1 + _AUTHOR_WIDTH + 1
    title_width = max(10, width - fixed)
    for e, pull in zip(entries, pulls, strict=True):
        lines.append(
            _row_head(
                e, pull, pull_width=pull_width, title_width=title_width, colour=colour, wide=wide
            )
        )
        for part in _named_parts(e):
            lines.extend(_fit(part, width))
        if wide and e.comment_url:
            lines.append(f"{INDENT}comment: {e.comment_url}")
        if e.not_read is not None:
            lines.append(f"{INDENT}last read {_short_time(e.read_at)} UTC")
    lines.extend(_table_foot(entries, now=now, width=width))
    return "\n".join(lines) + "\n"


def _row_head(
    e: TriageEntry, pull: str, *, pull_width: int, title_width: int, colour: bool, wide: bool
) -> str:
    """A pull request's line of the terminal table: verdict, pull, draft, counts, then author
    and title cut to fit (`wide`: the waiting time, head, observed time too, nothing cut)."""
    verdict = "failing (req)" if wide and e.urgency == "failing-required" else e.verdict.value
    shown = verdict.ljust(13 if wide else _VERDICT_WIDTH)
    if colour:
        shown = f"\x1b[{_COLOURS[e.verdict.value]}m{shown}\x1b[0m"
    counts = "{:>2} {:>2} {:>2} {:>3}".format(*(e.counts.get(g, 0) for g in COUNT_GROUPS))
    head = f"{shown} {pull:<{pull_width}} {'d' if e.draft else ' '} {counts:<12} "
    if wide:
        head += (
            f"{_waiting(e):<19} {short_sha(e.head_sha)} {_short_time(e.observed_at)} "
            f"{_clean(e.author)} {_clean(e.title)}"
        )
    else:
        author = _cell(_clean(e.author), _AUTHOR_WIDTH)
        head += f"{author} {_cell(_clean(e.title), title_width)}"
    return head.rstrip()


def _header(pull_width: int, *, wide: bool) -> str:
    verdict = f"{'VERDICT':<13}" if wide else f"{'VERDICT':<{_VERDICT_WIDTH}}"
    head = f"{verdict} {'PULL':<{pull_width}} {'D':1} {' F  P  I  OK':<12} "
    if wide:
        return head + f"{'WAITING SINCE (UTC)':<19} HEAD    OBSERVED    AUTHOR TITLE"
    return head + f"{'AUTHOR':<{_AUTHOR_WIDTH}} TITLE"


def _pull_label(entry: TriageEntry, limit: int | None) -> str:
    """owner/name#N; past `limit` characters the repository's name is cut, never the number."""
    label = _clean(entry.label)
    if limit is None or len(label) <= limit:
        return label
    number = f"#{entry.number}"
    return _clean(entry.repo)[: max(1, limit - len(number) - 1)] + "…" + number


def _table_foot(entries: Sequence[TriageEntry], *, now: datetime, width: int) -> list[str]:
    t = totals(entries)
    lines: list[str] = []
    for repo, why in unread_repos(entries).items():
        said = f"{_clean(repo)} {_not_read_sentence(why.since)}: {_clean(why.reason)}"
        lines.extend(_cell(line, width).rstrip() for line in textwrap.wrap(said, width) or [""])
    counted = ", ".join(f"{n} {v}" for v, n in t.verdicts.items())
    lines.append(f"{plural(t.total, 'open pull request', 'open pull requests')}: {counted}.")
    words = [text for key, count, text in labels(t) if count or key not in QUIET_WHEN_NONE]
    lines.extend(_wrapped([*words, f"as of {format_utc(now)}."], width, sep="; "))
    return lines


def _fit(part: str, width: int) -> list[str]:
    """One named group ("failing: a, b +2") indented under its row, continued on further
    lines (indented deeper) between names where it would pass `width`; a name too long for a
    line of its own is cut with an ellipsis."""
    head, _, rest = part.partition(": ")
    names = rest.split(", ")
    names[0] = f"{head}: {names[0]}"
    lines = _wrapped(names, width - len(INDENT), sep=", ", more="  ")
    return [_cell(INDENT + line, width).rstrip() for line in lines]


def _wrapped(parts: Sequence[str], width: int, *, sep: str, more: str = "") -> list[str]:
    """`parts` joined by `sep`, a new line where the next part would pass `width`."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            if lines:
                lines[-1] += sep.rstrip()
            lines.append(more + part if lines else part)
    return lines


def _names(
    names: Sequence[str],
    show: Callable[[str], str],
    *,
    required: Sequence[str] = (),
    on_base: Sequence[str] = (),
) -> str:
    """The first names (required ones, and those failing on the merge base too, marked), then
    "+N" for the rest."""
    shown, more = shortlist(names)
    text = ", ".join(show(n) + _marks(n in required, n in on_base) for n in shown)
    return text + (f" +{more}" if more else "")


def _marks(required: bool, on_base: bool) -> str:
    words = [w for w, on in (("required", required), ("also on the merge base", on_base)) if on]
    return f" ({', '.join(words)})" if words else ""


def named_groups(entry: TriageEntry) -> list[tuple[str, tuple[Named, ...]]]:
    """The incomplete and pending signals of a row by state word, in STATE_ORDER."""
    items = (*entry.incomplete, *entry.pending)
    words = dict.fromkeys(n.state for n in in_order(items))
    return [(word, tuple(n for n in items if n.state == word)) for word in words]


def named_text(entry: TriageEntry) -> str:
    """The incomplete and pending signals with their state words, for the page's filter
    ("docs/readthedocs.org:omni-docs cancelled tests (3.12) never reported")."""
    return " ".join(f"{n.name} {n.state}" for n in (*entry.incomplete, *entry.pending))


def _group_words(word: str, items: Sequence[Named], time: Callable[[datetime], str]) -> str:
    """ "cancelled", or "stale since 10-05 09:00" (the oldest of them) for signals that wait."""
    if word not in ("stale", "pending"):
        return word
    times = [n.since for n in items if n.since is not None]
    return f"{word} since {time(min(times))}" if times else word


def _named_parts(e: TriageEntry) -> list[str]:
    """What a row names: what fails, then each state word's signals ("cancelled: docs")."""
    parts = []
    if e.failing:
        failing = _names(e.failing, _clean, required=e.required_failing, on_base=e.failing_on_base)
        parts.append(f"failing: {failing}")
    for word, items in named_groups(e):
        names = [n.name for n in items]
        required = [n.name for n in items if n.required]
        said = _group_words(word, items, _short_time)
        parts.append(f"{said}: {_names(names, _clean, required=required)}")
    if e.merge_queue_stuck:
        parts.append(f"{STUCK_IN_QUEUE}: {_names(e.merge_queue_stuck, _clean)}")
    return parts


_GLYPHS: Final = {"failing": "❌", "pending": "⏳", "incomplete": "⚪", "passing": "✅"}


def _md_name(name: str) -> str:
    """A check's name verbatim as GitHub renders it in a table cell (a code span)."""
    return cell_code(name, 80)


def _md_link(text: str, url: str | None) -> str:
    safe = safe_url(url)
    return f"[{text}]({safe})" if safe else text


_BR: Final = "<br>"  # a line break inside a table cell, as GitHub renders it


def markdown(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The view as a markdown table that pastes into an issue: five columns, each cell's
    lines broken (untrusted text escaped)."""
    t = totals(entries)
    counted = " · ".join(f"{_GLYPHS[v]} {n} {v}" for v, n in t.verdicts.items())
    total = plural(t.total, "open pull request", "open pull requests")
    lines = [
        f"### CI triage · {total} · {counted}",
        " · ".join(
            [
                *(text for key, n, text in labels(t) if n or key not in QUIET_WHEN_NONE),
                f"as of {format_utc(now)}",
            ]
        ),
        "",
        "| | pull request | signals | not passing | comment |",
        "|---|---|---|---|---|",
    ]
    for e in entries:
        lines.append("| " + " | ".join(_md_cells(e)) + " |")
    unread = unread_repos(entries)
    if unread:
        lines.append("")
    for repo, why in unread.items():
        lines.append(f"- {md(repo)} {_not_read_sentence(why.since)}: {md(why.reason, 200)}")
    lines += ["", "This bot reads CI state and retriggers nothing."]
    return "\n".join(lines) + "\n"


def _md_cells(e: TriageEntry) -> list[str]:
    """A pull request's row of the markdown table, a cell per column."""
    return [
        _GLYPHS[e.verdict.value] + (" draft" if e.draft else ""),
        _md_link(f"{md(e.repo)}#{e.number}", e.url)
        + f"{_BR}{md(e.title, 80)} · {md(e.author or 'unknown author')}",
        " · ".join(
            f"{_GLYPHS[g]} {e.counts.get(g, 0)}" for g in COUNT_GROUPS if e.counts.get(g, 0)
        ),
        _BR.join(_md_named_parts(e)),
        _BR.join(
            filter(None, [_md_link("comment", e.comment_url) if e.comment_url else "",
                          f"`{short_sha(e.head_sha)}` {format_utc(e.observed_at)}"
                          + _md_last_read(e)])
        ),
    ]  # fmt: skip


def _md_named_parts(e: TriageEntry) -> list[str]:
    parts = []
    if e.failing:
        failing = _names(
            e.failing, _md_name, required=e.required_failing, on_base=e.failing_on_base
        )
        parts.append(f"failing: {failing}")
    for word, items in named_groups(e):
        names = [n.name for n in items]
        required = [n.name for n in items if n.required]
        said = _group_words(word, items, format_utc)
        parts.append(f"{said}: {_names(names, _md_name, required=required)}")
    if e.merge_queue_stuck:
        parts.append(f"{STUCK_IN_QUEUE}: {_names(e.merge_queue_stuck, _md_name)}")
    return parts


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
        self._env.globals.update(
            not_read_sentence=_not_read_sentence,
            shortlist=shortlist,
            named_groups=named_groups,
            named_text=named_text,
            group_words=lambda word, items: _group_words(word, items, format_utc),
            labels=labels,
        )

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
        groups = by_check(entries)  # the failing checks, each with its pull requests
        return self._env.get_template(PAGE_TEMPLATE).render(
            entries=entries,
            checks=groups,
            row_checks=row_checks(groups),
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
