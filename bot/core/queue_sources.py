"""What a provider's own tracker documents about reporting on merge-group commits (pure data).

Beside remedies.py: a row about a required context that never reported on a merge-group
commit quotes the entry that fits it, linked to its source. Only what a source states is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from bot.core.model import Signal
from bot.core.remedies import DCO_APP


@dataclass(frozen=True, slots=True)
class Documented:
    """A source's words about a provider and `merge_group` events, for contexts it posts."""

    words: str  # the source's own words (its markdown dropped), quoted; the renderer escapes it
    source_name: str  # "readthedocs/readthedocs.org#10021"
    source: str  # its URL
    names: tuple[str, ...] = ()  # contexts of exactly these names
    prefixes: tuple[str, ...] = ()  # contexts whose name starts so
    app: str | None = None  # check runs of this app (slug)


QUEUE_DOCUMENTED: Final[tuple[Documented, ...]] = (
    # readthedocs/readthedocs.org issue 10021 ("Support GitHub merge queues when RTD PR builds
    # are required to merge", open since 2023-02-14), its description's "Actual Result".
    Documented(
        words="GitHub waits for ReadTheDocs to report the PR status check, which is never "
        "reported. The PR stays in the queue and is never merged.",
        source_name="readthedocs/readthedocs.org#10021",
        source="https://github.com/readthedocs/readthedocs.org/issues/10021",
        prefixes=("docs/readthedocs.org:", "docs/readthedocs.com:", "docs/readthedocs:"),
    ),
    # opentdf/web-sdk pull request 1036 (merged 2026-09), its description: why a
    # merge_group-only workflow had to stand in for the DCO app's required `DCO` context.
    Documented(
        words="The DCO app does not report on merge_group for this installation, so without "
        "this the context never arrives and every queue entry times out at the check-response "
        "timeout.",
        source_name="opentdf/web-sdk#1036",
        source="https://github.com/opentdf/web-sdk/pull/1036",
        names=("DCO",),
        app=DCO_APP,
    ),
)


def documented_for(signal: Signal) -> Documented | None:
    """The documented behaviour of the provider that posts `signal`'s context, if any."""
    for entry in QUEUE_DOCUMENTED:
        if signal.name in entry.names or signal.name.startswith(entry.prefixes):
            return entry
        if entry.app is not None and signal.app == entry.app:
            return entry
    return None
