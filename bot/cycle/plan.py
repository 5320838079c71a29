"""Plan one judged pull request: create, edit, leave or adopt its comment, from the state's
record or, where the state knows none, from the bot's own comment and its trusted stamp (pure).

What a plan lacks it names (`Wants`): a dry run's edit re-reads the comment first, as the write
would; a recorded comment that is gone or no longer the bot's is looked for again. The bot's
own later comments (never two) are found by `gather` and deleted by `publish`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from bot.core.annotations import needs_annotations
from bot.core.base import needs_base
from bot.core.comment import Comment
from bot.core.facts import core_key
from bot.core.model import Report
from bot.cycle.model import Judged, NoComment, Plan, SetFacts, Voice, Wants, sha256
from bot.render.stamp import Stamp, without_carried

# The bot's comments left as they are are re-read this many per GraphQL query (one point).
CHECK_BATCH = 100


def plan(judged: Judged, voice: Voice) -> Plan | Wants:
    """Decide create / edit / leave / adopt for one judged pull request."""
    inputs, report = judged.inputs, judged.report
    stored = inputs.comment
    if stored is None:
        return _unknown(judged, voice)
    comment_key = voice.comment_key(report, judged.key)
    if stored.facts_key == comment_key:
        return Plan(report, "leave", "", comment_key, stored.comment_id, stored.node_id)
    if voice.dry_run:  # the write would re-read the comment first: so does the prediction
        if not inputs.current_read:
            return Wants(frozenset({"current"}))
        current = inputs.current
        if current is None or current.author != voice.login:
            return Wants(frozenset({"own"}))  # planned as one the state does not know
        body = voice.body(report, inputs.generation)
        if current.body == body:
            return Plan(report, "adopt", body, comment_key, current.id, found=current)
    return Plan(report, "edit", "", comment_key, stored.comment_id, stored.node_id)


def _unknown(judged: Judged, voice: Voice) -> Plan:
    """Plan for a pull request whose comment the state does not know, from its comments as
    looked at (once: a listing that found none is kept; the write looks again first)."""
    inputs, report, stamp = judged.inputs, judged.report, judged.stamp
    comment_key = voice.comment_key(report, judged.key)
    if inputs.without_comment:
        return Plan(report, "create", "", comment_key, None)
    own = inputs.own
    if own is None:
        return Plan(
            report, "create", "", comment_key, None, looked=True,
            writes=(NoComment(inputs.now),),
        )  # fmt: skip
    body = voice.body(report, inputs.generation)
    if own.body != body and stamp is not None and unread_only(report, stamp):
        # Only a failed read would change it: no new fact, the comment is left as it is and
        # not recorded (the next pass reads its stamp again, until the read succeeds).
        report = replace(report, observed_at=stamp.observed_at)
        comment_key = voice.comment_key(report, stamp.facts_key)
        return Plan(
            report, "leave", own.body, comment_key, own.id, own.node_id,
            writes=(SetFacts(stamp.facts_key, stamp.observed_at),),
        )  # fmt: skip
    if (
        stamp is not None
        and own.body != body
        and without_carried(own.body) == without_carried(body)
    ):
        body = own.body  # a carried line alone never makes a write: kept as the bot wrote it
    action: Literal["edit", "adopt"] = "adopt" if own.body == body else "edit"
    return Plan(report, action, body, comment_key, own.id, own.node_id, found=own, looked=True)


def unread_only(report: Report, stamp: Stamp) -> bool:
    """Whether the comment stamped `stamp` differs from `report` only by what a failed read
    took away: the same head and core facts, and a failing row whose merge base's checks or
    annotations could not be read this time (a failed read is no new fact)."""
    if stamp.head_sha != report.head_sha or stamp.core_key != core_key(report):
        return False
    return any(
        (needs_base(row) and row.base is not None and row.base.error is not None)
        or (needs_annotations(row) and row.annotations is None)
        for row in report.rows
    )


def due_for_check(
    last_good: Mapping[tuple[str, int], datetime], *, per_query: int = CHECK_BATCH
) -> list[tuple[str, int]]:
    """Which comments to re-read this pass: all of them when that takes no more queries than
    half of them would, else the least recently known good, whole queries, at least half."""
    queries = -(-len(last_good) // (2 * per_query))
    ordered = sorted(last_good, key=lambda key: (last_good[key], key))
    return ordered[: queries * per_query]


@dataclass(frozen=True, slots=True)
class Checked:
    """What re-reading the comments left as they are found: the plans that restore them (an
    edit for one someone else changed, a create for one gone), and those found as written."""

    plans: tuple[Plan, ...]
    good: tuple[tuple[str, int], ...]
    gone: tuple[tuple[str, int], ...]  # their records are forgotten (a create follows)


def restore(
    due: Sequence[tuple[Plan, str, str]], found: Mapping[str, Comment | None], login: str
) -> Checked:
    """Plan what the re-read comments need: `due` holds each left plan with its recorded
    comment's node id and body hash; `found` the comments as re-read, by node id."""
    plans: list[Plan] = []
    good: list[tuple[str, int]] = []
    gone: list[tuple[str, int]] = []
    for left, node_id, body_hash in due:
        key = (left.report.repo, left.report.number)
        current = found.get(node_id)
        if current is not None and current.author == login:  # marker or not
            if sha256(current.body) == body_hash:
                good.append(key)
            else:
                plans.append(replace(left, action="edit"))
            continue
        gone.append(key)
        plans.append(replace(left, action="create", comment_id=None, node_id=""))
    return Checked(tuple(plans), tuple(good), tuple(gone))
