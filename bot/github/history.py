"""What a failure's history is read from: failing checks' earlier attempts on their head
(batched, kept per head once final) and base branches' last commits (at most hourly, kept)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final

from bot.core.history import (
    BranchHistory,
    attempts_final,
    attempts_of_payload,
    attempts_payload,
    branch_of_payload,
    branch_payload,
    earlier_attempts,
)
from bot.core.history import failing_checks as checks_failing
from bot.core.model import Attempt, Kind, PullSnapshot, Signal
from bot.github.annotations import per_head
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError
from bot.state.ports import HistoryKeeper

log = logging.getLogger(__name__)

BRANCH_EVERY: Final = timedelta(hours=1)  # a base branch's history is read at most this often
BRANCH_KEPT: Final = timedelta(days=1)  # a last good history stands this long when a read fails
Attempts = dict[str, tuple[Attempt, ...]]  # signal key -> its earlier attempts on the head


def failing_checks(snapshot: PullSnapshot) -> Sequence[Signal]:
    """The head's failing check runs (superseded ones left out) and statuses."""
    return checks_failing(snapshot.signals)


def attempts_key(signal: Signal) -> str | None:
    """Where a failing signal's earlier attempts are kept: its key and this run (or state);
    None where GitHub gave neither a run id nor a time (nothing is kept for it)."""
    if signal.kind is Kind.CHECK_RUN and signal.database_id is not None:
        return f"attempts:{signal.key}@{signal.database_id}"
    if signal.kind is Kind.STATUS and signal.created_at is not None:
        return f"attempts:{signal.key}@{signal.created_at.isoformat()}"
    return None


def seed_attempts(
    keeper: HistoryKeeper,
    repo: str,
    snapshot: PullSnapshot,
    carried: Mapping[int, tuple[Attempt, ...]],
    *,
    now: datetime,
) -> None:
    """Keep the earlier attempts a trusted comment carries for the head's failing check runs
    (by run id) where `keeper` holds none, as AttemptReader keeps final ones (a run with no
    state then asks them no more)."""
    found: dict[str, tuple[Attempt, ...]] = {}
    for signal in failing_checks(snapshot):
        run, key = signal.database_id, attempts_key(signal)
        if signal.kind is Kind.CHECK_RUN and run is not None and run in carried and key:
            found[key] = carried[run]
    held = keeper.get_history(repo, sorted(found)) if found else {}
    head = snapshot.head_sha
    new = {k: (head, attempts_payload(a)) for k, a in found.items() if k not in held}
    if new:
        keeper.put_history(repo, new, now=now)


class AttemptReader:
    """Reads failing checks' earlier attempts on their heads: check runs in batched GraphQL
    (`checkType: ALL`), statuses' earlier states over REST (one page per head); kept where
    `keeper` is once every run read is final (a status's earlier states never change)."""

    def __init__(
        self,
        github: GitHubApi,
        keeper: HistoryKeeper | None,
        *,
        clock: Callable[[], datetime],
        checks_of: Callable[[PullSnapshot], Sequence[Signal]] = failing_checks,
    ) -> None:
        """`checks_of`: the head's failing checks (failing_checks, or what kept them)."""
        self.github, self.keeper, self.clock = github, keeper, clock
        self.checks_of = checks_of

    def read(
        self, repo: str, snapshots: Sequence[PullSnapshot], *, ask: bool = True
    ) -> dict[str, tuple[Attempts, frozenset[str]]]:
        """By head: the earlier attempts of each failing check whose history could be read,
        and the signal keys of those that are final (kept, or every run read had settled).
        With `ask` False only the state is read, and a head with a check not kept is left out."""
        checks: dict[str, Signal] = {}
        heads: dict[str, list[str]] = {}
        for snapshot in snapshots:
            for signal in self.checks_of(snapshot):
                key = attempts_key(signal)
                if key is not None:
                    checks[key] = signal
                    heads.setdefault(snapshot.head_sha, []).append(key)
        for snapshot in snapshots:
            heads.setdefault(snapshot.head_sha, [])

        final: set[str] = set()  # the attempts keys whose attempts never change again

        def kept(keys: list[str]) -> dict[str, tuple[Attempt, ...]]:
            found = self._kept(repo, keys)
            final.update(found)
            return found

        def asked(unread: dict[str, str]) -> dict[str, tuple[Attempt, ...]]:
            wanted = {key: (head, checks[key]) for key, head in unread.items()}
            return self._ask(repo, wanted, final)

        found = per_head(heads, kept, asked if ask else None)
        return {
            head: (
                {checks[key].key: attempts for key, attempts in by_key.items()},
                frozenset(checks[key].key for key in by_key if key in final),
            )
            for head, by_key in found.items()
        }

    def _kept(self, repo: str, keys: list[str]) -> dict[str, tuple[Attempt, ...]]:
        found: dict[str, tuple[Attempt, ...]] = {}
        kept = self.keeper.get_history(repo, keys) if self.keeper and keys else {}
        for key, (payload, _) in kept.items():
            try:
                found[key] = attempts_of_payload(payload)
            except (ValueError, TypeError):
                log.warning("the kept attempts %s in %s are unreadable: read again", key, repo)
        return found

    def _ask(
        self, repo: str, unread: dict[str, tuple[str, Signal]], settled: set[str]
    ) -> dict[str, tuple[Attempt, ...]]:
        """Ask GitHub; the keys of those that are final are added to `settled` (and kept)."""
        runs = {k: v for k, v in unread.items() if v[1].kind is Kind.CHECK_RUN}
        statuses = {k: v for k, v in unread.items() if v[1].kind is Kind.STATUS}
        found: dict[str, tuple[Attempt, ...]] = {}
        final: dict[str, tuple[str, str]] = {}
        try:
            found |= self._ask_runs(repo, runs, final)
            found |= self._ask_statuses(repo, statuses, final)
        except GitHubError as exc:  # not read: the rows say no attempts; asked again next time
            log.warning("could not read earlier attempts in %s: %s", repo, exc)
        settled.update(final)
        if self.keeper is not None:
            self.keeper.put_history(repo, final, now=self.clock())
        return found

    def _ask_runs(
        self, repo: str, runs: dict[str, tuple[str, Signal]], final: dict[str, tuple[str, str]]
    ) -> dict[str, tuple[Attempt, ...]]:
        keys = list(runs)
        asks = [(head, s.name, s.app_id) for head, s in (runs[k] for k in keys)]
        answered = self.github.check_attempts(repo, asks) if asks else {}
        found: dict[str, tuple[Attempt, ...]] = {}
        for index, all_runs in answered.items():
            key = keys[index]
            head, signal = runs[key]
            found[key] = attempts = earlier_attempts(signal, all_runs)
            if attempts_final(all_runs):
                final[key] = (head, attempts_payload(attempts))
        return found

    def _ask_statuses(
        self, repo: str, statuses: dict[str, tuple[str, Signal]], final: dict[str, tuple[str, str]]
    ) -> dict[str, tuple[Attempt, ...]]:
        found: dict[str, tuple[Attempt, ...]] = {}
        for head in sorted({head for head, _ in statuses.values()}):
            states = self.github.commit_statuses(repo, head)
            if states is None:  # more than a page: the earliest states are not known
                log.info("%s: the statuses of %s fill more than a page: not said", repo, head)
                continue
            for key, (its_head, signal) in statuses.items():
                if its_head == head:
                    found[key] = attempts = earlier_attempts(signal, states)
                    final[key] = (head, attempts_payload(attempts))
        return found


class BranchReader:
    """Reads base branches' last commits and their checks, batched, at most hourly each; kept
    where `keeper` is (a failed read leaves the last good history standing for a day)."""

    def __init__(
        self, github: GitHubApi, keeper: HistoryKeeper | None, *, clock: Callable[[], datetime]
    ) -> None:
        self.github, self.keeper, self.clock = github, keeper, clock

    def read(self, repo: str, branches: Iterable[str]) -> dict[str, BranchHistory]:
        """Each branch's history that is known (a branch whose history cannot be read, and
        was not read within a day, is left out)."""
        wanted = sorted(set(branches))
        if not wanted:
            return {}
        now = self.clock()
        kept = self._kept(repo, wanted)
        fresh = {b: h for b, h in kept.items() if h.read_at and now - h.read_at < BRANCH_EVERY}
        stale = [b for b in wanted if b not in fresh]
        if not stale:
            return fresh
        read = self._ask(repo, stale, now=now)
        for branch in stale:
            if branch not in read and branch in kept:
                last = kept[branch]
                if last.read_at is not None and now - last.read_at < BRANCH_KEPT:
                    read[branch] = last
        return fresh | read

    def _kept(self, repo: str, branches: list[str]) -> dict[str, BranchHistory]:
        if self.keeper is None:
            return {}
        found: dict[str, BranchHistory] = {}
        rows = self.keeper.get_history(repo, [f"branch:{b}" for b in branches])
        for key, (payload, _) in rows.items():
            try:
                history = branch_of_payload(payload)
            except (ValueError, TypeError, KeyError):
                log.warning("the kept history %s in %s is unreadable: read again", key, repo)
                continue
            found[history.branch] = history
        return found

    def _ask(self, repo: str, branches: list[str], *, now: datetime) -> dict[str, BranchHistory]:
        try:
            answered = self.github.branch_histories(repo, branches)
        except GitHubError as exc:
            log.warning("could not read the base branches' history in %s: %s", repo, exc)
            return {}
        read: dict[str, BranchHistory] = {}
        for branch, commits in answered.items():
            if isinstance(commits, str):
                log.warning("%s: the history of %s: %s", repo, branch, commits)
                continue
            read[branch] = BranchHistory(branch, commits, read_at=now)
        if self.keeper is not None and read:
            rows = {f"branch:{b}": ("", branch_payload(h)) for b, h in read.items()}
            self.keeper.put_history(repo, rows, now=now)
        return read
