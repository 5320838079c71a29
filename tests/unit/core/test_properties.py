"""Property-based tests (hypothesis) of the pure core: dedupe, reconcile, verdict, render.

The properties are the contract's (interface.md), stated over any set of GitHub signals and
Read the Docs answers, including values GitHub does not document and hostile text. Runs are
bounded (max_examples, no deadline) so the file runs in seconds. Several of them found
defects before issue 7's fixes (events merged, branch builds settling, a queued re-run
passed over for an older success).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from github import Auth, Github
from github.Requester import Requester
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.core.model import (
    MARKER,
    Kind,
    Policy,
    PullSnapshot,
    Report,
    RequiredChecks,
    RequiredContext,
    Rule,
    Signal,
    State,
    Verdict,
)
from bot.core.reconcile import dedupe, github_state, reconcile
from bot.github.client import GitHubApi
from bot.render.comment import Renderer
from bot.sources.readthedocs.rows import RtdLookup
from bot.sources.readthedocs.rules import RtdBuild
from bot_sandbox import Sandbox, World

NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
NUMBER = 7430
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
COMMENT_LIMIT = 65_536
RUNS = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
FEWER = settings(RUNS, max_examples=100)  # supplementary properties: fewer examples

# The contract's groups (interface.md), stated here rather than imported from the bot.
PASSING_STATES = {State.SUCCESS, State.NEUTRAL, State.SKIPPED}
FAILING_STATES = {State.FAILURE, State.ACTION_REQUIRED, State.TIMED_OUT}
INCOMPLETE_STATES = {State.CANCELLED, State.STALE, State.UNKNOWN}

# GitHub's documented values (CheckStatusState, CheckConclusionState, StatusState).
CHECK_FAILING = ("failure", "timed_out", "action_required", "startup_failure")
CHECK_PASSING = ("success", "neutral", "skipped")
CHECK_PENDING = ("queued", "in_progress", "waiting", "pending", "requested")
CHECK_KNOWN = (*CHECK_FAILING, *CHECK_PASSING, *CHECK_PENDING, "cancelled", "stale")
STATUS_KNOWN = ("success", "failure", "error", "pending", "expected")
RTD_CODES = ("triggered", "cloning", "installing", "building", "uploading", "finished", "cancelled")
RTD_NOTES = (
    "build:user:cancelled",
    "build:app:terminated-due-inactivity",
    "build:user:exit-code-183",
)


def make_signal(**fields: Any) -> Signal:
    """A Signal; `event` is passed on only once Signal has the field (issue 7 adds it)."""
    event = fields.pop("event", None)
    if "event" in Signal._fields:
        fields["event"] = event
    return Signal(**fields)


def event_of(signal: Signal) -> str | None:
    """The triggering event of a check run, None while Signal has no such field."""
    return getattr(signal, "event", None)


# --- strategies ------------------------------------------------------------------------------

HOSTILE = st.sampled_from(
    [
        "`",
        "``x``",
        "<script>alert(1)</script>",
        "<!-- ci-status-bot:v1 -->",
        "@everyone #1 owner/repo#2",
        "[x](javascript:alert(1))",
        "| a | b |\n|---|---|",
        "line\nbreak\r\n# heading",
        "\u202eevil\u200b\u2060",
        "**bold** _i_ ~~s~~ <details>",
        "&#64;&amp;",
        "x" * 5000,
        "🚀" * 300,
        "\\",
        "",
    ]
)
TEXT = st.one_of(st.text(max_size=24), HOSTILE)
NAMES = st.one_of(st.sampled_from(["build", "test (3.11)", "DCO", "lint"]), TEXT)
APPS = st.one_of(st.none(), st.sampled_from(["github-actions", "dco", "octoapp"]), TEXT)
WORKFLOWS = st.one_of(st.none(), st.sampled_from(["ci", "tests"]))
EVENTS = st.one_of(st.none(), st.sampled_from(["push", "pull_request", "schedule", "merge_group"]))
TIMES = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(2026, 9, 25), max_value=datetime(2026, 10, 5, 15), timezones=st.just(UTC)
    ),
)
URLS = st.one_of(st.none(), st.sampled_from(["https://ci.example/1", "javascript:alert(1)"]), TEXT)
CHECK_STATES = st.one_of(st.sampled_from((*CHECK_KNOWN, "completed")), st.text(max_size=12))
STATUS_STATES = st.one_of(st.sampled_from(STATUS_KNOWN), st.text(max_size=12))


@st.composite
def check_runs(draw: st.DrawFn, names: st.SearchStrategy[str] = NAMES) -> dict[str, Any]:
    """The fields of one check run (with `event`), as GitHub might report it."""
    return {
        "name": draw(names),
        "kind": Kind.CHECK_RUN,
        "github_state": draw(CHECK_STATES),
        "app": draw(APPS),
        "workflow": draw(WORKFLOWS),
        "event": draw(EVENTS),
        "url": draw(URLS),
        "description": draw(st.one_of(st.none(), TEXT)),
        "summary": draw(st.one_of(st.none(), TEXT)),
        "started_at": draw(TIMES),
        "completed_at": draw(TIMES),
        "required": draw(st.one_of(st.none(), st.booleans())),
        "database_id": draw(st.one_of(st.none(), st.integers(1, 10**12))),
    }


@st.composite
def statuses(draw: st.DrawFn, names: st.SearchStrategy[str] = NAMES) -> dict[str, Any]:
    """The fields of one commit status."""
    return {
        "name": draw(names),
        "kind": Kind.STATUS,
        "github_state": draw(STATUS_STATES),
        "url": draw(URLS),
        "description": draw(st.one_of(st.none(), TEXT)),
        "created_at": draw(TIMES),
        "required": draw(st.one_of(st.none(), st.booleans())),
    }


RTD_SLUGS = st.sampled_from(["omni-docs", "other-docs"])


@st.composite
def rtd_builds(draw: st.DrawFn) -> RtdBuild:
    """One RTD build of the head commit, of the PR's own version or another one."""
    code = draw(st.one_of(st.sampled_from(RTD_CODES), st.text(max_size=10)))
    return RtdBuild(
        id=draw(st.integers(1, 10**8)),
        project="omni-docs",
        commit=SHA,
        state=code,
        success=draw(st.one_of(st.none(), st.booleans())),
        version=draw(st.sampled_from([str(NUMBER), "latest", "v1.0", "7431"])),
        created=draw(TIMES),
        finished=draw(TIMES),
        duration=draw(st.one_of(st.none(), st.integers(0, 4000))),
        url=draw(st.one_of(st.none(), URLS)),
    )


@st.composite
def rtd_lookups(draw: st.DrawFn, project: str) -> RtdLookup:
    """What RTD answered for a project and the head commit: builds, or an error."""
    error = draw(st.one_of(st.none(), st.sampled_from(["Read the Docs answered HTTP 503"]), TEXT))
    builds = () if error else tuple(draw(st.lists(rtd_builds(), max_size=4)))
    notes = tuple(draw(st.lists(st.sampled_from(RTD_NOTES), max_size=2)))
    return RtdLookup(project, SHA, NOW, builds=builds, notifications=notes, error=error)


@st.composite
def pulls(draw: st.DrawFn, *, max_signals: int = 8) -> tuple[PullSnapshot, dict[str, RtdLookup]]:
    """A pull request with any signals (some of them RTD statuses) and RTD's answers."""
    runs = draw(st.lists(check_runs(), max_size=max_signals))
    plain = draw(st.lists(statuses(), max_size=3))
    rtd_contexts = draw(st.lists(RTD_SLUGS, max_size=2, unique=True))
    rtd_statuses = [
        {**draw(statuses()), "name": f"docs/readthedocs.org:{slug}"} for slug in rtd_contexts
    ]
    lookups = {
        f"docs/readthedocs.org:{slug}": draw(rtd_lookups(slug))
        for slug in rtd_contexts
        if draw(st.booleans())
    }
    signals = tuple(make_signal(**fields) for fields in (*runs, *plain, *rtd_statuses))
    snap = snapshot(signals, truncated=draw(st.booleans()))
    return snap, lookups


def snapshot(signals: Sequence[Signal], *, truncated: bool = False) -> PullSnapshot:
    """PR #7430 with `signals` on its head."""
    return PullSnapshot(
        repo="octo/omni",
        number=NUMBER,
        title="Add the omni resolver",
        author="alice",
        draft=False,
        head_sha=SHA,
        url=f"https://github.com/octo/omni/pull/{NUMBER}",
        signals=tuple(signals),
        truncated=truncated,
    )


def reconciled(snap: PullSnapshot, lookups: dict[str, RtdLookup] | None = None) -> Report:
    """The bot's reconcile at NOW with the default policy (120-minute stale limit)."""
    return reconcile(snap, lookups or {}, Policy(), now=NOW)


# --- the verdict -----------------------------------------------------------------------------


def _unique_runs(snap: PullSnapshot) -> list[Signal]:
    """Check runs that no other run on the head could supersede (contract key incl. event)."""
    keys = [(s.name, s.app, s.workflow, event_of(s)) for s in snap.signals]
    return [
        s
        for s, key in zip(snap.signals, keys, strict=True)
        if s.kind is Kind.CHECK_RUN and keys.count(key) == 1
    ]


@RUNS
@given(pulls(), st.integers(1, 24 * 60))
def test_verdict_follows_the_contract_for_any_signals(
    case: tuple[PullSnapshot, dict[str, RtdLookup]], stale_minutes: int
) -> None:
    snap, lookups = case
    # reconcile never raises, whatever GitHub and RTD said, and keeps one row per signal kept
    report = reconcile(snap, lookups, Policy(timedelta(minutes=stale_minutes)), now=NOW)
    assert len(report.rows) == len(dedupe(snap.signals))
    row_states = {row.state for row in report.rows}

    # passing only when every reconciled state is success/neutral/skipped, nothing truncated
    all_green = bool(report.rows) and row_states <= PASSING_STATES and not snap.truncated
    assert (report.verdict is Verdict.PASSING) == all_green, (report.verdict, row_states)
    # cancelled, stale and unknown never yield passing; failure states always give failing
    if row_states & INCOMPLETE_STATES:
        assert report.verdict is not Verdict.PASSING
    assert (report.verdict is Verdict.FAILING) == bool(row_states & FAILING_STATES)

    # From GitHub's raw values: a run nothing supersedes, or a status with no second source,
    # that failed makes the verdict failing; in any state but success/neutral/skipped
    # (cancelled, stale, pending of any age, "completed" without conclusion, an unknown
    # value) it never lets the verdict be passing.
    unique = _unique_runs(snap)
    plain = [s for s in snap.signals if s.kind is Kind.STATUS and s.name not in lookups]
    failed = [s for s in unique if s.github_state in CHECK_FAILING]
    failed += [s for s in plain if s.github_state in ("failure", "error")]
    if failed:
        assert report.verdict is Verdict.FAILING, [s.name for s in failed]
    not_green = [s for s in unique if s.github_state not in CHECK_PASSING]
    not_green += [s for s in plain if s.github_state != "success"]
    if not_green:
        assert report.verdict is not Verdict.PASSING, [s.github_state for s in not_green]


@RUNS
@given(st.lists(statuses(), min_size=1, max_size=6), st.integers(1, 600))
def test_pending_statuses_go_stale_past_the_limit_and_never_pass(
    fields: list[dict[str, Any]], minutes: int
) -> None:
    signals = [
        make_signal(**{**f, "github_state": "pending", "created_at": NOW - timedelta(minutes=m)})
        for f, m in zip(fields, range(minutes, minutes + len(fields)), strict=False)
    ]
    report = reconcile(snapshot(signals), {}, Policy(timedelta(minutes=120)), now=NOW)
    for row in report.rows:
        age = NOW - row.signal.created_at if row.signal.created_at else timedelta(0)
        assert row.state is (State.STALE if age > timedelta(minutes=120) else State.PENDING)
    assert report.verdict is not Verdict.PASSING


# --- deduplication -----------------------------------------------------------------------------

SMALL_NAMES = st.sampled_from(["build", "test"])
_RUN = {"name": "build", "kind": Kind.CHECK_RUN, "app": "github-actions", "workflow": "ci"}
PUSH_FAILED = {**_RUN, "github_state": "failure", "event": "push", "started_at": NOW}
PR_PASSED = {**_RUN, "github_state": "success", "event": "pull_request", "started_at": NOW}


def _key(s: Signal) -> tuple[str, str | None, str | None, str | None]:
    return (s.name, s.app, s.workflow, event_of(s))


@RUNS
@given(st.lists(check_runs(SMALL_NAMES).map(lambda f: {**f, "event": None}), max_size=10))
def test_dedupe_keeps_one_newest_run_per_name_app_workflow(runs: list[dict[str, Any]]) -> None:
    signals = [make_signal(**r) for r in runs]
    kept = dedupe(signals)
    assert {_key(s) for s in kept} == {_key(s) for s in signals}
    assert len(kept) == len({_key(s) for s in signals})
    for k in kept:
        same = [s for s in signals if _key(s) == _key(k)]
        queued = [s for s in same if s.started_at is None and _pending(s)]
        times = [t for s in same if (t := s.started_at or s.completed_at) is not None]
        if queued:  # a run not started yet (a queued re-run) is the newest
            assert k in queued, "a queued re-run was passed over for an older result"
        elif times:
            assert (k.started_at or k.completed_at) == max(times), "a superseded run was kept"
            tied = [s for s in same if (s.started_at or s.completed_at) == max(times)]
            ids = [s.database_id for s in tied]
            if all(i is None for i in ids):  # no id breaks the tie: the worst state is kept
                worst = min(row_rank(s) for s in tied)
                assert row_rank(k) == worst, "a tie was settled by the answer's order"
            elif None not in ids and len(set(ids)) == len(ids):
                assert k.database_id == max(i for i in ids if i is not None)


def _pending(signal: Signal) -> bool:
    return github_state(signal) is State.PENDING


def row_rank(signal: Signal) -> int:
    """0 failing, 1 incomplete, 2 pending, 3 passing: lower is worse."""
    state = github_state(signal)
    if state in FAILING_STATES:
        return 0
    if state in INCOMPLETE_STATES:
        return 1
    return 2 if state is State.PENDING else 3


@FEWER
@given(st.lists(statuses(), max_size=8))
def test_dedupe_keeps_every_status(fields: list[dict[str, Any]]) -> None:
    signals = [make_signal(**f) for f in fields]
    assert sorted(map(repr, dedupe(signals))) == sorted(map(repr, signals))


@RUNS
@given(st.lists(check_runs(SMALL_NAMES), max_size=10))
@example([PUSH_FAILED, PR_PASSED])
def test_dedupe_never_drops_a_run_of_a_different_event(runs: list[dict[str, Any]]) -> None:
    # The contract's key is (name, app, workflow, event): for every run given, a run with its
    # exact key is kept. The generated events are compared, not the Signal's (which may lack one).
    kept = {_key(s) for s in dedupe([make_signal(**r) for r in runs])}
    for r in runs:
        assert (r["name"], r["app"], r["workflow"], r["event"]) in kept


@RUNS
@given(check_runs(SMALL_NAMES), check_runs(SMALL_NAMES))
@example(PUSH_FAILED, PR_PASSED)
def test_signal_identity_across_cycles_tells_events_apart(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    # Signal.key is the identity used for first-seen bookkeeping across cycles: two runs with
    # different (name, app, workflow, event) are different signals there too.
    if (a["name"], a["app"], a["workflow"], a["event"]) != (
        b["name"], b["app"], b["workflow"], b["event"]
    ):  # fmt: skip
        assert make_signal(**a).key != make_signal(**b).key


@RUNS
@given(st.lists(check_runs(SMALL_NAMES).map(lambda f: {**f, "event": None}), max_size=6))
@example([{**PR_PASSED, "event": None, "database_id": 1}])
def test_dedupe_keeps_a_not_yet_started_rerun_over_older_runs(runs: list[dict[str, Any]]) -> None:
    # A re-run that has not started (queued, no startedAt) and carries the highest database id
    # of its (name, app, workflow) is the newest run: dedupe keeps it, never an older result.
    rerun = {
        **_RUN, "event": None, "github_state": "queued", "started_at": None,
        "completed_at": None, "database_id": 10**13,
    }  # fmt: skip
    signals = [make_signal(**r) for r in runs] + [make_signal(**rerun)]
    kept = [s for s in dedupe(signals) if _key(s) == _key(signals[-1])]
    assert kept == [signals[-1]]


# --- Read the Docs ---------------------------------------------------------------------------


def rtd_status(state: str, *, age: timedelta = timedelta(minutes=5)) -> Signal:
    """RTD's status for omni-docs on PR #7430, with no build id in its target_url."""
    return make_signal(
        name="docs/readthedocs.org:omni-docs",
        kind=Kind.STATUS,
        github_state=state,
        url=None,
        description="Read the Docs build is in progress!",
        created_at=NOW - age,
    )


@FEWER
@given(st.lists(rtd_builds(), max_size=5), st.sampled_from(["pending", "success", "failure"]))
def test_rtd_lookup_never_makes_reconcile_raise(builds: list[RtdBuild], state: str) -> None:
    status = rtd_status(state)
    lookup = RtdLookup("omni-docs", SHA, NOW, builds=tuple(builds))
    report = reconciled(snapshot([status]), {status.name: lookup})
    assert len(report.rows) == 1
    if report.verdict is Verdict.PASSING:
        assert report.rows[0].state in PASSING_STATES


@RUNS
@given(st.text(max_size=80), st.sampled_from(["pending", "failure"]), st.integers(0, 600))
def test_rtd_unreadable_never_turns_a_pending_or_failed_status_green(
    error: str, state: str, minutes: int
) -> None:
    # RTD could not be read (429, 5xx, anything): the signal keeps GitHub's state (aged).
    status = rtd_status(state, age=timedelta(minutes=minutes))
    lookup = RtdLookup("omni-docs", SHA, NOW, error=error or "Read the Docs answered HTTP 429")
    report = reconciled(snapshot([status]), {status.name: lookup})
    assert report.rows[0].state not in PASSING_STATES
    assert report.verdict is not Verdict.PASSING


OTHER_VERSION_SUCCESS = st.builds(
    RtdBuild,
    id=st.integers(1, 10**8),
    project=st.just("omni-docs"),
    commit=st.just(SHA),
    state=st.just("finished"),
    success=st.just(True),
    version=st.sampled_from(["latest", "stable", "v1.0", "7431"]),
    created=st.datetimes(
        min_value=datetime(2026, 10, 5, 13), max_value=datetime(2026, 10, 5, 14),
        timezones=st.just(UTC),
    ),
)  # fmt: skip


@RUNS
@given(st.lists(OTHER_VERSION_SUCCESS, min_size=1, max_size=3), st.booleans())
def test_rtd_builds_of_other_versions_never_settle_a_pull_request_status(
    others: list[RtdBuild], own_cancelled: bool
) -> None:
    # Domain facts: a branch build (`latest`, a tag, another PR's number) of the same commit
    # says nothing about PR #7430's status. Whatever they say, a pending status whose own
    # build (version "7430") was cancelled, or that has no own build, never becomes green.
    own = RtdBuild(
        id=34894885, project="omni-docs", commit=SHA, state="cancelled", success=False,
        version=str(NUMBER), created=NOW - timedelta(hours=5),
    )  # fmt: skip
    builds = sorted([*others, *([own] if own_cancelled else [])], key=lambda b: b.created or NOW)
    status = rtd_status("pending")
    lookup = RtdLookup("omni-docs", SHA, NOW, builds=tuple(reversed(builds)))
    report = reconciled(snapshot([status]), {status.name: lookup})
    assert report.rows[0].state not in PASSING_STATES
    assert report.verdict is not Verdict.PASSING


@RUNS
@given(
    st.sampled_from(["pending", "failure"]),
    st.lists(st.sampled_from(RTD_NOTES[:2]), max_size=1),
    st.integers(0, 14 * 24 * 60),
)
def test_rtd_own_cancelled_build_is_cancelled_never_green_nor_stale(
    state: str, notes: list[str], minutes: int
) -> None:
    # A pending or failure status whose only build (the PR's own) was cancelled: cancelled,
    # at any age ("evidence from a second source settles a state before age does").
    build = RtdBuild(
        id=34894885, project="omni-docs", commit=SHA, state="cancelled", success=False,
        version=str(NUMBER), created=NOW - timedelta(minutes=minutes),
    )  # fmt: skip
    status = rtd_status(state, age=timedelta(minutes=minutes))
    lookup = RtdLookup("omni-docs", SHA, NOW, builds=(build,), notifications=tuple(notes))
    report = reconciled(snapshot([status]), {status.name: lookup})
    assert report.rows[0].state is State.CANCELLED
    assert report.verdict is Verdict.INCOMPLETE


# --- the rendered comment --------------------------------------------------------------------

RENDERER = Renderer()


@settings(
    max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(pulls(max_signals=6), st.sampled_from([0, 1, 40, 400]))
def test_comment_fits_githubs_limit_and_starts_with_the_marker(
    case: tuple[PullSnapshot, dict[str, RtdLookup]], copies: int
) -> None:
    # Any signals, hostile text included, repeated up to 400 times with distinct names:
    # the body is at most 65,536 characters and its first line is the marker.
    snap, lookups = case
    many = [
        s._replace(name=f"{s.name} #{i}") if s.kind is Kind.CHECK_RUN else s
        for i in range(max(1, copies // max(1, len(snap.signals))))
        for s in snap.signals
    ]
    big = snapshot(many or snap.signals, truncated=snap.truncated)
    report = reconciled(big, lookups)
    body = RENDERER.markdown(report)
    assert len(body) <= COMMENT_LIMIT
    assert body.split("\n", 1)[0] == MARKER


@settings(max_examples=6, deadline=None, database=None)
@given(HOSTILE, st.sampled_from(["failure", "cancelled", "in_progress"]), st.integers(1, 5000))
def test_comment_with_huge_hostile_urls_and_texts_fits(name: str, state: str, n: int) -> None:
    # Signals whose URL, description and summary are each far longer than a comment.
    huge = "https://ci.example/" + "a" * 70_000
    signals = [
        make_signal(
            name=f"{name} {i}", kind=Kind.CHECK_RUN, github_state=state, app="github-actions",
            url=huge, description=name * 50, summary=huge, started_at=NOW, completed_at=NOW,
        )
        for i in range(1 + n % 6)
    ]  # fmt: skip
    body = RENDERER.markdown(reconciled(snapshot(signals)))
    assert len(body) <= COMMENT_LIMIT
    assert body.split("\n", 1)[0] == MARKER


# --- the comment is edited only when the facts change ------------------------------------------


@FEWER
@given(pulls(), st.integers(1, 30))
def test_facts_do_not_change_with_the_clock_alone(
    case: tuple[PullSnapshot, dict[str, RtdLookup]], minutes: int
) -> None:
    # The same answers from GitHub and RTD read a few minutes apart: where no state changed
    # (nothing crossed the stale limit), the facts the comment states are the same, so the
    # comment is not edited ("no counters ... nothing that changes from one cycle to the next").
    from bot.core.facts import facts_key

    snap, lookups = case
    before = reconciled(snap, lookups)
    after = reconcile(snap, lookups, Policy(), now=NOW + timedelta(minutes=minutes))
    if [r.state for r in before.rows] == [r.state for r in after.rows]:
        assert facts_key(before) == facts_key(after)


# --- the JSON report (interface.md "The JSON report") ------------------------------------------

REPORT_KEYS = {"schema", "repo", "number", "head_sha", "draft", "observed_at", "verdict", "signals"}
SIGNAL_KEYS = {"name", "kind", "app", "github_state", "state", "required", "url", "since"}
EVIDENCE_KEYS = {
    "provider", "project", "build_id", "build_state", "success", "builds_for_commit",
    "divergent", "finding",
}  # fmt: skip


@FEWER
@given(pulls())
def test_json_report_keeps_the_contracts_keys_and_null_rules(
    case: tuple[PullSnapshot, dict[str, RtdLookup]],
) -> None:
    from bot.render.report import report_dict

    snap, lookups = case
    data = report_dict(reconciled(snap, lookups))
    assert data.keys() >= REPORT_KEYS
    assert data["schema"] == "ci-status-bot.report/v1"
    assert data["verdict"] in {"passing", "failing", "pending", "incomplete"}
    # names, descriptions, URLs and required-ness are the sources' raw values
    raw = sorted(
        (s.name, s.description or "", s.url or "", repr(s.required)) for s in dedupe(snap.signals)
    )
    shown = sorted(
        (s["name"], s.get("description") or "", s["url"] or "", repr(s["required"]))
        for s in data["signals"]
    )
    assert shown == raw
    for signal in data["signals"]:
        assert SIGNAL_KEYS | {"reconciliation"} <= signal.keys()
        assert signal["state"] in {str(s) for s in State}
        if signal["kind"] == "status":
            assert signal["app"] is None
        lookup = lookups.get(signal["name"]) if signal["kind"] == "status" else None
        rec = signal["reconciliation"]
        if lookup is None:
            assert rec is None  # no second source consulted
            continue
        assert rec is not None and rec.keys() >= EVIDENCE_KEYS
        if lookup.error is not None:  # consulted but not read: build_id null, finding says why
            assert rec["build_id"] is None and rec["finding"]
        elif not lookup.builds:  # read, no build for the exact commit
            assert (rec["builds_for_commit"], rec["build_id"], rec["build_state"]) == (
                0,
                None,
                None,
            )
            assert rec["success"] is None and rec["divergent"] is False


@settings(max_examples=30, deadline=None, database=None)
@given(
    st.sampled_from(["failure", "cancelled", "in_progress"]),
    st.permutations(["alpha", "bravo", "charlie"]),
)
@example("failure", ["charlie", "bravo", "alpha"])
def test_comment_lists_required_rows_before_optional_ones(state: str, names: list[str]) -> None:
    # interface.md: one row per signal that is not passing, "required before optional".
    # The first name drawn is required, the others optional, all in the same group.
    signals = [
        make_signal(
            name=name, kind=Kind.CHECK_RUN, github_state=state, app="github-actions",
            required=(i == 0), started_at=NOW, completed_at=NOW,
        )
        for i, name in enumerate(names)
    ]  # fmt: skip
    body = RENDERER.markdown(reconciled(snapshot(signals)))
    positions = {name: body.index(name) for name in names}
    assert positions[names[0]] < min(positions[n] for n in names[1:])


@settings(max_examples=30, deadline=None, database=None)
@given(st.lists(HOSTILE, min_size=1, max_size=4))
@example(["@everyone #1 owner/repo#2"])
def test_comment_uses_no_numeric_entities_or_invisible_characters(names: list[str]) -> None:
    # interface.md: the raw body stays readable as plain text (email notifications show it):
    # no numeric HTML entities, no invisible characters.
    signals = [
        make_signal(
            name=f"{name} {i}", kind=Kind.CHECK_RUN, github_state="failure", app="github-actions",
            description=name, started_at=NOW, completed_at=NOW,
        )
        for i, name in enumerate(names)
    ]  # fmt: skip
    body = RENDERER.markdown(reconciled(snapshot(signals)))
    # An entity the source itself wrote is its verbatim text (in a code span: a name, in a row
    # and in the headline); the bot writes none of its own.
    assert "&#" not in re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", body)
    assert body.count("&#") >= sum(2 * name.count("&#") for name in names)
    assert not any(c in body for c in "\u200b\u200c\u200d\u2060\ufeff\u202e")


# --- issue 15: required contexts, workflow identity, one head per report ----------------------

REQUIRED_NAMES = st.sampled_from(["build", "test", "DCO", "lint"])
APP_IDS = st.one_of(st.none(), st.sampled_from([1861, 15368]))


@st.composite
def required_sets(draw: st.DrawFn) -> RequiredChecks:
    """What a base branch might require: names, some bound to an app (a ruleset's integrationId)."""
    if draw(st.integers(0, 9)) == 0:
        return RequiredChecks("main", read=False, error="GitHub answered 403")
    pairs = draw(st.lists(st.tuples(REQUIRED_NAMES, APP_IDS), max_size=4, unique=True))
    rule = draw(st.sampled_from([Rule("branch protection", "main"), Rule("ruleset", "Main")]))
    return RequiredChecks(
        "main", read=True, contexts=tuple(RequiredContext(n, (rule,), a) for n, a in pairs)
    )


@RUNS
@given(
    st.lists(check_runs(REQUIRED_NAMES), max_size=8),
    st.lists(statuses(REQUIRED_NAMES), max_size=3),
    st.lists(APP_IDS, min_size=8, max_size=8),
    required_sets(),
    st.lists(REQUIRED_NAMES, max_size=2),
)
def test_passing_only_when_every_required_context_is_present_and_passing(
    runs: list[dict[str, Any]],
    plain: list[dict[str, Any]],
    app_ids: list[int | None],
    checks: RequiredChecks,
    configured: list[str],
) -> None:
    signals = [make_signal(**r, app_id=a) for r, a in zip(runs, app_ids, strict=False)]
    signals += [make_signal(**s) for s in plain]
    snap = replace(snapshot(signals), required_checks=checks, base="main")
    report = reconcile(snap, {}, Policy(), now=NOW, expected=configured)
    if report.verdict is not Verdict.PASSING:
        return
    assert all(row.signal.kind is not Kind.EXPECTED for row in report.rows)
    reported = [row for row in report.rows if row.signal.kind is not Kind.EXPECTED]
    wanted = list(checks.contexts) if checks.read else []
    for context in wanted:
        carrying = [
            row for row in reported
            if row.signal.name == context.name
            and (context.app_id is None or row.signal.kind is Kind.STATUS
                 or row.signal.app_id == context.app_id)
        ]  # fmt: skip
        assert carrying, f"{context} is required and absent, yet the verdict is passing"
        assert all(row.state in PASSING_STATES for row in carrying)
    for name in configured:
        assert any(row.signal.name == name for row in reported)


@RUNS
@given(check_runs(SMALL_NAMES), st.sampled_from(["workflow_path", "event"]), st.data())
def test_two_runs_differing_in_workflow_file_or_event_both_survive_dedupe(
    run: dict[str, Any], field: str, data: st.DataObject
) -> None:
    values = data.draw(
        st.lists(
            st.sampled_from([".github/workflows/ci.yml", ".github/workflows/nightly.yml", None])
            if field == "workflow_path"
            else EVENTS,
            min_size=2, max_size=2, unique=True,
        )
    )  # fmt: skip
    first = make_signal(**{**run, field: values[0]})
    second = make_signal(**{**run, field: values[1], "github_state": "failure"})
    kept = dedupe([first, second])
    assert len(kept) == 2
    assert {getattr(s, field) for s in kept} == set(values)
    assert len({s.key for s in kept}) == 2


@settings(max_examples=12, deadline=None, database=None)
@given(st.integers(1, 260), st.integers(1, 260), st.integers(0, 4), st.booleans())
def test_a_reports_signals_all_come_from_one_head_commit(
    on_a: int, on_b: int, move_at: int, show: bool
) -> None:
    """Head A and head B each carry their own checks (`a-…`, `b-…`); the head moves before the
    `move_at`-th GraphQL query. Whatever page that falls on, one report's signals are one
    head's: all A's or all B's, and exactly as many as that head carries."""
    world = World()
    world.add_user(login="ci-status-bot", token="t")
    world.add_repo("octo/omni")
    head_a, head_b = "a" * 40, "b" * 40
    world.add_pull("octo/omni", 1, title="t", author="alice", head_sha=head_a)
    for head, count in ((head_a, on_a), (head_b, on_b)):
        for i in range(count):
            world.add_check_run("octo/omni", head, name=f"{head[0]}-{i:03d}", workflow="ci")
    seen: list[str | None] = []

    def push(w: World, operation: str | None) -> None:
        seen.append(operation)
        if len(seen) == move_at + 1:
            w.set_head("octo/omni", 1, head_b)

    world.on_graphql(push)
    with Sandbox(world) as sandbox:
        gh = Github(  # PyGithub as the bot sets it up (bot.app.pygithub_options): without its
            auth=Auth.Token("t"), base_url=sandbox.github_url, retry=None,  # own pacing, which
            seconds_between_requests=None, seconds_between_writes=None,  # slept 1 s a query
        )  # fmt: skip
        api = GitHubApi(gh)
        if show:
            snap = api.pull("octo/omni", 1, now=NOW)
        else:
            [read] = list(api.open_pulls("octo/omni", now=NOW))
            assert isinstance(read, PullSnapshot)
            snap = read
        Requester.resetConnectionClasses()
    prefixes = {s.name[0] for s in snap.signals}
    assert prefixes == {snap.head_sha[0]}
    assert len(snap.signals) == (on_a if snap.head_sha == head_a else on_b)


# --- the headline names at most two signals, each one a row shows (issue 28) -----------------

PLAIN_NAMES = st.sampled_from(["build", "test", "lint", "docs", "DCO", "e2e (3.12)"])


# apps in plain words: what tells two same-named runs apart is then a plain code span too
PLAIN_RUNS = check_runs(PLAIN_NAMES).map(
    lambda f: {
        **f,
        "app": f["app"] if f["app"] in (None, "github-actions", "dco") else "other",
        "summary": None,  # no app's own words quoted beside the names (they may be code)
        "description": None,
    }
)


@FEWER
@given(
    st.lists(PLAIN_RUNS, max_size=8),
    st.lists(PLAIN_NAMES, max_size=3, unique=True),
    st.integers(0, 600),
)
def test_the_headline_names_at_most_two_signals_and_only_rows_it_shows(
    runs: list[dict[str, Any]], required: list[str], minutes: int
) -> None:
    rule = Rule("branch protection", "main")
    checks = RequiredChecks(
        "main", read=True, contexts=tuple(RequiredContext(n, (rule,)) for n in required)
    )
    snap = replace(
        snapshot(tuple(make_signal(**fields) for fields in runs)), required_checks=checks
    )
    seen = {"\0head": NOW - timedelta(minutes=minutes)}
    body = RENDERER.markdown(reconcile(snap, {}, Policy(), now=NOW, first_seen=seen))
    lines = body.splitlines()
    head = next(line for line in lines if line.startswith("### "))
    said = re.sub(r" \((?:`[^`]*`(?:, )?)+\)", "", head.split("“", 1)[0])  # not what tells
    named = re.findall(r"`([^`]+)`", said)  # two apart, nor the app's quoted words
    assert len(named) <= 2, head
    rows = [line for line in lines if line.startswith("- ") and "<summary>" not in line]
    for name in named:
        assert any(f"`{name}`" in row for row in rows if not row.startswith("- `")), (name, body)


ANY_TEXT = st.one_of(st.none(), TEXT, st.text(st.characters(exclude_categories=()), max_size=12))


@RUNS
@given(st.sampled_from(list(Kind)), NAMES, ANY_TEXT, ANY_TEXT, ANY_TEXT, ANY_TEXT)
def test_a_signals_key_is_the_json_text_of_its_identity_as_it_always_was(
    kind: Kind, name: str, app: str | None, workflow: str | None, event: str | None,
    path: str | None,
) -> None:  # fmt: skip
    """The key is kept (first sights, stamps): written out, it is json.dumps's text exactly."""
    signal = make_signal(name=name, kind=kind, github_state="success", app=app,
                         workflow=workflow, event=event, workflow_path=path)  # fmt: skip
    fields = [kind.value, app, workflow, name, event]
    assert signal.key == json.dumps(fields if path is None else [*fields, path])
