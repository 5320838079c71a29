"""Table-driven tests of the pure reconciliation core (no mocks)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from support import (
    BUILD_URL,
    DOCS,
    NOW,
    OLD,
    PENDING_RAW,
    PR_URL,
    RECENT,
    SHA,
    at,
    build,
    lookup,
    one_row,
    run,
    seed_report,
    seed_rtd,
    seed_snapshot,
    snapshot,
    status,
)

from bot.core.facts import facts_key
from bot.core.model import (
    Kind,
    Policy,
    Signal,
    SinceSource,
    State,
    Verdict,
)
from bot.core.reconcile import (
    EXPECTED_FINDING,
    NO_SIGNALS_NOTE,
    TRUNCATED_NOTE,
    reconcile,
)
from bot.sources.readthedocs.rows import RtdLookup, settle_status
from bot.sources.readthedocs.rules import PROJECT_KEY as RTD_PROJECT_KEY
from bot.sources.readthedocs.rules import RtdBuild, Target, target_of
from bot.sources.readthedocs.rules import project_of as rtd_project_of

# --- GitHub's raw values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("success", State.SUCCESS),
        ("failure", State.FAILURE),
        ("neutral", State.NEUTRAL),
        ("cancelled", State.CANCELLED),
        ("skipped", State.SKIPPED),
        ("timed_out", State.TIMED_OUT),
        ("action_required", State.ACTION_REQUIRED),
        ("startup_failure", State.FAILURE),
        ("stale", State.STALE),
        ("completed", State.UNKNOWN),
        ("something_new", State.UNKNOWN),
        ("", State.UNKNOWN),
        *((raw, State.PENDING) for raw in PENDING_RAW),
    ],
)
def test_check_run_table(raw: str, state: State) -> None:
    report = one_row(run("job", raw))
    assert report.rows[0].state is state


@pytest.mark.parametrize(
    ("raw", "state", "finding"),
    [
        ("success", State.SUCCESS, None),
        ("failure", State.FAILURE, None),
        ("error", State.FAILURE, None),
        ("pending", State.PENDING, None),
        ("expected", State.UNKNOWN, EXPECTED_FINDING),
        ("bogus", State.UNKNOWN, 'GitHub reported the value "bogus", which this bot does not map.'),
    ],
)
def test_status_table(raw: str, state: State, finding: str | None) -> None:
    row = one_row(status("ctx", raw)).rows[0]
    assert (row.state, row.finding) == (state, finding)


@pytest.mark.parametrize("raw", ["cancelled", "stale", "something_new", "completed"])
def test_unsettled_check_runs_are_never_passing(raw: str) -> None:
    report = reconcile(snapshot(run("a", "success"), run("b", raw)), {}, Policy(), now=NOW)
    assert report.verdict is Verdict.INCOMPLETE


def test_expected_is_never_called_pending() -> None:
    report = one_row(status("required/ctx", "expected"))
    assert report.verdict is Verdict.INCOMPLETE
    assert report.rows[0].finding == EXPECTED_FINDING
    assert "pending" not in EXPECTED_FINDING


@pytest.mark.parametrize(
    ("context", "project"),
    [
        ("docs/readthedocs.org:omni-docs", ("org", "omni-docs")),
        ("docs/readthedocs.com:corp-docs", ("com", "corp-docs")),
        ("docs/readthedocs.net:x", None),
        ("docs/readthedocs.org:", None),
        ("ci/readthedocs.org:x", None),
        ("docs/readthedocs.org:x y", None),
        ("docs/readthedocs:self-docs", ("self", "self-docs")),
        ("docs/readthedocs.org:../x", None),
        ("docs/readthedocs.com:a/b", None),
        ("docs/readthedocs.org:x\n", None),
    ],
)
def test_rtd_project_of(context: str, project: tuple[str, str] | None) -> None:
    assert rtd_project_of(context) == project


# --- dedupe --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signals", "kept"),
    [
        pytest.param(
            (
                run("DCO", "action_required", app="dco", started_at=at(9, 0), database_id=1),
                run("DCO", "success", app="dco", started_at=at(9, 5), database_id=2),
            ),
            [("DCO", State.SUCCESS)],
            id="dco-manual-override-wins",
        ),
        pytest.param(
            (
                run("test", "success", workflow="CI", started_at=at(10, 0), database_id=5),
                run("test", "failure", workflow="CI", started_at=at(9, 0), database_id=9),
            ),
            [("test", State.SUCCESS)],
            id="rerun-in-another-suite",
        ),
        pytest.param(
            (
                run("test", "failure", workflow="CI", started_at=at(9, 0), database_id=1),
                run("test", "success", workflow="CI", started_at=at(9, 0), database_id=2),
            ),
            [("test", State.SUCCESS)],
            id="tie-larger-database-id",
        ),
        pytest.param(
            (
                run("test", "queued", workflow="CI", started_at=None, database_id=9),
                run("test", "success", workflow="CI", started_at=at(9, 0), database_id=1),
            ),
            [("test", State.PENDING)],  # a queued re-run: the older success is not the answer
            id="not-started-yet-is-newest",
        ),
        pytest.param(
            (
                run("test", "failure", workflow="CI", started_at=at(9, 0)),
                run("test", "success", workflow="Nightly", started_at=at(10, 0)),
            ),
            [("test", State.FAILURE), ("test", State.SUCCESS)],
            id="other-workflow-kept",
        ),
        pytest.param(
            (
                run("DCO", "action_required", app="dco", started_at=at(9, 0)),
                run("DCO", "success", app="other-dco", started_at=at(10, 0)),
            ),
            [("DCO", State.ACTION_REQUIRED), ("DCO", State.SUCCESS)],
            id="other-app-kept",
        ),
    ],
)
def test_dedupe(signals: tuple[Signal, ...], kept: list[tuple[str, State]]) -> None:
    # (more cases in DEDUPE_TIES below: found by an adversarial review of the merged build)
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)
    assert [(row.signal.name, row.state) for row in report.rows] == kept


TIE = at(9, 0)


@pytest.mark.parametrize(
    "signals",
    [
        (run("t", "success", started_at=TIE), run("t", "failure", started_at=TIE)),
        (run("t", "failure", started_at=TIE), run("t", "success", started_at=TIE)),
        (run("t", "failure", started_at=TIE), run("t", "success", started_at=TIE, database_id=5)),
        # a completed run with no start is dated by its completion, not taken as a re-run
        (run("t", "failure", started_at=at(13, 5), database_id=9),
         run("t", "success", started_at=None, completed_at=None, database_id=3)),
    ],
)  # fmt: skip
def test_dedupe_ties_and_missing_times_never_hide_a_failure(signals: tuple[Signal, ...]) -> None:
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)
    assert [row.state for row in report.rows] == [State.FAILURE]
    assert report.verdict is Verdict.FAILING


def test_a_named_build_without_a_commit_is_not_called_this_exact_commits() -> None:
    rtd = lookup(build("triggered", None, id=4, commit=""))
    row = one_row(status(DOCS, "pending", url=LATEST.format(4)), rtd).rows[0]
    assert row.reconciliation is not None and row.reconciliation.build_id == 4
    finding = row.reconciliation.finding
    assert "for this exact commit" not in finding and "no commit for it yet" in finding


def test_a_named_build_rtd_did_not_give_settles_nothing_and_says_so() -> None:
    # The status names build 101; RTD gave only an older successful build 100 of the PR.
    rtd = lookup(build("finished", True, id=100))
    row = one_row(status(DOCS, "pending", url=LATEST.format(101)), rtd).rows[0]
    rec = row.reconciliation
    assert row.state is State.PENDING and rec is not None
    assert rec.build_id is None and not rec.divergent
    assert "build 101" in rec.finding and "no other build settles" in rec.finding


@pytest.mark.parametrize(
    "notes", [("build:user:exit-code-183",), ("build:user:cancelled", "build:user:exit-code-183")]
)
def test_a_failure_status_is_never_turned_into_a_skip(notes: tuple[str, ...]) -> None:
    rtd = lookup(build("cancelled", False), notes=notes)
    report = one_row(status(DOCS, "failure", url=BUILD_URL), rtd)
    assert report.rows[0].state is State.CANCELLED
    assert report.verdict is Verdict.INCOMPLETE


# --- since and stale -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signal", "first_seen", "state", "since", "source"),
    [
        (run("j", "queued", started_at=None), OLD, State.STALE, OLD, SinceSource.FIRST_SEEN),
        (
            run("j", "queued", started_at=None),
            RECENT,
            State.PENDING,
            RECENT,
            SinceSource.FIRST_SEEN,
        ),
        (run("j", "queued", started_at=None), None, State.PENDING, None, SinceSource.NONE),
        (run("j", "in_progress", started_at=OLD), RECENT, State.STALE, OLD, SinceSource.GITHUB),
        (run("j", "success", completed_at=OLD), None, State.SUCCESS, OLD, SinceSource.GITHUB),
        (status("s", "pending", created_at=OLD), None, State.STALE, OLD, SinceSource.GITHUB),
        (status("s", "pending", created_at=None), OLD, State.STALE, OLD, SinceSource.FIRST_SEEN),
        (status("s", "failure", created_at=OLD), None, State.FAILURE, OLD, SinceSource.GITHUB),
    ],
)
def test_since_and_stale(
    signal: Signal,
    first_seen: datetime | None,
    state: State,
    since: datetime | None,
    source: SinceSource,
) -> None:
    seen = {signal.key: first_seen} if first_seen else None
    row = one_row(signal, first_seen=seen).rows[0]
    assert (row.state, row.since, row.since_source) == (state, since, source)


def test_stale_finding_is_absolute_and_dated() -> None:
    row = one_row(status("ci/x", "pending", created_at=at(9, 12))).rows[0]
    assert row.state is State.STALE
    assert row.finding == (
        "GitHub has shown it pending since 2026-10-05 09:12 UTC, longer than the 120-minute limit."
    )


def test_stale_check_run_names_its_github_state() -> None:
    row = one_row(run("lint", "in_progress", started_at=at(9, 0))).rows[0]
    assert row.finding == (
        "GitHub has shown it in_progress since 2026-10-05 09:00 UTC, "
        "longer than the 120-minute limit."
    )


def test_stale_limit_comes_from_policy() -> None:
    signal = status("ci/x", "pending", created_at=NOW - timedelta(minutes=30))
    report = reconcile(snapshot(signal), {}, Policy(timedelta(minutes=20)), now=NOW)
    assert report.rows[0].state is State.STALE
    assert "20-minute limit" in (report.rows[0].finding or "")
    assert report.stale_after == timedelta(minutes=20)


# --- Read the Docs -------------------------------------------------------------------------

RTD_CASES = [
    # (id, github state, status created, lookup, state, divergent, build_id, builds, phrases)
    (
        "pending-no-build",
        "pending",
        RECENT,
        lookup(),
        State.PENDING,
        False,
        None,
        0,
        ["Read the Docs lists no build for this exact commit."],
    ),
    (
        "pending-no-build-stale",
        "pending",
        OLD,
        lookup(),
        State.STALE,
        False,
        None,
        0,
        ["lists no build"],
    ),
    (
        "pending-running",
        "pending",
        OLD,
        lookup(build("building", None, created=RECENT)),
        State.PENDING,
        False,
        34894885,
        1,
        ["build 34894885 for this exact commit as building since 2026-10-05 13:53 UTC."],
    ),
    (
        "pending-running-too-long",
        "pending",
        RECENT,
        lookup(build("triggered", None, created=OLD)),
        State.STALE,
        False,
        34894885,
        1,
        ["as triggered since 2026-10-05 11:03 UTC, longer than the 120-minute limit."],
    ),
    (
        "pending-cancelled",
        "pending",
        OLD,
        lookup(build("cancelled", False), notes=("build:user:cancelled",)),
        State.CANCELLED,
        True,
        34894885,
        1,
        [
            "for this exact commit as cancelled; it is the only build",
            "it is the only build for this commit, so no newer build exists.",
            "RTD's notification for it: build:user:cancelled.",
        ],
    ),
    (
        "pending-cancelled-no-notification",
        "pending",
        RECENT,
        lookup(build("cancelled", None, id=3), build("finished", True, id=2), build("x", None)),
        State.CANCELLED,
        True,
        3,
        3,
        [
            "it is the newest of 3 builds for this commit, so no newer build exists.",
            "RTD gave no notification for it.",
        ],
    ),
    (
        "pending-cancelled-183-is-skipped",
        "pending",
        RECENT,
        lookup(build("cancelled", False), notes=("build:user:exit-code-183",)),
        State.SKIPPED,
        True,
        34894885,
        1,
        ["RTD's notification for it: build:user:exit-code-183."],
    ),
    (
        "pending-succeeded",
        "pending",
        RECENT,
        lookup(build("finished", True, finished=at(13, 40))),
        State.SUCCESS,
        True,
        34894885,
        1,
        [
            "reports that build 34894885 for this exact commit succeeded at 2026-10-05 13:40 UTC.",
            "GitHub's status was not updated after the build finished.",
        ],
    ),
    (
        "pending-failed",
        "pending",
        RECENT,
        lookup(build("finished", False, finished=at(13, 40))),
        State.FAILURE,
        True,
        34894885,
        1,
        ["reports that build 34894885 for this exact commit failed at 2026-10-05 13:40 UTC."],
    ),
    (
        "pending-unknown-rtd-state",
        "pending",
        RECENT,
        lookup(build("exploded", None)),
        State.PENDING,
        False,
        34894885,
        1,
        ['with state "exploded", which this bot does not map.'],
    ),
    (
        "success-agrees",
        "success",
        RECENT,
        lookup(build("finished", True, finished=at(13, 40))),
        State.SUCCESS,
        False,
        34894885,
        1,
        ["Read the Docs agrees: it reports that build 34894885 for this exact commit succeeded"],
    ),
    (
        "failure-agrees",
        "failure",
        RECENT,
        lookup(build("finished", False)),
        State.FAILURE,
        False,
        34894885,
        1,
        ["Read the Docs agrees", "for this exact commit failed."],
    ),
    (
        "error-status-agrees-with-failed-build",
        "error",
        RECENT,
        lookup(build("finished", False)),
        State.FAILURE,
        False,
        34894885,
        1,
        ["Read the Docs agrees"],
    ),
    (
        "success-agrees-skipped-183",
        "success",
        RECENT,
        lookup(build("cancelled", False), notes=("build:user:exit-code-183",)),
        State.SKIPPED,
        False,
        34894885,
        1,
        ["Read the Docs agrees", "build:user:exit-code-183"],
    ),
    (
        "success-disagrees-failed",
        "success",
        RECENT,
        lookup(build("finished", False)),
        State.FAILURE,
        True,
        34894885,
        1,
        ["GitHub's status says success. Read the Docs reports that build 34894885", "failed."],
    ),
    (
        "failure-disagrees-succeeded",
        "failure",
        RECENT,
        lookup(build("finished", True)),
        State.SUCCESS,
        True,
        34894885,
        1,
        ["GitHub's status says failure.", "for this exact commit succeeded."],
    ),
    (
        "success-cancelled-not-183",
        "success",
        RECENT,
        lookup(build("cancelled", False)),
        State.CANCELLED,
        True,
        34894885,
        1,
        ["GitHub's status says success.", "as cancelled"],
    ),
    (
        "failure-newer-running",
        "failure",
        OLD,
        lookup(build("installing", None, created=RECENT)),
        State.PENDING,
        True,
        34894885,
        1,
        ["GitHub's status says failure.", "as installing since 2026-10-05 13:53 UTC."],
    ),
    (
        "failure-newer-running-too-long",
        "failure",
        OLD,
        lookup(build("triggered", None, created=OLD)),
        State.STALE,
        True,
        34894885,
        1,
        ["longer than the 120-minute limit"],
    ),
    (
        "unreadable-pending",
        "pending",
        RECENT,
        lookup(error="HTTP 403 from app.readthedocs.org."),
        State.PENDING,
        False,
        None,
        None,
        ["Could not verify with Read the Docs: HTTP 403 from app.readthedocs.org."],
    ),
    (
        "unreadable-pending-stale",
        "pending",
        OLD,
        lookup(build("cancelled", False), error="timed out"),
        State.STALE,
        False,
        None,
        None,
        ["Could not verify with Read the Docs: timed out."],
    ),
    (
        "unreadable-success",
        "success",
        OLD,
        lookup(error="timed out"),
        State.SUCCESS,
        False,
        None,
        None,
        ["Could not verify"],
    ),
]


@pytest.mark.parametrize(
    ("github", "created", "rtd", "state", "divergent", "build_id", "builds", "phrases"),
    [pytest.param(*case[1:], id=case[0]) for case in RTD_CASES],
)
def test_read_the_docs_table(
    github: str,
    created: datetime,
    rtd: RtdLookup,
    state: State,
    divergent: bool,
    build_id: int | None,
    builds: int | None,
    phrases: list[str],
) -> None:
    row = one_row(status(DOCS, github, created_at=created), rtd).rows[0]
    rec = row.reconciliation
    assert rec is not None
    assert row.state is state
    assert (rec.divergent, rec.build_id, rec.builds_for_commit) == (divergent, build_id, builds)
    assert (rec.provider, rec.project, rec.fetched_at) == ("readthedocs", "omni-docs", NOW)
    for phrase in phrases:
        assert phrase in rec.finding
    if rec.build_id is None:
        assert (rec.build_state, rec.success, rec.notification) == (None, None, None)


def test_evidence_settles_before_age() -> None:
    signal = status(DOCS, "pending", created_at=NOW - timedelta(days=3))
    rtd = lookup(build("cancelled", False, created=NOW - timedelta(days=3)))
    row = one_row(signal, rtd).rows[0]
    assert row.state is State.CANCELLED
    assert row.finding is None


def test_unreadable_rtd_is_stale_with_github_finding() -> None:
    row = one_row(status(DOCS, "pending", created_at=at(9, 12)), lookup(error="503")).rows[0]
    assert row.state is State.STALE
    assert row.finding is not None and "since 2026-10-05 09:12 UTC" in row.finding


def test_rtd_lookup_applies_only_to_statuses() -> None:
    report = one_row(run(DOCS, "success"), lookup(build("finished", False)))
    assert report.rows[0].reconciliation is None
    assert report.rows[0].state is State.SUCCESS


def test_reconciliation_carries_build_details() -> None:
    rec = seed_report().rows[0].reconciliation
    assert rec is not None
    assert (rec.build_state, rec.success, rec.build_url) == ("cancelled", False, BUILD_URL)
    assert (rec.notification, rec.build_created, rec.build_finished) == (
        "build:user:cancelled",
        at(9, 12),
        None,
    )


# --- Read the Docs: which build settles (issue 7, defects 2-4 and 9) ---------------------------

LATEST = "https://readthedocs.org/projects/omni-docs/builds/{}/"


@pytest.mark.parametrize(
    ("builds", "url", "settles", "others"),
    [
        pytest.param(  # a newer branch build of the same commit never settles the PR's status
            [build("finished", True, id=9, version="latest", created=RECENT),
             build("cancelled", False, id=1, created=OLD)],
            None, 1, [9], id="branch-build-is-not-the-pr",
        ),
        pytest.param(  # the build target_url names settles, even if a newer one of the PR exists
            [build("finished", True, id=3, created=RECENT),
             build("cancelled", False, id=2, created=OLD)],
            LATEST.format(2), 2, [], id="named-build-over-newest",
        ),
        pytest.param(  # a named build with no commit yet (freshly triggered) still settles
            [build("finished", True, id=3, created=OLD), build("triggered", None, id=4, commit="")],
            LATEST.format(4), 4, [], id="named-build-without-commit",
        ),
        pytest.param(  # a named build of ANOTHER commit does not, and no other stands in
            [build("finished", True, id=3), build("cancelled", False, id=4, commit="a" * 40)],
            LATEST.format(4), None, [], id="named-build-of-another-commit",
        ),
        pytest.param(  # a named build RTD did not give (unreadable): an older one never settles
            [build("finished", True, id=100)],
            LATEST.format(101), None, [], id="named-build-not-read",
        ),
        pytest.param(  # a target_url of another project names nothing
            [build("finished", True, id=3), build("cancelled", False, id=4)],
            "https://readthedocs.org/projects/other/builds/4/", 3, [], id="named-in-other-project",
        ),
        pytest.param(  # only other versions: nothing settles
            [build("finished", True, id=9, version="latest")], None, None, [9], id="only-branch",
        ),
        pytest.param(  # the success status's target_url is the preview, which names no build
            [build("finished", False, id=5, created=OLD),
             build("finished", True, id=6, version="7431", created=RECENT)],
            "https://omni-docs--7430.org.readthedocs.build/en/7430/", 5, [6], id="preview-url",
        ),
    ],
)  # fmt: skip
def test_settling_rule(
    builds: list[RtdBuild], url: str | None, settles: int | None, others: list[int]
) -> None:
    settled = settle_status(lookup(*builds), number=7430, url=url)
    assert (settled.build.id if settled.build else None) == settles
    assert [b.id for b in settled.others] == others
    assert settled.version == "7430"


@pytest.mark.parametrize(
    ("context", "target"),
    [
        ("docs/readthedocs.org:omni-docs", Target("org", "omni-docs", True)),
        ("docs/readthedocs.com:corp", Target("com", "corp", True)),
        ("docs/readthedocs:self_hosted", Target("self", "self_hosted", True)),
        ("docs/readthedocs.org:../x", Target("org", "../x", False)),
        ("docs/readthedocs.org:a b", Target("org", "a b", False)),
        ("docs/readthedocs.org:a/b", Target("org", "a/b", False)),
        ("docs/readthedocs.org:", Target("org", "", False)),
        ("docs/readthedocs.net:x", None),
        ("ci/docs", None),
    ],
)
def test_target_of_context(context: str, target: Target | None) -> None:
    assert target_of(context) == target


def test_branch_build_is_mentioned_but_the_pr_build_settles() -> None:
    rtd = lookup(
        build("finished", True, id=9, version="latest", created=RECENT),
        build("cancelled", False, id=1, created=OLD),
        notes=("build:user:cancelled",),
    )
    row = one_row(status(DOCS, "pending", created_at=OLD), rtd).rows[0]
    assert row.state is State.CANCELLED
    assert row.reconciliation is not None and row.reconciliation.build_id == 1
    assert row.reconciliation.builds_for_commit == 1
    assert "it is the only build of version 7430 for this commit" in row.reconciliation.finding
    assert "9 (version latest)" in row.reconciliation.finding


def test_no_build_of_the_pr_version_keeps_github_state_and_names_the_others() -> None:
    rtd = lookup(build("finished", True, id=9, version="latest"))
    row = one_row(status(DOCS, "pending"), rtd).rows[0]
    rec = row.reconciliation
    assert row.state is State.PENDING and rec is not None
    assert (rec.build_id, rec.builds_for_commit, rec.divergent) == (None, 0, False)
    assert rec.finding.startswith("Read the Docs lists no build of version 7430")


def test_failure_with_a_cancelled_build_is_cancelled_and_says_why_rtd_posted_failure() -> None:
    rtd = lookup(build("cancelled", False, duration=120), notes=("build:user:cancelled",))
    row = one_row(status(DOCS, "failure", url=BUILD_URL), rtd).rows[0]
    rec = row.reconciliation
    assert row.state is State.CANCELLED and rec is not None and rec.divergent
    assert rec.finding.startswith(
        "GitHub's status says failure. Read the Docs sets that state when a running build is "
        "cancelled. Read the Docs reports build 34894885 for this exact commit as cancelled"
    )
    assert "build:user:cancelled" in rec.finding


def test_unread_notifications_keep_the_build_evidence_and_never_make_it_skipped() -> None:
    rtd = dataclasses.replace(lookup(build("cancelled", False)), notifications_read=False)
    row = one_row(status(DOCS, "pending"), rtd).rows[0]
    assert row.state is State.CANCELLED
    assert row.reconciliation is not None and row.reconciliation.build_id == 34894885
    assert "RTD's notifications for it could not be read." in row.reconciliation.finding


def unreadable(since: datetime, *builds: RtdBuild) -> RtdLookup:
    """RTD failing since `since`: the last good builds (if any) stand, read at OLD."""
    if builds:
        return RtdLookup("omni-docs", SHA, OLD, builds, unverified_since=since)
    return RtdLookup(
        "omni-docs", SHA, NOW, error="Read the Docs answered HTTP 429", unverified_since=since
    )


def test_an_outage_shorter_than_the_limit_changes_no_fact() -> None:
    running = build("building", None, created=RECENT)
    good = one_row(status(DOCS, "pending"), lookup(running))
    failing = one_row(status(DOCS, "pending"), unreadable(NOW - timedelta(minutes=29), running))
    assert facts_key(failing) == facts_key(good)


def test_an_outage_past_the_limit_is_said_once_with_absolute_times() -> None:
    running = build("building", None, created=RECENT)
    began = NOW - timedelta(minutes=31)
    first = one_row(status(DOCS, "pending"), unreadable(began, running))
    later = reconcile(
        snapshot(status(DOCS, "pending")), {DOCS: unreadable(began, running)}, Policy(),
        now=NOW + timedelta(minutes=20),
    )  # fmt: skip
    rec = first.rows[0].reconciliation
    assert rec is not None and rec.build_id == 34894885
    assert rec.finding.endswith(
        "Read the Docs could not be read since 2026-10-05 13:32 UTC; this is what it reported "
        "at 2026-10-05 11:03 UTC."
    )
    assert facts_key(later) == facts_key(first)  # nothing that changes from cycle to cycle


@pytest.mark.parametrize(
    ("minutes", "finding"),
    [
        (29, "Could not verify with Read the Docs: Read the Docs answered HTTP 429."),
        (31, "Could not verify with Read the Docs since 2026-10-05 13:32 UTC: "
             "Read the Docs answered HTTP 429."),
    ],
)  # fmt: skip
def test_an_outage_without_evidence(minutes: int, finding: str) -> None:
    since = NOW - timedelta(minutes=minutes) if minutes == 29 else at(13, 32)
    row = one_row(status(DOCS, "pending"), unreadable(since)).rows[0]
    assert row.reconciliation is not None and row.reconciliation.finding == finding
    assert row.state is State.PENDING


def test_unverified_limit_comes_from_policy() -> None:
    running = build("building", None, created=RECENT)
    table = {DOCS: unreadable(NOW - timedelta(minutes=6), running)}
    policy = Policy(unverified_after=timedelta(minutes=5))
    row = reconcile(snapshot(status(DOCS, "pending")), table, policy, now=NOW).rows[0]
    assert (
        row.reconciliation is not None and "could not be read since" in row.reconciliation.finding
    )


def test_rtd_project_answer_is_a_note_never_a_signal() -> None:
    dco = run("DCO", "success", app="dco")
    rtd = {
        RTD_PROJECT_KEY: lookup(build("cancelled", False, id=77), notes=("build:user:cancelled",))
    }
    report = reconcile(snapshot(dco), rtd, Policy(), now=NOW)
    assert [r.signal.name for r in report.rows] == ["DCO"] and report.verdict is Verdict.PASSING
    assert report.notes == (
        "Read the Docs project omni-docs reports build 77 of version 7430 for this exact commit "
        "as cancelled, with notification build:user:cancelled; no Read the Docs "
        "status is reported on GitHub for this commit.",
    )
    empty = reconcile(snapshot(dco), {RTD_PROJECT_KEY: lookup()}, Policy(), now=NOW)
    assert empty.notes == (
        "Read the Docs project omni-docs lists no build of version 7430 for this exact commit; "
        "no Read the Docs status is reported on GitHub for this commit.",
    )


# --- verdict, notes, order -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "verdict"),
    [
        (["success", "neutral", "skipped"], Verdict.PASSING),
        (["success", "failure", "queued", "cancelled"], Verdict.FAILING),
        (["success", "action_required"], Verdict.FAILING),
        (["timed_out", "in_progress"], Verdict.FAILING),
        (["startup_failure"], Verdict.FAILING),
        (["success", "in_progress", "cancelled", "stale"], Verdict.PENDING),
        (["success", "cancelled"], Verdict.INCOMPLETE),
        (["success", "stale"], Verdict.INCOMPLETE),
        (["success", "mystery"], Verdict.INCOMPLETE),
        (["skipped"], Verdict.PASSING),
    ],
)
def test_verdict_precedence(states: list[str], verdict: Verdict) -> None:
    signals = [run(f"job{i}", raw) for i, raw in enumerate(states)]
    assert reconcile(snapshot(*signals), {}, Policy(), now=NOW).verdict is verdict


def test_no_signals_is_incomplete_with_note() -> None:
    report = reconcile(snapshot(), {}, Policy(), now=NOW)
    assert report.verdict is Verdict.INCOMPLETE
    assert report.notes == (NO_SIGNALS_NOTE,)
    assert "pending" not in NO_SIGNALS_NOTE


@pytest.mark.parametrize(
    ("raw", "verdict"),
    [
        ("success", Verdict.INCOMPLETE),
        ("failure", Verdict.FAILING),
        ("queued", Verdict.PENDING),
    ],
)
def test_truncated_is_never_passing(raw: str, verdict: Verdict) -> None:
    report = reconcile(snapshot(run("a", raw), truncated=True), {}, Policy(), now=NOW)
    assert report.verdict is verdict
    assert report.truncated
    assert report.notes == (TRUNCATED_NOTE,)


def test_rows_sorted_attention_first_then_by_name() -> None:
    signals = [
        run("zeta", "success"),
        run("Alpha", "success"),
        status("beta", "pending"),
        run("omega", "cancelled"),
        run("delta", "failure"),
        status("Gamma", "expected"),
        run("Epsilon", "action_required"),
        run("eta", "stale"),
        status("alpha", "success"),
        run("alpha", "neutral"),
    ]
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)
    assert [(r.signal.name, r.signal.kind) for r in report.rows] == [
        ("delta", Kind.CHECK_RUN),
        ("Epsilon", Kind.CHECK_RUN),
        ("eta", Kind.CHECK_RUN),
        ("Gamma", Kind.STATUS),
        ("omega", Kind.CHECK_RUN),
        ("beta", Kind.STATUS),
        ("Alpha", Kind.CHECK_RUN),
        ("alpha", Kind.CHECK_RUN),
        ("alpha", Kind.STATUS),
        ("zeta", Kind.CHECK_RUN),
    ]


def test_report_header_fields() -> None:
    report = seed_report()
    assert (report.repo, report.number, report.head_sha, report.draft) == (
        "example/omni",
        7430,
        SHA,
        True,
    )
    assert report.observed_at == NOW
    assert report.commit_url == f"{PR_URL}/commits/{SHA}"


# --- facts_key -----------------------------------------------------------------------------


def test_facts_key_ignores_observed_at() -> None:
    report = seed_report()
    later = dataclasses.replace(report, observed_at=NOW + timedelta(hours=5))
    assert facts_key(report) == facts_key(later)
    assert len(facts_key(report)) == 64


def test_facts_key_changes_with_facts() -> None:
    report = seed_report()
    passing = dataclasses.replace(report, verdict=Verdict.PASSING)
    assert facts_key(report) != facts_key(passing)


def test_facts_key_stable_across_cycles_of_the_same_state() -> None:
    first = reconcile(seed_snapshot(), seed_rtd(), Policy(), now=NOW)
    second = reconcile(seed_snapshot(), seed_rtd(), Policy(), now=NOW + timedelta(hours=2))
    assert facts_key(first) == facts_key(second)


def test_seed_case_reconciles() -> None:
    report = seed_report()
    assert report.verdict is Verdict.INCOMPLETE
    docs, *passing = report.rows
    assert [r.signal.name for r in passing] == [
        "build-wheel (3.11)",
        "build-wheel (3.12)",
        "DCO",
        "pre-commit",
    ]
    assert all(r.state is State.SUCCESS for r in passing)
    assert (docs.signal.name, docs.signal.github_state, docs.state) == (
        DOCS,
        "pending",
        State.CANCELLED,
    )
    assert (docs.since, docs.since_source) == (at(9, 12), SinceSource.GITHUB)


def test_facts_key_ignores_the_title_and_the_rtd_fetch_time() -> None:
    report = reconcile(seed_snapshot(), seed_rtd(), Policy(), now=NOW)
    retitled = dataclasses.replace(seed_snapshot(), title="Something else entirely")
    later_rtd = {
        k: dataclasses.replace(v, fetched_at=NOW + timedelta(hours=1))
        for k, v in seed_rtd().items()
    }
    again = reconcile(retitled, later_rtd, Policy(), now=NOW)
    assert facts_key(report) == facts_key(again)


def test_the_pure_core_loads_no_io_module() -> None:
    """Importing the reconciliation loads neither the state (sqlite3, fcntl) nor any transport."""
    probe = (
        "import sys, bot.core.reconcile, bot.core.facts; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlite3', 'fcntl', 'httpx', 'github', 'jinja2') or m.startswith('bot.') "
        "and not m.startswith('bot.core'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
