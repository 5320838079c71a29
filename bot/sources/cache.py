"""The one cache of the second sources' reads: the `source_reads` table, by source and record
key, and the rules a provider reads by (Read the Docs keeps its reads in the same table, by the
rules of its own evidence.py: a build a status names, why a build ended).

- A record that is final (the provider's own word: nothing it says about it can change) and
  was read after GitHub last heard about the signal is taken from the state, never asked again.
- Any other is asked (at most once per key per cycle); a good answer is kept.
- A failure (an outage, 429, 5xx, an answer that cannot be read) is never evidence: the last
  good record stands with its time, marked since when reading fails (the first failure of the
  run and its words are kept); it is logged once, when that run begins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from bot.sources.http import SourceError
from bot.state.ports import SourceRead, SourceReads

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Looked(Generic[T]):
    """What is known of one record now: the last good one (if any) and a failing run."""

    record: T | None
    read_at: datetime | None  # when `record` was read
    failure: str | None = None  # set while it cannot be read: what failed (stable words)
    failing_since: datetime | None = None
    status: int | None = None  # the HTTP status of that failure, when there was one


class NoReads:
    """No state at all (`show`): nothing cached, nothing kept."""

    def get_source_read(self, source: str, key: str) -> SourceRead | None:
        return None

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        return None

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        return None


class Records(Generic[T]):
    """One cycle's reads of one provider's records, through the state's cache."""

    def __init__(
        self,
        source: str,
        store: SourceReads | None,
        *,
        dump: Callable[[T], str],
        load: Callable[[str], T | None],
        final: Callable[[T], bool],
    ) -> None:
        self.source, self.store = source, store if store is not None else NoReads()
        self._dump, self._load, self._final = dump, load, final
        self._seen: dict[str, Looked[T]] = {}

    def begin(self) -> None:
        """A new head: what was looked up for the last one is asked again if needed."""
        self._seen.clear()

    def look(
        self, key: str, fetch: Callable[[], T], *, now: datetime, posted: datetime | None
    ) -> Looked[T]:
        """The record under `key`: kept and final, read now, or the last good one."""
        if key in self._seen:
            return self._seen[key]
        stored = self.store.get_source_read(self.source, key)
        last = self._load(stored.payload) if stored is not None and stored.payload else None
        read_at = stored.read_at if stored is not None else None
        fresh_enough = posted is None or (read_at is not None and posted <= read_at)
        if last is not None and self._final(last) and fresh_enough:
            looked: Looked[T] = Looked(last, read_at)
        else:
            looked = self._read(key, fetch, stored, last, now=now)
        self._seen[key] = looked
        return looked

    def _read(
        self, key: str, fetch: Callable[[], T], stored: SourceRead | None, last: T | None,
        *, now: datetime,
    ) -> Looked[T]:  # fmt: skip
        try:
            record = fetch()
        except SourceError as exc:
            said = str(exc)
            if stored is None or stored.failing_since is None:
                log.warning("%s: %s could not be read: %s", self.source, key, said)
                since, failure = now, said
            else:
                since, failure = stored.failing_since, stored.failure or said
            self.store.source_read_failed(self.source, key, now=now, failure=failure)
            read_at = stored.read_at if stored is not None else None
            return Looked(last, read_at if last is not None else None, failure, since, exc.status)
        self.store.put_source_read(self.source, key, payload=self._dump(record), now=now)
        return Looked(record, now)
