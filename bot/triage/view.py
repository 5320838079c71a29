"""The triage view: every open pull request's last reconciled state, most urgent first."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

import jinja2

from bot.core.model import (
    FAILING_STATES,
    INCOMPLETE_STATES,
    PullSnapshot,
    Report,
    State,
    Verdict,
    as_utc,
    format_utc,
)
from bot.core.reconcile import rtd_project_of
from bot.render.comment import default_template_dir
from bot.render.escape import iso_utc, md, safe_url, short_sha
from bot.state.sqlite import Store, StoredTriage

if TYPE_CHECKING:
    from bot.cycle import Cycle
    from bot.settings import RepoSettings

TRIAGE_SCHEMA: Final = "ci-status-bot.triage/v1"
PAGE_TEMPLATE: Final = "triage.html.j2"
COUNT_GROUPS: Final = ("failing", "pending", "incomplete", "passing")
VERDICTS: Final = tuple(v.value for v in (Verdict.FAILING, Verdict.INCOMPLETE, Verdict.PENDING,
                                          Verdict.PASSING))  # fmt: skip
UNSETTLED_STATES: Final = frozenset({State.PENDING, State.STALE})
DraftFilter = Literal["only", "exclude"]

_RANK: Final = {Verdict.FAILING: 1, Verdict.INCOMPLETE: 2, Verdict.PENDING: 3, Verdict.PASSING: 4}
_COLOURS: Final = {"failing": "31", "incomplete": "35", "pending": "33", "passing": "32"}
_FAR_FUTURE: Final = "9999"


@dataclass(frozen=True, slots=True)
class Unsettled:
    """The oldest pending or stale signal of a pull request."""

    name: str
    state: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class TriageEntry:
    """One pull request's row of the triage view."""

    repo: str
    number: int
    title: str
    author: str | None
    draft: bool
    head_sha: str
    verdict: Verdict
    url: str
    observed_at: datetime
    counts: Mapping[str, int]
    required_failing: tuple[str, ...] = ()
    oldest_unsettled: Unsettled | None = None
    docs_stuck: int = 0
    comment_url: str | None = None

    @property
    def label(self) -> str:
        """owner/name#N."""
        return f"{self.repo}#{self.number}"

    @property
    def urgency(self) -> str:
        """The verdict, with failing split by whether a required signal fails."""
        if self.verdict is Verdict.FAILING and self.required_failing:
            return "failing-required"
        return self.verdict.value


@dataclass(frozen=True, slots=True)
class Filters:
    """Which rows of the view to keep (empty means all)."""

    repos: frozenset[str] = frozenset()
    verdicts: frozenset[str] = frozenset()
    drafts: DraftFilter | None = None

    def keep(self, entry: TriageEntry) -> bool:
        """Whether the entry passes every filter."""
        if self.repos and entry.repo.lower() not in {r.lower() for r in self.repos}:
            return False
        if self.verdicts and entry.verdict.value not in self.verdicts:
            return False
        if self.drafts == "only":
            return entry.draft
        return not (self.drafts == "exclude" and entry.draft)


def parse_verdicts(text: str) -> frozenset[str]:
    """`failing,pending` as a set of verdicts; ValueError naming an unknown one."""
    names = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(names - set(VERDICTS))
    if unknown:
        raise ValueError(f"unknown verdict {', '.join(unknown)} (expected {', '.join(VERDICTS)})")
    return frozenset(names)


# -- from a report to a row ------------------------------------------------------------


def entry_for(snapshot: PullSnapshot, report: Report) -> TriageEntry:
    """The triage row of one reconciled pull request (pure)."""
    counts: Counter[str] = Counter({group: 0 for group in COUNT_GROUPS})
    required: list[str] = []
    unsettled: list[Unsettled] = []
    docs_stuck = 0
    for row in report.rows:
        counts[_group(row.state)] += 1
        if row.state in FAILING_STATES and row.signal.required:
            required.append(row.signal.name)
        if row.state in UNSETTLED_STATES:
            unsettled.append(Unsettled(row.signal.name, row.state.value, row.since))
        if row.state in INCOMPLETE_STATES and rtd_project_of(row.signal.name) is not None:
            docs_stuck += 1
    oldest = min(unsettled, key=_since_key, default=None)
    return TriageEntry(
        repo=report.repo,
        number=report.number,
        title=snapshot.title,
        author=snapshot.author,
        draft=report.draft,
        head_sha=report.head_sha,
        verdict=report.verdict,
        url=report.url,
        observed_at=report.observed_at,
        counts=dict(counts),
        required_failing=tuple(required),
        oldest_unsettled=oldest,
        docs_stuck=docs_stuck,
    )


def _group(state: State) -> str:
    if state in FAILING_STATES:
        return "failing"
    if state in INCOMPLETE_STATES:
        return "incomplete"
    return "pending" if state is State.PENDING else "passing"


def _since_key(item: Unsettled) -> str:
    return _FAR_FUTURE if item.since is None else as_utc(item.since).isoformat()


def _details_json(entry: TriageEntry) -> str:
    """The computed parts of a row, compact, as stored in the state."""
    oldest = entry.oldest_unsettled
    return json.dumps(
        {
            "counts": dict(entry.counts),
            "required_failing": list(entry.required_failing),
            "oldest_unsettled": None if oldest is None else _unsettled_dict(oldest),
            "docs_stuck": entry.docs_stuck,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _from_stored(row: StoredTriage) -> TriageEntry:
    details = json.loads(row.details)
    oldest = details.get("oldest_unsettled")
    comment_url = None if row.comment_id is None else f"{row.url}#issuecomment-{row.comment_id}"
    return TriageEntry(
        repo=row.repo,
        number=row.number,
        title=row.title,
        author=row.author,
        draft=row.draft,
        head_sha=row.head_sha,
        verdict=Verdict(row.verdict),
        url=row.url,
        observed_at=row.observed_at,
        counts={group: int(details["counts"].get(group, 0)) for group in COUNT_GROUPS},
        required_failing=tuple(details.get("required_failing", ())),
        oldest_unsettled=None
        if oldest is None
        else Unsettled(
            oldest["name"],
            oldest["state"],
            None if oldest["since"] is None else datetime.fromisoformat(oldest["since"]),
        ),
        docs_stuck=int(details.get("docs_stuck", 0)),
        comment_url=comment_url,
    )


# -- the cycle's side: keep each planned pull request, drop the closed ones -----------------


def keep_triage(
    store: Store, snapshot: PullSnapshot, report: Report, *, dry_run: bool, now: datetime
) -> None:
    """Keep a planned pull request's last report in the state (a dry run records nothing)."""
    if dry_run:
        return
    entry = entry_for(snapshot, report)
    store.put_triage(
        entry.repo,
        entry.number,
        title=entry.title,
        author=entry.author,
        draft=entry.draft,
        head_sha=entry.head_sha,
        verdict=entry.verdict.value,
        url=entry.url,
        details=_details_json(entry),
        observed_at=entry.observed_at,
        now=now,
    )


def prune_triage(store: Store, repo: str, *seen: Iterable[str], dry_run: bool) -> None:
    """After a repository was read completely: drop rows of pull requests it did not list.

    `seen` holds owner/name#N labels of the pull requests kept (planned, or failed this time).
    """
    if dry_run:
        return
    prefix = f"{repo}#"
    labels = [label for group in seen for label in group]
    numbers = {int(label[len(prefix) :]) for label in labels if label.startswith(prefix)}
    store.prune_triage(repo, keep=numbers)


def stored_entries(store: Store) -> list[TriageEntry]:
    """Every row the state holds (any order)."""
    return [_from_stored(row) for row in store.triage_rows()]


def live_entries(cycle: Cycle, repos: Sequence[RepoSettings]) -> list[TriageEntry]:
    """Read and reconcile every selected open pull request now (the cycle must be a dry run)."""
    from bot.cycle import selected
    from bot.github.client import ReadOnlyRequired
    from bot.github.parse import PullFailure

    if not cycle.dry_run:
        raise ValueError("live_entries reads only: pass a dry-run cycle")
    entries: list[TriageEntry] = []
    required = ReadOnlyRequired(cycle.store)
    for repo in repos:
        for snapshot in cycle.github.open_pulls(repo.name, now=cycle.clock(), required=required):
            if isinstance(snapshot, PullFailure):  # not shown: `once` names it
                continue
            if selected(snapshot, cycle.policy):
                report, _ = cycle.report_for(snapshot, repo)
                stored = cycle.store.get_comment(repo.name, snapshot.number)
                entry = entry_for(snapshot, report)
                if stored is not None:
                    url = f"{entry.url}#issuecomment-{stored.comment_id}"
                    entry = replace(entry, comment_url=url)
                entries.append(entry)
    return entries


# -- order and filters ------------------------------------------------------------------


def urgency_key(entry: TriageEntry) -> tuple[int, str, str, int]:
    """Sort key: failing with a required signal, failing, incomplete, pending, passing."""
    rank = 0 if entry.urgency == "failing-required" else _RANK[entry.verdict]
    if entry.verdict in (Verdict.INCOMPLETE, Verdict.PENDING):
        oldest = entry.oldest_unsettled
        waiting = _FAR_FUTURE if oldest is None else _since_key(oldest)
    else:
        waiting = as_utc(entry.observed_at).isoformat()
    return rank, waiting, entry.repo.lower(), entry.number


def ordered(entries: Iterable[TriageEntry], filters: Filters | None = None) -> list[TriageEntry]:
    """The entries that pass `filters`, most urgent first."""
    chosen = entries if filters is None else (e for e in entries if filters.keep(e))
    return sorted(chosen, key=urgency_key)


@dataclass(frozen=True, slots=True)
class Totals:
    """The summary bar: pull requests per verdict, stuck docs builds, required failures."""

    verdicts: Mapping[str, int]
    failing_required: int
    docs_stuck: int
    drafts: int
    repos: tuple[str, ...] = field(default=())

    @property
    def total(self) -> int:
        """Pull requests in the view."""
        return sum(self.verdicts.values())


def totals(entries: Sequence[TriageEntry]) -> Totals:
    """Count the view for the summary bar."""
    verdicts = Counter({v: 0 for v in VERDICTS})
    verdicts.update(e.verdict.value for e in entries)
    return Totals(
        verdicts=dict(verdicts),
        failing_required=sum(1 for e in entries if e.required_failing),
        docs_stuck=sum(e.docs_stuck for e in entries),
        drafts=sum(1 for e in entries if e.draft),
        repos=tuple(sorted({e.repo for e in entries}, key=str.lower)),
    )


# -- formats ----------------------------------------------------------------------------


def _unsettled_dict(item: Unsettled) -> dict[str, Any]:
    return {"name": item.name, "state": item.state, "since": iso_utc(item.since)}


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
        "oldest_unsettled": None if oldest is None else _unsettled_dict(oldest),
        "observed_at": iso_utc(entry.observed_at),
        "comment_url": entry.comment_url,
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
        if e.required_failing:
            names = ", ".join(_clean(n) for n in e.required_failing)
            lines.append(_cell(f"{'':13}   required failing: {names}", width).rstrip())
    t = totals(entries)
    counted = ", ".join(f"{n} {v}" for v, n in t.verdicts.items())
    lines.append(f"{t.total} open pull requests: {counted}.")
    lines.append(
        f"{t.failing_required} failing a required check; {_docs_builds(t.docs_stuck)} stale, "
        f"cancelled or unknown; as of {format_utc(now)}."
    )
    return "\n".join(lines) + "\n"


_GLYPHS: Final = {"failing": "❌", "pending": "⏳", "incomplete": "⚪", "passing": "✅"}


def _md_link(text: str, url: str | None) -> str:
    safe = safe_url(url)
    return f"[{text}]({safe})" if safe else text


def markdown(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The view as a markdown table that pastes into an issue (untrusted text escaped)."""
    t = totals(entries)
    counted = " · ".join(f"{_GLYPHS[v]} {n} {v}" for v, n in t.verdicts.items())
    lines = [
        f"### CI triage · {t.total} open pull requests · {counted}",
        f"{t.failing_required} failing a required check · {_docs_builds(t.docs_stuck)} stale, "
        f"cancelled or unknown · as of {format_utc(now)}",
        "",
        "| | pull | title | author | failing | pending | incomplete | passing "
        "| required failing | oldest unsettled | head | observed | comment |",
        "|---|---|---|---|--:|--:|--:|--:|---|---|---|---|---|",
    ]
    for e in entries:
        oldest = e.oldest_unsettled
        unsettled = (
            ""
            if oldest is None
            else f"`{md(oldest.name, 80)}` {oldest.state}"
            + (f" since {format_utc(oldest.since)}" if oldest.since else "")
        )
        cells = [
            _GLYPHS[e.verdict.value] + (" draft" if e.draft else ""),
            _md_link(f"{md(e.repo)}#{e.number}", e.url),
            md(e.title, 80),
            md(e.author or ""),
            *(str(e.counts.get(g, 0)) for g in COUNT_GROUPS),
            ", ".join(f"`{md(n, 80)}`" for n in e.required_failing),
            unsettled,
            f"`{short_sha(e.head_sha)}`",
            format_utc(e.observed_at),
            _md_link("comment", e.comment_url) if e.comment_url else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
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

    def render(
        self, entries: Sequence[TriageEntry], *, now: datetime, refresh_seconds: int = 0
    ) -> str:
        """The page for entries already in order; it re-reads itself every `refresh_seconds`."""
        return self._env.get_template(PAGE_TEMPLATE).render(
            entries=entries,
            totals=totals(entries),
            verdicts=VERDICTS,
            now=now,
            refresh_seconds=refresh_seconds,
            schema=TRIAGE_SCHEMA,
        )


def _docs_builds(count: int) -> str:
    """ "1 docs build" / "2 docs builds"."""
    return f"{count} docs build" if count == 1 else f"{count} docs builds"
