"""The reports of a pass kept in the state for the next process (issue 31): `once`, a restart
and the Action with its cache reuse the report of a pull request whose inputs did not change,
as a long-running `run` reuses it from memory (`bot.cycle.model.Reports`).

One payload per pull request: its `Built` (the inputs its report was built from, the report,
its facts key and until when it holds) with, in place of the second sources' evidence, its
digest; and the digest of the GitHub node its snapshot was read from (an equal node is not
parsed again). Typed msgpack (msgspec), compressed. Every payload is of one `version`: the
bot's, this format's, its shape's and a digest of the bot's code; a payload of another
version is never read, and one that does not decode as this shape is dropped (its pull
request is built again): never trusted, never an exception.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

import msgspec

import bot
from bot.core.base import MergeBase
from bot.core.history import HistoryInputs
from bot.core.merge_queue import QueueRead
from bot.core.model import Annotation, Policy, PullSnapshot, Report
from bot.cycle.model import Built, docs_digest

FORMAT = 1  # one more whenever what a payload holds changes meaning
MAX_PAYLOAD = 8 << 20  # bytes a payload may decompress to (a bigger one is not read)


class _Kept(msgspec.Struct, array_like=True, frozen=True):
    """One pull request's payload: a `Built`, its evidence digested, and its node's digest."""

    node: bytes  # the digest of the GitHub node its snapshot was read from
    docs: bytes  # bot.cycle.model.docs_digest of the evidence it was built from
    snapshot: PullSnapshot
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


def encode(built: Built, node: bytes) -> bytes | None:
    """The payload of one pull request's `Built`, read from the node of digest `node` (None:
    something in it is not plain data)."""
    digest = docs_digest(built.docs) if built.docs_digest is None else built.docs_digest
    if digest is None:
        return None
    kept = _Kept(
        node, digest, built.snapshot, dict(built.first_seen), built.policy, built.expected,
        built.merge, built.judged_at, built.until, built.report, built.key,
        None if built.annotations is None else dict(built.annotations), built.keys,
        built.failing, built.queue, built.history,
    )  # fmt: skip
    try:
        return zlib.compress(_ENCODER.encode(kept), 1)
    except (TypeError, ValueError, OverflowError):
        return None


def decode(payload: bytes) -> tuple[bytes, Built] | None:
    """One payload back: its node's digest and its `Built` (None: not of this shape)."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(payload, MAX_PAYLOAD)
        if inflate.unconsumed_tail or not inflate.eof:
            return None
        kept = _DECODER.decode(raw)
    except (zlib.error, msgspec.DecodeError, ValueError, TypeError):
        return None
    built = Built(
        kept.snapshot, {}, kept.first_seen, kept.policy, kept.expected, kept.merge,
        kept.judged_at, kept.until, kept.report, kept.key, kept.annotations, kept.keys,
        kept.failing, kept.queue, kept.history, docs_digest=kept.docs,
    )  # fmt: skip
    return kept.node, built


def restored(repo: str, payloads: Mapping[int, bytes]) -> dict[bytes, Built]:
    """The kept `Built`s of `repo`'s pull requests, by their node's digest; a payload that does
    not decode, or is of another pull request than its row, is left out."""
    found: dict[bytes, Built] = {}
    for number, payload in payloads.items():
        kept = decode(payload)
        if kept is None:
            continue
        node, built = kept
        snapshot, report = built.snapshot, built.report
        if (snapshot.repo, snapshot.number) == (report.repo, report.number) == (repo, number):
            found[node] = built
    return found


def kept_rows(
    built: Iterable[Built], nodes: Mapping[bytes, PullSnapshot]
) -> dict[int, tuple[str, bytes]]:
    """What to keep of these `Built`s of one repository: number -> (head commit, payload), for
    each built from a snapshot its listing read whole (`nodes`, by digest: GitHubApi.read_nodes)."""
    digests = {id(snapshot): node for node, snapshot in nodes.items()}
    rows: dict[int, tuple[str, bytes]] = {}
    for one in built:
        node = digests.get(id(one.snapshot))
        payload = None if node is None else encode(one, node)
        if payload is not None:
            rows[one.report.number] = (one.snapshot.head_sha, payload)
    return rows
