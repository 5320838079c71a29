"""Failing check runs' failure-level annotations: kept per run where a state is, else asked."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from bot.core.annotations import annotations_of_payload, annotations_payload, needs_run
from bot.core.model import FAILING_STATES, Annotation, PullSnapshot, Signal
from bot.core.reconcile import dedupe, github_state
from bot.github.client import GitHubApi, GitHubError
from bot.state.ports import AnnotationKeeper

log = logging.getLogger(__name__)

Found = dict[int, tuple[Annotation, ...]]  # run id -> its failure-level annotations


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
        heads = {snapshot.head_sha: self.runs_of(snapshot) for snapshot in snapshots}
        runs = {s.database_id: (head, s) for head, ss in heads.items() for s in ss if s.database_id}
        found = self._kept(repo, list(runs)) if runs and self.keeper else {}
        unread = {run: runs[run] for run in runs if run not in found}
        if unread and ask:
            found.update(self._ask(repo, unread))
        return {
            head: {s.database_id: found[s.database_id] for s in ss if s.database_id in found}
            for head, ss in heads.items()
            if ask or not any(s.database_id in unread for s in ss)
        }

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
