"""The merge-group commits of queued pull requests and their queues' time limits, as read.

One GraphQL query per repository with queued pull requests (their merge-group commits' checks
by `object(oid:)`, batched as the merge bases' are, through the same client read), the queue's
configuration of each base branch asked in it only when it is not kept: a repository with no
queued pull request costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Final

from bot.core.base import MergeBase
from bot.core.merge_queue import QueueConfig, QueueRead
from bot.core.model import PullSnapshot
from bot.github.client import GitHubApi
from bot.github.commits import MERGE_GROUP
from bot.github.errors import GitHubError

log = logging.getLogger(__name__)

# A queue's configuration is read again after this long by one reader (it changes rarely, and
# is asked inside the query that reads the merge groups anyway: no point of its own).
CONFIG_KEPT: Final = timedelta(hours=1)


class MergeGroupReader:
    """Reads what queued pull requests' merge-group commits carry; keeps each queue's time
    limit per (repository, base branch) for CONFIG_KEPT."""

    def __init__(self, github: GitHubApi, *, clock: Callable[[], datetime]) -> None:
        self.github, self.clock = github, clock
        self._configs: dict[tuple[str, str], tuple[QueueConfig, datetime]] = {}

    def read(self, repo: str, snapshots: Sequence[PullSnapshot]) -> dict[int, QueueRead]:
        """Each queued pull request's read, by number (none for one not queued). A failed
        read is said on every entry it concerns, and the cycle goes on."""
        queued = [s for s in snapshots if s.queue is not None and s.queue.error is None]
        if not queued:
            return {}
        now = self.clock()
        shas = sorted({s.queue.commit for s in queued if s.queue and s.queue.commit})
        bases = sorted({s.base for s in queued if s.base})
        unknown = [b for b in bases if not self._fresh(repo, b, now)]
        groups: dict[str, MergeBase] = {}
        try:
            groups, configs = self.github.commits_and_queues(repo, shas, unknown, what=MERGE_GROUP)
        except GitHubError as exc:  # a rate limit too: said on the entries, nothing else stops
            log.warning("could not read the merge-group commits of %s: %s", repo, exc)
            why = f"GitHub's checks of the merge-group commit could not be read: {exc.reason}"
            groups = {sha: MergeBase(sha, error=why) for sha in shas}
            configs = {b: QueueConfig(None, f"the merge queue could not be read: {exc.reason}")
                       for b in unknown}  # fmt: skip
        for base, config in configs.items():
            if config.error is None:
                self._configs[(repo, base)] = (config, now)
        known = {b: c for b in bases if (c := self._config(repo, b, configs)) is not None}
        return {
            s.number: QueueRead(
                groups.get(s.queue.commit) if s.queue and s.queue.commit else None,
                known.get(s.base) if s.base else None,
            )
            for s in queued
        }

    def _fresh(self, repo: str, base: str, now: datetime) -> bool:
        kept = self._configs.get((repo, base))
        return kept is not None and now - kept[1] < CONFIG_KEPT and now >= kept[1]

    def _config(self, repo: str, base: str, read: dict[str, QueueConfig]) -> QueueConfig | None:
        """What this read said of the queue, else what is kept (a failed read says why)."""
        if base in read and read[base].error is None:
            return read[base]
        kept = self._configs.get((repo, base))
        if kept is not None:
            return kept[0]
        return read.get(base)
