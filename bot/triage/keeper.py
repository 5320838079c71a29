"""The triage rows kept in the state: the cycle's observer writes them, the views read them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from bot.core.history import told_anew
from bot.core.model import PullSnapshot, Report, Verdict, parse_optional_time
from bot.sources.base import Source
from bot.state.ports import StoredTriage, TriageRows, TriageState, TriageValues
from bot.triage.rows import (
    COUNT_GROUPS,
    NotRead,
    TriageEntry,
    Unsettled,
    comment_url,
    entry_for,
    named_dict,
    named_of,
    unsettled_dict,
)

# A row's values as compared with the one kept: all but when it was read.
Values = TriageValues
# Rows to write are written this many at a time, in one transaction (and at a pass's end).
WRITE_BATCH = 100
# By pull request: the report a row was computed from, the title and author, and the row.
RowMemo = dict[tuple[str, int], tuple[Report, str, str | None, Values]]


class TriageKeeper:
    """Observes a writing cycle: keeps each planned pull request's row, drops the closed ones.

    A row that would be written as the state holds it is not written again: only its read
    time is, for all such rows of a repository in one statement when the repository is done.
    A row names what it was computed from (`origin`): a fresh process takes the row the state
    keeps for a report of the same facts, since the same time, as computed (not again).
    """

    def __init__(
        self,
        store: TriageState,
        *,
        clock: Callable[[], datetime],
        docs: Sequence[Source],
        memo: RowMemo | None = None,
        version: str = "",
    ) -> None:
        """Keep rows in `store`, dated by `clock`; `docs` count the stuck docs builds; `memo`
        keeps each row with the report it was computed from (a process shares one: a report
        reused by the next cycle gives the same row); `version` is the bot's code's (a row
        computed by other code, or with other `docs`, is computed again; "": every row is)."""
        self.store, self.clock, self.docs = store, clock, tuple(docs)
        self.memo: RowMemo = {} if memo is None else memo
        self.version = version
        self._kept: dict[tuple[str, int], Values] | None = None  # read at the first row
        self._same: dict[str, list[int]] = {}  # rows found as kept, to be dated, by repo
        self._new: dict[str, dict[int, Values]] = {}  # rows to write, by repo

    def pull_done(self, snapshot: PullSnapshot, report: Report, key: str) -> None:
        """Keep a planned pull request's last report; `key` is its facts key
        (bot.core.facts: every fact it states)."""
        number = (report.repo, report.number)
        values = self._row(snapshot, report, key)
        kept = self._rows()
        if kept.get(number) == values:
            self._same.setdefault(report.repo, []).append(report.number)
            return
        kept[number] = values
        new = self._new.setdefault(report.repo, {})
        new[report.number] = values
        if len(new) >= WRITE_BATCH:
            self._write(report.repo)

    def _rows(self) -> dict[tuple[str, int], Values]:
        """The rows the state keeps (read at the first pull request), as this pass leaves them."""
        if self._kept is None:
            self._kept = {(r.repo, r.number): _values(r) for r in self.store.triage_rows()}
        return self._kept

    def _row(self, snapshot: PullSnapshot, report: Report, key: str) -> Values:
        """The row's values: those of the same report kept in memory, else of a report that only
        told its failures' history anew (a row shows none: when it was observed moves, and what
        it names as computed from), else the state's (`_kept_row`), else computed; kept in
        memory with the report they are of."""
        number, who = (report.repo, report.number), (snapshot.title, snapshot.author)
        origin = _origin(self.version, self.docs, key)
        last = self.memo.get(number)
        values: Values | None = None
        if last is not None and last[1:3] == who:
            if last[0] is report:
                return last[3]
            if told_anew(last[0], report):
                details = _with_origin(last[3][6], origin)
                values = (*last[3][:6], details, report.observed_at)
        if values is None:
            values = self._kept_row(snapshot, report, origin)
        if values is None:
            entry = entry_for(snapshot, report, docs=self.docs)
            values = (
                entry.title, entry.author, entry.draft, entry.head_sha, entry.verdict.value,
                entry.url, _details_json(entry, origin), entry.observed_at,
            )  # fmt: skip
        self.memo[number] = (report, *who, values)
        return values

    def _kept_row(self, snapshot: PullSnapshot, report: Report, origin: str) -> Values | None:
        """The row the state keeps where it was computed from the same facts (`origin`: this
        code, these `docs`, the report's facts key), observed since the same time, for the same
        title and author; None: compute it."""
        kept = self._rows().get((report.repo, report.number))
        if (
            origin
            and kept is not None
            and kept[6].startswith(_from(origin))
            and (kept[0], kept[1], kept[7]) == (snapshot.title, snapshot.author, report.observed_at)
        ):
            return kept
        return None

    def pulls_done(self) -> None:
        """Write the rows not yet written and date those found as kept (the end of a pass's
        reads, or of a refresh)."""
        for repo in list(self._new):
            self._write(repo)
        for repo in list(self._same):
            self._date(repo)

    def _write(self, repo: str) -> None:
        """Write the repository's new rows, in one transaction; rows it could not write are
        not taken as kept (written again next time)."""
        new = self._new.pop(repo, {})
        try:
            self.store.put_triage_many(repo, sorted(new.items()), now=self.clock())
        except BaseException:
            for number in new:
                if self._kept is not None:
                    self._kept.pop((repo, number), None)
            raise

    def repo_done(self, repo: str, seen: Iterable[int]) -> None:
        """After a repository was read completely: drop rows of pull requests it did not list."""
        kept = set(seen)
        self._write(repo)
        self._date(repo)
        for key in [k for k in self.memo if k[0] == repo and k[1] not in kept]:
            del self.memo[key]
        self.store.prune_triage(repo, keep=kept)
        self.store.repo_read_ok(repo)

    def repo_failed(self, repo: str, reason: str) -> None:
        """A repository could not be read: its rows stay, marked with since when and why."""
        self._write(repo)
        self._date(repo)
        self.store.repo_read_failed(repo, now=self.clock(), failure=reason)

    def _date(self, repo: str) -> None:
        same = self._same.pop(repo, [])
        if same:
            self.store.touch_triage(repo, same, now=self.clock())


def _values(row: StoredTriage) -> Values:
    return (
        row.title, row.author, row.draft, row.head_sha, row.verdict, row.url, row.details,
        row.observed_at,
    )  # fmt: skip


def stored_entries(store: TriageRows) -> list[TriageEntry]:
    """Every row the state holds (any order); rows of a repository not read say so."""
    unread = {repo: NotRead(since, why) for repo, (since, why) in store.unread_repos().items()}
    return [_from_stored(row, unread.get(row.repo)) for row in store.triage_rows()]


def _origin(version: str, docs: Sequence[Source], key: str) -> str:
    """What a row is computed from: the code's version, the sources that count stuck docs
    builds and the report's facts key ("": not known, never taken as kept)."""
    if not version or not key:
        return ""
    return f"{version}|{','.join(source.name for source in docs)}|{key}"


def _from(origin: str) -> str:
    """How a row's details begin when computed from `origin` (written first: see below)."""
    return '{"from":' + json.dumps(origin, ensure_ascii=False) + ","


def _with_origin(details: str, origin: str) -> str:
    """A row's stored details naming `origin` as what they were computed from ("": none), in
    place of what they named (the same row told of a report of other facts, see `_row`)."""
    values = json.loads(details)
    values.pop("from", None)
    named = {"from": origin} if origin else {}
    return json.dumps({**named, **values}, separators=(",", ":"), ensure_ascii=False)


def _details_json(entry: TriageEntry, origin: str = "") -> str:
    """The computed parts of a row, compact, as stored in the state; `from` (first) names
    what they were computed from, where that is known."""
    oldest = entry.oldest_unsettled
    return json.dumps(
        {
            **({"from": origin} if origin else {}),
            "counts": dict(entry.counts),
            "required_failing": list(entry.required_failing),
            "oldest_unsettled": None if oldest is None else unsettled_dict(oldest),
            "docs_stuck": entry.docs_stuck,
            "failing": list(entry.failing),
            "never_reported": list(entry.never_reported),
            "required_never_reported": list(entry.required_never_reported),
            "failing_on_base": list(entry.failing_on_base),
            "incomplete": [named_dict(n) for n in entry.incomplete],
            "pending": [named_dict(n) for n in entry.pending],
            "in_merge_queue": entry.in_merge_queue,
            "merge_queue_stuck": list(entry.merge_queue_stuck),
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _from_stored(row: StoredTriage, not_read: NotRead | None) -> TriageEntry:
    details = json.loads(row.details)
    oldest = details.get("oldest_unsettled")
    return TriageEntry(
        repo=row.repo,
        number=row.number,
        title=row.title,
        author=row.author,
        draft=row.draft,
        head_sha=row.head_sha,
        verdict=Verdict(row.verdict),
        url=row.url,
        observed_at=row.observed_at,
        counts={group: int(details["counts"].get(group, 0)) for group in COUNT_GROUPS},
        required_failing=tuple(details.get("required_failing", ())),
        oldest_unsettled=None
        if oldest is None
        else Unsettled(
            oldest["name"],
            oldest["state"],
            parse_optional_time(oldest["since"]),
        ),
        docs_stuck=int(details.get("docs_stuck", 0)),
        comment_url=comment_url(row.url, row.comment_id),
        read_at=row.updated_at,
        not_read=not_read,
        # rows kept before the names were: their required failures are all that is known
        failing=tuple(details.get("failing", details.get("required_failing", ()))),
        never_reported=tuple(details.get("never_reported", ())),
        required_never_reported=tuple(details.get("required_never_reported", ())),
        failing_on_base=tuple(details.get("failing_on_base", ())),
        incomplete=tuple(named_of(n) for n in details.get("incomplete", ())),
        pending=tuple(named_of(n) for n in details.get("pending", ())),
        in_merge_queue=bool(details.get("in_merge_queue", False)),
        merge_queue_stuck=tuple(details.get("merge_queue_stuck", ())),
    )
