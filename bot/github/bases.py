"""The merge bases of failing heads and what GitHub reported on them, kept where a state is:
each of the head and the base branch's commit it was asked with, asked again when the branch
moved (at most once per `recheck` per head)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from bot.core.base import MergeBase, merge_base_of_payload, merge_base_payload
from bot.core.model import MergeBaseOf, PullSnapshot
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError, RateLimited
from bot.state.ports import BaseKeeper, KeptBase

log = logging.getLogger(__name__)

RECHECK: Final = timedelta(hours=1)  # a kept merge base serves this long whatever its branch did


@dataclass(slots=True)
class _Asking:
    """One read's merge bases: what is kept of them, the base branches' newest commits it
    needs (None: GitHub gave none), its time, and the rate limit it met (no compare after)."""

    kept: Mapping[tuple[str, str], KeptBase]
    tips: Mapping[str, str | None]
    now: datetime
    limited: str | None = None


def seed_base(
    keeper: BaseKeeper,
    repo: str,
    head: str,
    stamped: MergeBaseOf | None,
    *,
    observed: datetime,
    now: datetime,
) -> None:
    """Keep the merge base a trusted stamp holds for a head (and its base branch) where
    `keeper` holds none, as BaseReader keeps what it asks: with the branch's commit it was
    asked with and when (a stamp of an older bot names neither: the tip is not known, asked
    when its facts were first observed; never later than `now`)."""
    if stamped is None or keeper.get_merge_base(repo, stamped.branch, head):
        return
    at = min(stamped.asked_at or observed, now)
    keeper.put_merge_base(repo, stamped.branch, head, stamped.commit, now=at, tip=stamped.tip)


def _stands(known: KeptBase | None, why: str) -> MergeBase:
    """What was kept stands where GitHub could not be asked again (else `why` it is not known)."""
    if known is None:
        return MergeBase(None, error=why)
    return MergeBase(known.merge_base, tip=known.tip, asked_at=known.read_at)


class BaseReader:
    """Reads each head's merge base and the merge bases' contexts (batched GraphQL; final
    answers kept).

    A merge base is a fact of the head and the base branch's commit GitHub's compare was asked
    with, kept with both where `keeper` keeps it: it serves while that commit is still the
    branch's newest, and for `recheck` after it was asked whatever the branch did; past that,
    a branch that moved (a merge commit that took in part of the head, a force push) is asked
    again, with its newest commit. A branch whose newest commit cannot be read leaves what is
    kept as it is."""

    def __init__(
        self,
        github: GitHubApi,
        keeper: BaseKeeper | None,
        *,
        clock: Callable[[], datetime],
        recheck: timedelta = RECHECK,
    ) -> None:
        self.github, self.keeper, self.clock, self.recheck = github, keeper, clock, recheck

    def read(self, repo: str, snapshots: Sequence[PullSnapshot]) -> dict[str, MergeBase]:
        """Each head's merge base with its signals (or why they could not be read), by head.

        A re-read of a merge base's checks that fails where an answer was read before is no
        new fact: that last good answer stands, with since when reading fails (kept)."""
        merges: dict[str, MergeBase] = {}
        asking = self._asking(repo, snapshots)
        for snapshot in snapshots:
            merges[snapshot.head_sha] = self._merge_base(repo, snapshot, asking)
        commits = {m.commit for m in merges.values() if m.commit is not None}
        kept = {c: m for c in commits if (m := self._kept(repo, c)) is not None}
        known = {c: m for c, m in kept.items() if m.final}
        unread = sorted(commits - set(known))
        if unread and asking.limited is None:
            known.update(self._read_commits(repo, unread, kept))
        found: dict[str, MergeBase] = {}
        for head, merge in merges.items():
            if merge.commit is not None and merge.commit not in known:
                why = asking.limited or "its checks were not read"
                known[merge.commit] = self._fallback(
                    repo, merge.commit, kept.get(merge.commit), error=why, failure=why
                )
            found[head] = (
                replace(known[merge.commit], tip=merge.tip, asked_at=merge.asked_at)
                if merge.commit is not None
                else merge
            )
        return found

    def _asking(self, repo: str, snapshots: Sequence[PullSnapshot]) -> _Asking:
        """What is kept of these heads' merge bases, and the newest commit of each base branch
        one of them needs: to ask GitHub's compare with, or to see whether a kept answer
        `recheck` old or older is of it (as the listing read them, else one batched read)."""
        pairs = [(s.base, s.head_sha) for s in snapshots if s.base is not None]
        kept = self.keeper.merge_bases(repo, pairs) if self.keeper and pairs else {}
        now = self.clock()
        due = {b for b, h in pairs if (k := kept.get((b, h))) is None or self._due(k, now)}
        if not due:
            return _Asking(kept, {}, now)
        try:
            return _Asking(kept, self.github.branch_tips(repo, sorted(due)), now)
        except GitHubError as exc:  # kept answers stand; a new head is compared by its branch
            log.warning("could not read the base branches' newest commits in %s: %s", repo, exc)
            why = f"GitHub's read of the base branch was refused: {exc.reason}"
            return _Asking(kept, {}, now, why if isinstance(exc, RateLimited) else None)

    def _due(self, kept: KeptBase, now: datetime) -> bool:
        """Whether a kept merge base was asked `recheck` ago or more (else it serves as is)."""
        return now - kept.read_at >= self.recheck

    def _merge_base(self, repo: str, snapshot: PullSnapshot, asking: _Asking) -> MergeBase:
        """The head's merge base (no signals yet): kept, where it still serves; else asked of
        GitHub with the branch's newest commit (by the branch's name where that could not be
        read), unless a rate limit was met (then a kept one stands, else `limited` says why)."""
        base, head = snapshot.base, snapshot.head_sha
        if base is None:
            return MergeBase(None, error="GitHub did not name the pull request's base branch")
        known = asking.kept.get((base, head))
        tip = asking.tips.get(base)
        if known is not None and (
            not self._due(known, asking.now) or tip is None or tip == known.tip
        ):
            return MergeBase(known.merge_base, tip=known.tip, asked_at=known.read_at)
        if asking.limited is not None:
            return _stands(known, asking.limited)
        try:
            sha = self.github.merge_base(repo, tip or base, head)
        except GitHubError as exc:
            log.warning("GitHub's compare of %s and %s in %s: %s", base, head, repo, exc)
            how = "was refused" if isinstance(exc, RateLimited) else "failed"
            why = f"GitHub's compare of {base} and the head {how}: {exc.reason}"
            if "rate limit" in why:  # `reason` names the rate limit: none asked after
                asking.limited = why
            return _stands(known, why)
        now = self.clock()
        if self.keeper is not None:
            self.keeper.put_merge_base(repo, base, head, sha, now=now, tip=tip)
        return MergeBase(sha, tip=tip, asked_at=now)

    def _kept(self, repo: str, commit: str) -> MergeBase | None:
        """The answer kept for this merge base: final (never read again), or the last good one."""
        payload = None if self.keeper is None else self.keeper.get_base_contexts(repo, commit)
        if payload is None:
            return None
        try:
            return merge_base_of_payload(commit, payload)
        except (ValueError, TypeError, KeyError):
            log.warning("the kept contexts of %s in %s are unreadable: read again", commit, repo)
            return None

    def _read_commits(
        self, repo: str, commits: Sequence[str], kept: Mapping[str, MergeBase]
    ) -> dict[str, MergeBase]:
        try:
            found = self.github.commits_signals(repo, commits)
        except GitHubError as exc:
            log.warning("could not read the merge bases' checks in %s: %s", repo, exc)
            why = f"GitHub's checks of the merge base could not be read: {exc.reason}"
            return {
                c: self._fallback(repo, c, kept.get(c), error=why, failure=exc.reason)
                for c in commits
            }
        now = self.clock()
        read: dict[str, MergeBase] = {}
        for commit, merge in found.items():
            if merge.error is not None:
                read[commit] = self._fallback(
                    repo, commit, kept.get(commit), error=merge.error, failure=merge.error
                )
                continue
            read[commit] = merge = replace(merge, read_at=now)
            if self.keeper is not None:  # final: for good; else as the last good answer
                payload = merge_base_payload(merge)
                self.keeper.put_base_contexts(repo, commit, payload=payload, now=now)
        return read

    def _fallback(
        self, repo: str, commit: str, last: MergeBase | None, *, error: str, failure: str
    ) -> MergeBase:
        """A failed read of a merge base's checks: the last good answer, failing since the
        first failure (kept), or, where none was ever read, the error."""
        if last is None:
            return MergeBase(commit, error=error)
        if last.failing_since is not None:
            return last
        now = self.clock()
        last = replace(last, failing_since=now, failure=failure)
        if self.keeper is not None:
            payload = merge_base_payload(last)
            self.keeper.put_base_contexts(repo, commit, payload=payload, now=now)
        return last
