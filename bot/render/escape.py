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
BRAILLE_BLANK: Final = "\u2800"  # shows as a blank of a letter's width: kept, but it is blank
# Default_Ignorable_Code_Point (Unicode 14.0, Python's unicodedata: DerivedCoreProperties.txt,
# https://www.unicode.org/Public/14.0.0/ucd/DerivedCoreProperties.txt): invisible by
# definition (format characters, Hangul fillers, the combining grapheme joiner, variation
# selectors, tags). Dropped, except where they belong to a sequence that shows something
# (_visible: an emoji ZWJ sequence, VS16, a flag's tags, a variation sequence).
_IGNORABLE_RANGES: Final = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
_DEFAULT_IGNORABLE: Final = frozenset(
    point for low, high in _IGNORABLE_RANGES for point in range(low, high + 1)
)
# Emoji-capable characters outside the symbol categories: ‼ ⁉ 〰 〽, and keycap bases.
_EMOJI_BASES_NOT_SYMBOLS: Final = frozenset("\u203c\u2049\u3030\u303d")
_KEYCAP_BASES: Final = frozenset("#*0123456789")
# Where Unicode's variation sequences have bases (StandardizedVariants.txt, IVD): CJK
# ideographs; and, for VS1-VS14, beside symbols, the scripts that use them (Myanmar, Phags-pa,
# Manichaean) and the digit zero.
_IDEOGRAPHS: Final = (
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF),
)  # fmt: skip
_VARIATION_BASES: Final = (
    *_IDEOGRAPHS, (0x0030, 0x0030), (0x1000, 0x109F), (0xA840, 0xA877), (0xAA60, 0xAA7F),
    (0x10AC0, 0x10AFF),
)  # fmt: skip
_BLANK_NAMED: Final = 3  # code points named in "(blank: U+3164 …)"
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
    """Untrusted text on one line: no control or invisible characters (emoji kept whole),
    cut to `limit` characters at a grapheme boundary, the cut shown by "…"."""
    text = "" if value is None else str(value)
    kept = [" " if c in _WHITESPACE else c for i, c in enumerate(text) if _visible(text, i, c)]
    text = _OWN_COMMENT_OPENER.sub(_DEFUSED_OPENER, "".join(kept))
    return text if len(text) <= limit else text[: _grapheme_cut(text, limit - 1)] + "…"


def is_blank(value: object) -> bool:
    """Whether untrusted text shows nothing once cleaned: empty, or spaces and blanks only."""
    text = "" if value is None else str(value)
    return _shows_nothing(clean(text, len(text)))


def code(value: object, limit: int = TEXT_LIMIT) -> Md:
    """Untrusted text verbatim in a code span (a fence longer than any backtick run inside);
    text that shows nothing is said as such, "(empty)" or "(blank: U+3164)", never a span
    that looks empty."""
    text = clean(value, limit)
    if _shows_nothing(text):
        return Md(_blank_words(value))
    return Md(_span(text))


def _shows_nothing(cleaned: str) -> bool:
    return all(c.isspace() or c == BRAILLE_BLANK for c in cleaned)


def first_line(value: object) -> str:
    """The first line of untrusted text that shows something once cleaned ("" if none)."""
    text = "" if value is None else str(value)
    return next((line.strip() for line in text.splitlines() if not is_blank(line)), "")


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
    if char in _WHITESPACE:
        return True
    category = unicodedata.category(char)
    if category in ("Cc", "Cs", "Co"):
        return False
    point = ord(char)
    if point not in _DEFAULT_IGNORABLE:
        return category != "Cf"  # other format characters (U+0600 …) are dropped too
    # Default_Ignorable: nothing to see, unless it is part of a sequence that shows something
    before = text[index - 1] if index else ""
    if char == ZWJ:  # inside an emoji sequence only (woman + laptop, flag + rainbow, ...)
        after = text[index + 1] if index + 1 < len(text) else ""
        return bool(before and after) and (
            unicodedata.category(before) in ("So", "Sk", "Mn")
            and unicodedata.category(after) == "So"
        )
    if 0xE0020 <= point <= 0xE007F:  # tag characters of a subdivision flag 🏴…
        return before == "\U0001f3f4" or "\U000e0020" <= before <= "\U000e007f"
    if point in (0xFE0E, 0xFE0F):  # text or emoji presentation of an emoji-capable character
        if before in _KEYCAP_BASES:  # "#️⃣": only before the enclosing keycap
            return text[index + 1 : index + 2] == "\u20e3"
        return bool(before) and (
            unicodedata.category(before)[0] == "S" or before in _EMOJI_BASES_NOT_SYMBOLS
        )
    if 0xFE00 <= point <= 0xFE0D:  # standardized variation sequences: symbols, some scripts
        return bool(before) and (
            unicodedata.category(before)[0] == "S" or _in(before, _VARIATION_BASES)
        )
    if 0xE0100 <= point <= 0xE01EF:  # ideographic variation sequences
        return bool(before) and _in(before, _IDEOGRAPHS)
    if point in (0x180B, 0x180C, 0x180D, 0x180F):  # Mongolian free variation selectors
        return bool(before) and 0x1820 <= ord(before) <= 0x18AA
    return False


def _in(char: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in ranges)


def _grapheme_cut(text: str, at: int) -> int:
    """The last grapheme boundary at or before `at` (Unicode's extended grapheme clusters, for
    what a name can hold: marks, joiners, selectors, skin tones, flags, tags, Hangul)."""
    cut = at
    while 0 < cut < len(text) and not _boundary(text, cut):
        cut -= 1
    return cut or at  # one cluster longer than the limit: cut inside it rather than drop it


def _boundary(text: str, index: int) -> bool:
    before, after = text[index - 1], text[index]
    if before == ZWJ or _extends(after):
        return False
    if _regional_indicator(before) and _regional_indicator(after):
        count = 0  # a flag is a pair: break only after an even number of indicators
        while index - count > 0 and _regional_indicator(text[index - count - 1]):
            count += 1
        return count % 2 == 0
    return not _hangul_joins(before, after)


def _extends(char: str) -> bool:
    point = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or point in _DEFAULT_IGNORABLE  # what survives of them: ZWJ, selectors, tags
        or 0x1F3FB <= point <= 0x1F3FF  # skin tones
    )


def _regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _hangul_joins(before: str, after: str) -> bool:
    """Unicode's GB6-GB8: conjoining jamo and precomposed syllables stay together."""
    first, second = _jamo(before), _jamo(after)
    if first == "L":
        return second in ("L", "V", "LV", "LVT")
    if first in ("LV", "V"):
        return second in ("V", "T")
    return first in ("LVT", "T") and second == "T"


def _jamo(char: str) -> str:
    point = ord(char)
    if 0x1100 <= point <= 0x115F or 0xA960 <= point <= 0xA97C:
        return "L"
    if 0x1160 <= point <= 0x11A7 or 0xD7B0 <= point <= 0xD7C6:
        return "V"
    if 0x11A8 <= point <= 0x11FF or 0xD7CB <= point <= 0xD7FB:
        return "T"
    if 0xAC00 <= point <= 0xD7A3:
        return "LV" if (point - 0xAC00) % 28 == 0 else "LVT"
    return ""


def _blank_words(value: object) -> str:
    """What a blank text is, in words: "(empty)", or its first code points "(blank: U+3164)"."""
    points = list(dict.fromkeys("" if value is None else str(value)))
    if not points:
        return "(empty)"
    named = " ".join(f"U+{ord(c):04X}" for c in points[:_BLANK_NAMED])
    return f"(blank: {named}{' …' if len(points) > _BLANK_NAMED else ''})"


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
