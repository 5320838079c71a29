"""Gather what a chunk of pull requests is judged from: the only stage of a pass that reads.

The state's records and first sights, the bot's own comments (one batched listing where the
state knows none) and their stamps, each second source's evidence, the failing heads' merge
bases, annotations and history, the queued ones' merge groups, and the last pass's reports
kept in memory. Each read is made once per pass (kept here by head or pull request) and
batched where GitHub allows; what `judge` or `plan` want besides is read by `more`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.core.annotations import annotations_payload
from bot.core.base import MergeBase
from bot.core.comment import Comment
from bot.core.evidence import Evidence
from bot.core.history import BranchHistory, FailingIndex, HistoryInputs, elsewhere_of
from bot.core.merge_queue import QueueRead
from bot.core.model import PullSnapshot, Signal
from bot.cycle.comments import Sightings, find_own, trusted_stamp
from bot.cycle.digests import restored, version
from bot.cycle.model import (
    Found,
    FromSignals,
    Inputs,
    Known,
    Reports,
    Want,
    Wanted,
    has_failing,
    needs_first_seen,
)
from bot.github.annotations import AnnotationReader, failing_runs
from bot.github.bases import BaseReader, seed_base
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError
from bot.github.history import AttemptReader, Attempts, BranchReader, seed_attempts
from bot.github.merge_groups import MergeGroupReader
from bot.github.ownership import is_claimed
from bot.github.parse import PullFailure
from bot.render.stamp import Stamp, parse_carried
from bot.settings import PolicySettings, RepoSettings
from bot.sources.base import Source
from bot.sources.carried import CarriedReads
from bot.state.ports import CycleState, PullRecord, StoredComment, StoreError

log = logging.getLogger(__name__)

Pull = PullSnapshot | PullFailure


def selected(snapshot: PullSnapshot, policy: PolicySettings) -> bool:
    """Whether the policy lets the bot report on this pull request."""
    if snapshot.draft and not policy.include_drafts:
        return False
    # Logins are in REST's form (a Bot's with `[bot]`) and compared as GitHub does, ignoring case.
    skip = {login.casefold() for login in policy.skip_authors}
    if snapshot.author is not None and snapshot.author.casefold() in skip:
        return False
    # GitHub's label names are unique ignoring case: compare them so.
    skip_labels = {label.casefold() for label in policy.skip_labels}
    return not {label.casefold() for label in snapshot.labels} & skip_labels


def queued(snapshots: Iterable[Pull], policy: PolicySettings) -> list[PullSnapshot]:
    """The selected pull requests GitHub's merge queue holds (their merge groups are read)."""
    return [
        s
        for s in snapshots
        if isinstance(s, PullSnapshot) and s.queue is not None and selected(s, policy)
    ]


def read_docs(
    snapshot: PullSnapshot,
    repo: RepoSettings,
    docs: Sequence[Source],
    *,
    now: datetime,
    kept: FromSignals,
) -> dict[str, Evidence]:
    """What every second source says about the head's statuses, by context; which signals
    each is asked about as `kept` holds it (the head's very signals: computed once for them)."""
    found: dict[str, Evidence] = {}
    for provider in docs:
        asked = kept.asked_by(provider.name, provider.asks)
        found.update(provider.evidence(snapshot, repo, now=now, asked=asked))
    return found


class Gatherer:
    """One pass's reads: each made once (kept by head or pull request), batched."""

    def __init__(
        self,
        *,
        github: GitHubApi,
        docs: Sequence[Source],
        store: CycleState,
        reports: Reports,
        policy: PolicySettings,
        login: str,
        clock: Callable[[], datetime],
        generation: Callable[[str], int],
        sightings: Sightings,
        carried: CarriedReads | None = None,
    ) -> None:
        """`carried`: what the sources read through (a head's final records are noted there,
        and those the bot's own trusted comment carries are given to the state first)."""
        self.github, self.docs, self.store, self.reports = github, tuple(docs), store, reports
        self.policy, self.login, self.clock, self.generation = policy, login, clock, generation
        self.sightings, self.carried = sightings, carried
        self._records: dict[tuple[str, int], PullRecord] = {}  # read a chunk at a time
        self._listed: dict[tuple[str, int], Comment | None] = {}  # by the batched listing
        # what taking a listed comment's stamp and carried line raised, by pull request: that
        # pull request's failure when it is judged (never its chunk's or its repository's)
        self._untaken: dict[tuple[str, int], Exception] = {}
        self.stored: dict[tuple[str, int], StoredComment] = {}  # the records judged from
        self._bases: dict[tuple[str, str], MergeBase] = {}
        self._annotations: dict[tuple[str, str], Found] = {}
        self._groups: dict[tuple[str, int], QueueRead] = {}
        self._grouped: set[tuple[str, int]] = set()  # pull requests whose group was read
        self._attempts: dict[tuple[str, str], Attempts] = {}
        self._final: dict[tuple[str, str], frozenset[str]] = {}  # whose attempts are final
        self._branches: dict[tuple[str, str], BranchHistory | None] = {}
        self._building: dict[str, FailingIndex] = {}
        # The readers tell time by the cycle's clock as it is when they ask (one clock per pass)
        self._base_reader = BaseReader(github, store, clock=clock, recheck=policy.base_recheck)
        self._group_reader = MergeGroupReader(github, clock=clock)
        self._annotation_reader = AnnotationReader(
            github, store, clock=clock, runs_of=self.failing_runs
        )
        self._attempt_reader = AttemptReader(
            github, store, clock=clock, checks_of=lambda s: reports.from_signals(s).checks
        )
        self._branch_reader = BranchReader(github, store, clock=clock)
        self._given = Given(store, carried, policy=policy, login=login, clock=clock,
                            runs_of=self.failing_runs)  # fmt: skip

    # -- what an earlier process kept -----------------------------------------------------

    def restore(self, repo: str) -> None:
        """The reports an earlier process kept for `repo` (bot.cycle.digests), read once per
        process and repository: each pull request's last report, and the digest of the node
        it was read from, as though this process had built them (each serves, or not, as
        one kept in memory does)."""
        if repo in self.reports.restored:
            return
        self.reports.restored.add(repo)
        try:
            payloads = self.store.kept_reports(repo, version=version())
        except StoreError as exc:  # nothing kept: each is built again
            log.warning("could not read the kept reports of %s: %s", repo, exc)
            return
        kept = restored(repo, payloads)
        for _, one in kept:
            if self.reports.get(repo, one.built.report.number) is None:
                self.reports.put(one.built, derived=one.derived)
        self.github.keep_nodes(repo, {node: one.built.snapshot for node, one in kept if node})

    # -- a chunk of a repository's listing -------------------------------------------------

    def chunk(self, repo: RepoSettings, chunk: Sequence[Pull]) -> list[PullSnapshot]:
        """Read what the chunk's pull requests share: the state's records, one listing of the
        comments the state does not know, the failing heads' merge bases and kept annotations.
        Returns those that wait for the repository's batched reads (`late`): failing heads
        whose annotations are not kept (with `[policy] history`: every failing head) and the
        queued ones."""
        name = repo.name
        self.records(name, chunk)
        self._list_unknown(name, chunk)
        failing = [
            s
            for s in chunk
            if isinstance(s, PullSnapshot) and selected(s, self.policy) and self.failing(repo, s)
        ]
        self._from_comments(name, chunk, failing)
        self.read_bases(name, failing)
        self.read_annotations(name, failing, ask=False)
        unread = [s for s in failing if (name, s.head_sha) not in self._annotations]
        if self.policy.history:  # every open head is counted; the failing wait for them all
            index = self._building.setdefault(name, FailingIndex())
            for snapshot in chunk:
                if isinstance(snapshot, PullSnapshot):
                    index.add(snapshot, self.reports.from_signals(snapshot).entries)
            unread = list(failing)
        # queued ones wait too: the repository's merge groups are read in one query at its end
        unread += [s for s in queued(chunk, self.policy) if all(s is not u for u in unread)]
        return unread

    def records(self, repo: str, pulls: Sequence[Pull]) -> None:
        """The state's records of these pull requests, in one batched read."""
        numbers = [s.number for s in pulls if isinstance(s, PullSnapshot)]
        for number, record in self.store.pull_records(repo, numbers).items():
            self._records[(repo, number)] = record

    def listed_whole(self, repo: str) -> None:
        """Every open pull request of `repo` was listed: its index of failing checks is too."""
        if repo in self._building:
            self.reports.index[repo] = self._building.pop(repo)

    def late(self, repo: RepoSettings, waiting: Sequence[PullSnapshot]) -> None:
        """The repository's batched reads for the pull requests that waited for them: merge
        groups (one query), annotations (100 runs a query), history."""
        self.read_groups(repo.name, waiting)
        failing = [s for s in waiting if self.failing(repo, s)]
        self.read_annotations(repo.name, failing)
        self.read_history(repo.name, failing)

    def prefetch(self, pulls: Sequence[tuple[Pull, RepoSettings]]) -> None:
        """A refresh's reads, batched by repository as a pass's are: the failing heads' merge
        bases, annotations and history, the queued ones' merge groups (read again)."""
        failing: dict[str, list[PullSnapshot]] = {}
        grouped: dict[str, list[PullSnapshot]] = {}
        for snapshot, repo in pulls:
            if not isinstance(snapshot, PullSnapshot):
                continue
            if selected(snapshot, self.policy) and self.failing(repo, snapshot):
                failing.setdefault(repo.name, []).append(snapshot)
            if snapshot.queue is not None:
                grouped.setdefault(repo.name, []).append(snapshot)
        for name, snapshots in failing.items():
            self.read_bases(name, snapshots)
            self.read_annotations(name, snapshots)
            self.read_history(name, snapshots)
        for name, snapshots in grouped.items():
            self.read_groups(name, queued(snapshots, self.policy))

    def _list_unknown(self, repo: str, chunk: Sequence[Pull]) -> None:
        numbers = [
            s.number
            for s in chunk
            if isinstance(s, PullSnapshot)
            and selected(s, self.policy)
            and self._record(repo, s.number).comment is None
            and not self._record(repo, s.number).without_comment
        ]
        if not numbers:
            return
        try:
            listed = self.github.pulls_comments(
                repo, numbers, until=lambda c: is_claimed(c, self.login)
            )
        except GitHubError as exc:  # each is listed over REST when planned (or fails alone)
            log.warning("could not list the comments of %s over GraphQL: %s", repo, exc)
            return
        for number, comments in listed.items():
            self._listed[(repo, number)] = self.sightings.keep(repo, number, comments, self.login)

    def _from_comments(
        self, repo: str, chunk: Sequence[Pull], failing: Sequence[PullSnapshot]
    ) -> None:
        """Give the state what the bot's own listed comments say never changes for their head,
        where it holds none, as its readers keep what they read (a run with no state then asks
        none of it again): the merge base its stamp holds (failing heads), the failing runs'
        annotations and earlier attempts and second sources' final records its carried line
        holds. Only a comment
        whose stamp is trusted (the bot edited it last) gives anything; a carried line of
        another head, another version, over its bound or garbled gives nothing. Whatever
        taking one comment's lines raises is its pull request's failure alone."""
        failing_ids = {id(s) for s in failing}
        for snapshot in chunk:
            if not isinstance(snapshot, PullSnapshot) or not selected(snapshot, self.policy):
                continue
            built = self.reports.get(repo, snapshot.number)
            if built is not None and built.snapshot.head_sha == snapshot.head_sha:
                continue  # judged before for this head: the state was given all of it then
            own = self._listed.get((repo, snapshot.number))
            if own is None:
                continue
            try:
                self._given.take(repo, snapshot, own, failing=id(snapshot) in failing_ids)
            except Exception as exc:  # defence in depth: the parsers raise nothing they read
                log.warning(
                    "%s#%d: what comment %d carries could not be taken: %s",
                    repo, snapshot.number, own.id, exc,
                )  # fmt: skip
                self._untaken[(repo, snapshot.number)] = exc

    # -- one pull request --------------------------------------------------------------------

    def _record(self, repo: str, number: int) -> PullRecord:
        """What the state holds for a pull request: as read with its chunk, else read now (a
        webhook refresh, a dry run's report)."""
        found = self._records.get((repo, number))
        if found is None:
            found = PullRecord(
                self.store.get_comment(repo, number),
                self.store.known_without_comment(repo, number),
                self.store.get_facts(repo, number),
            )
            self._records[(repo, number)] = found
        return found

    def failing(self, repo: RepoSettings, snapshot: PullSnapshot) -> bool:
        """Whether a signal of the head fails (as last time when its signals are the same)."""
        last = self.reports.get(repo.name, snapshot.number)
        if last is not None and last.same_signals(snapshot, repo.expected):
            return last.failing
        return has_failing(snapshot)

    def inputs(self, snapshot: PullSnapshot, repo: RepoSettings, *, look: bool = True) -> Inputs:
        """Everything one pull request is judged from; with `look`, the bot's own comment
        where the state knows none (found by the chunk's listing, else listed now)."""
        name, number = repo.name, snapshot.number
        untaken = self._untaken.pop((name, number), None)
        if untaken is not None:  # taking its comment's lines failed: this pull request fails
            raise untaken
        record = self._record(name, number)
        self._records.pop((name, number), None)  # judged now: it may differ after
        stored = record.comment
        if stored is not None:
            self.stored[(name, number)] = stored
        last = self.reports.get(name, number)
        same = last is not None and last.same_signals(snapshot, repo.expected)
        keys = (
            tuple(last.keys)
            if last is not None and same
            else tuple(needs_first_seen(snapshot, repo.expected))
        )
        now = self.clock()
        if self.carried is not None:
            self.carried.begin(snapshot.head_sha)
        kept = self.reports.from_signals(snapshot)
        docs = read_docs(snapshot, repo, self.docs, now=now, kept=kept)
        found = Inputs(
            snapshot=snapshot,
            expected=tuple(repo.expected),
            now=now,
            comment=None if stored is None else Known(
                stored.comment_id, stored.node_id, stored.facts_key
            ),
            without_comment=record.without_comment,
            facts=record.facts,
            last=last,
            failing=last.failing if last is not None and same else has_failing(snapshot),
            keys=keys,
            seen=self.store.first_seen(name, number, snapshot.head_sha) if keys else {},
            docs=docs,
            kept_reads=() if self.carried is None else self.carried.taken(),
            generation=self.generation(name),
            **self._reads(snapshot),
        )  # fmt: skip
        if look and stored is None and not record.without_comment:
            found = self.look(found)
        return found

    def look(self, inputs: Inputs) -> Inputs:
        """The inputs as though the state knew no comment: the bot's own as listed (by the
        chunk's listing, else now, with its last editor) and its stamp, if trusted."""
        key = (inputs.snapshot.repo, inputs.snapshot.number)
        if key in self._listed:
            own = self._listed.pop(key)
        else:
            own = find_own(self.github, self.sightings, *key, login=self.login, editor=True)
        stamp = trusted_stamp(own, self.login)
        return replace(inputs, comment=None, looked=True, own=own, stamp=stamp)

    def _reads(self, snapshot: PullSnapshot) -> dict[str, Any]:
        """What this pass read for the head (merge base, annotations, history) and the pull
        request (merge group), as fields of its inputs."""
        repo, head = snapshot.repo, snapshot.head_sha
        history = None
        if (repo, head) in self._attempts and (
            not snapshot.base or (repo, snapshot.base) in self._branches
        ):
            history = self._history(snapshot)
        return {
            "merge": self._bases.get((repo, head)),
            "annotations": self._annotations.get((repo, head)),
            "history": history,
            "group": self._groups.get((repo, snapshot.number)),
            "group_read": (repo, snapshot.number) in self._grouped,
        }

    def _history(self, snapshot: PullSnapshot) -> HistoryInputs:
        repo = snapshot.repo
        index = self.reports.index.get(repo)
        failing = self.reports.from_signals(snapshot).failing
        return HistoryInputs(
            attempts=self._attempts.get((repo, snapshot.head_sha), {}),
            elsewhere={} if index is None else elsewhere_of(index, snapshot, failing),
            branch=self._branches.get((repo, snapshot.base)) if snapshot.base else None,
            final=self._final.get((repo, snapshot.head_sha), frozenset()),
        )

    def more(self, wanted: Sequence[Wanted]) -> list[Inputs]:
        """Read what `judge` or `plan` want besides (batched by repository), and give each
        pull request's inputs again with it."""
        by_read: dict[tuple[str, Want], list[PullSnapshot]] = {}
        for inputs, wants in wanted:
            for want in wants:
                by_read.setdefault((inputs.snapshot.repo, want), []).append(inputs.snapshot)
        for (repo, want), snapshots in by_read.items():
            if want == "base":
                self.read_bases(repo, snapshots)
            elif want == "annotations":
                self.read_annotations(repo, snapshots)
            elif want == "history":
                self.read_history(repo, snapshots)
            elif want == "group":
                self.read_groups(repo, snapshots)
        return [self._again(inputs, wants) for inputs, wants in wanted]

    def _again(self, inputs: Inputs, wants: frozenset[Want]) -> Inputs:
        """One pull request's inputs with the reads it wanted."""
        found = replace(inputs, **self._reads(inputs.snapshot))
        if "history" in wants and self.policy.history:  # asked: what could not be read is none
            found = replace(found, history=self._history(inputs.snapshot))
        if "current" in wants and inputs.comment is not None:
            current = self.github.get_comment(inputs.snapshot.repo, inputs.comment.comment_id)
            found = replace(found, current=current, current_read=True)
        if "own" in wants:
            found = self.look(found)
        return found

    # -- the batched reads -------------------------------------------------------------------

    def failing_runs(self, snapshot: PullSnapshot) -> list[Signal]:
        """The head's failing check runs (bot.github.annotations), found again only when its
        signals are not the very ones they were found in (kept across passes)."""
        key = (snapshot.repo, snapshot.number)
        last = self.reports.runs.get(key)
        if last is not None and last[0] is snapshot.signals:
            return last[1]
        runs = failing_runs(snapshot)
        self.reports.runs[key] = (snapshot.signals, runs)
        return runs

    def read_bases(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """The merge base of each failing head and what GitHub reported on it (bot.github.bases)."""
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._bases]
        for head, merge in self._base_reader.read(repo, wanted).items():
            self._bases[(repo, head)] = merge

    def read_groups(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """The merge-group commits of the queued ones (bot.github.merge_groups), one query."""
        wanted = [s for s in snapshots if (repo, s.number) not in self._grouped]
        for number, read in self._group_reader.read(repo, wanted).items():
            self._groups[(repo, number)] = read
        self._grouped.update((repo, s.number) for s in wanted)

    def read_annotations(
        self, repo: str, snapshots: Sequence[PullSnapshot], *, ask: bool = True
    ) -> None:
        """Each failing head's failing check runs' annotations (bot.github.annotations); with
        `ask` False only those the state keeps for every failing run of the head."""
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._annotations]
        for head, found in self._annotation_reader.read(repo, wanted, ask=ask).items():
            self._annotations[(repo, head)] = found

    def read_history(self, repo: str, snapshots: Sequence[PullSnapshot]) -> None:
        """Each failing head's earlier attempts and its base branch's last commits, batched
        (bot.github.history); nothing with `[policy] history` off."""
        if not self.policy.history:
            return
        wanted = [s for s in snapshots if (repo, s.head_sha) not in self._attempts]
        for head, (found, final) in self._attempt_reader.read(repo, wanted).items():
            self._attempts[(repo, head)] = found
            self._final[(repo, head)] = final
        branches = {s.base for s in snapshots if s.base and (repo, s.base) not in self._branches}
        read = self._branch_reader.read(repo, branches) if branches else {}
        for branch in branches:
            self._branches[(repo, branch)] = read.get(branch)

    # -- the comments left as they are -------------------------------------------------------

    def recorded(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], StoredComment]:
        """The records of comments this pass leaves as they are (as judged, else read now)."""
        found = {key: self.stored.get(key) or self.store.get_comment(*key) for key in keys}
        return {key: s for key, s in found.items() if s is not None and s.node_id}

    def reread(self, node_ids: Sequence[str]) -> Mapping[str, Comment | None]:
        """The comments as GitHub has them now, by node id (100 per GraphQL point)."""
        return self.github.read_comments(node_ids)


class Given:
    """What the bot's own trusted comment gives the state a pass starts from: the merge base
    its stamp holds, the annotations, earlier attempts and second sources' final records its
    carried line holds (issue 31), each where the state holds none."""

    def __init__(
        self,
        store: CycleState,
        carried: CarriedReads | None,
        *,
        policy: PolicySettings,
        login: str,
        clock: Callable[[], datetime],
        runs_of: Callable[[PullSnapshot], list[Signal]],
    ) -> None:
        """`runs_of`: a head's failing check runs (whose annotations are taken)."""
        self.store, self.carried, self.policy, self.login = store, carried, policy, login
        self.clock, self.runs_of = clock, runs_of

    def take(self, repo: str, snapshot: PullSnapshot, own: Comment, *, failing: bool) -> None:
        """Give the state what one listed comment of the bot's says of its head where its
        stamp is trusted (the merge base and the annotations only for a failing head)."""
        stamp = trusted_stamp(own, self.login)
        if stamp is None:
            return
        if failing:
            self._stamped_base(repo, snapshot, stamp)
        carried = parse_carried(own.body)
        carried = carried and carried.of(snapshot.head_sha)
        if not carried:
            return
        if failing and carried.annotations:
            self._carried_annotations(repo, snapshot, carried.annotations)
        if failing and carried.attempts and self.policy.history:
            seed_attempts(self.store, repo, snapshot, carried.attempts, now=self.clock())
        if carried.reads and self.carried is not None:
            self.carried.seed(snapshot.head_sha, carried.reads, now=self.clock())

    def _stamped_base(self, repo: str, snapshot: PullSnapshot, stamp: Stamp) -> None:
        """Keep the merge base the stamp holds for the head and its base branch (with the
        branch's commit it was asked with and when, where the stamp says)."""
        if snapshot.base:
            stamped = stamp.merge_base_of(snapshot.head_sha, snapshot.base)
            now, observed = self.clock(), stamp.observed_at
            seed_base(self.store, repo, snapshot.head_sha, stamped, observed=observed, now=now)

    def _carried_annotations(self, repo: str, snapshot: PullSnapshot, found: Found) -> None:
        """Keep the carried annotations of the head's failing runs the state holds none of."""
        runs = {s.database_id for s in self.runs_of(snapshot) if s.database_id} & set(found)
        held = self.store.get_annotations(repo, sorted(runs)) if runs else {}
        head = snapshot.head_sha
        new = {run: (head, annotations_payload(found[run])) for run in runs if run not in held}
        if new:
            self.store.put_annotations(repo, new, now=self.clock())
