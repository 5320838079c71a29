"""The kept reports' payloads (bot.cycle.digests): one back as it was, anything else none."""

from __future__ import annotations

import zlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from bot.core.model import (
    Kind,
    Policy,
    PullSnapshot,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
)
from bot.cycle.digests import (
    Derived,
    _Kept,
    _Signals,
    decode,
    derive,
    encode,
    kept_rows,
    restored,
    version,
)
from bot.cycle.model import Built, FromSignals, Reports

NOW = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)
SIGNAL = Signal("lint", Kind.CHECK_RUN, "in_progress", started_at=NOW)
FAILED = Signal("test", Kind.CHECK_RUN, "failure", "actions", started_at=NOW, completed_at=NOW,
                database_id=7, node_id="CR_7")  # fmt: skip
STATUS = Signal("ci/x", Kind.STATUS, "failure", started_at=NOW, created_at=NOW)
FAILING = PullSnapshot("o/r", 6, "t", "bob", False, "c" * 40, "u",
                       signals=(SIGNAL, FAILED, STATUS))  # fmt: skip
SNAPSHOT = PullSnapshot("o/r", 5, "t", "alice", False, "a" * 40, "u", signals=(SIGNAL,))
REPORT = Report("o/r", 5, "t", "u", "a" * 40, False, NOW, Verdict.PENDING,
                rows=(Row(SIGNAL, State.PENDING, NOW, next(iter(SinceSource))),))  # fmt: skip
BUILT = Built(SNAPSHOT, {}, {"k": NOW}, Policy(), ("ci",), None, NOW,
              NOW + timedelta(hours=2), REPORT, "key")  # fmt: skip


def test_a_payload_comes_back_as_it_was_kept() -> None:
    payload = encode(BUILT, b"node")
    assert payload is not None
    node, kept = decode(payload) or (None, None)
    assert node == b"node" and kept is not None
    built = kept.built
    assert (built.snapshot, built.report, built.until, built.first_seen) == (
        SNAPSHOT, REPORT, BUILT.until, BUILT.first_seen,
    )  # fmt: skip
    assert built.serves(SNAPSHOT, {}, {"k": NOW}, Policy(), NOW + timedelta(minutes=1))
    assert not built.serves(SNAPSHOT, {}, {"k": NOW}, Policy(), NOW + timedelta(hours=2))


@pytest.mark.parametrize(
    "payload",
    [b"", b"garbage", zlib.compress(b"\x93\x01\x02\x03"), zlib.compress(b"\xc1"),
     (encode(BUILT, b"n") or b"")[:-3]],
)  # fmt: skip
def test_anything_else_is_none(payload: bytes) -> None:
    assert decode(payload) is None


def test_a_payload_under_another_pull_request_is_left_out() -> None:
    payload = encode(BUILT, b"n") or b""
    assert [node for node, _ in restored("o/r", {5: payload})] == [b"n"]
    assert restored("o/r", {6: payload}) == [] == restored("o/x", {5: payload})


def test_what_a_listing_read_whole_is_kept_with_its_node() -> None:
    rows = kept_rows([BUILT], {b"n": SNAPSHOT})
    assert list(rows) == [5] and rows[5][0] == "a" * 40
    [(node, one)] = restored("o/r", {5: rows[5][1]})
    assert node == b"n" and one.built.snapshot == SNAPSHOT


def test_what_was_read_over_several_pages_is_kept_with_no_node() -> None:
    """A head whose contexts filled more than one page (no whole node): its report is kept all
    the same, with no node to find it by, and compared whole with the next pass's snapshot."""
    rows = kept_rows([BUILT], {b"n": PullSnapshot("o/r", 5, "t", None, False, "b", "u")})
    assert list(rows) == [5] and rows[5][0] == "a" * 40
    [(node, one)] = restored("o/r", {5: rows[5][1]})
    assert node == b"" and one.built.snapshot == SNAPSHOT
    assert one.built.serves(SNAPSHOT, {}, {"k": NOW}, Policy(), NOW + timedelta(minutes=1))


def test_the_version_names_the_bot_and_the_format() -> None:
    assert version().startswith("0.") and version().count("/") == 3


def _built(snapshot: PullSnapshot) -> Built:
    report = Report(snapshot.repo, snapshot.number, "t", "u", snapshot.head_sha, False, NOW,
                    Verdict.FAILING)  # fmt: skip
    return Built(snapshot, {}, {}, Policy(), (), None, NOW, None, report, "key")


def test_what_is_computed_from_the_signals_comes_back_as_computed_on_its_signals() -> None:
    _, kept = decode(encode(_built(FAILING), b"n") or b"") or (None, None)
    assert kept is not None
    signals = kept.built.snapshot.signals
    computed = derive(kept.built.snapshot)
    assert computed.from_signals.failing and computed.runs  # the case has something to keep
    assert kept.derived == computed
    found = kept.derived.from_signals
    assert found.signals is signals  # the very tuple: Reports.from_signals keeps it
    assert all(any(s is t for t in signals) for s in (*found.failing, *found.checks))
    assert all(any(s is t for t in signals) for s in kept.derived.runs)


def test_a_derived_of_other_signals_is_not_kept() -> None:
    other = derive(SNAPSHOT)
    assert encode(_built(FAILING), b"n", other) is None
    copied = FromSignals(FAILING.signals, (), (FAILED._replace(url="elsewhere"),), ())
    assert encode(_built(FAILING), b"n", Derived(copied, [])) is None


def _with_positions(positions: _Signals) -> bytes:
    raw = msgspec.msgpack.decode(zlib.decompress(encode(_built(FAILING), b"n") or b""))
    raw[-1] = msgspec.to_builtins(positions)
    return zlib.compress(msgspec.msgpack.encode(raw))


@pytest.mark.parametrize(
    "positions",
    [_Signals((), (3,), (), (), {}), _Signals((), (), (-1,), (), {}),
     _Signals((), (), (), (99,), {}), _Signals((), (), (), (), {"codecov": (3,)}),
     _Signals((), (), (), (), {"codecov": (-1,)})],
)  # fmt: skip
def test_a_position_that_is_not_one_of_its_signals_is_none(positions: _Signals) -> None:
    assert decode(_with_positions(positions)) is None
    same = _Signals((), (1,), (2,), (1,), {"codecov": (0, 2)})  # the same, in range
    assert decode(_with_positions(same)) is not None


def test_a_payload_of_the_format_before_is_none() -> None:
    raw = msgspec.msgpack.decode(zlib.decompress(encode(BUILT, b"n") or b""))
    assert len(raw) == len(_Kept.__struct_fields__)
    assert decode(zlib.compress(msgspec.msgpack.encode(raw[:-1]))) is None  # no positions
    before = [*raw[:3], *raw[4:-1], raw[-1][:-1]]  # format 2: signals in the snapshot, no asks
    before[2]["signals"] = [list(SIGNAL)]
    assert decode(zlib.compress(msgspec.msgpack.encode(before))) is None


def test_what_a_payload_kept_is_what_the_reports_give_for_its_signals() -> None:
    _, kept = decode(encode(_built(FAILING), b"n") or b"") or (None, None)
    assert kept is not None
    reports = Reports()
    reports.put(kept.built, derived=kept.derived)
    snapshot = kept.built.snapshot
    assert reports.from_signals(snapshot) is kept.derived.from_signals  # not computed again
    assert reports.runs[("o/r", 6)] == (snapshot.signals, kept.derived.runs)
    other = replace(snapshot, signals=tuple(list(snapshot.signals)))  # equal, not the same
    assert reports.from_signals(other) is not kept.derived.from_signals


def test_the_signals_each_source_asks_about_come_back_as_asked_on_its_signals() -> None:
    signals = FAILING.signals
    found = FromSignals.of(signals)
    found.asked_by("codecov", lambda s: s.kind is Kind.STATUS)
    found.asked_by("none", lambda s: False)
    derived = Derived(found, derive(FAILING).runs)
    _, kept = decode(encode(_built(FAILING), b"n", derived) or b"") or (None, None)
    assert kept is not None
    back, signals = kept.derived.from_signals, kept.built.snapshot.signals
    assert back.asked == {"codecov": (STATUS,), "none": ()}
    assert back.asked["codecov"][0] is signals[2]  # one of its very signals
    asked: list[Signal] = []
    assert back.asked_by("codecov", asked.append) == (STATUS,) and asked == []  # not asked again
    assert back.asked_by("azure", lambda s: s is signals[0]) == (signals[0],)  # one not kept


def test_an_asked_signal_not_among_its_signals_is_not_kept() -> None:
    found = FromSignals.of(FAILING.signals)
    found.asked["codecov"] = (FAILED._replace(url="elsewhere"),)
    assert encode(_built(FAILING), b"n", Derived(found, derive(FAILING).runs)) is None


def _rows_of(snapshot: PullSnapshot, *signals: Signal) -> Built:
    rows = tuple(Row(s, State.FAILURE, NOW, next(iter(SinceSource))) for s in signals)
    built = _built(snapshot)
    return replace(built, report=replace(built.report, rows=rows))


def test_the_signals_are_kept_once_each_where_a_row_holds_an_equal_one() -> None:
    extra = Signal("docs", Kind.STATUS, "pending", started_at=NOW)
    snapshot = replace(FAILING, signals=(*FAILING.signals, extra))
    copies = tuple(s._replace() for s in reversed(FAILING.signals))  # equal, not the same
    built = _rows_of(snapshot, *copies)
    payload = encode(built, b"n") or b""
    raw = msgspec.msgpack.decode(zlib.decompress(payload))
    assert raw[2]["signals"] == [] and raw[3][:3] == [2, 1, 0]  # positions in the rows
    alone = msgspec.msgpack.decode(msgspec.msgpack.encode(raw[3][3]), type=Signal)
    assert alone == extra  # in no row: kept as it is
    _, kept = decode(payload) or (None, None)
    assert kept is not None
    back = kept.built
    assert back.snapshot == snapshot and back.report == built.report
    rows = reversed(back.report.rows)
    assert all(s is r.signal for s, r in zip(back.snapshot.signals[:3], rows, strict=True))


@pytest.mark.parametrize("position", [3, -1, 99])
def test_a_signal_at_a_position_that_is_not_a_row_is_none(position: int) -> None:
    payload = encode(_rows_of(FAILING, *FAILING.signals), b"n") or b""
    raw = msgspec.msgpack.decode(zlib.decompress(payload))
    assert decode(payload) is not None
    raw[3][0] = position
    assert decode(zlib.compress(msgspec.msgpack.encode(raw))) is None
