"""The kept reports' payloads (bot.cycle.digests): one back as it was, anything else none."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

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
from bot.cycle.digests import decode, encode, kept_rows, restored, version
from bot.cycle.model import Built

NOW = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)
SIGNAL = Signal("lint", Kind.CHECK_RUN, "in_progress", started_at=NOW)
SNAPSHOT = PullSnapshot("o/r", 5, "t", "alice", False, "a" * 40, "u", signals=(SIGNAL,))
REPORT = Report("o/r", 5, "t", "u", "a" * 40, False, NOW, Verdict.PENDING,
                rows=(Row(SIGNAL, State.PENDING, NOW, next(iter(SinceSource))),))  # fmt: skip
BUILT = Built(SNAPSHOT, {}, {"k": NOW}, Policy(), ("ci",), None, NOW,
              NOW + timedelta(hours=2), REPORT, "key")  # fmt: skip


def test_a_payload_comes_back_as_it_was_kept() -> None:
    payload = encode(BUILT, b"node")
    assert payload is not None
    node, built = decode(payload) or (None, None)
    assert node == b"node" and built is not None
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
    assert set(restored("o/r", {5: payload})) == {b"n"}
    assert restored("o/r", {6: payload}) == {} == restored("o/x", {5: payload})


def test_only_what_a_listing_read_whole_is_kept() -> None:
    rows = kept_rows([BUILT], {b"n": SNAPSHOT})
    assert list(rows) == [5] and rows[5][0] == "a" * 40
    assert kept_rows([BUILT], {b"n": PullSnapshot("o/r", 5, "t", None, False, "b", "u")}) == {}


def test_the_version_names_the_bot_and_the_format() -> None:
    assert version().startswith("0.") and version().count("/") == 3
