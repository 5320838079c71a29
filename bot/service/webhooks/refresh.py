"""The refresh itself: the marked pull requests re-read in one batched query per 50, then
planned and published by the same Cycle code a polling cycle uses (pacing, budget)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.app import Cycle
from bot.core.model import PullSnapshot
from bot.core.summary import Summary
from bot.github.parse import PullFailure
from bot.service.webhooks.inbox import Inbox
from bot.settings import RepoSettings


def refresh(
    cycle: Cycle,
    batch: Mapping[str, Sequence[int]],
    repos: Mapping[str, RepoSettings],
    *,
    inbox: Inbox,
) -> Summary:
    """Re-read the marked pull requests (one query per 50), then plan and publish as a cycle."""
    usage = cycle.github.usage
    requests_before, points_before = usage.total, usage.graphql_points
    read_at = cycle.clock()
    pulls: list[tuple[PullSnapshot | PullFailure, RepoSettings]] = []
    for name, numbers in batch.items():
        repo = repos.get(name)
        if repo is None:
            continue
        found = cycle.github.pulls_by_number(name, numbers, now=cycle.clock(), required=cycle.store)
        for number in numbers:
            snapshot = found.get(number)
            if snapshot is None:  # closed or gone: its comment is left as it is
                inbox.forget_head(name, number)
            else:
                pulls.append((snapshot, repo))
    summary = cycle.run_pulls(pulls)
    summary.github_requests = usage.total - requests_before  # the batched read included
    summary.graphql_points = usage.graphql_points - points_before
    inbox.learn_heads(summary.heads, read_at=read_at)
    return summary
