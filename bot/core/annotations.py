"""What a failing check run said in GitHub's own words: its failure-level annotations (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from bot.core.model import Annotation, Kind, Report, Row, Signal, Verdict, group_of

QUOTED: Final = 3  # the first failure-level annotations a row quotes
# GitHub Actions' own annotation on a failed step: it says only that the step failed.
GENERIC: Final = re.compile(r"Process completed with exit code -?\d+\.")


def needs_annotations(row: Row) -> bool:
    """A failing check run is quoted in its annotations; nothing else is asked for them."""
    return needs_run(row.signal) and group_of(row.state) is Verdict.FAILING


def needs_run(signal: Signal) -> bool:
    """A check run GitHub can be asked for by node id (statuses have no annotations)."""
    return (
        signal.kind is Kind.CHECK_RUN
        and signal.node_id is not None
        and signal.database_id is not None
    )


def pick(annotations: tuple[Annotation, ...]) -> tuple[Annotation, ...]:
    """The first QUOTED failure annotations; the generic exit-code one only when it is all."""
    specific = tuple(a for a in annotations if not GENERIC.fullmatch(a.message.strip()))
    return (specific or annotations)[:QUOTED]


def with_annotations(report: Report, found: Mapping[int, tuple[Annotation, ...]]) -> Report:
    """The report with each failing check run's quoted annotations (by run id) attached;
    a run whose annotations were not read keeps None (the row then quotes none)."""
    rows = tuple(
        row._replace(annotations=pick(found[run]))
        if needs_annotations(row) and (run := row.signal.database_id) is not None and run in found
        else row
        for row in report.rows
    )
    return replace(report, rows=rows)


def annotations_payload(annotations: tuple[Annotation, ...]) -> str:
    """A run's failure annotations as JSON text (kept in the state: they never change)."""
    return json.dumps([list(a) for a in annotations], ensure_ascii=False)


def annotations_of_payload(payload: str) -> tuple[Annotation, ...]:
    """The annotations kept by annotations_payload (ValueError/TypeError when malformed)."""
    rows = json.loads(payload)
    if not isinstance(rows, list):
        raise ValueError("kept annotations are not a list")
    return tuple(Annotation(str(p), _line(s), _line(e), str(m)) for p, s, e, m in rows)


def _line(value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"a line number must be an integer, not {value!r}")
