"""The reports of a pass kept in the state for the next process (issue 31): `once`, a restart
and the Action with its cache reuse the report of a pull request whose inputs did not change,
as a long-running `run` reuses it from memory (`bot.cycle.model.Reports`).

One payload per pull request: its `Built` (the inputs its report was built from, the report,
its facts key and until when it holds) with, in place of the second sources' evidence, its
digest; the digest of the GitHub node its snapshot was read from (an equal node is not
parsed again; empty for a head read over several pages, which every pass reads whole again
and compares with the kept snapshot, as `run` does); and what is computed from its signals
alone (`FromSignals`, the signals each second source asks about and its failing runs, as
positions in its signals: a fresh process does not compute them again). The snapshot's
signals are kept as positions in its report's rows where a row holds an equal signal (each
is kept once, not twice). Typed msgpack (msgspec), compressed. Every payload is of one
`version`: the bot's, this format's, its shape's and a digest of the bot's code; a payload of
another version is never read, and one that does not decode as this shape (or names a
position that is not one of its signals) is dropped (its pull request is built again): never
trusted, never an exception.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, NamedTuple

import msgspec

import bot
from bot.core.base import MergeBase
from bot.core.history import HistoryInputs, IndexEntries
from bot.core.merge_queue import QueueRead
from bot.core.model import Annotation, Policy, PullSnapshot, Report, Row, Signal
from bot.cycle.model import Built, FromSignals, docs_digest
from bot.github.annotations import failing_runs

FORMAT = 4  # one more whenever what a payload holds changes meaning
MAX_PAYLOAD = 8 << 20  # bytes a payload may decompress to (a bigger one is not read)


Position = Annotated[int, msgspec.Meta(ge=0)]  # a place in a kept tuple (never from its end)


class Derived(NamedTuple):
    """What is computed from a head's signals alone, kept with its report: its `FromSignals`
    and its failing check runs (bot.github.annotations.failing_runs)."""

    from_signals: FromSignals
    runs: list[Signal]


class Restored(NamedTuple):
    """One kept payload back: its `Built` and what was computed from its signals."""

    built: Built
    derived: Derived


class _Signals(msgspec.Struct, array_like=True, frozen=True):
    """`Derived` as positions in the snapshot's signals (its entries as they are), with the
    signals each second source asks about, by its name (as `FromSignals.asked` holds them)."""

    entries: IndexEntries
    failing: tuple[int, ...]
    checks: tuple[int, ...]
    runs: tuple[int, ...]
    asked: dict[str, tuple[int, ...]]


class _Kept(msgspec.Struct, array_like=True, frozen=True):
    """One pull request's payload: a `Built`, its evidence digested, and its node's digest."""

    node: bytes  # the digest of the GitHub node its snapshot was read from (b"": several)
    docs: bytes  # bot.cycle.model.docs_digest of the evidence it was built from
    snapshot: PullSnapshot  # its signals: none (they are `signals`)
    signals: tuple[Position | Signal, ...]  # each a position in the report's rows, or itself
    first_seen: dict[str, datetime]
    policy: Policy
    expected: tuple[str, ...]
    merge: MergeBase | None
    judged_at: datetime
    until: datetime | None
    report: Report
    key: str
    annotations: dict[int, tuple[Annotation, ...]] | None
    keys: tuple[str, ...]
    failing: bool
    queue: QueueRead | None
    history: HistoryInputs | None
    derived: _Signals


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Kept)


@functools.cache
def version() -> str:
    """The version every payload is kept in: the bot's, the format's, a digest of the
    payload's shape (its types' fields) and of the bot's code (a report built by other code
    is not this code's report)."""
    shape = hashlib.blake2b(msgspec.json.encode(msgspec.json.schema(_Kept)), digest_size=8)
    return f"{bot.__version__}/{FORMAT}/{shape.hexdigest()}/{_code()}"


def _code() -> str:
    """A digest of the bot's own modules' source ("" where it cannot be read)."""
    root = Path(bot.__file__).parent
    code = hashlib.blake2b(digest_size=8)
    try:
        for path in sorted(root.rglob("*.py")):
            code.update(str(path.relative_to(root)).encode())
            code.update(path.read_bytes())
    except OSError:
        return ""
    return code.hexdigest()


def encode(built: Built, node: bytes, derived: Derived | None = None) -> bytes | None:
    """The payload of one pull request's `Built`, read from the node of digest `node`, with
    what was computed from its signals (None: computed here); None: something in it is not
    plain data, or `derived` is not of its signals."""
    digest = docs_digest(built.docs) if built.docs_digest is None else built.docs_digest
    signals = built.snapshot.signals
    positions = _positions(signals, derived or derive(built.snapshot))
    if digest is None or positions is None:
        return None
    kept = _Kept(
        node, digest, replace(built.snapshot, signals=()), _in_rows(signals, built.report.rows),
        dict(built.first_seen), built.policy, built.expected, built.merge, built.judged_at,
        built.until, built.report, built.key,
        None if built.annotations is None else dict(built.annotations), built.keys,
        built.failing, built.queue, built.history, positions,
    )  # fmt: skip
    try:
        return zlib.compress(_ENCODER.encode(kept), 1)
    except (TypeError, ValueError, OverflowError):
        return None


def derive(snapshot: PullSnapshot) -> Derived:
    """What is computed from the snapshot's signals alone."""
    return Derived(FromSignals.of(snapshot.signals), failing_runs(snapshot))


def _in_rows(signals: tuple[Signal, ...], rows: tuple[Row, ...]) -> tuple[int | Signal, ...]:
    """Each signal as the position of the first report row holding an equal one, else itself."""
    at: dict[Signal, int] = {}
    try:
        for index, row in enumerate(rows):
            at.setdefault(row.signal, index)
        return tuple(at.get(signal, signal) for signal in signals)
    except TypeError:  # a field that cannot be hashed: each signal kept as it is
        return signals


def _positions(signals: tuple[Signal, ...], derived: Derived) -> _Signals | None:
    """`derived` as positions in `signals` (None: it holds a signal not among them)."""
    at = {id(signal): index for index, signal in enumerate(signals)}
    found = derived.from_signals
    if found.signals is not signals:
        return None
    try:
        failing, checks, runs = (
            tuple(at[id(s)] for s in group) for group in (found.failing, found.checks, derived.runs)
        )
        asked = {name: tuple(at[id(s)] for s in group) for name, group in found.asked.items()}
    except KeyError:
        return None
    return _Signals(found.entries, failing, checks, runs, asked)


def decode(payload: bytes) -> tuple[bytes, Restored] | None:
    """One payload back: its node's digest, its `Built` and what was computed from its
    signals (None: not of this shape, or a position that is not one of its signals or rows)."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(payload, MAX_PAYLOAD)
        if inflate.unconsumed_tail or not inflate.eof:
            return None
        kept = _DECODER.decode(raw)
    except (zlib.error, msgspec.DecodeError, ValueError, TypeError):
        return None
    signals = _signals(kept.signals, kept.report.rows)
    derived = None if signals is None else _derived(signals, kept.derived)
    if signals is None or derived is None:
        return None
    built = Built(
        replace(kept.snapshot, signals=signals), {}, kept.first_seen, kept.policy,
        kept.expected, kept.merge, kept.judged_at, kept.until, kept.report, kept.key,
        kept.annotations, kept.keys, kept.failing, kept.queue, kept.history,
        docs_digest=kept.docs,
    )  # fmt: skip
    return kept.node, Restored(built, derived)


def _signals(kept: tuple[int | Signal, ...], rows: tuple[Row, ...]) -> tuple[Signal, ...] | None:
    """The snapshot's signals back from their positions in the report's rows (None: one is
    not a position there; the decoder refuses a negative one)."""
    try:
        return tuple(rows[s].signal if isinstance(s, int) else s for s in kept)
    except IndexError:
        return None


def _derived(signals: tuple[Signal, ...], kept: _Signals) -> Derived | None:
    """The kept positions as signals (None: one is not a position in `signals`)."""
    count = len(signals)
    groups = (kept.failing, kept.checks, kept.runs, *kept.asked.values())
    if any(not 0 <= i < count for group in groups for i in group):
        return None
    failing, checks = (tuple(signals[i] for i in g) for g in (kept.failing, kept.checks))
    asked = {name: tuple(signals[i] for i in group) for name, group in kept.asked.items()}
    found = FromSignals(signals, kept.entries, failing, checks, asked)
    return Derived(found, [signals[i] for i in kept.runs])


def restored(repo: str, payloads: Mapping[int, bytes]) -> list[tuple[bytes, Restored]]:
    """The kept `Built`s of `repo`'s pull requests (with what was computed from their signals),
    each with its node's digest (b"": read over several pages); a payload that does not
    decode, or is of another pull request than its row, is left out."""
    found: list[tuple[bytes, Restored]] = []
    for number, payload in payloads.items():
        kept = decode(payload)
        if kept is None:
            continue
        node, one = kept
        snapshot, report = one.built.snapshot, one.built.report
        if (snapshot.repo, snapshot.number) == (report.repo, report.number) == (repo, number):
            found.append((node, one))
    return found


def kept_rows(
    built: Iterable[Built],
    nodes: Mapping[bytes, PullSnapshot],
    derived: Callable[[PullSnapshot], Derived] = derive,
) -> dict[int, tuple[str, bytes]]:
    """What to keep of these `Built`s of one repository: number -> (head commit, payload), each
    with the digest of the node its listing read it whole from (`nodes`, by digest:
    GitHubApi.read_nodes), else none (read over several pages, or alone: it is compared whole,
    as in `run`); `derived`: what was computed from a snapshot's signals (kept by the pass,
    else `derive`)."""
    digests = {id(snapshot): node for node, snapshot in nodes.items()}
    rows: dict[int, tuple[str, bytes]] = {}
    for one in built:
        node = digests.get(id(one.snapshot), b"")
        payload = encode(one, node, derived(one.snapshot))
        if payload is not None:
            rows[one.report.number] = (one.snapshot.head_sha, payload)
    return rows
