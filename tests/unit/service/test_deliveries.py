"""A delivery seen before: by its id, or by its body under a new id; both are always noted."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from bot.service.webhooks.deliveries import is_repeat

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_a_repeat_by_id_or_by_body_and_both_keys_noted_every_time() -> None:
    noted: list[str] = []

    def note(key: str, event: str, now: datetime) -> bool:
        first = key not in noted
        noted.append(key)
        return first

    assert not is_repeat(note, "d1", b'{"a": 1}', event="check_run", now=NOW)
    assert is_repeat(note, "d1", b'{"a": 2}', event="check_run", now=NOW)  # the same id
    assert is_repeat(note, "d2", b'{"a": 1}', event="check_run", now=NOW)  # a replay, new id
    assert not is_repeat(note, "d3", b'{"a": 3}', event="check_run", now=NOW)
    digest = "sha256:" + hashlib.sha256(b'{"a": 2}').hexdigest()
    assert noted[2:4] == ["d1", digest]  # a repeated id still notes its body
