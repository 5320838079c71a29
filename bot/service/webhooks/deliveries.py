"""A delivery seen before: by its id, or by its body under a new id (a replay)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

# note(delivery key, event, now): False when the key was noted before (StoreError: unusable)
NoteDelivery = Callable[[str, str, datetime], bool]


def is_repeat(note: NoteDelivery, delivery: str, body: bytes, *, event: str, now: datetime) -> bool:
    """Note the delivery's id and its body's digest (both, always); True if either was seen."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()  # a replay under a new id
    repeated = not note(delivery, event, now)
    return not note(digest, event, now) or repeated
