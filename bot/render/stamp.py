"""The facts stamp: a hidden line right after the marker (the facts key, first-observed time).

`<!-- ci-status-bot:facts=<facts key> observed=<ISO UTC> -->` lets the bot adopt its own
comment after the state is lost and keep the first-observed time the comment states.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

from bot.core.facts import facts_key
from bot.core.model import Report, as_utc

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
