"""One pass over the configured repositories, driven chunk by chunk in one direction:
gather -> judge -> (the state's writes) -> plan, then publish every plan, paced.

Imported by `bot.app` alone: everything else gets a `Cycle` from `bot.app.make_cycle`.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Protocol

from bot.core.comment import Comment
from bot.core.model import PullSnapshot, Report
from bot.core.remedies import READTHEDOCS
from bot.core.summary import Summary
from bot.cycle.comments import Sightings
from bot.cycle.digests import Derived, kept_rows, version
from bot.cycle.gather import Gatherer, Pull, queued, selected
from bot.cycle.judge import Rules, judge
from bot.cycle.model import (
    Built,
    Inputs,
    Judged,
    MarkSeen,
    NoComment,
    Plan,
    Reports,
    SetFacts,
    Voice,
    Wanted,
    Wants,
    Write,
)
from bot.cycle.plan import due_for_check, plan, restore
from bot.cycle.publish import Desk, Publisher, WritePacing
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError, RateLimited
from bot.render.comment import Renderer
from bot.retry import Stopped
from bot.settings import PolicySettings, RepoSettings
from bot.sources.base import Source
from bot.sources.carried import CarriedReads
from bot.state.ports import CycleState, StoredComment, StoreError

log = logging.getLogger(__name__)

# Pull requests whose comments the state does not know are listed this many at a time (GraphQL).
LIST_BATCH = 50


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a cycle's answers makes millions of objects
    that live until the cycle ends, and each full collection would walk every one of them
    again (a quarter of a warm cycle's CPU at 500 pull requests). Objects freed by reference
    count still are; cycles of garbage wait for the collector, enabled again after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class CycleObserver(Protocol):
    """What a writing cycle tells the rest of the bot (the triage rows, metrics) as it goes."""

    def pull_done(self, snapshot: PullSnapshot, report: Report, key: str) -> None:
        """A selected pull request was reconciled into `report`, of facts key `key`
        (bot.core.facts)."""

    def pulls_done(self) -> None:
        """The pass (or refresh) planned every pull request it read."""

    def repo_done(self, repo: str, seen: Iterable[int]) -> None:
        """Every open pull request of `repo` was listed; `seen` are the numbers kept."""

    def repo_failed(self, repo: str, reason: str) -> None:
        """`repo` could not be read (renamed, access removed, an error): what failed."""


class Cycle:
    """Passes over repositories; one pull request's failure never stops the others. Each pass
    (`run`, `run_pulls`) gets its own stages; what is kept across passes is the reports'
    memory and the write pacing (shared by the service)."""

    def __init__(
        self,
        *,
        github: GitHubApi,
        docs: Sequence[Source],
        store: CycleState,
        renderer: Renderer,
        policy: PolicySettings,
        login: str,
        clock: Callable[[], datetime],
        carried: CarriedReads | None = None,
        dry_run: bool = False,
        out: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        stop: threading.Event | None = None,
        observers: Sequence[CycleObserver] = (),
        pacing: WritePacing | None = None,
        generation: Callable[[str], int] = lambda _repo: 0,
        fence: Callable[[str], int | None] | None = None,
        reports: Reports | None = None,
        progress: Callable[[str], None] | None = None,
        epoch: str = "",
    ) -> None:
        self.github, self.docs, self.store, self.renderer = github, tuple(docs), store, renderer
        # what the sources read through: the final records of a head (None: none are carried)
        self.carried = carried
        self.progress = progress  # a terminal's line of how far the writes are ("" clears it)
        self.reports = reports or Reports()  # the service shares one across its cycles
        self.policy = policy
        self.pacing = pacing or WritePacing()  # the service shares one across its cycles
        self.core_policy = policy.core()
        self.login = login
        self.clock = clock
        self.dry_run = dry_run
        self.out = out
        self.sleep = sleep  # None: wait on `stop`; either way a wait ends on a stop request
        self.should_stop = should_stop
        self.stop = stop or threading.Event()
        # The lease generation a write to a repository's comments carries (0: no lease).
        self.generation = generation
        # Several replicas: the generation this replica may write under now, read from the
        # state just before each write (None: its lease is lost: no write). None: one process.
        self.fence = fence
        # The state's identity, stamped beside the generation: a stamp of another epoch (a
        # recreated or swapped database) is never newer than this state's lease.
        self.epoch = epoch
        self.observers = tuple(observers)

    def stopping(self) -> bool:
        """Whether a stop was requested (the service's flag or the Event handed down)."""
        return self.stop.is_set() or self.should_stop()

    def run(self, repos: Sequence[RepoSettings]) -> Summary:
        """Read and reconcile every open pull request, then write what changed, paced.

        It always returns its summary: a repository that cannot be read is named in
        `failed` (with, after a rate limit, every repository not read because of it) and the
        others are still read; a stop request ends it early, naming what was left.
        """
        one = Pass(self)
        with one.counted():
            with gc_paused():
                one.repos(repos)
                for observer in self.observers:
                    observer.pulls_done()
                one.plans.extend(one.check_left())
            one.publisher.all(one.plans, one.summary)
            foreign = one.sightings.foreign
            one.summary.foreign = {login: len(ids) for login, ids in sorted(foreign.items())}
        return one.summary

    def run_pulls(self, pulls: Sequence[tuple[Pull, RepoSettings]]) -> Summary:
        """Plan and publish already-read pull requests through the same rules as `run`; the
        failing heads' merge bases and annotations are asked first, batched, as a pass does.
        A refresh checks no comment left as it is: the pass does."""
        one = Pass(self)
        with one.counted():
            one.gather.prefetch(pulls)
            for snapshot, repo in pulls:
                one.settle(repo, [snapshot])
            for observer in self.observers:
                observer.pulls_done()
            one.publisher.all(one.plans, one.summary)
        return one.summary

    def read_reports(
        self, repos: Sequence[RepoSettings]
    ) -> Iterator[tuple[PullSnapshot, Report, int | None]]:
        """Every selected open pull request's report now, with its comment's id (reads only)."""
        if not self.dry_run:
            raise ValueError("read_reports reads only: use a dry-run cycle")
        one = Pass(self)
        for repo in repos:
            pulls = list(self.github.open_pulls(repo.name, now=self.clock(), required=self.store))
            one.gather.records(repo.name, pulls)
            one.gather.read_groups(repo.name, queued(pulls, self.policy))  # one query, not each
            for snapshot in pulls:
                if isinstance(snapshot, PullSnapshot) and selected(snapshot, self.policy):
                    report = one.report(snapshot, repo)
                    stored = one.gather.stored.get((repo.name, snapshot.number))
                    yield snapshot, report, None if stored is None else stored.comment_id
                # a pull request that could not be read is named by `once`

    def preview(self, repo: RepoSettings, number: int) -> tuple[Report, str]:
        """One pull request read now: its report and the body of the comment the bot keeps for
        it, dated as that comment is (the state's times, else its own comment's stamp). Reads
        only: what `show` prints."""
        if not self.dry_run:
            raise ValueError("preview reads only: use a dry-run cycle")
        snapshot = self.github.pull(repo.name, number, now=self.clock())
        planned = self.rendered(self.plan(snapshot, repo))
        return planned.report, planned.body

    def plan(self, snapshot: PullSnapshot, repo: RepoSettings) -> Plan:
        """One pull request gathered, judged and planned alone (its state writes made; its
        plan's write not): what a benchmark settles and `show` previews."""
        decided = Pass(self).decide(repo, [snapshot])[id(snapshot)]
        if isinstance(decided, Exception):
            raise decided
        return decided

    def rendered(self, planned: Plan) -> Plan:
        """The plan with its comment body, stamped with its repository's lease generation."""
        return Pass(self).publisher.rendered(planned)


class Pass:
    """One pass's stages and what it collects: its summary, plans, and comments left."""

    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle
        self.summary = Summary(dry_run=cycle.dry_run)
        self.sightings = Sightings()
        self.gather = Gatherer(
            github=cycle.github, docs=cycle.docs, store=cycle.store, reports=cycle.reports,
            policy=cycle.policy, login=cycle.login, clock=lambda: cycle.clock(),
            generation=cycle.generation, sightings=self.sightings, carried=cycle.carried,
        )  # fmt: skip
        self.rules = Rules(cycle.core_policy, history=cycle.policy.history)
        self.voice = Voice(cycle.renderer, cycle.login, cycle.epoch, cycle.dry_run)
        desk = Desk(
            voice=self.voice, policy=cycle.policy, clock=lambda: cycle.clock(),
            stopping=cycle.stopping, stop=cycle.stop, pacing=cycle.pacing,
            generation=cycle.generation, out=cycle.out, sleep=cycle.sleep, fence=cycle.fence,
            progress=cycle.progress,
        )  # fmt: skip
        self.publisher = Publisher(cycle.github, cycle.store, desk, self.sightings)
        self.plans: list[Plan] = []  # to write
        self.left: list[Plan] = []  # this pass's comments left as they are (to be checked)
        self.built: dict[str, list[Built]] = {}  # reports built this pass, to keep, by repo
        self.facts: list[tuple[PullSnapshot, SetFacts]] = []  # facts to record (in one go)
        self.keys: dict[int, str] = {}  # the facts key of each plan, by id of its snapshot

    @contextmanager
    def counted(self) -> Iterator[None]:
        """What the pass asked of GitHub and of each second source, in its summary."""
        github, summary = self.cycle.github, self.summary
        before = (github.usage.total, github.usage.graphql_points)
        sources = {source.name: source.requests for source in self.cycle.docs}
        yield
        summary.github_requests = github.usage.total - before[0]
        summary.graphql_points = github.usage.graphql_points - before[1]
        for source in self.cycle.docs:
            summary.source_requests[source.name] = source.requests - sources.get(source.name, 0)
            summary.source_labels[source.name] = source.label
        summary.rtd_requests = summary.source_requests.get(READTHEDOCS, 0)

    # -- the repositories --------------------------------------------------------------------

    def repos(self, repos: Sequence[RepoSettings]) -> None:
        """Read and plan every repository (a failure is that repository's alone)."""
        summary = self.summary
        for index, repo in enumerate(repos):
            if self.cycle.stopping():
                self._not_read(repos[index:], "not read: the bot is stopping")
                break
            try:
                self.repo(repo)
            except RateLimited as exc:
                summary.rate_limited_s = exc.wait_s
                self._repo_failed(repo.name, f"rate limited: {exc}")
                log.warning("rate limited while reading %s: %s", repo.name, exc)
                why = f"not read: GitHub's rate limit was reached while reading {repo.name}"
                self._not_read(repos[index + 1 :], why)
                break
            except Stopped:
                self._not_read(repos[index:], "not read: the bot is stopping")
                break
            except GitHubError as exc:
                self._repo_failed(repo.name, str(exc))
                log.warning("could not read %s: %s", repo.name, exc)
            except Exception as exc:  # one repository's failure never loses the cycle
                self._repo_failed(repo.name, f"{exc.__class__.__name__}: {exc}")
                log.warning("could not read %s", repo.name, exc_info=True)

    def _repo_failed(self, repo: str, reason: str) -> None:
        self.summary.failed[repo] = reason
        for observer in self.cycle.observers:
            observer.repo_failed(repo, reason)

    def _not_read(self, repos: Sequence[RepoSettings], why: str) -> None:
        for repo in repos:
            self.summary.failed.setdefault(repo.name, why)

    def repo(self, repo: RepoSettings) -> None:
        """One repository's open pull requests, LIST_BATCH at a time as they are listed; those
        that wait for its batched reads (annotations, history, merge groups) at its end."""
        cycle, waiting = self.cycle, list[PullSnapshot]()
        chunk: list[Pull] = []
        self.gather.restore(repo.name)
        pulls = iter(cycle.github.open_pulls(repo.name, now=cycle.clock(), required=cycle.store))
        while True:
            try:
                snapshot = next(pulls)
            except StopIteration:
                break
            except Exception:  # what was read before the failure is still planned
                self._chunk(repo, chunk, waiting)
                self._late(repo, waiting)
                raise
            chunk.append(snapshot)
            if len(chunk) == LIST_BATCH:
                self._chunk(repo, chunk, waiting)
                chunk = []
        self._chunk(repo, chunk, waiting)
        self.gather.listed_whole(repo.name)
        self._late(repo, waiting)
        prefix = f"{repo.name}#"  # the pull requests kept: planned, or failed this time
        labels = [
            label for group in (self.summary.verdicts, self.summary.failed) for label in group
        ]
        seen = {int(label[len(prefix) :]) for label in labels if label.startswith(prefix)}
        for observer in cycle.observers:
            observer.repo_done(repo.name, seen)
        cycle.reports.keep_only(repo.name, seen)
        self._keep_reports(repo.name, seen)

    def _keep_reports(self, repo: str, seen: set[int]) -> None:
        """Keep in the state the reports this pass built for `repo`, for the next process, and
        drop those of its pull requests no longer open (a failure costs only a rebuild)."""
        built, store = self.built.pop(repo, []), self.cycle.store
        if not store.keeps_reports:
            return
        reports, gather = self.cycle.reports, self.gather
        rows = kept_rows(
            built,
            self.cycle.github.read_nodes(repo),
            lambda s: Derived(reports.from_signals(s), gather.failing_runs(s)),
        )
        try:
            store.keep_reports(repo, rows, version=version(), now=self.cycle.clock())
            store.forget_reports(repo, keep=seen)
        except StoreError as exc:
            log.warning("could not keep the reports of %s: %s", repo, exc)

    def _chunk(
        self, repo: RepoSettings, chunk: Sequence[Pull], waiting: list[PullSnapshot]
    ) -> None:
        wait = self.gather.chunk(repo, chunk)
        waiting.extend(wait)
        held = {id(s) for s in wait}
        self.settle(repo, [s for s in chunk if id(s) not in held])

    def _late(self, repo: RepoSettings, waiting: list[PullSnapshot]) -> None:
        late, waiting[:] = list(waiting), []
        self.gather.late(repo, late)
        self.settle(repo, late)

    # -- pull requests -----------------------------------------------------------------------

    def settle(self, repo: RepoSettings, pulls: Sequence[Pull]) -> None:
        """Judge and plan these pull requests; count each in the summary, in order, and tell
        the observers; keep the plans to write and the comments left as they are."""
        summary = self.summary
        ready = [s for s in pulls if isinstance(s, PullSnapshot) and selected(s, self.cycle.policy)]
        decided = self.decide(repo, ready)
        for snapshot in pulls:
            summary.pulls_seen += 1
            if not isinstance(snapshot, PullSnapshot):  # that pull request only
                summary.failed[snapshot.label] = snapshot.reason
                log.debug("could not read %s: %s", snapshot.label, snapshot.reason)
                continue
            label = f"{repo.name}#{snapshot.number}"
            summary.heads[label] = snapshot.head_sha
            outcome = decided.get(id(snapshot))
            if outcome is None:
                summary.skipped += 1
            elif isinstance(outcome, Exception):  # one pull request's failure is isolated
                summary.failed[label] = f"{outcome.__class__.__name__}: {outcome}"
                log.debug("could not process %s", label, exc_info=outcome)
            else:
                self._planned(snapshot, outcome)

    def _planned(self, snapshot: PullSnapshot, planned: Plan) -> None:
        self.summary.verdicts[planned.label] = str(planned.report.verdict)
        key = self.keys.pop(id(snapshot), "")
        for observer in self.cycle.observers:
            observer.pull_done(snapshot, planned.report, key)
        if planned.action == "adopt" and planned.found is not None:
            self.publisher.record(planned, planned.found, "adopted")
        if planned.action in ("leave", "adopt"):
            self.summary.left += 1
            self.publisher.show(planned)
            if planned.action == "leave":
                self.left.append(planned)
        else:
            self.plans.append(planned)

    def decide(
        self, repo: RepoSettings, snapshots: Sequence[PullSnapshot]
    ) -> dict[int, Plan | Exception]:
        """Each pull request's plan (or what failed), by id of its snapshot: gathered, judged,
        its state writes made, planned; what a stage wants besides is gathered (batched) and
        judged again."""
        decided: dict[int, Plan | Exception] = {}
        todo: list[Inputs] = []
        for snapshot in snapshots:
            try:
                todo.append(self.gather.inputs(snapshot, repo))
            except Stopped:
                raise
            except Exception as exc:
                decided[id(snapshot)] = exc
        while todo:
            wanted: list[Wanted] = []
            for inputs in todo:
                try:
                    step = self._step(inputs)
                except Stopped:
                    raise
                except Exception as exc:
                    decided[id(inputs.snapshot)] = exc
                    continue
                if isinstance(step, Plan):
                    decided[id(inputs.snapshot)] = step
                else:
                    wanted.append((inputs, step.reads))
            todo = self._more(wanted, decided)
        self._record_facts(decided)
        return decided

    def _record_facts(self, decided: dict[int, Plan | Exception] | None = None) -> None:
        """Record the facts judging and planning decided, one transaction a repository; where
        that fails, it is each such pull request's failure (raised without `decided`). Of two
        for one pull request the later stands, or the earlier where they say the same facts
        (as recording them one after the other would leave it)."""
        pending, self.facts = self.facts, []
        by_repo: dict[str, dict[int, tuple[PullSnapshot, SetFacts]]] = {}
        for snapshot, write in pending:
            mine = by_repo.setdefault(snapshot.repo, {})
            earlier = mine.get(snapshot.number)
            if earlier is None or earlier[1].facts_key != write.facts_key:
                mine[snapshot.number] = (snapshot, write)
        for repo, items in by_repo.items():
            rows = [(n, w.facts_key, w.observed_at) for n, (_, w) in sorted(items.items())]
            try:
                self.cycle.store.set_facts_many(repo, rows)
            except Exception as exc:
                if decided is None:
                    raise
                for snapshot, _ in items.values():
                    decided[id(snapshot)] = exc

    def _more(self, wanted: list[Wanted], decided: dict[int, Plan | Exception]) -> list[Inputs]:
        """The wanted reads gathered (a failure is each wanting pull request's)."""
        if not wanted:
            return []
        try:
            return self.gather.more(wanted)
        except Stopped:
            raise
        except Exception as exc:
            for inputs, _ in wanted:
                decided[id(inputs.snapshot)] = exc
            return []

    def _step(self, inputs: Inputs) -> Plan | Wants:
        """One pull request judged (its writes made, its report kept) and planned."""
        judged = judge(inputs, self.rules)
        if isinstance(judged, Wants):
            return judged
        self._keep(judged)
        planned = plan(judged, self.voice)
        if isinstance(planned, Plan):
            self._write(inputs, planned.writes)
            self.keys[id(inputs.snapshot)] = judged.key  # its report's (plan only dates it)
        return planned

    def _keep(self, judged: Judged) -> None:
        self._write(judged.inputs, judged.writes)
        if judged.built is None:
            self.summary.reused += 1
            return
        self.cycle.reports.put(judged.built)
        self.built.setdefault(judged.report.repo, []).append(judged.built)

    def _write(self, inputs: Inputs, writes: Sequence[Write]) -> None:
        """Make what a stage decided the state should record for one pull request."""
        store, s = self.cycle.store, inputs.snapshot
        for write in writes:
            if isinstance(write, MarkSeen):
                store.mark_seen(s.repo, s.number, s.head_sha, write.keys, now=write.at)
            elif isinstance(write, SetFacts):  # recorded with the others (_record_facts)
                self.facts.append((s, write))
            elif isinstance(write, NoComment):
                store.note_no_comment(s.repo, s.number, now=write.at)

    def report(self, snapshot: PullSnapshot, repo: RepoSettings) -> Report:
        """One pull request's report now, judged with no stamp (its comment not looked at)."""
        inputs = self.gather.inputs(snapshot, repo, look=False)
        while isinstance(judged := judge(inputs, self.rules), Wants):
            inputs = self.gather.more([(inputs, judged.reads)])[0]
        self._keep(judged)
        self._record_facts()
        return judged.report

    # -- the comment stays true --------------------------------------------------------------

    def check_left(self) -> list[Plan]:
        """Re-read the comments this pass leaves as they are (the least recently checked, at
        least half of them: each is checked every second pass or more often, 100 per GraphQL
        point); plan a create for one deleted and an edit for one someone else changed."""
        left = {(p.report.repo, p.report.number): p for p in self.left if p.node_id}
        kept = self.gather.recorded(left)
        due = due_for_check({key: s.last_known_good for key, s in kept.items()})
        if not due:
            return []
        try:
            found = self.gather.reread([kept[key].node_id for key in due])
        except RateLimited as exc:  # checked again next pass; the writes meet the limit too
            self.summary.rate_limited_s = exc.wait_s
            log.warning("rate limited while checking the bot's comments: %s", exc)
            return []
        except GitHubError as exc:  # checked again next pass; nothing is written on a guess
            log.warning("could not check the bot's comments: %s", exc)
            return []
        checked = restore(
            [(left[key], kept[key].node_id, kept[key].body_hash) for key in due], found,
            self.cycle.login,
        )  # fmt: skip
        self._told(checked.plans, found, kept)
        for key in checked.gone:
            self.cycle.store.forget_comment(*key)
        self.summary.left -= len(checked.plans)
        self.cycle.store.mark_checked(list(checked.good), now=self.cycle.clock())
        return list(checked.plans)

    @staticmethod
    def _told(
        plans: Sequence[Plan],
        found: Mapping[str, Comment | None],
        kept: Mapping[tuple[str, int], StoredComment],
    ) -> None:
        for planned in plans:
            if planned.action == "edit":
                current = found.get(kept[(planned.report.repo, planned.report.number)].node_id)
                editor = None if current is None else current.editor
                log.info("comment on %s was edited by %s: restoring it", planned.label, editor)
            else:
                log.info(
                    "comment on %s is gone (or no longer the bot's): posting it", planned.label
                )
