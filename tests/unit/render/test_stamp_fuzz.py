"""The stamp and the carried line under mutation (hypothesis): lines that decode (base64, zlib,
JSON) but hold anything at all in any field are read or ignored as a whole, never an
exception, and what is read holds only what the bot itself would write (run ids of ASCII
digits in range, strings that can be written as UTF-8)."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.model import MARKER, MergeBaseOf
from bot.render.stamp import Carried, Stamp, parse_carried, parse_stamp

HEAD: Final = "ab" * 20
AT: Final = 1_790_000_000_000_000  # microseconds since the epoch (2026)
# What a mutation puts in place of a value or a key: each of these once got past the decoding
# and raised further on (a Unicode digit passes str.isdigit but not int, a lone surrogate
# cannot be written as UTF-8, JSON nested past json's limit, a float int() overflows on).
ODD: Final = (
    "\u00b2", "\u0661\u0662", "\u2460", "\uff11", "-1", "0", "9" * 19, "9" * 30, "", " 1",
    "1e3", "\ud800", "[" * 1000, "[" * 600 + "]" * 600, "[" * 5000 + "]" * 5000, "x" * 2000,
    None, True, 1.5, 1e400, -1, 2**70, [], {}, [[]],
)  # fmt: skip
ODD_KEYS: Final = tuple(k for k in ODD if isinstance(k, str))

RTD_PAYLOAD: Final = json.dumps({
    "host": "org", "project": "p", "commit": HEAD, "read_at": "2026-01-01T00:00:00+00:00",
    "builds": [{"id": 1, "project": "p", "commit": HEAD, "state": "finished", "success": True,
                "version": "1", "created": None, "finished": None, "duration": 1, "url": None}],
    "notes": {}, "missing": [],
})  # fmt: skip
CODECOV_PAYLOAD: Final = json.dumps(
    {"commit": HEAD, "state": "complete", "uploads": [], "count": 0}
)
AZURE_PAYLOAD: Final = json.dumps({
    "id": 5, "status": "completed", "result": "succeeded", "sourceVersion": HEAD,
    "triggerInfo": {"pr.sourceSha": HEAD}, "buildNumber": "1", "startTime": None,
    "finishTime": None, "_links": {"web": {"href": "https://dev.azure.com/o/p/_build?buildId=5"}},
})  # fmt: skip
CARRIED: Final[dict[str, Any]] = {
    "h": HEAD,
    "a": {"123": [["x.py", 1, 2, "msg"]]},
    "r": [
        ["readthedocs", json.dumps(["org", "p", HEAD]), RTD_PAYLOAD, AT],
        ["codecov", f"github/o/r@{HEAD}", CODECOV_PAYLOAD, AT],
        ["azure-pipelines", "o/p#5", AZURE_PAYLOAD, AT],
    ],
    "t": {"123": [["failure", AT, "https://x"]]},
}
STAMP: Final[dict[str, Any]] = {
    "k": "a" * 64, "o": AT, "h": HEAD, "s": {"0123456789abcdef": AT}, "g": 0,
    "b": ["main", "cd" * 20, "ef" * 20, AT], "c": "b" * 64, "e": "0123456789abcdef",
}  # fmt: skip


def mutated(value: Any) -> st.SearchStrategy[Any]:
    """`value` with parts of it (about one in ten) replaced by an odd value, keys by an odd
    key, and any JSON text it holds (a provider's payload, a record's key) mutated the same
    way."""
    odd = st.one_of(st.sampled_from(ODD), st.text(max_size=6), st.integers(), st.floats())
    inner: st.SearchStrategy[Any]
    if isinstance(value, dict):
        keys = [st.one_of(*[st.just(k)] * 9, st.sampled_from(ODD_KEYS)) for k in value]
        pairs = [st.tuples(k, mutated(v)) for k, v in zip(keys, value.values(), strict=True)]
        inner = st.tuples(*pairs).map(dict)
    elif isinstance(value, list):
        inner = st.tuples(*(mutated(v) for v in value)).map(list)
    elif isinstance(value, str) and value[:1] in ("[", "{"):
        inner = st.one_of(st.just(value), mutated(json.loads(value)).map(json.dumps))
    else:
        inner = st.just(value)
    return st.one_of(*[inner] * 9, odd)


def variants(value: Any) -> Iterator[Any]:
    """`value` with exactly one part of it replaced by each odd value in turn: itself, a
    value inside it, a key, or a part of the JSON text it holds."""
    yield from ODD
    if isinstance(value, dict):
        for key, item in value.items():
            for odd_key in ODD_KEYS:
                yield {(odd_key if k == key else k): v for k, v in value.items()}
            for changed in variants(item):
                yield {**value, key: changed}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for changed in variants(item):
                yield [*value[:index], changed, *value[index + 1 :]]
    elif isinstance(value, str) and value[:1] in ("[", "{"):
        yield from map(json.dumps, variants(json.loads(value)))


def _encoded(value: Any) -> str:
    return base64.urlsafe_b64encode(value).decode().rstrip("=")


def stamp_text(value: Any) -> str:
    """A stamp line holding `value` as its JSON (escapes for what ASCII cannot hold)."""
    return f"<!-- ci-status-bot:stamp v2 {_encoded(json.dumps(value).encode())} -->"


def carried_text(value: Any, *, escaped: bool = True) -> str:
    """A carried line holding `value`; not `escaped`: its JSON's raw UTF-8, lone surrogates
    passed through as bytes (a line that no longer decodes as UTF-8)."""
    text = json.dumps(value, ensure_ascii=escaped)
    packed = zlib.compress(text.encode("utf-8", "surrogatepass"), 9)
    return f"<!-- ci-status-bot:carried v1 {_encoded(packed)} -->"


@st.composite
def bodies(draw: st.DrawFn) -> str:
    """A comment body with a mutated stamp and a mutated carried line at their places."""
    stamp = stamp_text(draw(mutated(STAMP)))
    carried = carried_text(draw(mutated(CARRIED)), escaped=draw(st.booleans()))
    return f"{MARKER}\n{stamp}\n{carried}\n### ✅ Passing\n"


def writable(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (to a comment, to the state)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def texts_of(merge_base: MergeBaseOf) -> list[str]:
    """The texts a stamp's merge base holds (its branch, commit and, where known, tip)."""
    return [t for t in (merge_base.branch, merge_base.commit, merge_base.tip) if t is not None]


def well_formed(carried: Carried) -> bool:
    """Whether a carried line read holds only what the bot writes."""
    runs = [*carried.annotations, *carried.attempts]
    texts = [s for found in carried.annotations.values() for a in found for s in (a.path,
             a.message)]  # fmt: skip
    texts += [a.url for found in carried.attempts.values() for a in found if a.url is not None]
    texts += [s for r in carried.reads for s in (r.source, r.key, r.payload)]
    return all(type(r) is int and 0 < r < 2**63 for r in runs) and all(map(writable, texts))


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(bodies())
def test_a_mutated_stamp_or_carried_line_is_read_or_ignored_never_raises(body: str) -> None:
    stamp = parse_stamp(body)
    assert stamp is None or isinstance(stamp, Stamp)
    if stamp is not None and stamp.merge_base is not None:
        assert all(map(writable, texts_of(stamp.merge_base)))
    carried = parse_carried(body)
    assert carried is None or well_formed(carried)


def _body(stamp: Any, carried: Any, *, escaped: bool = True) -> str:
    return f"{MARKER}\n{stamp_text(stamp)}\n{carried_text(carried, escaped=escaped)}\n### x\n"


def test_every_one_point_change_of_a_good_line_is_read_or_ignored_never_raises() -> None:
    """Exhaustive where hypothesis samples: each odd value at each place of each line."""
    assert parse_carried(_body(STAMP, CARRIED)) is not None  # the lines changed are good
    assert parse_stamp(_body(STAMP, CARRIED)) is not None
    for carried in variants(CARRIED):
        for escaped in (True, False):
            found = parse_carried(_body(STAMP, carried, escaped=escaped))
            assert found is None or well_formed(found), carried
    for stamp in variants(STAMP):
        read = parse_stamp(_body(stamp, CARRIED))
        assert (
            read is None or read.merge_base is None or all(map(writable, texts_of(read.merge_base)))
        )
