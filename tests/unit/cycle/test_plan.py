"""Table tests of `bot.cycle.plan`: a judged pull request in, create / edit / leave / adopt (or
the read it wants) and its state writes out; the re-check of comments left as they are (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from support import NOW, SHA, run, snapshot

from bot.core.base import MergeBase
from bot.core.comment import Comment
from bot.core.facts import core_key
from bot.core.model import KeptRead, Policy
from bot.cycle.judge import Rules, judge
from bot.cycle.model import (
    Inputs,
    Judged,
    Known,
    NoComment,
    Plan,
    SetFacts,
    Voice,
    Wants,
    sha256,
)
from bot.cycle.plan import plan, restore
from bot.render.comment import Renderer
from bot.render.stamp import Stamp, stamp_of

LOGIN = "ci-status-bot[bot]"
VOICE = Voice(Renderer(), LOGIN)
DRY = replace(VOICE, dry_run=True)
EARLIER = NOW - timedelta(hours=2)


def judged(**fields: Any) -> Judged:
    """A passing pull request judged from `fields` (the state knowing no comment)."""
    defaults: dict[str, Any] = {
        "expected": (), "now": NOW, "comment": None, "without_comment": False, "facts": None,
        "last": None, "failing": False, "keys": (), "seen": {}, "docs": {}, "generation": 0,
    }  # fmt: skip
    snap = fields.pop("snap", snapshot(run("build", "success")))
    given = Inputs(snapshot=snap, **{**defaults, **fields})
    found = judge(given, Rules(Policy()))
    assert isinstance(found, Judged)
    return found


def body_of(found: Judged) -> str:
    return VOICE.body(found.report, 0)


def own(body: str, **fields: Any) -> Comment:
    return Comment(1, LOGIN, body, node_id="IC_1", **fields)


def known(found: Judged, *, same: bool) -> Known:
    key = VOICE.comment_key(found.report, found.key) if same else "stale"
    return Known(comment_id=1, node_id="IC_1", facts_key=key)


def planned(found: Judged, voice: Voice = VOICE) -> Plan:
    result = plan(found, voice)
    assert isinstance(result, Plan), result
    return result


def test_the_state_records_the_same_comment_key_left_as_it_is() -> None:
    first = judged()
    found = planned(replace(first, inputs=replace(first.inputs, comment=known(first, same=True))))
    assert (found.action, found.comment_id, found.node_id, found.writes) == ("leave", 1, "IC_1", ())


def test_the_state_records_another_key_edited_without_rendering_yet() -> None:
    first = judged()
    found = planned(replace(first, inputs=replace(first.inputs, comment=known(first, same=False))))
    assert (found.action, found.body, found.comment_id) == ("edit", "", 1)


@pytest.mark.parametrize(
    ("case", "current", "expect"),
    [
        ("not re-read yet: it wants the comment", None, {"current"}),
        ("gone: looked for again, as one the state does not know", "gone", {"own"}),
        ("another's now: looked for again", "foreign", {"own"}),
        ("the body it would write: adopted", "same", "adopt"),
        ("another body: edited", "other", "edit"),
    ],
)
def test_a_dry_runs_edit_re_reads_the_comment_first(case: str, current: Any, expect: Any) -> None:
    first = judged()
    fields: dict[str, Any] = {"comment": known(first, same=False)}
    if current is not None:
        fields["current_read"] = True
        fields["current"] = {
            "gone": None,
            "foreign": Comment(1, "someone", body_of(first)),
            "same": own(body_of(first)),
            "other": own("another body"),
        }[current]
    result = plan(replace(first, inputs=replace(first.inputs, **fields)), DRY)
    if isinstance(expect, set):
        assert isinstance(result, Wants) and result.reads == frozenset(expect), case
    else:
        assert isinstance(result, Plan) and result.action == expect, case


def test_a_listing_found_none_before_created_without_looking() -> None:
    found = planned(judged(without_comment=True))
    assert (found.action, found.looked, found.writes) == ("create", False, ())


def test_looked_and_none_found_created_and_the_look_recorded() -> None:
    found = planned(judged(looked=True, own=None))
    assert (found.action, found.looked, found.writes) == ("create", True, (NoComment(NOW),))


@pytest.mark.parametrize(
    ("case", "same", "action"), [("the same body", True, "adopt"), ("another body", False, "edit")]
)
def test_the_bots_own_comment_found_is_adopted_or_edited(
    case: str, same: bool, action: str
) -> None:
    first = judged(looked=True)
    comment = own(body_of(first) if same else "an older body")
    found = planned(replace(first, inputs=replace(first.inputs, own=comment)))
    assert (found.action, found.found, found.comment_id, found.looked) == (
        action, comment, 1, True,
    ), case  # fmt: skip


def test_a_comment_that_differs_only_by_a_failed_read_is_left_and_its_stamp_recorded() -> None:
    failing = snapshot(run("build", "failure", database_id=11, node_id="CR_11"))
    broken = MergeBase(None, error="the merge base could not be read")
    probe = judged(snap=failing, failing=True, merge=broken, annotations={})
    stamp = Stamp("stamped-key", EARLIER, head_sha=SHA, core=core_key(probe.report))
    first = judged(
        snap=failing, failing=True, merge=broken, annotations={}, looked=True,
        own=own("the body as it was"), stamp=stamp,
    )  # fmt: skip
    found = planned(first)
    assert found.action == "leave"
    assert found.report.observed_at == EARLIER
    assert found.writes == (SetFacts("stamped-key", EARLIER),)
    assert found.comment_key == VOICE.comment_key(found.report, "stamped-key")


def left(number: int) -> Plan:
    report = judged().report
    return Plan(replace(report, number=number), "leave", "", "key", number, f"IC_{number}")


@pytest.mark.parametrize(
    ("case", "current", "action", "good", "gone"),
    [
        ("as written", own("written"), None, True, False),
        ("someone edited it: restored", own("edited by someone"), "edit", False, False),
        ("deleted: posted again", None, "create", False, True),
        ("no longer the bot's: posted again", Comment(1, "someone", "written"), "create", False,
         True),
    ],
)  # fmt: skip
def test_the_comments_left_as_they_are_re_read(
    case: str, current: Comment | None, action: str | None, good: bool, gone: bool
) -> None:
    checked = restore([(left(5), "IC_5", sha256("written"))], {"IC_5": current}, LOGIN)
    assert [p.action for p in checked.plans] == ([action] if action else []), case
    assert (checked.good == (("example/omni", 5),)) is good, case
    assert (checked.gone == (("example/omni", 5),)) is gone, case
    if action == "create":
        assert (checked.plans[0].comment_id, checked.plans[0].node_id) == (None, ""), case


READ = KeptRead("codecov", "octo/omni@" + SHA, '{"state": "complete"}', EARLIER)


@pytest.mark.parametrize(
    ("case", "trusted", "action"),
    [
        ("the bot edited it last: left as it is (adopted)", True, "adopt"),
        ("someone else edited it last: restored", False, "edit"),
    ],
)
def test_a_comment_that_differs_only_by_its_carried_line(
    case: str, trusted: bool, action: str
) -> None:
    """A carried line alone (one an older bot did not write, one it cannot take) makes no
    write on a comment the bot edited last; the body recorded is the one GitHub has."""
    carrying = judged(kept_reads=(READ,))
    written = body_of(judged())  # the same facts, no carried line
    assert written != body_of(carrying) and "ci-status-bot:carried" in body_of(carrying)
    stamp = stamp_of(carrying.report) if trusted else None
    first = judged(kept_reads=(READ,), looked=True, own=own(written), stamp=stamp)
    found = planned(first)
    assert found.action == action, case
    assert found.body == (written if trusted else body_of(carrying)), case
