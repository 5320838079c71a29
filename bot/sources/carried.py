"""Second sources' final records carried by the comment (issue 31): what a head's evidence was
read from, taken as the sources read it, and given back to the state a run starts from.

The sources keep what they read in the state (`SourcesState`: every provider's records by
source and key). `CarriedReads` stands between them and the state: it passes every call
through, and notes each record the head being read was settled with. Those a provider calls
final (`Kind.final`: nothing it says about them can change) go into the report
(`Report.kept_reads`), and its comment's carried line takes them to the next run. A run with no
state gives them back to its state (`seed`) before it reads that head, where the provider says
the record is of that head's commit and was read no later than now (`Kind.record_of`): the
provider then finds them kept, exactly as with a state, and asks nothing. A record of another
commit, one read "in the future" (which would outlast every later status) or one whose
provider cannot say whose it is, is never given: a carried line is a claim, never an authority,
so it is asked again. A record the state already holds is never overwritten by a carried one.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from bot.core.model import KeptRead
from bot.sources.base import Kind, SourcesState
from bot.state.ports import SourceRead


class CarriedReads:
    """The state as the sources see it, noting the final records of the head being read."""

    def __init__(self, store: SourcesState, kinds: Iterable[Kind]) -> None:
        """`kinds`: the sources, each saying by its name whether a kept payload is final and
        which carried records it takes for a head."""
        self.store = store
        self.kinds = {kind.name: kind for kind in kinds}
        self._head = ""
        self._noted: dict[tuple[str, str], KeptRead] = {}

    # -- the head being read ------------------------------------------------------------------

    def begin(self, head_sha: str) -> None:
        """The sources are about to read this head's evidence: nothing noted yet."""
        self._head, self._noted = head_sha, {}

    def taken(self) -> tuple[KeptRead, ...]:
        """The final records the head's evidence was read from, in a stable order."""
        return tuple(sorted(self._noted.values()))

    def _note(self, source: str, key: str, read: SourceRead | None) -> None:
        if read is None or not read.payload or read.read_at is None or read.failing_since:
            return
        kind = self.kinds.get(source)
        if kind is not None and kind.final(read.payload):
            self._noted[(source, key)] = KeptRead(source, key, read.payload, read.read_at)

    def seed(self, head_sha: str, reads: Iterable[KeptRead], *, now: datetime) -> int:
        """Give the state the records a trusted comment of this head carried, where it holds
        none under their key, their source calls them final and says they are records of this
        head read no later than `now`. How many."""
        given = 0
        for read in reads:
            kind = self.kinds.get(read.source)
            of = kind.record_of(read.key, read.payload) if kind is not None else None
            if kind is None or of is None or head_sha not in of.commits:
                continue  # another commit's, or whose its source cannot say: read again
            if read.read_at > now or (of.read_at is not None and of.read_at > now):
                continue  # read "in the future": it would outlast every later status
            source, key = read.source, read.key
            if not kind.final(read.payload) or self.store.get_source_read(source, key):
                continue  # not final, or the state holds one
            self.store.put_source_read(source, key, payload=read.payload, now=read.read_at)
            given += 1
        return given

    # -- SourceReads ------------------------------------------------------------------------

    def get_source_read(self, source: str, key: str) -> SourceRead | None:
        """The state's record, noted for the head where it is final."""
        read = self.store.get_source_read(source, key)
        self._note(source, key, read)
        return read

    def put_source_read(self, source: str, key: str, *, payload: str, now: datetime) -> None:
        """Kept in the state, and noted for the head where it is final."""
        self.store.put_source_read(source, key, payload=payload, now=now)
        self._note(source, key, SourceRead(payload, now, None))

    def source_read_failed(self, source: str, key: str, *, now: datetime, failure: str) -> None:
        """Passed through (a failure is never carried)."""
        self.store.source_read_failed(source, key, now=now, failure=failure)
        self._noted.pop((source, key), None)
