"""Failing check runs' failure-level annotations: kept per run where a state is, else asked."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from bot.core.annotations import annotations_of_payload, annotations_payload, needs_run
from bot.core.model import FAILING_STATES, Annotation, PullSnapshot, Signal
from bot.core.reconcile import dedupe, github_state
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError
from bot.state.ports import AnnotationKeeper

log = logging.getLogger(__name__)

Found = dict[int, tuple[Annotation, ...]]  # run id -> its failure-level annotations
K = TypeVar("K", int, str)
T = TypeVar("T")


def per_head(
    heads: Mapping[str, Sequence[K]],
    kept: Callable[[list[K]], dict[K, T]],
    asked: Callable[[dict[K, str]], dict[K, T]] | None,
) -> dict[str, dict[K, T]]:
    """By head: what is known of each of its items (failing runs), from `kept` (the state)
    first, then `asked` of GitHub for the rest, all heads' together (one batched read). With
    `asked` None only the state is read, and a head with an item not kept is left out."""
    items = {item: head for head, its in heads.items() for item in its}
    found = kept(list(items)) if items else {}
    unread = {item: head for item, head in items.items() if item not in found}
    if unread and asked is not None:
        found.update(asked(unread))
    return {
        head: {item: found[item] for item in its if item in found}
        for head, its in heads.items()
        if asked is not None or not any(item in unread for item in its)
    }


def failing_runs(snapshot: PullSnapshot) -> list[Signal]:
    """The head's failing check runs (superseded runs left out) that can be asked by node id."""
    return [
        s for s in dedupe(snapshot.signals) if needs_run(s) and github_state(s) in FAILING_STATES
    ]


class AnnotationReader:
    """Reads failing check runs' annotations in batched GraphQL (`nodes(ids:)`), once per run
    where `keeper` keeps them (a completed run's annotations never change; None: no state)."""

    def __init__(
        self,
        github: GitHubApi,
        keeper: AnnotationKeeper | None,
        *,
        clock: Callable[[], datetime],
        runs_of: Callable[[PullSnapshot], list[Signal]] = failing_runs,
    ) -> None:
        """`runs_of`: the failing runs of a head (failing_runs, or one that keeps them)."""
        self.github, self.keeper, self.clock, self.runs_of = github, keeper, clock, runs_of

    def read(
        self, repo: str, snapshots: Sequence[PullSnapshot], *, ask: bool = True
    ) -> dict[str, Found]:
        """By head: the annotations of each of its failing check runs that could be read.
        With `ask` False only the state is read, and a head with a run not kept is left out."""
        runs = {
            snapshot.head_sha: {s.database_id: s for s in self.runs_of(snapshot) if s.database_id}
            for snapshot in snapshots
        }
        signals = {run: signal for found in runs.values() for run, signal in found.items()}

        def asked(unread: dict[int, str]) -> Found:
            return self._ask(repo, {run: (head, signals[run]) for run, head in unread.items()})

        kept = (lambda ids: self._kept(repo, ids)) if self.keeper else (lambda ids: {})
        return per_head({h: list(r) for h, r in runs.items()}, kept, asked if ask else None)

    def _kept(self, repo: str, run_ids: list[int]) -> Found:
        found: Found = {}
        kept = self.keeper.get_annotations(repo, run_ids) if self.keeper else {}
        for run, payload in kept.items():
            try:
                found[run] = annotations_of_payload(payload)
            except (ValueError, TypeError):
                log.warning("the kept annotations of run %d in %s are unreadable", run, repo)
        return found

    def _ask(self, repo: str, runs: dict[int, tuple[str, Signal]]) -> Found:
        by_node = {str(s.node_id): run for run, (_, s) in runs.items()}
        try:
            answered = self.github.check_run_annotations(list(by_node))
        except GitHubError as exc:  # not read: the rows quote nothing, asked again next time
            log.warning("could not read check-run annotations in %s: %s", repo, exc)
            return {}
        found = {by_node[node]: annotations for node, annotations in answered.items()}
        if self.keeper is not None:
            kept = {run: (runs[run][0], annotations_payload(a)) for run, a in found.items()}
            self.keeper.put_annotations(repo, kept, now=self.clock())
        return found
