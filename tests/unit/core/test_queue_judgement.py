"""The merge queue's judgement (bot.core.merge_queue): table-driven, pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.core.base import MergeBase
from bot.core.merge_queue import (
    HEAD_COMMIT,
    NO_COMMIT,
    QueueConfig,
    QueueRead,
    entry_of,
    judge_queue,
    queue_state,
    queue_verdict,
    queued_number,
    stuck,
)
from bot.core.model import (
    BRANCH_PROTECTION,
    Kind,
    QueueEntry,
    QueueState,
    RequiredChecks,
    RequiredContext,
    Rule,
    Signal,
    Verdict,
)
from bot.core.queue_sources import documented_for

AT = datetime(2026, 10, 5, 13, 22, tzinfo=UTC)
GROUP = "a" * 40
HEAD = "e" * 40
RTD = "docs/readthedocs.org:proj"
MAIN = (Rule(BRANCH_PROTECTION, "main"),)


def required(*names: str, read: bool = True) -> RequiredChecks:
    return RequiredChecks("main", read, tuple(RequiredContext(n, MAIN) for n in names))


def run(name: str, state: str, *, app: str = "github-actions") -> Signal:
    status = "completed" if state not in ("in_progress", "queued") else state
    return Signal(name, Kind.CHECK_RUN, state if status == "completed" else status, app=app,
                  started_at=AT, completed_at=AT)  # fmt: skip


def status(name: str, state: str) -> Signal:
    return Signal(name, Kind.STATUS, state, created_at=AT)


ENTRY = QueueEntry(QueueState.AWAITING_CHECKS, "AWAITING_CHECKS", 1, AT, GROUP, "b" * 40)
CONFIG = QueueConfig(60)


@pytest.mark.parametrize(
    ("signals", "checks", "expected", "missing", "failing", "pending", "verdict"),
    [
        # RTD and DCO never report on merge_group: both missing, the entry waits
        (
            (run("tests", "success"),),
            required("tests", RTD, "DCO"),
            (),
            (RTD, "DCO"),
            (),
            (),
            Verdict.PENDING,
        ),
        # 0 checks on the merge-group commit: every required context is missing, never passing
        ((), required("tests", "DCO"), (), ("tests", "DCO"), (), (), Verdict.PENDING),
        # one failing there
        (
            (run("tests", "failure"), run("DCO", "success", app="dco")),
            required("tests", "DCO"),
            (),
            (),
            ("tests",),
            (),
            Verdict.FAILING,
        ),
        # a cancelled required run keeps the entry from merging too
        ((run("tests", "cancelled"),), required("tests"), (), (), ("tests",), (), Verdict.FAILING),
        # everything required passed there (an optional failure does not count)
        (
            (run("tests", "success"), run("lint", "failure")),
            required("tests"),
            (),
            (),
            (),
            (),
            Verdict.PASSING,
        ),
        # still running there
        (
            (run("tests", "in_progress"),),
            required("tests"),
            (),
            (),
            (),
            ("tests",),
            Verdict.PENDING,
        ),
        # a name of `[[repos]] expected` counts there too
        (
            (run("tests", "success"),),
            required("tests"),
            ("DCO",),
            ("DCO",),
            (),
            (),
            Verdict.PENDING,
        ),
        ((status("DCO", "failure"),), required(), ("DCO",), (), ("DCO",), (), Verdict.FAILING),
        # the required set unread: the configured names still count, the verdict is unverified
        ((run("tests", "success"),), required(read=False), (), (), (), (), Verdict.INCOMPLETE),
    ],
)
def test_what_the_merge_group_commit_lacks(
    signals: tuple[Signal, ...],
    checks: RequiredChecks,
    expected: tuple[str, ...],
    missing: tuple[str, ...],
    failing: tuple[str, ...],
    pending: tuple[str, ...],
    verdict: Verdict,
) -> None:
    read = QueueRead(MergeBase(GROUP, signals), CONFIG)
    found = judge_queue(ENTRY, read, checks, expected)
    assert [s.name for s in found.missing] == list(missing)
    assert [s.name for s in found.failing] == list(failing)
    assert [s.name for s in found.pending] == list(pending)
    assert found.checks == len(signals)
    assert found.timeout_minutes == 60
    assert queue_verdict(found) is verdict
    assert stuck(found) is bool(missing or failing)


@pytest.mark.parametrize(
    ("entry", "read", "error"),
    [
        # the commit could not be read (a GraphQL error, a failed query)
        (
            ENTRY,
            QueueRead(MergeBase(GROUP, error="GitHub GraphQL error on x: FORBIDDEN"), CONFIG),
            "GitHub GraphQL error on x: FORBIDDEN",
        ),
        # the entry named a commit GitHub no longer finds (it left the queue between the reads)
        (
            ENTRY,
            QueueRead(MergeBase(GROUP, error="GitHub did not find the merge-group commit"), None),
            "GitHub did not find the merge-group commit",
        ),
        # no commit named at all
        (QueueEntry(QueueState.QUEUED, "QUEUED", 2, AT), QueueRead(None, CONFIG), NO_COMMIT),
        # not read this pass
        (ENTRY, None, "its checks were not read"),
        # the entry names the head itself (not a merge group's commit): never judged as one
        (
            QueueEntry(QueueState.QUEUED, "QUEUED", 1, AT, HEAD),
            QueueRead(MergeBase(HEAD, (run("tests", "success"),)), CONFIG),
            HEAD_COMMIT,
        ),
    ],
)
def test_an_unread_commit_is_said_never_guessed(
    entry: QueueEntry, read: QueueRead | None, error: str
) -> None:
    found = judge_queue(entry, read, required("tests"), (), head=HEAD)
    assert found.commit_error == error
    assert found.missing == () and found.failing == ()
    assert queue_verdict(found) is Verdict.INCOMPLETE
    assert not stuck(found)


def test_an_unreadable_configuration_leaves_the_timeout_unknown() -> None:
    read = QueueRead(MergeBase(GROUP, ()), QueueConfig(None, "Resource not accessible"))
    found = judge_queue(ENTRY, read, required("tests"), ())
    assert found.timeout_minutes is None
    assert found.timeout_error == "Resource not accessible"
    assert [s.name for s in found.missing] == ["tests"]  # the rest is still judged


def test_an_entry_github_answered_an_error_for_is_not_judged() -> None:
    entry = QueueEntry(QueueState.UNKNOWN, "", error="GitHub answered an error")
    found = judge_queue(entry, QueueRead(MergeBase(GROUP, ()), CONFIG), required("tests"), ())
    assert found.missing == () and queue_verdict(found) is Verdict.INCOMPLETE


def test_a_truncated_read_names_no_missing_context() -> None:
    read = QueueRead(MergeBase(GROUP, (run("x", "success"),), truncated=True), CONFIG)
    found = judge_queue(ENTRY, read, required("tests"), ())
    assert found.missing == () and queue_verdict(found) is Verdict.INCOMPLETE


@pytest.mark.parametrize(
    ("ref", "number"),
    [
        ("refs/heads/gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64", 104),
        ("gh-readonly-queue/release/1.x/pr-7-" + "0" * 40, 7),
        ("refs/heads/main", None),
        ("refs/heads/gh-readonly-queue/main/pr-104-notasha", None),
        ("refs/heads/gh-readonly-queue/main/pr-99999999999-" + "0" * 40, None),
        (None, None),
    ],
)
def test_the_pull_request_a_merge_group_is_named_after(ref: object, number: int | None) -> None:
    assert queued_number(ref) == number


@pytest.mark.parametrize(
    ("raw", "state"),
    [("AWAITING_CHECKS", QueueState.AWAITING_CHECKS), ("LOCKED", QueueState.LOCKED),
     ("SOMETHING_NEW", QueueState.UNKNOWN), (None, QueueState.UNKNOWN)],
)  # fmt: skip
def test_states_through_one_table(raw: object, state: QueueState) -> None:
    assert queue_state(raw) is state


@pytest.mark.parametrize(
    ("in_queue", "node", "entry"),
    [
        (False, None, None),
        (True, None, QueueEntry(QueueState.UNKNOWN, "", error="GitHub gave no merge-queue entry")),
        (True, {"state": "QUEUED", "position": 3, "enqueuedAt": "2026-10-05T13:22:00Z",
                "headCommit": {"oid": GROUP}, "baseCommit": None},
         QueueEntry(QueueState.QUEUED, "QUEUED", 3, AT, GROUP, None)),
        (True, {"state": "QUEUED", "position": True, "enqueuedAt": "soon",
                "headCommit": {"oid": "not-hex"}},
         QueueEntry(QueueState.QUEUED, "QUEUED", None, None, None, None)),
    ],
)  # fmt: skip
def test_entry_of_graphql(in_queue: object, node: object, entry: QueueEntry | None) -> None:
    assert entry_of(in_queue, node) == entry


@pytest.mark.parametrize(
    ("signal", "source"),
    [
        (Signal(RTD, Kind.EXPECTED, "expected"), "readthedocs/readthedocs.org#10021"),
        (Signal("docs/readthedocs.com:biz", Kind.EXPECTED, "expected"),
         "readthedocs/readthedocs.org#10021"),
        (Signal("DCO", Kind.EXPECTED, "expected"), "opentdf/web-sdk#1036"),
        (Signal("tests", Kind.EXPECTED, "expected"), None),
    ],
)  # fmt: skip
def test_documented_behaviour_by_context(signal: Signal, source: str | None) -> None:
    found = documented_for(signal)
    assert (found.source_name if found else None) == source
