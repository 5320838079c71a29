"""Untrusted text -> markdown: the escaping every rendered surface uses (pure)."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from typing import Final
from urllib.parse import quote, urlsplit

from bot.core.model import as_utc, format_utc

TEXT_LIMIT: Final = 200  # a name or a quoted line of source text, in characters
QUOTE_LIMIT: Final = 160  # a description or a summary line quoted on a row

NBSP: Final = "\u00a0"
NB_HYPHEN: Final = "\u2011"  # a hyphen no browser breaks a line after
ZWJ: Final = "\u200d"
_WHITESPACE: Final = frozenset("\n\r\t\v\f\x85\u2028\u2029")
_URL_SAFE: Final = "-._~:/?#@!$&*+,;=%"  # RFC 3986 minus ' ( ) [ ] (markdown-significant)
# The bot's own hidden lines (the marker, the facts line) start like this: untrusted text
# never carries one into the body. U+2011 (non-breaking hyphen) looks the same and is inert.
_OWN_COMMENT_OPENER: Final = re.compile(r"<!--(?=\s*ci-status-bot)", re.IGNORECASE)
_DEFUSED_OPENER: Final = "<!\u2011\u2011"

# A token of untrusted text goes in a code span when it holds markdown syntax or anything
# GitHub links or converts after markdown: @mentions, #1 / GH-1 / owner/repo#1 references,
# URLs, www., e-mail addresses, commit shas, :emoji: shortcodes, custom autolinks (ABC-123),
# entities, raw HTML, math ($). Code spans stop all of these; nothing else needs escaping.
_CODE_CHARS: Final = frozenset("`\\*_[]<>~|$@#&/")
_CODE_PATTERN: Final = re.compile(
    r"^:|://|www\.|:[^\d\s]|:.*:|[a-z]-\d|ghsa-"
    r"|(?<![0-9a-z])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?![0-9a-z])",
    re.IGNORECASE,
)
# md(): every character it rewrites. U+2060 after "@" and "#" keeps GitHub from linking a
# mention or reference even after the entities decode (tables only: never in the comment).
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
_LEAD: Final = "(\"'\u201c\u2018"  # ( " ' and curly opening quotes
_TRAIL: Final = ".,;!?)\"'\u201d\u2019"  # sentence punctuation and curly closing quotes
# After a URL a colon is the sentence's too ("see https://x.example): …"); elsewhere it may be
# the token's own (":tada:", "tests/x.py::test_y:"), so it stays in the span.
_URL_TRAIL: Final = _TRAIL + ":"
_URL_START: Final = re.compile(r"[a-z][a-z0-9+.-]*://|www\.", re.IGNORECASE)
_BLOCK_START: Final = re.compile(r"(\d{1,9})([.)])|([-+=])")
_UTC_TIME: Final = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")  # format_utc's, kept on one line


class Md(str):
    """Markdown built by this module from escaped parts: printed into the comment as it is."""

    __slots__ = ()


def clean(value: object, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text on one line: no control or invisible characters (emoji kept whole)."""
    text = "" if value is None else str(value)
    kept = [" " if c in _WHITESPACE else c for i, c in enumerate(text) if _visible(text, i, c)]
    text = _OWN_COMMENT_OPENER.sub(_DEFUSED_OPENER, "".join(kept))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(value: object, limit: int = TEXT_LIMIT) -> Md:
    """Untrusted text verbatim in a code span (a fence longer than any backtick run inside)."""
    return Md(_span(clean(value, limit)))


def prose(value: object, limit: int = TEXT_LIMIT, *, line_start: bool = True) -> Md:
    """Untrusted text as markdown prose: plain words as they are, anything live in code spans."""
    # With line_start, a leading "1." / "-" / "+" / "=" is escaped: it could start a block.
    tokens = clean(value, limit).split()
    pieces: list[str] = []
    run: list[str] = []
    for token in tokens:
        if not _needs_code(token):
            pieces.extend(_flush(run))
            pieces.append(token)
            continue
        lead, core, trail = _split_punctuation(token)
        if lead or trail:
            pieces.extend(_flush(run))
            pieces.append(lead + _span(core) + trail)
        else:
            run.append(core)
    pieces.extend(_flush(run))
    text = _UTC_TIME.sub(lambda m: _unbreakable(m.group(0)), " ".join(pieces))
    match = _BLOCK_START.match(text) if line_start else None
    if match is not None:  # a list item, heading underline or break if it began a line
        cut = match.start(2) if match.group(2) else 0
        text = text[:cut] + "\\" + text[cut:]
    return Md(text)


def md(value: object, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text escaped for a markdown table cell (entities, backslashes; not the comment)."""
    # The comment uses code spans (code, prose); a table cell cannot hold a "|" in one, so
    # the triage view's tables keep this older, entity-escaping form.
    return clean(value, limit).translate(_MD_ESCAPES)


def cell_code(value: object, limit: int = TEXT_LIMIT) -> Md:
    """Untrusted text verbatim in a code span inside a GFM table cell: a `|` is written `\\|`,
    which the table parser turns back into `|` before the span is read; nothing else changes
    (a code span shows backslashes as they are, so md()'s escapes do not belong in one)."""
    return Md(code(value, limit).replace("|", "\\|"))


def quoted(value: object, limit: int = QUOTE_LIMIT) -> Md:
    """Source text as said: “prose” in quotes, or one bare code span when it is one token."""
    text = prose(value, limit, line_start=False)
    if text.startswith("`") and text.endswith("`") and text.count(" ") == 0:
        return text
    return Md(f"“{text}”") if text else text


def safe_url(value: object) -> Md | None:
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
    return Md(quote(text, safe=_URL_SAFE))


def utc(value: datetime) -> Md:
    """An absolute UTC time that never wraps inside: "2026-10-05 09:12 UTC", non-breaking."""
    return Md(_unbreakable(format_utc(value)))


def short_sha(value: object) -> str:
    """Return the first seven hex digits of a commit sha."""
    return "".join(c for c in str(value)[:7] if c in "0123456789abcdefABCDEF")


def iso_utc(value: datetime | None) -> str | None:
    """Format a time as "2026-10-05T09:12:00Z", or None."""
    return None if value is None else as_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def _unbreakable(text: str) -> str:
    return text.replace(" ", NBSP).replace("-", NB_HYPHEN)


def _visible(text: str, index: int, char: str) -> bool:
    category = unicodedata.category(char)
    if char in _WHITESPACE:
        return True
    if category in ("Cc", "Cs", "Co"):
        return False
    if category != "Cf":
        return True
    before = text[index - 1] if index else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if char == ZWJ:  # inside an emoji sequence only (woman + laptop, flag + rainbow, ...)
        return bool(before and after) and (
            unicodedata.category(before) in ("So", "Sk", "Mn")
            and unicodedata.category(after) == "So"
        )
    if "\U000e0020" <= char <= "\U000e007f":  # tag characters of a subdivision flag 🏴…
        return before == "\U0001f3f4" or "\U000e0020" <= before <= "\U000e007f"
    return False


def _span(text: str) -> str:
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = (
        text[:1] == "`"
        or text[-1:] == "`"
        or (text[:1] == " " and text[-1:] == " " and bool(text.strip(" ")))
    )
    inner = f" {text} " if pad else text or " "
    return f"{fence}{inner}{fence}"


def _needs_code(token: str) -> bool:
    return not _CODE_CHARS.isdisjoint(token) or _CODE_PATTERN.search(token) is not None


def _split_punctuation(token: str) -> tuple[str, str, str]:
    core = token.lstrip(_LEAD)
    lead = token[: len(token) - len(core)]
    stripped = core.rstrip(_URL_TRAIL if _URL_START.match(core) else _TRAIL)
    while stripped.count("(") > stripped.count(")") and core[len(stripped) :].startswith(")"):
        stripped += ")"  # a closing parenthesis that belongs to the token stays with it
    trail = core[len(stripped) :]
    if not stripped or not _needs_code(stripped):
        return "", token, ""
    return lead, stripped, trail


def _flush(run: list[str]) -> list[str]:
    if not run:
        return []
    span = _span(" ".join(run))
    run.clear()
    return [span]
