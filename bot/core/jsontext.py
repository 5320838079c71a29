"""JSON text the bot did not write this run, read with bounds (pure): a comment's hidden lines,
a provider's record kept in the state or carried by a comment.

`json.loads` raises RecursionError on text nested past Python's recursion limit (a thousand
`[` fit in a record's key), not a ValueError; and a JSON escape gives a lone surrogate that no
UTF-8 writer (a comment, SQLite, PostgreSQL) takes. So text nested deeper than its bound is
refused before `json.loads` sees it, and every refusal is a ValueError.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

MAX_DEPTH: Final = 32  # nesting: deeper than anything the bot keeps or carries
# a JSON string (escapes included) or a bracket: brackets inside strings do not nest
_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def depth(text: str) -> int:
    """How deep `text`'s arrays and objects nest (an upper bound where it is not JSON)."""
    deepest = level = 0
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark in ("[", "{"):
            level += 1
            deepest = max(deepest, level)
        elif mark in ("]", "}"):
            level -= 1
    return deepest


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`, refused with a ValueError (never a RecursionError) where the text
    nests deeper than `max_depth` or is not JSON."""
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth}")
    try:
        return json.loads(text)
    except RecursionError as exc:  # past the bound, never reached: still no RecursionError
        raise ValueError("JSON nested too deep") from exc


def writable(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (no lone surrogate from a JSON escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
