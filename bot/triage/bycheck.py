"""The triage view grouped by failing check: one line per check of a repository with the pull
requests it fails (a broken base branch shows as one line, not forty)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from bot.core.model import format_utc
from bot.render.escape import cell_code, md, safe_url
from bot.render.escape import iso_utc as iso
from bot.triage.rows import TriageEntry

CHECKS_SCHEMA: Final = "ci-status-bot.triage-checks/v1"
PULLS_LISTED: Final = 12  # pull requests a table or markdown line names before "+N"


@dataclass(frozen=True, slots=True)
class CheckGroup:
    """One failing check of a repository and the open pull requests it fails."""

    ident: str  # "c0", "c1": how the page's rows and buttons refer to it
    repo: str
    name: str
    pulls: tuple[TriageEntry, ...]  # most urgent first, as the view orders them
    required: bool  # required on at least one of them

    @property
    def count(self) -> int:
        """How many pull requests it fails."""
        return len(self.pulls)


def by_check(entries: Sequence[TriageEntry]) -> list[CheckGroup]:
    """Every failing check of the rows, most pull requests first (then repository, name)."""
    found: dict[tuple[str, str], list[TriageEntry]] = {}
    for entry in entries:
        for name in dict.fromkeys(entry.failing):
            found.setdefault((entry.repo, name), []).append(entry)
    ordered = sorted(found.items(), key=lambda item: (-len(item[1]), item[0][0], item[0][1]))
    return [
        CheckGroup(
            f"c{i}", repo, name, tuple(pulls), any(name in p.required_failing for p in pulls)
        )
        for i, ((repo, name), pulls) in enumerate(ordered)
    ]


def row_checks(groups: Sequence[CheckGroup]) -> dict[str, str]:
    """Each row's (by label) groups as " c0 c3 ": what the page's check filter matches."""
    found: dict[str, list[str]] = {}
    for group in groups:
        for entry in group.pulls:
            found.setdefault(entry.label, []).append(group.ident)
    return {label: f" {' '.join(idents)} " for label, idents in found.items()}


def _pulls(group: CheckGroup, show: Any) -> str:
    shown = [show(p) for p in group.pulls[:PULLS_LISTED]]
    more = group.count - len(shown)
    return " ".join(shown) + (f" +{more}" if more else "")


def checks_table(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """`report --by check`: one line per failing check, with the pull requests it fails."""
    groups = by_check(entries)
    lines = [f"{'PULLS':>5}  CHECK"]
    for g in groups:
        required = " (required)" if g.required else ""
        lines.append(f"{g.count:>5}  {_plain(g.repo)}: {_plain(g.name)}{required}")
        lines.append(f"{'':7}{_pulls(g, lambda p: f'#{p.number}')}")
    lines.append(
        f"{len(groups)} failing checks across {len(entries)} open pull requests; "
        f"as of {format_utc(now)}."
    )
    return "\n".join(lines) + "\n"


def _plain(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def checks_markdown(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The grouped view as a markdown table that pastes into an issue."""
    groups = by_check(entries)
    lines = [
        f"### CI triage by failing check · {len(groups)} checks · {len(entries)} open pull "
        f"requests · as of {format_utc(now)}",
        "",
        "| check | repository | failing on | pull requests |",
        "|---|---|--:|---|",
    ]
    for g in groups:
        link = lambda p: f"[#{p.number}]({u})" if (u := safe_url(p.url)) else f"#{p.number}"  # noqa: E731
        name = cell_code(g.name, 80) + (" (required)" if g.required else "")
        lines.append(f"| {name} | {md(g.repo)} | {g.count} | {_pulls(g, link)} |")
    lines += ["", "This bot reads CI state and retriggers nothing."]
    return "\n".join(lines) + "\n"


def checks_json(entries: Sequence[TriageEntry], *, now: datetime) -> str:
    """The grouped view as `ci-status-bot.triage-checks/v1`."""
    document = {
        "schema": CHECKS_SCHEMA,
        "generated_at": iso(now),
        "checks": [
            {
                "repo": g.repo,
                "name": g.name,
                "required": g.required,
                "pulls": [p.number for p in g.pulls],
                "count": g.count,
            }
            for g in by_check(entries)
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
