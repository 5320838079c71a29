"""Judge one pull request from what was gathered: reconcile, each source's evidence, the merge
base, annotations, history and merge queue, the facts key, and the warm reuse (pure).

It reads nothing: what it lacks it names (`Wants`), to be gathered and judged again; what the
state should record (first sights, facts) it returns with its report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from bot.core.annotations import needs_annotations, with_annotations
from bot.core.base import MergeBase, judged, needs_base, with_base
from bot.core.facts import facts_key, keyed, rekeyed
from bot.core.history import (
    HistoryInputs,
    final_attempts,
    needs_history,
    with_elsewhere,
    with_history,
)
from bot.core.merge_queue import judge_queue
from bot.core.model import MergeBaseOf, Policy, Report
from bot.core.reconcile import reconcile_until
from bot.cycle.model import Built, Inputs, Judged, MarkSeen, SetFacts, Want, Wants, Write
from bot.render.stamp import Stamp


@dataclass(frozen=True, slots=True)
class Rules:
    """What a pass judges by: the core policy, and whether failures' history is told."""

    policy: Policy
    history: bool = False


def judge(inputs: Inputs, rules: Rules) -> Judged | Wants:
    """Reconcile one pull request at `inputs.now`. Where the state knows no comment, the
    trusted stamp of the bot's own (`inputs.stamp`) dates what the state does not: first
    sights, and the first observation of the same facts (a lost state re-dates nothing).

    The state's first-seen and first-observed times stand; where it has none, the stamp's.
    """
    stamp = inputs.stamp
    if rules.history and inputs.failing and inputs.history is None:
        return Wants(frozenset({"history"}))
    first_seen, writes = _first_seen(inputs, stamp)
    kept = _kept(inputs, rules, first_seen) if stamp is None else None
    if kept is not None:
        return Judged(inputs, kept.report, kept.key, None, None, writes)
    patched = _patched(inputs, rules, first_seen) if stamp is None else None
    if patched is not None:
        return _dated(inputs, patched, stamp, writes)
    built = _build(inputs, rules, first_seen)
    if isinstance(built, Wants):
        return built
    return _dated(inputs, built, stamp, writes)


def _first_seen(
    inputs: Inputs, stamp: Stamp | None
) -> tuple[dict[str, datetime], tuple[Write, ...]]:
    """When each key the head needs dated was first seen, and what the state should record."""
    keys, now, head = inputs.keys, inputs.now, inputs.snapshot.head_sha
    if not keys:
        return {}, ()
    stamped = {k: t for k in keys if stamp and (t := stamp.seen(head, k))}
    writes: list[Write] = [MarkSeen((k,), t) for k, t in stamped.items()]
    writes.append(MarkSeen(keys, now))
    seen = inputs.seen
    return {k: seen.get(k) or stamped.get(k) or now for k in keys}, tuple(writes)


def _kept(inputs: Inputs, rules: Rules, first_seen: Mapping[str, datetime]) -> Built | None:
    """The last pass's report, where these inputs would give it again."""
    last = inputs.last
    if (
        last is not None
        and last.history == _history(inputs, rules)
        and _serves_but_history(last, inputs, rules, first_seen)
    ):
        return last
    return None


def _patched(inputs: Inputs, rules: Rules, first_seen: Mapping[str, datetime]) -> Built | None:
    """The last pass's report with its failing rows' history told again, where only what other
    pull requests say changed (a failure's `elsewhere`: 5 % of heads changing moves the counts
    of most failing heads): what a rebuild gives, without reconciling again."""
    last, history = inputs.last, _history(inputs, rules)
    if (
        last is None
        or last.history is None
        or history is None
        or replace(last.history, elsewhere=history.elsewhere) != history
        or not _serves_but_history(last, inputs, rules, first_seen)
    ):
        return None
    text = last.text  # where kept: only its first rows tell a history, keyed from it
    first = None if text is None else text.told
    # observed now, as a rebuild's; its final attempts are of the same attempts: as they were
    rows = with_elsewhere(last.report.rows, history.elsewhere, first=first)
    report = replace(last.report, rows=rows, observed_at=inputs.now)
    key = facts_key(report) if text is None else rekeyed(report, text)
    return replace(last, report=report, key=key, history=history)


def _serves_but_history(
    last: Built, inputs: Inputs, rules: Rules, first_seen: Mapping[str, datetime]
) -> bool:
    """Whether the last report serves these inputs, their failing rows' history aside."""
    return (
        inputs.facts == (last.key, last.report.observed_at)
        and last.merge == inputs.merge
        and last.annotations == inputs.annotations
        and last.queue == inputs.group
        and last.expected == inputs.expected
        and last.report.kept_reads == inputs.kept_reads
        and last.serves(inputs.snapshot, inputs.docs, first_seen, rules.policy, inputs.now)
    )


def _history(inputs: Inputs, rules: Rules) -> HistoryInputs | None:
    """The failing head's history (what the warm reuse compares)."""
    return inputs.history if rules.history and inputs.failing else None


def _build(inputs: Inputs, rules: Rules, first_seen: dict[str, datetime]) -> Built | Wants:
    """Reconcile, then add what the failing rows and the merge queue need (or name it)."""
    snapshot, now, policy = inputs.snapshot, inputs.now, rules.policy
    report, until = reconcile_until(
        snapshot, inputs.docs, policy, now=now, first_seen=first_seen, expected=inputs.expected
    )
    wanted = _wanted(inputs, report, rules)
    if wanted:
        return Wants(wanted)
    report = replace(report, kept_reads=inputs.kept_reads)
    merge = inputs.merge
    if merge is not None and any(needs_base(row) for row in report.rows):
        shown, turns = judged(merge, now=now, unverified_after=policy.unverified_after)
        report = with_base(report, shown)  # a failed re-read is said once it lasted
        until = turns if until is None or (turns is not None and turns < until) else until
        if merge.commit is not None and snapshot.base is not None:
            report = replace(report, merge_base=_stamped(inputs, merge, snapshot.base))
    if inputs.annotations is not None and any(needs_annotations(row) for row in report.rows):
        report = with_annotations(report, inputs.annotations)
    history = _history(inputs, rules)
    if rules.history and any(needs_history(row) for row in report.rows):
        history = history or inputs.history  # gathered: wanted above where it was not
        if history is not None:
            report = with_history(report, history)  # states, verdict and headline as they were
            report = replace(report, kept_attempts=final_attempts(report, history))
    if snapshot.queue is not None:
        found = judge_queue(
            snapshot.queue, inputs.group, snapshot.required_checks, inputs.expected,
            head=snapshot.head_sha,
        )  # fmt: skip
        report = replace(report, merge_queue=found)
    # what a failure's history told anew is keyed from (where the report tells one)
    key, text = keyed(report) if history is not None else (facts_key(report), None)
    return Built(
        snapshot, inputs.docs, first_seen, policy, inputs.expected, merge, now, until, report,
        key, inputs.annotations, inputs.keys, inputs.failing, inputs.group, history, text=text,
    )  # fmt: skip


def _stamped(inputs: Inputs, merge: MergeBase, base: str) -> MergeBaseOf:
    """The merge base the comment's stamp carries: as it was read, with the branch's commit
    it was asked with and when; where the trusted stamp of the bot's own comment (a run with
    no state) names the same merge base, the stamp's as it is (a confirmation alone is never
    a write: a run with no state asks again once the stamp's read is `recheck` old)."""
    read = MergeBaseOf(base, str(merge.commit), merge.tip, merge.asked_at)
    stamped = inputs.stamp and inputs.stamp.merge_base_of(inputs.snapshot.head_sha, base)
    return stamped if stamped and stamped.commit == read.commit else read


def _wanted(inputs: Inputs, report: Report, rules: Rules) -> frozenset[Want]:
    """The reads this report needs that were not gathered."""
    wanted: set[Want] = set()
    if inputs.merge is None and any(needs_base(row) for row in report.rows):
        wanted.add("base")
    if inputs.annotations is None and any(needs_annotations(row) for row in report.rows):
        wanted.add("annotations")
    if rules.history and inputs.history is None and any(needs_history(row) for row in report.rows):
        wanted.add("history")
    if inputs.snapshot.queue is not None and not inputs.group_read:
        wanted.add("group")
    return frozenset(wanted)


def _dated(inputs: Inputs, built: Built, stamp: Stamp | None, writes: tuple[Write, ...]) -> Judged:
    """The report dated by when its facts were first observed: the state's, else the stamp's
    (adopted: a lost state re-dates nothing), else now (recorded)."""
    known, key, report = inputs.facts, built.key, built.report
    if known is not None and known[0] == key:
        report = replace(report, observed_at=known[1])
        return Judged(inputs, report, key, stamp, replace(built, report=report), writes)
    now = inputs.now
    if stamp is not None and stamp.facts_key == key:
        now = stamp.observed_at
        report = replace(report, observed_at=now)
    writes += (SetFacts(key, now),)
    return Judged(inputs, report, key, stamp, replace(built, report=report), writes)
