"""The facts stamp: a hidden line right after the marker (the facts key, first-observed time).

`<!-- ci-status-bot:facts=<facts key> observed=<ISO UTC> -->` lets the bot adopt its own
comment after the state is lost and keep the first-observed time the comment states. Where a
row says since when the bot has known the head (a required context never reported), the line
ends ` head=<sha>@<ISO UTC>`, so a run without a state dates it as the comment does.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

from bot.core.facts import facts_key
from bot.core.model import Kind, Report, SinceSource, as_utc

_TIME: Final = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_STAMP: Final = re.compile(
    rf"<!-- ci-status-bot:facts=(?P<key>[0-9a-f]{{64}}) observed=(?P<at>{_TIME})"
    rf"(?: head=(?P<head>[0-9a-f]{{40}})@(?P<seen>{_TIME}))? -->"
)


def head_seen(report: Report) -> datetime | None:
    """Since when the bot has known the head, where a row says so (a context never reported)."""
    times = [
        row.since
        for row in report.rows
        if row.signal.kind is Kind.EXPECTED
        and row.since is not None
        and row.since_source is SinceSource.FIRST_SEEN
    ]
    return min(times, default=None)


def facts_stamp(report: Report) -> str:
    """The hidden line that records the report's facts key and first-observed time (and since
    when the bot has known the head, where a row says it)."""
    at = as_utc(report.observed_at).strftime(_FORMAT)
    seen = head_seen(report)
    head = "" if seen is None else f" head={report.head_sha}@{as_utc(seen).strftime(_FORMAT)}"
    return f"<!-- ci-status-bot:facts={facts_key(report)} observed={at}{head} -->"


def with_facts_stamp(report: Report, body: str) -> str:
    """The body with the facts stamp inserted right after its first line (the marker)."""
    first, newline, rest = body.partition("\n")
    return f"{first}\n{facts_stamp(report)}{newline}{rest}"


def _stamp(body: str) -> re.Match[str] | None:
    lines = body.split("\n", 2)
    return _STAMP.fullmatch(lines[1].strip()) if len(lines) > 1 else None


def parse_facts_stamp(body: str) -> tuple[str, datetime] | None:
    """The (facts key, first-observed time) a comment's stamp line records, if it has one."""
    match = _stamp(body)
    if match is None:
        return None
    return match["key"], as_utc(datetime.strptime(match["at"], _FORMAT))


def stamped_head_seen(body: str) -> tuple[str, datetime] | None:
    """The (head sha, since when the bot has known it) a comment's stamp records, if any."""
    match = _stamp(body)
    if match is None or match["head"] is None:
        return None
    return match["head"], as_utc(datetime.strptime(match["seen"], _FORMAT))
