"""The stamp: a hidden, versioned line right after the marker that carries what the next run needs.

`<!-- ci-status-bot:stamp v2 <base64url of compact JSON> -->` records the facts key, when those
facts were first observed, the head commit, when the bot first saw each signal GitHub gave no
time for (by a digest of the signal's key), the lease generation of the write and, where a
failure was compared with the merge base, the base branch and the merge-base commit (which
never change for a head), and, where the comment quotes a merge-base finding or annotations,
the facts key without them (a run with no state then tells a failed read of those from new
facts). With it a run with no state at all (a fresh CI runner) tells the same story as one
with a state, and a lost state re-dates nothing. Base64 keeps untrusted names out of the HTML
comment.

A stamp the bot cannot read (garbled, too large, another version, a field out of range) is
ignored as a whole, never trusted in part. The v1 line of earlier releases,
`<!-- ci-status-bot:facts=<key> observed=<ISO UTC> -->`, is still read (facts and time only).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from bot.core.facts import core_key, facts_key
from bot.core.model import Report, as_utc

VERSION: Final = 2
MAX_DATA: Final = 50_000  # base64 characters (1,000 first-seen times fit); longer is not read
MAX_SEEN: Final = 1_000
_V1: Final = re.compile(
    r"<!-- ci-status-bot:facts=(?P<key>[0-9a-f]{64}) "
    r"observed=(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) -->"
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


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a comment's hidden stamp records."""

    facts_key: str
    observed_at: datetime
    head_sha: str = ""  # the first-seen times are this head's ("" in a v1 stamp: none)
    first_seen: Mapping[str, datetime] = field(default_factory=dict)  # seen_key(key) -> time
    generation: int = 0  # the lease generation that wrote it (0: no lease)
    merge_base: tuple[str, str] | None = None  # (base branch, merge-base commit) of this head
    # the facts key without the merge-base findings and quoted annotations ("": facts_key)
    core: str = ""
    # the identity of the state whose lease issued `generation` ("": none, or an older bot):
    # generations are ordered only within one epoch
    epoch: str = ""

    @property
    def core_key(self) -> str:
        """The facts key of what the comment says without the merge base and annotations."""
        return self.core or self.facts_key

    def merge_base_of(self, head_sha: str, base: str) -> str | None:
        """The merge-base commit of this head and base branch, as the stamp says."""
        if not self.head_sha or head_sha != self.head_sha or self.merge_base is None:
            return None
        return self.merge_base[1] if self.merge_base[0] == base else None

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
        data["b"] = list(stamp.merge_base)
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
    """The stamp a comment body carries on its second line; None when it has none the bot
    can read (a garbled or foreign stamp is ignored as a whole)."""
    lines = body.split("\n", 2)
    line = lines[1].strip() if len(lines) > 1 else ""
    if len(line) > MAX_DATA + 64:
        return None
    v1 = _V1.fullmatch(line)
    if v1 is not None:
        try:
            at = datetime.strptime(v1["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        except ValueError:  # month 13, year 0000
            return None
        return Stamp(v1["key"], at)
    v2 = _V2.fullmatch(line)
    if v2 is None or int(v2["v"]) != VERSION:
        return None
    return _decode(v2["data"])


def generation_of(body: str, *, epoch: str | None = None) -> int | None:
    """The lease generation stamped in a comment body (0: written with no lease); None when
    the body has no stamp the bot can read (a v1 stamp says 0) or, with `epoch`, when its
    stamp is of another epoch (another state's generations are not comparable)."""
    stamp = parse_stamp(body)
    if stamp is None or (epoch is not None and stamp.epoch != epoch):
        return None
    return stamp.generation


def _decode(data: str) -> Stamp | None:
    try:
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        value = json.loads(raw.decode("ascii"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None
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
    merge_base = value.get("b")
    if merge_base is not None:
        if not (
            isinstance(merge_base, list)
            and len(merge_base) == 2
            and isinstance(merge_base[0], str)
            and 0 < len(merge_base[0]) <= _MAX_REF
            and isinstance(merge_base[1], str)
            and _COMMIT.fullmatch(merge_base[1])
        ):
            return None
        merge_base = (merge_base[0], merge_base[1])
    core = value.get("c", "")
    if not (isinstance(core, str) and (core == "" or _HEX64.fullmatch(core))):
        return None
    epoch = value.get("e", "")
    if not (isinstance(epoch, str) and (epoch == "" or _EPOCH.fullmatch(epoch))):
        return None
    seen_at = {k: t for k, t in times.items() if t is not None}
    return Stamp(key, observed, head, seen_at, generation, merge_base, core, epoch)


def _micros(value: datetime) -> int:
    """Whole microseconds since the epoch (exact, unlike a float timestamp)."""
    delta = as_utc(value) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**6 + delta.microseconds


def _time(value: Any) -> datetime | None:
    if type(value) is not int or not _EARLIEST_US <= value <= _LATEST_US:
        return None
    seconds, micros = divmod(value, 10**6)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
