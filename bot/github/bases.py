"""The merge bases of failing heads and what GitHub reported on them, kept where a state is."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from bot.core.base import MergeBase, merge_base_of_payload, merge_base_payload
from bot.core.model import PullSnapshot
from bot.github.client import GitHubApi, GitHubError, RateLimited
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
        """Each head's merge base with its signals (or why they could not be read), by head."""
        merges: dict[str, MergeBase] = {}
        limited: str | None = None
        pairs = [(s.base, s.head_sha) for s in snapshots if s.base is not None]
        kept = self.keeper.merge_bases(repo, pairs) if self.keeper and pairs else {}
        for snapshot in snapshots:
            if limited is not None:
                merges[snapshot.head_sha] = MergeBase(None, error=limited)
                continue
            merges[snapshot.head_sha] = merge = self._merge_base(repo, snapshot, kept)
            if merge.error is not None and "rate limit" in merge.error:
                limited = merge.error
        commits = {m.commit for m in merges.values() if m.commit is not None}
        known = {c: m for c in commits if (m := self._kept(repo, c)) is not None}
        unread = sorted(commits - set(known))
        if unread and limited is None:
            known.update(self._read_commits(repo, unread))
        found: dict[str, MergeBase] = {}
        for head, merge in merges.items():
            if merge.commit is not None:
                why = limited or "its checks were not read"
                merge = known.get(merge.commit) or MergeBase(merge.commit, error=why)
            found[head] = merge
        return found

    def _merge_base(
        self, repo: str, snapshot: PullSnapshot, kept: Mapping[tuple[str, str], str]
    ) -> MergeBase:
        """The head's merge base (no signals yet): kept (read for all heads at once), else
        asked of GitHub."""
        base = snapshot.base
        if base is None:
            return MergeBase(None, error="GitHub did not name the pull request's base branch")
        known = kept.get((base, snapshot.head_sha))
        if known:
            return MergeBase(known)
        head = snapshot.head_sha
        try:
            sha = self.github.merge_base(repo, base, head)
        except RateLimited as exc:
            log.warning("GitHub's compare of %s and %s in %s: %s", base, head, repo, exc)
            return MergeBase(None, error=f"GitHub's rate limit was reached ({exc.reason})")
        except GitHubError as exc:
            log.warning("GitHub's compare of %s and %s in %s: %s", base, head, repo, exc)
            why = f"GitHub's compare of {base} and the head failed: {exc.reason}"
            return MergeBase(None, error=why)
        if self.keeper is not None:
            self.keeper.put_merge_base(repo, base, snapshot.head_sha, sha, now=self.clock())
        return MergeBase(sha)

    def _kept(self, repo: str, commit: str) -> MergeBase | None:
        payload = None if self.keeper is None else self.keeper.get_base_contexts(repo, commit)
        if payload is None:
            return None
        try:
            return merge_base_of_payload(commit, payload)
        except (ValueError, TypeError, KeyError):
            log.warning("the kept contexts of %s in %s are unreadable: read again", commit, repo)
            return None

    def _read_commits(self, repo: str, commits: Sequence[str]) -> dict[str, MergeBase]:
        try:
            found = self.github.commits_signals(repo, commits)
        except GitHubError as exc:
            log.warning("could not read the merge bases' checks in %s: %s", repo, exc)
            why = f"GitHub's checks of the merge base could not be read: {exc.reason}"
            return {c: MergeBase(c, error=why) for c in commits}
        if self.keeper is not None:
            for commit, merge in found.items():
                if merge.final:
                    payload = merge_base_payload(merge)
                    self.keeper.put_base_contexts(repo, commit, payload=payload, now=self.clock())
        return found
