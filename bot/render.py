"""Render a Report as the status comment (markdown via jinja2) or as the JSON report."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

import jinja2

from bot.model import (
    FAILING_STATES,
    INCOMPLETE_STATES,
    MARKER,
    REPORT_SCHEMA,
    Reconciliation,
    Report,
    Row,
    State,
    as_utc,
    format_utc,
)

COMMENT_LIMIT: Final = 65_536
TEMPLATE_NAME: Final = "status_comment.md.j2"
TEXT_LIMIT: Final = 200

# Every character the md filter rewrites, and what it becomes.  U+2060 (word joiner) after
# "@" and "#" keeps GitHub from linking a mention or reference even after entities decode.
_MD_ESCAPES: Final[dict[int, str]] = {
    **{ord(c): "\\" + c for c in "\\`*_{}[]()+-.!|~"},
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord('"'): "&quot;",
    ord("'"): "&#39;",
    ord("@"): "&#64;&#8288;",
    ord("#"): "&#35;&#8288;",
    ord(":"): "&#58;",
}
_WHITESPACE: Final = frozenset("\n\r\t\v\f\x85\u2028\u2029")
_URL_SAFE: Final = "-._~:/?#@!$&*+,;=%"  # RFC 3986 minus ' ( ) [ ] (markdown-significant)

_GROUPS: Final[tuple[tuple[str, frozenset[State]], ...]] = (
    ("Failing", FAILING_STATES),
    ("Incomplete", INCOMPLETE_STATES - {State.STALE}),
    ("Stale", frozenset({State.STALE})),
    ("Pending", frozenset({State.PENDING})),
)
DIVERGENT_TITLE: Final = "Differs from GitHub"
TITLES: Final = (*(title for title, _ in _GROUPS), DIVERGENT_TITLE)


@dataclass(frozen=True, slots=True)
class Group:
    """One heading of rows shown in full in the comment."""

    title: str
    rows: tuple[Row, ...]


def iso_utc(value: datetime | None) -> str | None:
    """Format a time as "2026-10-05T09:12:00Z", or None."""
    return None if value is None else as_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def md(value: object, limit: int = TEXT_LIMIT) -> str:
    """Escape untrusted text for markdown: one line, no HTML, no links, mentions or references."""
    text = "" if value is None else str(value)
    text = "".join(" " if c in _WHITESPACE else c for c in text if _printable(c))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.translate(_MD_ESCAPES)


def safe_url(value: object) -> str | None:
    """Return an http(s) URL percent-encoded for a markdown link, or None for anything else."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return quote(text, safe=_URL_SAFE)


def short_sha(value: object) -> str:
    """Return the first seven hex digits of a commit sha."""
    return "".join(c for c in str(value)[:7] if c in "0123456789abcdefABCDEF")


def report_dict(report: Report) -> dict[str, Any]:
    """Return the JSON report (interface.md schema, raw source text) as plain data."""
    return {
        "schema": REPORT_SCHEMA,
        "repo": report.repo,
        "number": report.number,
        "title": report.title,
        "url": report.url,
        "head_sha": report.head_sha,
        "draft": report.draft,
        "observed_at": iso_utc(report.observed_at),
        "verdict": str(report.verdict),
        "stale_after_minutes": int(report.stale_after.total_seconds() // 60),
        "truncated": report.truncated,
        "notes": list(report.notes),
        "signals": [_signal_dict(row) for row in report.rows],
    }


def report_json(report: Report) -> str:
    """Return the JSON report as text (indent 2)."""
    return json.dumps(report_dict(report), indent=2, ensure_ascii=False)


class Renderer:
    """Renders reports with one jinja2 Environment; a user template folder is searched first."""

    def __init__(self, template_dir: Path | None = None) -> None:
        """Build the Environment over the user's folder (if given) and the packaged templates."""
        loaders: list[jinja2.BaseLoader] = []
        if template_dir is not None:
            loaders.append(jinja2.FileSystemLoader(template_dir))
        loaders.append(jinja2.FileSystemLoader(default_template_dir()))
        self._loader = jinja2.ChoiceLoader(loaders)
        self._env = jinja2.Environment(
            loader=self._loader,
            autoescape=False,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self._env.filters.update(md=md, url=safe_url, utc=format_utc, short=short_sha)

    @cached_property
    def fingerprint(self) -> str:
        """A sha256 of this module and of every template in use; it changes when output may."""
        digest = hashlib.sha256(Path(__file__).read_bytes())
        for name in sorted(n for n in self._env.list_templates() if n.endswith(".j2")):
            source, _, _ = self._loader.get_source(self._env, name)
            digest.update(f"\0{name}\0{source}".encode())
        return digest.hexdigest()

    def markdown(self, report: Report) -> str:
        """Render the status comment, shrinking it to stay within GitHub's 65,536 characters."""
        body = self._render(report, names=True, shown=None)
        if len(body) <= COMMENT_LIMIT:
            return body
        body = self._render(report, names=False, shown=None)
        if len(body) <= COMMENT_LIMIT:
            return body
        return self._render(report, names=False, shown=self._fitting_rows(report))

    def _fitting_rows(self, report: Report) -> int:
        low, high = 0, sum(1 for row in report.rows if group_of(row) is not None)
        while low < high:
            mid = (low + high + 1) // 2
            if len(self._render(report, names=False, shown=mid)) <= COMMENT_LIMIT:
                low = mid
            else:
                high = mid - 1
        return low

    def _render(self, report: Report, *, names: bool, shown: int | None) -> str:
        attention = [row for row in report.rows if group_of(row) is not None]
        kept = attention if shown is None else attention[:shown]
        template = self._env.get_template(TEMPLATE_NAME)
        return with_facts_stamp(
            report,
            template.render(
                marker=MARKER,
                report=report,
                groups=_groups(kept),
                passing=[row for row in report.rows if group_of(row) is None],
                passing_names=names,
                hidden=len(attention) - len(kept),
                counts=_counts(report.rows),
                stale_minutes=int(report.stale_after.total_seconds() // 60),
            ),
        )


def default_template_dir() -> Path:
    """Return the packaged templates' folder (`bot.templates`, or templates/ in a checkout)."""
    spec = importlib.util.find_spec("bot.templates")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "templates"


def group_of(row: Row) -> str | None:
    """The heading a row is shown under in full, or None when it is only listed as passing."""
    for title, states in _GROUPS:
        if row.state in states:
            return title
    if row.reconciliation is not None and row.reconciliation.divergent:
        return DIVERGENT_TITLE
    return None


def _groups(rows: list[Row]) -> list[Group]:
    groups = (Group(title, tuple(r for r in rows if group_of(r) == title)) for title in TITLES)
    return [group for group in groups if group.rows]


def _counts(rows: tuple[Row, ...]) -> dict[str, int]:
    titles = [group_of(row) for row in rows]
    counts = {title.lower(): titles.count(title) for title in TITLES}
    return {**counts, "total": len(rows)}


def _printable(char: str) -> bool:
    return char in _WHITESPACE or unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co")


def _signal_dict(row: Row) -> dict[str, Any]:
    signal = row.signal
    return {
        "name": signal.name,
        "kind": str(signal.kind),
        "app": signal.app,
        "workflow": signal.workflow,
        "github_state": signal.github_state,
        "state": str(row.state),
        "required": signal.required,
        "url": signal.url,
        "description": signal.description,
        "summary": signal.summary,
        "since": iso_utc(row.since),
        "since_source": str(row.since_source),
        "finding": row.finding,
        "reconciliation": _reconciliation_dict(row.reconciliation),
    }


def _reconciliation_dict(rec: Reconciliation | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {
        "provider": rec.provider,
        "project": rec.project,
        "build_id": rec.build_id,
        "build_state": rec.build_state,
        "success": rec.success,
        "builds_for_commit": rec.builds_for_commit,
        "divergent": rec.divergent,
        "finding": rec.finding,
        "build_url": rec.build_url,
        "notification": rec.notification,
        "build_created": iso_utc(rec.build_created),
        "build_finished": iso_utc(rec.build_finished),
    }


def facts_key(report: Report) -> str:
    """A sha256 of every fact the report states: not observed_at, the title or fetch times."""
    rows = tuple(_row_facts(row) for row in report.rows)
    facts = (
        report.repo,
        report.number,
        report.url,
        report.head_sha,
        report.draft,
        report.verdict.value,
        report.stale_after.total_seconds(),
        report.truncated,
        report.notes,
        rows,
    )
    return hashlib.sha256(repr(facts).encode("utf-8")).hexdigest()


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _row_facts(row: Row) -> tuple[Any, ...]:
    """Plain values only (str, float, bool, None): their repr is fast and stable."""
    s, rec = row.signal, row.reconciliation
    evidence = (
        None
        if rec is None
        else (
            rec.provider,
            rec.project,
            rec.build_id,
            rec.build_state,
            rec.success,
            rec.builds_for_commit,
            rec.divergent,
            rec.finding,
            rec.build_url,
            rec.notification,
            _ts(rec.build_created),
            _ts(rec.build_finished),
        )
    )
    return (
        s.name,
        s.kind.value,
        s.github_state,
        s.app,
        s.workflow,
        s.url,
        s.description,
        s.summary,
        _ts(s.started_at),
        _ts(s.completed_at),
        _ts(s.created_at),
        s.required,
        s.database_id,
        row.state.value,
        _ts(row.since),
        row.since_source.value,
        row.finding,
        evidence,
    )


# --- the facts stamp (rtd-truth): a hidden line right after the marker ------------------------
# `<!-- ci-status-bot:facts=<facts key> observed=<ISO UTC> -->` lets the bot adopt its own
# comment after the state is lost and keep the first-observed time the comment states.

_STAMP: Final = re.compile(
    r"<!-- ci-status-bot:facts=(?P<key>[0-9a-f]{64}) "
    r"observed=(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) -->"
)


def facts_stamp(report: Report) -> str:
    """The hidden line that records the report's facts key and first-observed time."""
    at = as_utc(report.observed_at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"<!-- ci-status-bot:facts={facts_key(report)} observed={at} -->"


def with_facts_stamp(report: Report, body: str) -> str:
    """The body with the facts stamp inserted right after its first line (the marker)."""
    first, newline, rest = body.partition("\n")
    return f"{first}\n{facts_stamp(report)}{newline}{rest}"


def parse_facts_stamp(body: str) -> tuple[str, datetime] | None:
    """The (facts key, first-observed time) a comment's stamp line records, if it has one."""
    lines = body.split("\n", 2)
    match = _STAMP.fullmatch(lines[1].strip()) if len(lines) > 1 else None
    if match is None:
        return None
    return match["key"], as_utc(datetime.strptime(match["at"], "%Y-%m-%dT%H:%M:%S.%fZ"))
