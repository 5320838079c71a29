"""The comment's hidden stamp: what it carries, read back exactly; anything else is ignored."""

from __future__ import annotations

import base64
import json
import os
import zlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.facts import facts_key
from bot.core.model import (
    MARKER,
    Annotation,
    Attempt,
    KeptRead,
    Kind,
    MergeBaseOf,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
)
from bot.render.comment import COMMENT_LIMIT, Renderer
from bot.render.stamp import (
    MAX_DATA,
    Stamp,
    carried_line,
    carried_of,
    generation_of,
    parse_carried,
    parse_stamp,
    seen_key,
    stamp_line,
    stamp_of,
)
from tests.unit.render.test_comment import visible

AT = datetime(2026, 10, 5, 14, 3, 7, 123456, tzinfo=UTC)
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"


def _report() -> Report:
    queued = Signal("integration `-->` <b>", Kind.CHECK_RUN, "queued", app="github-actions")
    done = Signal("unit", Kind.CHECK_RUN, "success", completed_at=AT - timedelta(hours=1))
    rows = (
        Row(queued, State.PENDING, AT - timedelta(minutes=5), SinceSource.FIRST_SEEN),
        Row(done, State.SUCCESS, done.completed_at, SinceSource.GITHUB),
    )
    return Report("o/r", 1, "t", "https://github.com/o/r/pull/1", SHA, False, AT,
                  Verdict.PENDING, rows, first_seen=((queued.key, rows[0].since),))  # fmt: skip


def _body(line: str) -> str:
    return f"{MARKER}\n{line}\n### ✅ Passing\n"


def _line(data: Any, version: int = 2) -> str:
    raw = json.dumps(data).encode()
    encoded = base64.urlsafe_b64encode(raw).decode().rstrip("=")  # as the bot writes it
    return f"<!-- ci-status-bot:stamp v{version} {encoded} -->"


def test_the_rendered_comment_carries_the_stamp_and_it_reads_back_exactly() -> None:
    report = _report()
    body = Renderer().markdown(report, generation=7)
    assert body.split("\n")[0] == MARKER
    stamp = parse_stamp(body)
    assert stamp is not None
    assert stamp.facts_key == facts_key(report)
    assert stamp.observed_at == AT  # to the microsecond: the facts key hashes these times
    assert stamp.head_sha == SHA and stamp.generation == 7
    queued = report.rows[0].signal
    assert stamp.seen(SHA, queued.key) == AT - timedelta(minutes=5)
    assert stamp.seen("f" * 40, queued.key) is None  # another head: not this head's times
    assert stamp.seen(SHA, report.rows[1].signal.key) is None  # GitHub gave its time
    assert generation_of(body) == 7
    assert "-->" not in body.split("\n")[1][:-3]  # untrusted names never reach the HTML comment
    assert "integration" not in body.split("\n")[1]


def test_a_v1_stamp_is_read_facts_and_time_only() -> None:
    key = "ab" * 32
    stamp = parse_stamp(
        _body(f"<!-- ci-status-bot:facts={key} observed=2026-10-05T14:03:07.123456Z -->")
    )
    assert stamp == Stamp(key, AT)
    assert (
        generation_of(
            _body(f"<!-- ci-status-bot:facts={key} observed=2026-10-05T14:03:07.123456Z -->")
        )
        == 0
    )


GOOD: dict[str, Any] = {"k": "ab" * 32, "o": 1_790_000_000_000_000, "h": SHA, "s": {}, "g": 0}


@pytest.mark.parametrize(
    "line",
    [
        "",
        "<!-- ci-status-bot:stamp v2 -->",
        "<!-- ci-status-bot:stamp v2 !!!! -->",
        "<!-- ci-status-bot:stamp v2 e30 -->",  # {}
        _line([1, 2, 3]),
        _line("text"),
        _line({**GOOD, "k": "AB" * 32}),
        _line({**GOOD, "k": "ab" * 31}),
        _line({**GOOD, "o": "2026-10-05"}),
        _line({**GOOD, "o": 1.5}),
        _line({**GOOD, "o": True}),
        _line({**GOOD, "o": -1}),
        _line({**GOOD, "o": 10**30}),
        _line({**GOOD, "h": "not a sha"}),
        _line({**GOOD, "s": []}),
        _line({**GOOD, "s": {"x": 1_790_000_000_000_000}}),
        _line({**GOOD, "s": {"0123456789abcdef": "soon"}}),
        _line({**GOOD, "s": {f"{i:016x}": 1_790_000_000_000_000 for i in range(1001)}}),
        _line({**GOOD, "g": -1}),
        _line({**GOOD, "g": 2**64}),
        _line({**GOOD, "g": "1"}),
        _line({**GOOD, "g": False}),
        _line({**GOOD, "b": ["main"]}),
        _line({**GOOD, "b": ["main", "not a sha"]}),
        _line({**GOOD, "b": ["", "ab" * 20]}),
        _line({**GOOD, "b": ["x" * 256, "ab" * 20]}),
        _line({**GOOD, "b": "main"}),
        _line(GOOD, version=3),
        _line(GOOD, version=1),
        "<!-- ci-status-bot:stamp v2 " + "A" * (MAX_DATA + 100) + " -->",
        "<!-- ci-status-bot:facts=" + "ab" * 32 + " observed=2026-13-05T14:03:07.123456Z -->",
        "<!-- ci-status-bot:facts=" + "ab" * 32 + " observed=0000-01-01T00:00:00.000000Z -->",
        "<!-- ci-status-bot:stamp v2 " + base64.urlsafe_b64encode(b"\xff\xfe").decode() + " -->",
        "<!-- ci-status-bot:stamp v2 "
        + base64.urlsafe_b64encode(b"[" * 100_000).decode()[:MAX_DATA]
        + " -->",
        # ASCII digits only; a string that cannot be written as UTF-8 (a lone surrogate)
        "<!-- ci-status-bot:facts="
        + "ab" * 32
        + " observed=\uff12\uff10\uff12\uff16-10-05T14:03:07.123456Z -->",
        _line({**GOOD, "b": ["\ud800", "ab" * 20]}),
        _line({**GOOD, "s": {"0123456789abcdef": 1_790_000_000_000_000}, "x": [[[[[[[[[]]]]]]]]]}),
    ],
)
def test_a_stamp_the_bot_cannot_read_is_ignored_as_a_whole(line: str) -> None:
    assert parse_stamp(_body(line)) is None
    assert generation_of(_body(line)) is None


def test_a_good_stamp_line_built_by_hand_is_read() -> None:
    stamp = parse_stamp(_body(_line({**GOOD, "s": {"0123456789abcdef": 1_790_000_000_000_001}})))
    assert stamp is not None and stamp.first_seen["0123456789abcdef"].microsecond == 1


def test_the_stamp_must_be_the_second_line() -> None:
    line = stamp_line(stamp_of(_report()))
    assert parse_stamp(f"{MARKER}\n\n{line}\n") is None
    assert parse_stamp(line) is None


def test_the_hidden_lines_are_read_right_after_the_marker_only() -> None:
    """A stamp and a carried line are read at their places (lines 2 and 3, the marker the
    first): one quoted in any other text (another workflow's comment that quotes a pull
    request's description) is never read (adversarial finding 1)."""
    body = Renderer().markdown(_failing_report())
    assert parse_stamp(body) is not None and parse_carried(body) is not None
    quoted = "**PR summary** by the welcome workflow:\n" + "\n".join(body.split("\n")[1:])
    assert parse_stamp(quoted) is None and parse_carried(quoted) is None
    assert generation_of(quoted) is None
    moved = f"{MARKER} and more\n" + "\n".join(body.split("\n")[1:])
    assert parse_stamp(moved) is None and parse_carried(moved) is None
    indented = " " + body
    assert parse_stamp(indented) is None and parse_carried(indented) is None


@given(st.text(max_size=300))
def test_any_second_line_is_read_or_ignored_never_raises(text: str) -> None:
    stamp = parse_stamp(_body(text))
    assert stamp is None or len(stamp.facts_key) == 64


@given(st.binary(max_size=300))
def test_any_base64_payload_is_read_or_ignored_never_raises(raw: bytes) -> None:
    line = f"<!-- ci-status-bot:stamp v2 {base64.urlsafe_b64encode(raw).decode().rstrip('=')} -->"
    parse_stamp(_body(line))


@given(
    st.datetimes(
        min_value=datetime(2001, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
    ),
    st.dictionaries(
        st.text(max_size=40),
        st.datetimes(
            min_value=datetime(2001, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
        ),
        max_size=20,
    ),
    st.integers(min_value=0, max_value=2**63 - 1),
)
def test_a_stamp_round_trips(
    observed: datetime, seen: dict[str, datetime], generation: int
) -> None:
    stamp = Stamp("cd" * 32, observed, SHA, {seen_key(k): v for k, v in seen.items()}, generation)
    assert parse_stamp(_body(stamp_line(stamp))) == stamp


def test_the_merge_base_is_stamped_for_its_head_and_base_branch_only() -> None:
    report = replace(_report(), merge_base=MergeBaseOf("main", "b" * 40))
    stamp = parse_stamp(_body(stamp_line(stamp_of(report))))
    assert stamp is not None and stamp.merge_base == MergeBaseOf("main", "b" * 40)
    assert stamp.merge_base_of(SHA, "main") == MergeBaseOf("main", "b" * 40)
    assert stamp.merge_base_of(SHA, "develop") is None  # retargeted: asked again
    assert stamp.merge_base_of("f" * 40, "main") is None  # another head
    # a report without one stamps exactly what it stamped before (no "b")
    assert (
        '"b"'
        not in base64.urlsafe_b64decode(stamp_line(stamp_of(_report())).split()[3] + "==").decode()
    )


def _with_b(b: Any) -> str:
    """A good stamp line whose merge base (`b`) is `b`."""
    line = stamp_line(stamp_of(_report()))
    data = json.loads(base64.urlsafe_b64decode(line.split()[3] + "==").decode())
    raw = base64.urlsafe_b64encode(json.dumps({**data, "b": b}).encode()).decode().rstrip("=")
    return f"<!-- ci-status-bot:stamp v2 {raw} -->"


def test_the_merge_base_carries_the_tip_it_was_asked_with_and_when() -> None:
    """A merge base is a fact of the base branch's commit: the stamp names it and when it was
    asked; an older bot's stamp (branch and merge base only) reads with neither known."""
    found = MergeBaseOf("main", "b" * 40, "c" * 40, AT)
    line = stamp_line(stamp_of(replace(_report(), merge_base=found)))
    stamp = parse_stamp(_body(line))
    assert stamp is not None and stamp.merge_base_of(SHA, "main") == found
    assert json.loads(base64.urlsafe_b64decode(line.split()[3] + "==").decode())["b"] == [
        "main", "b" * 40, "c" * 40, 1_791_208_987_123_456,
    ]  # fmt: skip
    older = parse_stamp(_body(_with_b(["main", "b" * 40])))
    assert older is not None and older.merge_base == MergeBaseOf("main", "b" * 40, None, None)
    unknown = parse_stamp(_body(_with_b(["main", "b" * 40, None, None])))
    assert unknown is not None and unknown.merge_base == older.merge_base
    for bad in (
        ["main", "b" * 40, "c" * 40],  # three: not a form the bot writes
        ["main", "b" * 40, "c" * 39, None],
        ["main", "b" * 40, None, "soon"],
        ["main", "b" * 40, None, 10**30],
        ["main", "b" * 40, "c" * 40, 1.5],
        ["", "b" * 40, None, None],
        "main",
    ):
        assert parse_stamp(_body(_with_b(bad))) is None, bad


def test_the_epoch_round_trips_and_a_malformed_one_is_ignored() -> None:
    from bot.render.stamp import generation_of

    stamp = stamp_of(_report(), generation=3, epoch="0123456789abcdef")
    line = stamp_line(stamp)
    parsed = parse_stamp(_body(line))
    assert parsed == stamp and parsed.epoch == "0123456789abcdef"
    assert generation_of(_body(line), epoch="0123456789abcdef") == 3
    assert generation_of(_body(line), epoch="fedcba9876543210") is None  # another state's
    assert generation_of(_body(line), epoch="") is None
    for bad in ("x" * 16, "ab", "0" * 65, 7, None, ["0123456789abcdef"]):
        data = json.loads(base64.urlsafe_b64decode(line.split()[3] + "==").decode())
        data["e"] = bad
        raw = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
        assert parse_stamp(_body(f"<!-- ci-status-bot:stamp v2 {raw} -->")) is None


# -- the carried line (issue 31): what never changes for the head ---------------------------

RUN = 9_000_001


def _failing_report(*, message: str = "assert 1 == 2", reads: int = 1) -> Report:
    failed = Signal(
        "tests", Kind.CHECK_RUN, "failure", completed_at=AT,
        node_id="CR_1", database_id=RUN,
    )  # fmt: skip
    quoted = (Annotation("tests/test_a.py", 3, 3, message),)
    rows = (Row(failed, State.FAILURE, AT, SinceSource.GITHUB, annotations=quoted),)
    kept = tuple(
        KeptRead("rtd", f"org/proj{i}/{SHA}", json.dumps({"n": i, "x": "y" * (i * 50)}), AT)
        for i in range(reads)
    )
    return Report("o/r", 1, "t", "https://github.com/o/r/pull/1", SHA, False, AT,
                  Verdict.FAILING, rows, kept_reads=kept)  # fmt: skip


def test_the_carried_line_follows_the_stamp_and_reads_back_exactly() -> None:
    report = _failing_report(reads=2)
    body = Renderer().markdown(report)
    lines = body.split("\n")
    assert lines[0] == MARKER and lines[2].startswith("<!-- ci-status-bot:carried v1 ")
    assert parse_stamp(body) == stamp_of(report)  # the stamp as it was
    carried = parse_carried(body)
    assert carried is not None and carried == carried_of(report)
    assert carried.annotations == {RUN: report.rows[0].annotations}
    assert carried.reads == report.kept_reads and carried.of(SHA) is carried
    assert carried.of("f" * 40) is None  # another head's: nothing of it is taken
    assert "assert" not in lines[2] and "-->" not in lines[2][:-3]  # untrusted text packed
    assert parse_carried(Renderer().markdown(_report())) is None  # nothing to carry: no line


def test_past_its_bound_provider_records_go_first_the_largest_first_then_annotations() -> None:
    big = _failing_report(reads=6)
    carried = carried_of(big)
    full = carried_line(carried)
    room = len(full) - 1  # one character short: the largest record goes
    kept = parse_carried(f"{MARKER}\nstamp\n{carried_line(carried, room=room)}")
    assert kept is not None and kept.annotations == carried.annotations
    assert {r.key for r in kept.reads} < {r.key for r in carried.reads}
    assert max(carried.reads, key=lambda r: len(r.payload)) not in kept.reads
    only_runs = carried_line(replace(carried, reads=()))
    line = carried_line(carried, room=len(only_runs))
    read_back = parse_carried(f"{MARKER}\nstamp\n{line}")
    assert read_back is not None and read_back.reads == () and read_back.annotations
    assert carried_line(carried, room=10) == ""  # nothing fits: no line at all
    noisy = _failing_report(message=os.urandom(40_000).hex(), reads=0)  # will not compress
    assert carried_line(carried_of(noisy)) == ""
    assert len(Renderer().markdown(noisy).split("\n")[2]) < 200  # the rows stay, no line


def test_the_carried_line_never_takes_a_rows_room() -> None:
    report = _failing_report(reads=3)
    rows = report.rows * 1  # one failing row; the body is short: the line fits
    body = Renderer().markdown(replace(report, rows=rows))
    assert len(body) <= COMMENT_LIMIT and parse_carried(body) is not None
    many = tuple(
        r._replace(signal=r.signal._replace(name=f"tests-{i:04}-{'x' * 120}", database_id=i + 1))
        for i in range(900)
        for r in report.rows
    )
    full = Renderer().markdown(replace(report, rows=many))
    assert len(full) <= COMMENT_LIMIT
    without = Renderer().markdown(replace(report, rows=many, kept_reads=()))
    hidden = [ln for ln in full.split("\n") if ln.startswith("<!-- ci-status-bot:carried")]
    assert visible(full) == visible(without)  # the same rows shown, the line or not
    assert not hidden or len(full) <= COMMENT_LIMIT


def _carried_body(data: Any, version: int = 1, *, raw: bytes | None = None) -> str:
    packed = zlib.compress(raw if raw is not None else json.dumps(data).encode())
    encoded = base64.urlsafe_b64encode(packed).decode().rstrip("=")
    return f"{MARKER}\n<!-- stamp -->\n<!-- ci-status-bot:carried v{version} {encoded} -->\n"


CARRIED: dict[str, Any] = {"h": SHA, "a": {str(RUN): [["p", 1, 2, "m"]]}, "r": []}


@pytest.mark.parametrize(
    "body",
    [
        _carried_body(CARRIED, version=0),  # an older version: read again
        _carried_body(CARRIED, version=2),
        _carried_body({**CARRIED, "h": "f" * 39}),
        _carried_body({**CARRIED, "a": {"-1": []}}),
        _carried_body({**CARRIED, "a": {"0": []}}),
        _carried_body({**CARRIED, "a": {"x": []}}),
        _carried_body({**CARRIED, "a": {str(RUN): [["p", "1", 2, "m"]]}}),
        _carried_body({**CARRIED, "a": {str(RUN): [["p", 1, 2]]}}),
        _carried_body({**CARRIED, "a": []}),
        _carried_body({**CARRIED, "r": [["rtd", "k", "p", "2026"]]}),
        _carried_body({**CARRIED, "r": [["RTD", "k", "p", 1_790_000_000_000_000]]}),
        _carried_body({**CARRIED, "r": [["rtd", "", "p", 1_790_000_000_000_000]]}),
        _carried_body({**CARRIED, "r": [["rtd", "k" * 1001, "p", 1_790_000_000_000_000]]}),
        _carried_body({**CARRIED, "r": [["rtd", "k", 3, 1_790_000_000_000_000]]}),
        _carried_body({**CARRIED, "r": {}}),
        _carried_body({**CARRIED, "t": []}),  # earlier attempts: by run id
        _carried_body({**CARRIED, "t": {"0": []}}),
        _carried_body({**CARRIED, "t": {str(RUN): [["bogus", None, None]]}}),  # no such state
        _carried_body({**CARRIED, "t": {str(RUN): [[["success"], None, None]]}}),
        _carried_body({**CARRIED, "t": {str(RUN): [["success", 12, None]]}}),  # before 2000
        _carried_body({**CARRIED, "t": {str(RUN): [["success", "2026", None]]}}),
        _carried_body({**CARRIED, "t": {str(RUN): [["success", None, 7]]}}),
        _carried_body({**CARRIED, "t": {str(RUN): [["success", None]]}}),
        _carried_body({**CARRIED, "t": {str(RUN): {}}}),
        _carried_body([]),
        _carried_body(None, raw=b"\xff\xfe"),
        _carried_body(None, raw=b"[" * 100_000),  # deep nesting
        _carried_body(None, raw=b" " * 500_000 + b"{}"),  # inflates past its bound: a bomb
        f"{MARKER}\n<!-- stamp -->\n<!-- ci-status-bot:carried v1 !!!! -->\n",
        f"{MARKER}\n<!-- stamp -->\n<!-- ci-status-bot:carried v1 {'A' * 24_000} -->\n",
        f"{MARKER}\n<!-- ci-status-bot:carried v1 eJyrrgUAAXUA-Q -->\n",  # not the third line
        # run ids of ASCII digits only (a Unicode digit passes str.isdigit, not int)
        _carried_body({**CARRIED, "a": {"\u00b2": []}}),
        _carried_body({**CARRIED, "a": {"\u0661\u0662": []}}),
        _carried_body({**CARRIED, "a": {"\uff11": []}}),
        _carried_body({**CARRIED, "t": {"\u2460": []}}),
        # strings that cannot be written as UTF-8 (a lone surrogate, escaped in the JSON)
        _carried_body({**CARRIED, "a": {str(RUN): [["p", 1, 2, "bad \ud800 text"]]}}),
        _carried_body({**CARRIED, "a": {str(RUN): [["\udfff", 1, 2, "m"]]}}),
        _carried_body({**CARRIED, "t": {str(RUN): [["success", None, "\ud800"]]}}),
        _carried_body({**CARRIED, "r": [["rtd", "k\ud800", "p", 1_790_000_000_000_000]]}),
        _carried_body({**CARRIED, "r": [["rtd", "k", "\ud800", 1_790_000_000_000_000]]}),
        # deeper than any line the bot writes, though json.loads would take it
        _carried_body({**CARRIED, "x": [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}),
    ],
)
def test_a_carried_line_it_cannot_read_is_ignored_as_a_whole(body: str) -> None:
    assert parse_carried(body) is None  # never an exception, never a part


def test_a_good_carried_line_reads_back() -> None:
    carried = parse_carried(_carried_body(CARRIED))
    assert carried is not None
    assert carried.annotations == {RUN: (Annotation("p", 1, 2, "m"),)} and carried.reads == ()


def test_earlier_attempts_are_carried_by_run_and_read_back_exactly() -> None:
    earlier = (Attempt(State.SUCCESS, AT - timedelta(hours=2), "https://x/1"),)
    report = replace(_failing_report(reads=0), kept_attempts=((RUN, earlier), (RUN + 1, ())))
    carried = parse_carried(Renderer().markdown(report))
    assert carried is not None and carried == carried_of(report)
    assert carried.attempts == {RUN: earlier, RUN + 1: ()}  # () read: none earlier
    no_time = replace(report, kept_attempts=((RUN, (Attempt(State.FAILURE, None, None),)),))
    back = parse_carried(Renderer().markdown(no_time))
    assert back is not None and back.attempts == {RUN: (Attempt(State.FAILURE, None, None),)}
    plain = _failing_report(reads=0)  # none kept: the line is as an earlier bot wrote it
    assert '"t"' not in zlib.decompress(_packed(carried_line(carried_of(plain)))).decode()


def _packed(line: str) -> bytes:
    data = line.split(" ")[3]
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def test_past_its_bound_earlier_attempts_go_last_the_largest_first() -> None:
    many = tuple(
        Attempt(State.FAILURE, AT - timedelta(minutes=i), f"https://x/{os.urandom(8).hex()}")
        for i in range(5)
    )
    kept = ((RUN, many), (RUN + 1, many[:1]))
    carried = carried_of(replace(_failing_report(reads=3), kept_attempts=kept))
    no_reads = carried_line(replace(carried, reads=()))
    read = parse_carried(f"{MARKER}\nstamp\n{carried_line(carried, room=len(no_reads))}")
    assert read is not None and read.reads == () and read.annotations  # records went first
    assert read.attempts == carried.attempts
    only = carried_line(replace(carried, reads=(), annotations={}))
    read = parse_carried(f"{MARKER}\nstamp\n{carried_line(carried, room=len(only))}")
    assert read is not None and not read.annotations and read.attempts == carried.attempts
    smaller = carried_line(replace(carried, reads=(), annotations={}, attempts={RUN + 1: many[:1]}))
    read = parse_carried(f"{MARKER}\nstamp\n{carried_line(carried, room=len(smaller))}")
    assert read is not None and read.attempts == {RUN + 1: many[:1]}  # the largest went first


def test_a_good_carried_line_with_attempts_reads_back() -> None:
    line = {
        **CARRIED,
        "t": {str(RUN): [["success", 1_790_000_000_000_000, "u"], ["failure", None, None]]},
    }
    carried = parse_carried(_carried_body(line))
    assert carried is not None
    assert carried.attempts == {
        RUN: (
            Attempt(State.SUCCESS, datetime.fromtimestamp(1_790_000_000, UTC), "u"),
            Attempt(State.FAILURE, None, None),
        )
    }
