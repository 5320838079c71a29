"""Table tests of `bot.cycle.judge`: one pull request's inputs in, its report, what it keeps,
its state writes or the reads it wants out (pure: no GitHub, no state, no clock)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from support import NOW, RECENT, SHA, run, snapshot, status

from bot.core.base import MergeBase
from bot.core.history import HistoryInputs
from bot.core.model import (
    Attempt,
    Elsewhere,
    KeptRead,
    MergeBaseOf,
    Policy,
    QueueEntry,
    QueueState,
    State,
)
from bot.core.required import HEAD_SEEN_KEY
from bot.cycle.judge import Rules, judge
from bot.cycle.model import Inputs, Judged, MarkSeen, SetFacts, Wants
from bot.render.stamp import Stamp, seen_key

PASSING = snapshot(run("build", "success"))
FAILING = snapshot(run("build", "failure", database_id=11, node_id="CR_11"))
QUEUED = replace(PASSING, queue=QueueEntry(QueueState.QUEUED, "QUEUED", position=1))
RULES = Rules(Policy())
HISTORY = Rules(Policy(), history=True)
EARLIER = NOW - timedelta(hours=2)
READ = KeptRead("codecov", "octo/omni@" + SHA, '{"state": "complete"}', EARLIER)


def inputs(snap: Any = PASSING, **fields: Any) -> Inputs:
    """A pull request as gathered, the state knowing nothing of it."""
    fields.setdefault("expected", ())
    fields.setdefault("now", NOW)
    fields.setdefault("comment", None)
    fields.setdefault("without_comment", True)
    fields.setdefault("facts", None)
    fields.setdefault("last", None)
    fields.setdefault("failing", False)
    fields.setdefault("keys", ())
    fields.setdefault("seen", {})
    fields.setdefault("docs", {})
    fields.setdefault("generation", 0)
    return Inputs(snapshot=snap, **fields)


def judged(found: Judged | Wants) -> Judged:
    assert isinstance(found, Judged), found
    return found


def cold() -> Judged:
    return judged(judge(inputs(), RULES))


@pytest.mark.parametrize(
    ("case", "given", "rules", "wants"),
    [
        (
            "a failing run's merge base and annotations, at once",
            inputs(FAILING, failing=True),
            RULES,
            {"base", "annotations"},
        ),
        (
            "its annotations, once the merge base is read",
            inputs(FAILING, failing=True, merge=MergeBase("base1")),
            RULES,
            {"annotations"},
        ),
        (
            "with [policy] history: its history, before anything",
            inputs(FAILING, failing=True),
            HISTORY,
            {"history"},
        ),
        ("a queued pull request's merge group", inputs(QUEUED), RULES, {"group"}),
    ],
)
def test_what_was_not_gathered_is_wanted_and_nothing_is_written(
    case: str, given: Inputs, rules: Rules, wants: set[str]
) -> None:
    found = judge(given, rules)
    assert isinstance(found, Wants), case
    assert found.reads == frozenset(wants), case


def test_gathered_in_full_a_failing_head_is_judged_with_its_merge_base() -> None:
    given = inputs(
        replace(FAILING, base="main"), failing=True, merge=MergeBase("base1"), annotations={}
    )
    found = judged(judge(given, RULES))
    assert found.report.merge_base == MergeBaseOf("main", "base1")
    assert found.built is not None and found.built.merge == MergeBase("base1")


TIP, OLD_TIP = "c" * 40, "d" * 40


@pytest.mark.parametrize(
    ("case", "stamped", "merge", "carried"),
    [
        (
            "no stamp: as read, with the tip it was asked with and when",
            None,
            MergeBase("b" * 40, tip=TIP, asked_at=NOW),
            MergeBaseOf("main", "b" * 40, TIP, NOW),
        ),
        (
            "the stamp names the same merge base: the stamp's, as it is (no write for it)",
            MergeBaseOf("main", "b" * 40, OLD_TIP, EARLIER),
            MergeBase("b" * 40, tip=TIP, asked_at=NOW),
            MergeBaseOf("main", "b" * 40, OLD_TIP, EARLIER),
        ),
        (
            "the stamp names another: as read (the facts changed with it)",
            MergeBaseOf("main", "a" * 40, OLD_TIP, EARLIER),
            MergeBase("b" * 40, tip=TIP, asked_at=NOW),
            MergeBaseOf("main", "b" * 40, TIP, NOW),
        ),
        (
            "the stamp's is of another base branch: as read",
            MergeBaseOf("develop", "b" * 40, OLD_TIP, EARLIER),
            MergeBase("b" * 40, tip=TIP, asked_at=NOW),
            MergeBaseOf("main", "b" * 40, TIP, NOW),
        ),
    ],
)
def test_the_merge_base_a_comment_carries(
    case: str, stamped: MergeBaseOf | None, merge: MergeBase, carried: MergeBaseOf
) -> None:
    stamp = Stamp("0" * 64, EARLIER, SHA, merge_base=stamped)
    given = inputs(
        replace(FAILING, base="main"), failing=True, merge=merge, annotations={}, stamp=stamp
    )
    assert judged(judge(given, RULES)).report.merge_base == carried, case


def test_a_queued_one_read_is_judged_with_what_its_merge_group_lacks() -> None:
    found = judged(judge(inputs(QUEUED, group_read=True), RULES))
    assert found.report.merge_queue is not None


@pytest.mark.parametrize(
    ("case", "facts", "stamp", "observed", "writes"),
    [
        ("new facts: observed now, recorded", None, None, NOW, (SetFacts,)),
        ("the same facts as recorded: since then, nothing recorded", "same", None, EARLIER, ()),
        ("other facts recorded: observed now", ("old-key", EARLIER), None, NOW, (SetFacts,)),
        ("the trusted stamp states the same facts: adopted", None, "same", EARLIER, (SetFacts,)),
        ("a stamp of other facts: observed now", None, "other", NOW, (SetFacts,)),
    ],
)
def test_when_the_facts_were_first_observed(
    case: str, facts: Any, stamp: Any, observed: Any, writes: tuple[type, ...]
) -> None:
    key = cold().key
    if facts == "same":
        facts = (key, EARLIER)
    if stamp is not None:
        stamp = Stamp(key if stamp == "same" else "other", EARLIER, head_sha=SHA)
    given = inputs(facts=facts, stamp=stamp, without_comment=False, looked=True)
    found = judged(judge(given, RULES))
    assert found.report.observed_at == observed, case
    assert tuple(type(w) for w in found.writes) == writes, case
    if writes:
        assert found.writes[-1] == SetFacts(key, observed), case
    assert found.built is not None and found.built.report == found.report, case


def test_first_sights_the_state_dated_stand_then_the_stamps_then_now() -> None:
    snap = snapshot(run("lint", "queued", started_at=None, completed_at=None))
    lint = snap.signals[0].key
    stamp = Stamp("k", EARLIER, head_sha=SHA, first_seen={seen_key(HEAD_SEEN_KEY): RECENT})
    given = inputs(
        snap, keys=(lint, HEAD_SEEN_KEY, "other"), seen={lint: EARLIER}, stamp=stamp,
        without_comment=False, looked=True,
    )  # fmt: skip
    found = judged(judge(given, RULES))
    assert found.built is not None
    assert dict(found.built.first_seen) == {lint: EARLIER, HEAD_SEEN_KEY: RECENT, "other": NOW}
    assert found.writes[:2] == (
        MarkSeen((HEAD_SEEN_KEY,), RECENT),
        MarkSeen((lint, HEAD_SEEN_KEY, "other"), NOW),
    )


def test_no_key_to_date_writes_no_first_sight() -> None:
    assert not [w for w in cold().writes if isinstance(w, MarkSeen)]


def warm(**changes: Any) -> Inputs:
    """The next pass of the same pull request, nothing changed, unless `changes`."""
    first = cold()
    assert first.built is not None
    fields: dict[str, Any] = {
        "last": first.built,
        "facts": (first.key, first.report.observed_at),
        "now": NOW + timedelta(minutes=1),
    }
    fields.update(changes)
    return inputs(**fields)


@pytest.mark.parametrize(
    ("case", "changes", "kept"),
    [
        ("nothing changed: the last report serves", {}, True),
        ("the state's facts differ", {"facts": ("other", NOW)}, False),
        ("a merge base read this pass", {"merge": MergeBase("base1")}, False),
        ("the clock went back", {"now": NOW - timedelta(minutes=1)}, False),
        (
            "the stamp is read (a comment the state does not know)",
            {"stamp": Stamp("k", NOW)},
            False,
        ),
        ("another expected context", {"expected": ("deploy",)}, False),
        ("another final record read", {"kept_reads": (READ,)}, False),
    ],
)
def test_the_warm_reuse(case: str, changes: dict[str, Any], kept: bool) -> None:
    given = warm(**changes)
    found = judged(judge(given, RULES))
    assert (found.built is None) is kept, case
    if kept:
        assert given.last is not None and found.report is given.last.report
        assert found.writes == ()


def test_with_history_a_failing_head_judged_with_its_history_keeps_it() -> None:
    history = HistoryInputs(attempts={}, elsewhere={}, branch=None)
    given = inputs(FAILING, failing=True, merge=MergeBase("base1"), annotations={}, history=history)
    found = judged(judge(given, HISTORY))
    assert found.built is not None and found.built.history == history


def test_the_final_records_read_go_into_the_report_for_its_carried_line() -> None:
    found = judged(judge(inputs(kept_reads=(READ,)), RULES))
    assert found.report.kept_reads == (READ,)
    assert found.key == cold().key  # not a fact: the facts key is as without them


def _failing_with(elsewhere: Elsewhere | None, **fields: Any) -> Inputs:
    key = FAILING.signals[0].key
    history = HistoryInputs(elsewhere={key: elsewhere})
    fields.setdefault("merge", MergeBase("base1"))
    fields.setdefault("annotations", {})
    return inputs(FAILING, failing=True, history=history, **fields)


@pytest.mark.parametrize(
    ("case", "before", "after"),
    [
        ("its count moves", Elsewhere(3, 40, EARLIER), Elsewhere(4, 41, EARLIER)),
        ("it now fails on another pull request", None, Elsewhere(1, 40, None)),
        ("it no longer fails on any other", Elsewhere(2, 40, EARLIER), None),
    ],
)  # fmt: skip
def test_a_failure_whose_only_change_is_elsewhere_is_patched_as_a_rebuild_would_give_it(
    case: str, before: Elsewhere | None, after: Elsewhere | None
) -> None:
    first = judged(judge(_failing_with(before), HISTORY))
    assert first.built is not None
    later = {"facts": (first.key, first.report.observed_at), "now": NOW + timedelta(minutes=1)}
    found = judged(judge(_failing_with(after, last=first.built, **later), HISTORY))
    scratch = judged(judge(_failing_with(after, **later), HISTORY))
    assert found.built is not None and scratch.built is not None, case
    assert found.report == scratch.report and found.key == scratch.key
    assert found.writes == scratch.writes and found.built.history == scratch.built.history
    assert found.report.rows[0].history == scratch.report.rows[0].history
    told = found.report.rows[0].history
    assert (None if told is None else told.elsewhere) == after
    # patched, not reconciled again: the last report's own build and rows carry over
    assert found.built.judged_at == first.built.judged_at != scratch.built.judged_at
    assert found.report.rows[1:] == first.report.rows[1:]
    now = {"facts": (found.key, found.report.observed_at), "now": NOW + timedelta(minutes=2)}
    again = judged(judge(_failing_with(after, last=found.built, **now), HISTORY))
    assert again.built is None and again.report is found.report  # then reused as it is


MANY = snapshot(
    run("build", "failure", database_id=11, node_id="CR_11"),
    status("ci/legacy", "failure"),
    run("lint", "success"),
    run("tests", "failure", database_id=12, node_id="CR_12"),
    run("zz-docs", "success"),
)
EARLIER_RUN = Attempt(State.SUCCESS, EARLIER, "https://ci/attempt/1")


def _many_with(counts: tuple[int, ...], **fields: Any) -> Inputs:
    keys = [s.key for s in MANY.signals]
    told = zip(keys, counts, strict=True)
    history = HistoryInputs(
        attempts={keys[0]: (EARLIER_RUN,)},
        elsewhere={k: Elsewhere(n, 40, EARLIER) if n else None for k, n in told},
        final=frozenset({keys[0]}),
    )
    fields.setdefault("merge", MergeBase("base1"))
    fields.setdefault("annotations", {})
    return inputs(MANY, failing=True, history=history, **fields)


def test_many_rows_patched_from_the_text_kept_are_a_rebuilds_rows_and_key() -> None:
    first = judged(judge(_many_with((3, 2, 0, 0, 0)), HISTORY))
    assert first.built is not None and first.built.text is not None
    assert first.report.kept_attempts == ((11, (EARLIER_RUN,)),)
    later = {"facts": (first.key, first.report.observed_at), "now": NOW + timedelta(minutes=1)}
    moved = (4, 0, 0, 1, 0)  # one count moves, one goes, one comes
    found = judged(judge(_many_with(moved, last=first.built, **later), HISTORY))
    scratch = judged(judge(_many_with(moved, **later), HISTORY))
    assert found.built is not None and scratch.built is not None
    assert found.built.judged_at == first.built.judged_at  # patched, not reconciled again
    assert found.report == scratch.report and found.key == scratch.key != first.key
    assert found.writes == scratch.writes
    assert found.built.text == first.built.text  # what the next patch is keyed from
