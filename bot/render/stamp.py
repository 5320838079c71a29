"""The stamp: a hidden, versioned line right after the marker that carries what the next run needs.

`<!-- ci-status-bot:stamp v2 <base64url of compact JSON> -->` records the facts key, when those
facts were first observed, the head commit, when the bot first saw each signal GitHub gave no
time for (by a digest of the signal's key), the lease generation of the write and, where a
failure was compared with the merge base, the base branch, the merge-base commit and the
branch's commit GitHub's compare was asked with and when (an older stamp names neither: not
known), and, where the comment quotes a merge-base finding or annotations,
the facts key without them (a run with no state then tells a failed read of those from new
facts). With it a run with no state at all (a fresh CI runner) tells the same story as one
with a state, and a lost state re-dates nothing. Base64 keeps untrusted names out of the HTML
comment.

A stamp the bot cannot read (garbled, too large, another version, a field out of range) is
ignored as a whole, never trusted in part. The v1 line of earlier releases,
`<!-- ci-status-bot:facts=<key> observed=<ISO UTC> -->`, is still read (facts and time only).

The third line may carry what never changes for the head (issue 31), so that a run with no
state asks for it once per head, ever: `<!-- ci-status-bot:carried v1 <base64url of zlib'd
compact JSON> -->` holds the head, its failing check runs' quoted annotations (by run id),
the second sources' final records (Read the Docs builds that finished, Codecov's and Azure's
final records: the payloads a state keeps, with when they were read) and its failing check
runs' earlier attempts on the head (by run id, where every attempt read had settled: a rerun
is a new run, so they never change). It is bounded (`CARRIED_MAX` characters, and never a row
of the comment for it): past the bound the provider records go first, the largest first, then
the runs' annotations, the largest first, then the runs' earlier attempts, the largest first
(the smallest entries, and the dearest to read again: a CheckAttempts query reads 50 checks,
an annotations query 100 runs).
A carried line over its bound, of another version, for another head, garbled or with any
field out of range is ignored as a whole (what it would carry is asked again); like the
stamp, it is trusted only on a comment whose last edit was the bot's.

Both lines are read as untrusted text: run ids of ASCII digits only, every string one that can
be written as UTF-8 (a JSON escape can make a lone surrogate), JSON nested no deeper than the
bot writes it (refused before `json.loads`), and whatever else fails in decoding ignores the
line; so reading either never raises.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from bot.core.annotations import needs_annotations
from bot.core.comment import marked
from bot.core.facts import core_key, facts_key
from bot.core.jsontext import loads, writable
from bot.core.model import Annotation, Attempt, KeptRead, MergeBaseOf, Report, State, as_utc

VERSION: Final = 2
MAX_DATA: Final = 50_000  # base64 characters (1,000 first-seen times fit); longer is not read
MAX_SEEN: Final = 1_000
_V1: Final = re.compile(
    r"<!-- ci-status-bot:facts=(?P<key>[0-9a-f]{64}) "
    r"observed=(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) -->",
    re.ASCII,  # ASCII digits only: strptime would take any Unicode digit
)
_V2: Final = re.compile(r"<!-- ci-status-bot:stamp v(?P<v>[0-9]{1,3}) (?P<data>[A-Za-z0-9_-]+) -->")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_SHA: Final = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})?")
_DIGEST: Final = re.compile(r"[0-9a-f]{16}")
_COMMIT: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MAX_REF: Final = 255  # git's practical limit on a ref name
# Times are whole microseconds since the epoch (exact: the facts key hashes them), 2000..9999.
_EARLIEST_US: Final = 946_684_800 * 10**6
_LATEST_US: Final = 253_402_300_799 * 10**6
_MAX_GENERATION: Final = 2**63 - 1
_EPOCH: Final = re.compile(r"[0-9a-f]{16,64}")

CARRIED_VERSION: Final = 1
CARRIED_MAX: Final = 24_000  # characters of the carried line; past it, facts are dropped
_CARRIED_RAW_MAX: Final = 400_000  # bytes its JSON may inflate to; more: ignored (a zip bomb)
_CARRIED: Final = re.compile(
    r"<!-- ci-status-bot:carried v(?P<v>[0-9]{1,3}) (?P<data>[A-Za-z0-9_-]+) -->"
)
_MAX_RUN_ID: Final = 2**63 - 1
_RUN: Final = re.compile(r"[1-9][0-9]{0,18}")  # a run id as the bot writes it: ASCII digits
_STAMP_DEPTH: Final = 4  # how deep the JSON of either line may nest (the bot writes 2 and 4)
_CARRIED_DEPTH: Final = 6
_MAX_KEY: Final = 1_000  # characters of a provider record's key
_SOURCE: Final = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_STATES: Final = frozenset(state.value for state in State)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Carried:
    """What never changes for one head, carried by its comment: its failing runs' quoted
    annotations (run id -> annotations; () where a run has none), second sources' final
    records, and its failing check runs' earlier attempts on the head (run id -> attempts,
    oldest first; () where a run has none)."""

    head_sha: str
    annotations: Mapping[int, tuple[Annotation, ...]] = field(default_factory=dict)
    reads: tuple[KeptRead, ...] = ()
    attempts: Mapping[int, tuple[Attempt, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.annotations or self.reads or self.attempts)

    def of(self, head_sha: str) -> Carried | None:
        """Itself where it is this head's; None for another head (nothing of it is taken)."""
        return self if head_sha and head_sha == self.head_sha else None


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a comment's hidden stamp records."""

    facts_key: str
    observed_at: datetime
    head_sha: str = ""  # the first-seen times are this head's ("" in a v1 stamp: none)
    first_seen: Mapping[str, datetime] = field(default_factory=dict)  # seen_key(key) -> time
    generation: int = 0  # the lease generation that wrote it (0: no lease)
    merge_base: MergeBaseOf | None = None  # of this head and its base branch
    # the facts key without the merge-base findings and quoted annotations ("": facts_key)
    core: str = ""
    # the identity of the state whose lease issued `generation` ("": none, or an older bot):
    # generations are ordered only within one epoch
    epoch: str = ""

    @property
    def core_key(self) -> str:
        """The facts key of what the comment says without the merge base and annotations."""
        return self.core or self.facts_key

    def merge_base_of(self, head_sha: str, base: str) -> MergeBaseOf | None:
        """The merge base of this head and base branch, as the stamp says."""
        if not self.head_sha or head_sha != self.head_sha or self.merge_base is None:
            return None
        return self.merge_base if self.merge_base.branch == base else None

    def seen(self, head_sha: str, signal_key: str) -> datetime | None:
        """When the bot first saw this signal on this head, as the stamp says."""
        if not self.head_sha or head_sha != self.head_sha:
            return None
        return self.first_seen.get(seen_key(signal_key))


def seen_key(signal_key: str) -> str:
    """The short digest under which a signal's first-seen time is stamped."""
    return hashlib.sha256(signal_key.encode("utf-8")).hexdigest()[:16]


def stamp_of(report: Report, *, generation: int = 0, epoch: str = "") -> Stamp:
    """The stamp of a report: its facts and the first-seen times it was reconciled with."""
    seen = {seen_key(key): at for key, at in report.first_seen}
    key, core = facts_key(report), core_key(report)
    return Stamp(
        key,
        report.observed_at,
        report.head_sha,
        seen,
        generation,
        report.merge_base,
        "" if core == key else core,
        epoch,
    )


def carried_of(report: Report) -> Carried:
    """What the report's comment carries for its head: the annotations its failing rows quote
    (as read: () where a run has none), the final records its second sources kept and its
    failing runs' earlier attempts that are final."""
    found = {
        run: row.annotations
        for row in report.rows
        if needs_annotations(row)
        and row.annotations is not None
        and (run := row.signal.database_id) is not None
    }
    reads = tuple(sorted(set(report.kept_reads)))
    return Carried(report.head_sha, found, reads, dict(report.kept_attempts))


def carried_line(carried: Carried, *, room: int = CARRIED_MAX) -> str:
    """The hidden line that carries `carried` within min(room, CARRIED_MAX) characters (""
    when nothing fits): provider records are dropped first, the largest first, then runs'
    annotations, the largest first, then runs' earlier attempts, the largest first."""
    limit = min(room, CARRIED_MAX)
    if not carried or limit <= 0:
        return ""
    runs = {run: [list(a) for a in found] for run, found in carried.annotations.items()}
    reads = [[r.source, r.key, r.payload, _micros(r.read_at)] for r in carried.reads]
    tried = {run: [_attempt_item(a) for a in found] for run, found in carried.attempts.items()}

    def size(item: Any) -> tuple[int, str]:
        text = json.dumps(item, sort_keys=True)
        return len(text), text

    reads.sort(key=size)  # the largest last: popped first
    order = sorted(runs, key=lambda run: size([run, runs[run]]))
    later = sorted(tried, key=lambda run: size([run, tried[run]]))
    raw = sum(size(r)[0] for r in reads) + sum(size([r, runs[r]])[0] for r in order)
    raw += sum(size([r, tried[r]])[0] for r in later)
    while reads or order or later:
        if raw <= _CARRIED_RAW_MAX // 2:  # else it cannot fit: no need to compress it to see
            kept = {r: runs[r] for r in order}
            line = _carried_text(carried.head_sha, kept, reads, {r: tried[r] for r in later})
            if len(line) <= limit:
                return line
        if reads:
            raw -= size(reads.pop())[0]
        else:
            group, run = (runs, order.pop()) if order else (tried, later.pop())
            raw -= size([run, group[run]])[0]
    return ""


def _attempt_item(attempt: Attempt) -> list[Any]:
    at = None if attempt.at is None else _micros(attempt.at)
    return [attempt.state.value, at, attempt.url]


def _carried_text(
    head: str,
    runs: Mapping[int, list[list[Any]]],
    reads: list[list[Any]],
    tried: Mapping[int, list[list[Any]]],
) -> str:
    data: dict[str, Any] = {"h": head, "a": {str(k): v for k, v in sorted(runs.items())}}
    data["r"] = reads
    if tried:  # absent where none is carried: a line without them reads as before
        data["t"] = {str(k): v for k, v in sorted(tried.items())}
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    packed = zlib.compress(text.encode("utf-8"), 9)
    encoded = base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")
    return f"<!-- ci-status-bot:carried v{CARRIED_VERSION} {encoded} -->"


def with_carried(body: str, line: str) -> str:
    """The stamped body with the carried line right after the stamp (its third line)."""
    if not line:
        return body
    parts = body.split("\n", 2)
    return "\n".join([*parts[:2], line, *parts[2:]])


def without_carried(body: str) -> str:
    """The body without its carried line (the same body where it has none)."""
    parts = body.split("\n", 3)
    if len(parts) > 2 and parts[2].strip().startswith("<!-- ci-status-bot:carried "):
        del parts[2]
    return "\n".join(parts)


def parse_carried(body: str) -> Carried | None:
    """What a comment's third line carries, right after the marker and the stamp; None where
    it has no line the bot can read there (over its bound, another version, garbled or any
    field out of range: ignored as a whole; one anywhere else in a body is never read)."""
    lines = body.split("\n", 3)
    line = lines[2].strip() if len(lines) > 2 and marked(body) else ""
    if not line.startswith("<!-- ci-status-bot:carried ") or len(line) > CARRIED_MAX:
        return None
    found = _CARRIED.fullmatch(line)
    if found is None or int(found["v"]) != CARRIED_VERSION:
        return None
    data = found["data"]
    try:
        packed = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, _CARRIED_RAW_MAX)
        if inflate.unconsumed_tail or not inflate.eof:
            return None  # larger than any line the bot writes inflates to, or cut short
        value = loads(raw.decode("utf-8"), max_depth=_CARRIED_DEPTH)
        return _carried(value) if isinstance(value, dict) else None
    except Exception:  # a line it cannot read is ignored, whatever failed
        return None


def _carried(value: dict[str, Any]) -> Carried | None:
    head, runs, reads = value.get("h"), value.get("a"), value.get("r")
    tried = value.get("t", {})
    if not (isinstance(head, str) and _COMMIT.fullmatch(head)):
        return None
    if not (isinstance(runs, dict) and isinstance(reads, list) and isinstance(tried, dict)):
        return None
    annotations = _by_run(runs, _annotations)
    attempts = _by_run(tried, _attempts)
    kept = tuple(read for item in reads if (read := _read(item)) is not None)
    if annotations is None or attempts is None or len(kept) != len(reads):
        return None
    return Carried(head, annotations, kept, attempts)


def _by_run(items: dict[Any, Any], read: Callable[[Any], T | None]) -> dict[int, T] | None:
    """Each run's entry read by `read`, by run id; None where a run id or an entry is not
    one the bot writes."""
    found: dict[int, T] = {}
    for run, item in items.items():
        value = read(item)
        if not (isinstance(run, str) and _RUN.fullmatch(run)) or value is None:
            return None
        if int(run) > _MAX_RUN_ID:
            return None
        found[int(run)] = value
    return found


def _attempts(items: Any) -> tuple[Attempt, ...] | None:
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 3):
            return None
        state, micros, url = item
        at = None if micros is None else _time(micros)
        if not (isinstance(state, str) and state in _STATES) or (micros is not None and at is None):
            return None
        if url is not None and not (isinstance(url, str) and writable(url)):
            return None
        out.append(Attempt(State(state), at, url))
    return tuple(out)


def _annotations(items: Any) -> tuple[Annotation, ...] | None:
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 4):
            return None
        path, start, end, message = item
        lines_ok = all(x is None or (type(x) is int and 0 <= x < 2**31) for x in (start, end))
        if not (isinstance(path, str) and isinstance(message, str) and lines_ok):
            return None
        if not (writable(path) and writable(message)):
            return None
        out.append(Annotation(path, start, end, message))
    return tuple(out)


def _read(item: Any) -> KeptRead | None:
    if not (isinstance(item, list) and len(item) == 4):
        return None
    source, key, payload, at = item
    read_at = _time(at)
    if not (isinstance(source, str) and _SOURCE.fullmatch(source)) or read_at is None:
        return None
    if not (isinstance(key, str) and 0 < len(key) <= _MAX_KEY and isinstance(payload, str)):
        return None
    if not (writable(key) and writable(payload)):
        return None
    return KeptRead(source, key, payload, read_at)


def kept_reads(reads: Iterable[KeptRead]) -> tuple[KeptRead, ...]:
    """Reads in the order a carried line holds them (a report's field compares equal)."""
    return tuple(sorted(set(reads)))


def stamp_line(stamp: Stamp) -> str:
    """The hidden line that records `stamp`."""
    data: dict[str, Any] = {
        "k": stamp.facts_key,
        "o": _micros(stamp.observed_at),
        "h": stamp.head_sha,
        "s": {k: _micros(v) for k, v in sorted(stamp.first_seen.items())},
        "g": stamp.generation,
    }
    if stamp.merge_base is not None:  # absent otherwise: a stamp without it reads as before
        branch, commit, tip, at = stamp.merge_base
        data["b"] = [branch, commit]  # an older bot's form where neither is known
        if tip is not None or at is not None:
            data["b"] += [tip, None if at is None else _micros(at)]
    if stamp.core:  # the same: absent where it is the facts key
        data["c"] = stamp.core
    if stamp.epoch:  # the same: absent with no state
        data["e"] = stamp.epoch
    text = json.dumps(data, separators=(",", ":"), sort_keys=True).encode("ascii")
    encoded = base64.urlsafe_b64encode(text).decode("ascii").rstrip("=")
    return f"<!-- ci-status-bot:stamp v{VERSION} {encoded} -->"


def with_stamp(body: str, stamp: Stamp) -> str:
    """The body with the stamp line inserted right after its first line (the marker)."""
    first, newline, rest = body.partition("\n")
    return f"{first}\n{stamp_line(stamp)}{newline}{rest}"


def parse_stamp(body: str) -> Stamp | None:
    """The stamp a comment body carries on its second line, right after the marker; None
    when it has none the bot can read there (a garbled or foreign stamp is ignored as a
    whole; one anywhere else in a body is never read)."""
    lines = body.split("\n", 2)
    line = lines[1].strip() if len(lines) > 1 and marked(body) else ""
    if len(line) > MAX_DATA + 64:
        return None
    try:
        v1 = _V1.fullmatch(line)
        if v1 is not None:  # month 13, year 0000: a ValueError
            at = datetime.strptime(v1["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            return Stamp(v1["key"], at)
        v2 = _V2.fullmatch(line)
        if v2 is None or int(v2["v"]) != VERSION:
            return None
        return _decode(v2["data"])
    except Exception:  # a stamp it cannot read is ignored, whatever failed
        return None


def generation_of(body: str, *, epoch: str | None = None) -> int | None:
    """The lease generation stamped in a comment body (0: written with no lease); None when
    the body has no stamp the bot can read (a v1 stamp says 0) or, with `epoch`, when its
    stamp is of another epoch (another state's generations are not comparable)."""
    stamp = parse_stamp(body)
    if stamp is None or (epoch is not None and stamp.epoch != epoch):
        return None
    return stamp.generation


def _decode(data: str) -> Stamp | None:
    raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    value = loads(raw.decode("ascii"), max_depth=_STAMP_DEPTH)
    return _stamp(value) if isinstance(value, dict) else None


def _stamp(value: dict[str, Any]) -> Stamp | None:
    key, observed, head = value.get("k"), _time(value.get("o")), value.get("h")
    seen, generation = value.get("s"), value.get("g")
    if not (isinstance(key, str) and _HEX64.fullmatch(key)) or observed is None:
        return None
    if not (isinstance(head, str) and _SHA.fullmatch(head)):
        return None
    if not isinstance(seen, dict) or len(seen) > MAX_SEEN:
        return None
    times = {k: _time(v) for k, v in seen.items()}
    if any(not _DIGEST.fullmatch(k) or t is None for k, t in times.items()):
        return None
    if type(generation) is not int or not 0 <= generation <= _MAX_GENERATION:
        return None
    try:
        merge_base = _merge_base(value.get("b"))
    except ValueError:
        return None
    core = value.get("c", "")
    if not (isinstance(core, str) and (core == "" or _HEX64.fullmatch(core))):
        return None
    epoch = value.get("e", "")
    if not (isinstance(epoch, str) and (epoch == "" or _EPOCH.fullmatch(epoch))):
        return None
    seen_at = {k: t for k, t in times.items() if t is not None}
    return Stamp(key, observed, head, seen_at, generation, merge_base, core, epoch)


def _merge_base(value: Any) -> MergeBaseOf | None:
    """The stamp's `b`: [branch, merge base] (an older bot's), or with the branch's commit it
    was asked with and when (each may be null); None where absent; ValueError where it is not
    one the bot writes."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) in (2, 4)):
        raise ValueError("not a merge base")
    branch, commit, tip, at = (*value, None, None)[:4]
    ok = isinstance(branch, str) and 0 < len(branch) <= _MAX_REF and writable(branch)
    ok = ok and isinstance(commit, str) and bool(_COMMIT.fullmatch(commit))
    ok = ok and (tip is None or (isinstance(tip, str) and bool(_COMMIT.fullmatch(tip))))
    asked = None if at is None else _time(at)
    if not ok or (at is not None and asked is None):
        raise ValueError("not a merge base")
    return MergeBaseOf(branch, commit, tip, asked)


def _micros(value: datetime) -> int:
    """Whole microseconds since the epoch (exact, unlike a float timestamp)."""
    delta = as_utc(value) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**6 + delta.microseconds


def _time(value: Any) -> datetime | None:
    if type(value) is not int or not _EARLIEST_US <= value <= _LATEST_US:
        return None
    seconds, micros = divmod(value, 10**6)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
