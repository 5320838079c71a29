"""Second sources' final records carried by the comment (issue 31): what a head's evidence was
read from, taken as the sources read it, and given back to the state a run starts from.

The sources keep what they read in the state (`SourcesState`: Read the Docs' reads by site,
project and commit; every other provider's by source and key). `CarriedReads` stands between
them and the state: it passes every call through, and notes each record the head being read
was settled with. Those a provider calls final (`Kind.final`: nothing it says about them can
change) go into the report (`Report.kept_reads`), and its comment's carried line takes them
to the next run. A run with no state gives them back to its state (`seed`) before it reads
that head: the provider then finds them kept, exactly as with a state, and asks nothing. A
record the state already holds is never overwritten by a carried one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from bot.core.model import KeptRead
from bot.core.remedies import READTHEDOCS
from bot.sources.base import SourcesState
from bot.state.ports import RtdRead

RTD: str = READTHEDOCS  # the source name of Read the Docs' reads (their own table in the state)


def rtd_key(host: str, project: str, commit: str) -> str:
    """The carried key of a Read the Docs read: JSON of site, project and commit."""
    return json.dumps([host, project, commit], separators=(",", ":"))


def _rtd_parts(key: str) -> tuple[str, str, str] | None:
    try:
        parts = json.loads(key)
    except ValueError:
        return None
    if isinstance(parts, list) and len(parts) == 3 and all(isinstance(p, str) for p in parts):
        return parts[0], parts[1], parts[2]
    return None


class CarriedReads:
    """The state as the sources see it, noting the final records of the head being read."""

    def __init__(self, store: SourcesState, finals: Mapping[str, Callable[[str], bool]]) -> None:
        """`finals`: by source name ("rtd" for Read the Docs), whether a kept payload is final."""
        self.store, self.finals = store, dict(finals)
        self._head = ""
        self._noted: dict[tuple[str, str], KeptRead] = {}

    # -- the head being read ------------------------------------------------------------------

    def begin(self, head_sha: str) -> None:
        """The sources are about to read this head's evidence: nothing noted yet."""
        self._head, self._noted = head_sha, {}

    def taken(self) -> tuple[KeptRead, ...]:
        """The final records the head's evidence was read from, in a stable order."""
        return tuple(sorted(self._noted.values()))

    def _note(self, source: str, key: str, read: RtdRead | None) -> None:
        if read is None or not read.payload or read.read_at is None or read.failing_since:
            return
        final = self.finals.get(source)
        if final is not None and final(read.payload):
            self._noted[(source, key)] = KeptRead(source, key, read.payload, read.read_at)

    def seed(self, head_sha: str, reads: Iterable[KeptRead]) -> int:
        """Give the state the records a trusted comment of this head carried, where it holds
        none under their key; a Read the Docs read of another commit is not taken. How many."""
        given = 0
        for read in reads:
            final = self.finals.get(read.source)
            if final is None or not final(read.payload):
                continue  # not final (or no such source here): read again
            if read.source == RTD:
                parts = _rtd_parts(read.key)
                if parts is None or parts[2] != head_sha or self.store.get_rtd_read(*parts):
                    continue
                self.store.put_rtd_read(*parts, payload=read.payload, now=read.read_at)
            else:
                if self.store.get_source_read(read.source, read.key) is not None:
                    continue
                self.store.put_source_read(
                    read.source, read.key, payload=read.payload, now=read.read_at
                )
            given += 1
        return given

    # -- RtdCache ---------------------------------------------------------------------------

    def get_rtd_read(self, host: str, project: str, commit: str) -> RtdRead | None:
        """The state's read, noted for the head where it is final."""
        read = self.store.get_rtd_read(host, project, commit)
        self._note(RTD, rtd_key(host, project, commit), read)
        return read

    def put_rtd_read(
        self, host: str, project: str, commit: str, *, payload: str, now: datetime
    ) -> None:
        """Kept in the state, and noted for the head where it is final."""
        self.store.put_rtd_read(host, project, commit, payload=payload, now=now)
        self._note(RTD, rtd_key(host, project, commit), RtdRead(payload, now, None))

    def rtd_read_failed(
        self, host: str, project: str, commit: str, *, now: datetime, failure: str
    ) -> None:
        """Passed through (a failure is never carried)."""
        self.store.rtd_read_failed(host, project, commit, now=now, failure=failure)
        self._noted.pop((RTD, rtd_key(host, project, commit)), None)

    # -- SourceReads ------------------------------------------------------------------------

    def get_source_read(self, source: str, key: str) -> RtdRead | None:
        """The state's record, noted for the head where it is final."""
        read = self.store.get_source_read(source, key)
        self._note(source, key, read)
        return read

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Kept in the state, and noted for the head where it is final."""
        self.store.put_source_read(source, key, payload=payload, now=now)
        self._note(source, key, RtdRead(payload, now, None))

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Passed through (a failure is never carried)."""
        self.store.source_read_failed(source, key, now=now, failure=failure)
        self._noted.pop((source, key), None)
