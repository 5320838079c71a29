"""The merge bases of failing heads and what GitHub reported on them, kept where a state is."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from bot.core.base import MergeBase, merge_base_of_payload, merge_base_payload
from bot.core.model import PullSnapshot
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError, RateLimited
from bot.state.ports import BaseKeeper

log = logging.getLogger(__name__)


class BaseReader:
    """Reads each head's merge base (REST compare, once per head where `keeper` keeps it) and
    the merge bases' contexts (batched GraphQL; final answers kept)."""

    def __init__(
        self,
        github: GitHubApi,
        keeper: BaseKeeper | None,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self.github, self.keeper, self.clock = github, keeper, clock

    def read(self, repo: str, snapshots: Sequence[PullSnapshot]) -> dict[str, MergeBase]:
        """Each head's merge base with its signals (or why they could not be read), by head.

        A re-read of a merge base's checks that fails where an answer was read before is no
        new fact: that last good answer stands, with since when reading fails (kept)."""
        merges: dict[str, MergeBase] = {}
        limited: str | None = None
        pairs = [(s.base, s.head_sha) for s in snapshots if s.base is not None]
        pairs_kept = self.keeper.merge_bases(repo, pairs) if self.keeper and pairs else {}
        for snapshot in snapshots:
            merges[snapshot.head_sha] = merge = self._merge_base(
                repo, snapshot, pairs_kept, limited=limited
            )
            if limited is None and merge.error is not None and "rate limit" in merge.error:
                limited = merge.error
        commits = {m.commit for m in merges.values() if m.commit is not None}
        kept = {c: m for c in commits if (m := self._kept(repo, c)) is not None}
        known = {c: m for c, m in kept.items() if m.final}
        unread = sorted(commits - set(known))
        if unread and limited is None:
            known.update(self._read_commits(repo, unread, kept))
        found: dict[str, MergeBase] = {}
        for head, merge in merges.items():
            if merge.commit is not None and merge.commit not in known:
                why = limited or "its checks were not read"
                known[merge.commit] = self._fallback(
                    repo, merge.commit, kept.get(merge.commit), error=why, failure=why
                )
            found[head] = known[merge.commit] if merge.commit is not None else merge
        return found

    def _merge_base(
        self,
        repo: str,
        snapshot: PullSnapshot,
        kept: Mapping[tuple[str, str], str],
        *,
        limited: str | None = None,
    ) -> MergeBase:
        """The head's merge base (no signals yet): kept (read for all heads at once), else
        asked of GitHub (not once a rate limit was met: then `limited` says why)."""
        base = snapshot.base
        if base is None:
            return MergeBase(None, error="GitHub did not name the pull request's base branch")
        known = kept.get((base, snapshot.head_sha))
        if known:
            return MergeBase(known)
        if limited is not None:
            return MergeBase(None, error=limited)
        head = snapshot.head_sha
        try:
            sha = self.github.merge_base(repo, base, head)
        except RateLimited as exc:
            log.warning("GitHub's compare of %s and %s in %s: %s", base, head, repo, exc)
            why = f"GitHub's compare of {base} and the head was refused: {exc.reason}"
            return MergeBase(None, error=why)  # `reason` names the rate limit: none asked after
        except GitHubError as exc:
            log.warning("GitHub's compare of %s and %s in %s: %s", base, head, repo, exc)
            why = f"GitHub's compare of {base} and the head failed: {exc.reason}"
            return MergeBase(None, error=why)
        if self.keeper is not None:
            self.keeper.put_merge_base(repo, base, snapshot.head_sha, sha, now=self.clock())
        return MergeBase(sha)

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
