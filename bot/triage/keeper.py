"""The triage rows kept in the state: the cycle's observer writes them, the views read them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from bot.core.model import PullSnapshot, Report, Verdict, parse_optional_time
from bot.docs.provider import DocsProvider
from bot.state.ports import StoredTriage, TriageRows, TriageState
from bot.triage.rows import (
    COUNT_GROUPS,
    NotRead,
    TriageEntry,
    Unsettled,
    comment_url,
    entry_for,
    unsettled_dict,
)

# A row's values as compared with the one kept: all but when it was read.
Values = tuple[str, str | None, bool, str, str, str, str, datetime]


class TriageKeeper:
    """Observes a writing cycle: keeps each planned pull request's row, drops the closed ones.

    A row that would be written as the state holds it is not written again: only its read
    time is, for all such rows of a repository in one statement when the repository is done.
    """

    def __init__(
        self, store: TriageState, *, clock: Callable[[], datetime], docs: Sequence[DocsProvider]
    ) -> None:
        """Keep rows in `store`, dated by `clock`; `docs` count the stuck docs builds."""
        self.store, self.clock, self.docs = store, clock, tuple(docs)
        self._kept: dict[tuple[str, int], Values] | None = None  # read at the first row
        self._same: dict[str, list[int]] = {}  # rows found as kept, to be dated, by repo

    def pull_done(self, snapshot: PullSnapshot, report: Report) -> None:
        """Keep a planned pull request's last report."""
        entry = entry_for(snapshot, report, docs=self.docs)
        details = _details_json(entry)
        values: Values = (
            entry.title, entry.author, entry.draft, entry.head_sha, entry.verdict.value,
            entry.url, details, entry.observed_at,
        )  # fmt: skip
        if self._kept is None:
            self._kept = {(r.repo, r.number): _values(r) for r in self.store.triage_rows()}
        if self._kept.get((entry.repo, entry.number)) == values:
            self._same.setdefault(entry.repo, []).append(entry.number)
            return
        self._kept[(entry.repo, entry.number)] = values
        self.store.put_triage(
            entry.repo,
            entry.number,
            title=entry.title,
            author=entry.author,
            draft=entry.draft,
            head_sha=entry.head_sha,
            verdict=entry.verdict.value,
            url=entry.url,
            details=details,
            observed_at=entry.observed_at,
            now=self.clock(),
        )

    def pulls_done(self) -> None:
        """Date the rows found as kept (the end of a pass's reads, or of a refresh)."""
        for repo in list(self._same):
            self._date(repo)

    def repo_done(self, repo: str, seen: Iterable[int]) -> None:
        """After a repository was read completely: drop rows of pull requests it did not list."""
        self._date(repo)
        self.store.prune_triage(repo, keep=set(seen))
        self.store.repo_read_ok(repo)

    def repo_failed(self, repo: str, reason: str) -> None:
        """A repository could not be read: its rows stay, marked with since when and why."""
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


def _details_json(entry: TriageEntry) -> str:
    """The computed parts of a row, compact, as stored in the state."""
    oldest = entry.oldest_unsettled
    return json.dumps(
        {
            "counts": dict(entry.counts),
            "required_failing": list(entry.required_failing),
            "oldest_unsettled": None if oldest is None else unsettled_dict(oldest),
            "docs_stuck": entry.docs_stuck,
            "failing": list(entry.failing),
            "never_reported": list(entry.never_reported),
            "required_never_reported": list(entry.required_never_reported),
            "failing_on_base": list(entry.failing_on_base),
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
    )
