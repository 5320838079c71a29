"""Payloads recorded or published by others, fed through the bot's real parsing and reconcile.

Every expected verdict and state below is what the SOURCE of the payload says (its own test,
or the recorded API answer), not what the bot does today; each test names its source.
Provenance of every file: tests/data/real/PROVENANCE.md. Sixteen of these tests failed on
the bot before issue 7's fixes (they were written first, as strict xfails, and now pass).
"""

from __future__ import annotations

import ast
import json
import re
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from github.GithubException import GithubException
from support import LOGIN, REPO, TESTS, TOKEN, Env, Waits, cli

from bot.core.model import (
    Kind,
    Policy,
    PullSnapshot,
    Report,
    Signal,
    State,
    Verdict,
)
from bot.core.reconcile import reconcile
from bot.github import errors as github_errors
from bot.github import parse as _parse_module
from bot.github import transport as github_transport
from bot.github.comments import rest_comment
from bot.guard import link_url
from bot.sources.readthedocs.client import RtdError, parse_build
from bot.sources.readthedocs.rows import RtdLookup
from bot.sources.readthedocs.rules import RtdBuild
from bot_sandbox import Sandbox, World

DATA = TESTS / "data" / "real"
SHA = "10a7135a04f71e6101f8b013aded8a662d08fd1f"  # a real sha (PyGithub's recorded commit)
NUMBER = 7430


# --- helpers: one place to change when the parsing API moves -------------------------------


def _parser(name: str) -> Any:
    """A parsing function from wherever the GitHub parsing lives now."""
    return getattr(_parse_module, name)


def parse_context(node: Any) -> Signal:
    """The bot's real parsing of one statusCheckRollup context."""
    result: Signal = _parser("parse_context")(node)
    return result


def parse_pull_snapshot(node: Any, *, now: datetime) -> PullSnapshot:
    """The bot's real parsing of one PullRequest node, as a complete snapshot."""
    result = _parser("parse_pull")(REPO, node, now=now)
    if isinstance(result, PullSnapshot):
        return result
    return replace(result.snapshot, signals=(*result.snapshot.signals, *result.signals))


def event_of(signal: Signal) -> str | None:
    """The triggering event of a check run (Signal gains `event` with issue 7)."""
    return getattr(signal, "event", None)


def snapshot(signals: tuple[Signal, ...] | list[Signal], *, number: int = NUMBER) -> PullSnapshot:
    """A pull request whose head carries `signals`."""
    return PullSnapshot(
        repo=REPO,
        number=number,
        title="t",
        author="alice",
        draft=False,
        head_sha=SHA,
        url=f"https://github.com/{REPO}/pull/{number}",
        signals=tuple(signals),
    )


def report_of(
    signals: list[Signal], *, now: datetime, rtd: dict[str, RtdLookup] | None = None
) -> Report:
    """Reconcile signals (and RTD lookups keyed by context) into a report."""
    return reconcile(snapshot(signals), rtd or {}, Policy(), now=now)


def states(report: Report) -> dict[str, State]:
    """Reconciled state by signal name (names are unique in these payloads)."""
    return {row.signal.name: row.state for row in report.rows}


def load(*parts: str) -> Any:
    """A JSON file of the corpus."""
    return json.loads((DATA.joinpath(*parts)).read_text(encoding="utf-8"))


def at(text: str) -> datetime:
    """An ISO time as aware UTC."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# --- the GitHub CLI's statusCheckRollup fixtures (hand-written by gh's authors) -----------

CLI_NOW = at("2020-08-27T19:01:00Z")  # a minute after the fixtures' runs completed


def cli_nodes(name: str) -> list[dict[str, Any]]:
    """The contexts of a gh fixture, adapted where gh's hand-made shape differs from the API.

    The fixtures omit `__typename` (the API always sends it when asked; gh decodes by field),
    use `"conclusion": ""` where the API gives null, and name a status context `name`.
    """
    payload = load("cli-cli", name)
    commit = payload["data"]["node"]["statusCheckRollup"]["nodes"][0]["commit"]
    nodes = []
    for raw in commit["statusCheckRollup"]["contexts"]["nodes"]:
        node = dict(raw)
        if "state" in node:
            node["__typename"] = "StatusContext"
            node.setdefault("context", node.pop("name", None))
        else:
            node["__typename"] = "CheckRun"
            if node.get("conclusion") == "":
                node["conclusion"] = None
        nodes.append(node)
    return nodes


def cli_report(name: str) -> Report:
    """A gh fixture through parse_context and reconcile."""
    return report_of([parse_context(n) for n in cli_nodes(name)], now=CLI_NOW)


@pytest.mark.parametrize(
    ("fixture", "verdict", "expected"),
    [
        # allPassing.json: gh prints "All checks were successful" (3 successful).
        (
            "allPassing.json",
            Verdict.PASSING,
            {
                "cool tests": State.SUCCESS,
                "rad tests": State.SUCCESS,
                "awesome tests": State.SUCCESS,
            },
        ),
        # someFailing.json: "Some checks were not successful": sad tests concluded FAILURE,
        # slow tests is IN_PROGRESS -> verdict failing.
        (
            "someFailing.json",
            Verdict.FAILING,
            {"cool tests": State.SUCCESS, "sad tests": State.FAILURE, "slow tests": State.PENDING},
        ),
        # somePending.json: "Some checks are still pending: 1 cancelled, 2 successful, 1 pending"
        # -> pending wins over incomplete in the contract's order.
        (
            "somePending.json",
            Verdict.PENDING,
            {
                "cool tests": State.SUCCESS,
                "rad tests": State.SUCCESS,
                "slow tests": State.PENDING,
                "sad tests": State.CANCELLED,
            },
        ),
        # someCancelled.json: "Some checks were cancelled" -> incomplete, never passing.
        (
            "someCancelled.json",
            Verdict.INCOMPLETE,
            {
                "cool tests": State.SUCCESS,
                "sad tests": State.CANCELLED,
                "awesome tests": State.SUCCESS,
            },
        ),
        # someSkipping.json: "All checks were successful: 1 successful, 2 skipped".
        (
            "someSkipping.json",
            Verdict.PASSING,
            {"cool tests": State.SUCCESS, "rad tests": State.SKIPPED, "skip tests": State.SKIPPED},
        ),
        # withStatuses.json: "Some checks were not successful": the status "a status" is FAILURE.
        (
            "withStatuses.json",
            Verdict.FAILING,
            {"cool tests": State.SUCCESS, "rad tests": State.SUCCESS, "a status": State.FAILURE},
        ),
        # withDescriptions.json: "All checks were successful".
        (
            "withDescriptions.json",
            Verdict.PASSING,
            {
                "cool tests": State.SUCCESS,
                "rad tests": State.SUCCESS,
                "awesome tests": State.SUCCESS,
            },
        ),
        # onlyRequired.json: all successful or skipped.
        (
            "onlyRequired.json",
            Verdict.PASSING,
            {"cool tests": State.SUCCESS, "rad tests": State.SKIPPED, "skip tests": State.SKIPPED},
        ),
    ],
)
def test_gh_cli_fixture_verdict_and_states(
    fixture: str, verdict: Verdict, expected: dict[str, State]
) -> None:
    report = cli_report(fixture)
    assert states(report) == expected
    assert report.verdict is verdict


def test_gh_cli_status_context_is_a_status() -> None:
    # withStatuses.json: "a status" is a StatusContext (gh prints it with elapsed "0").
    report = cli_report("withStatuses.json")
    kinds = {row.signal.name: row.signal.kind for row in report.rows}
    assert kinds["a status"] is Kind.STATUS
    assert kinds["cool tests"] is Kind.CHECK_RUN


def test_gh_cli_without_events_the_same_run_listed_twice_is_one_signal() -> None:
    # withoutEvents.json: gh prints one row "tests/cool tests" for the run listed twice.
    report = cli_report("withoutEvents.json")
    assert [row.signal.name for row in report.rows] == ["cool tests"]
    assert report.rows[0].signal.workflow == "tests"
    assert report.verdict is Verdict.PASSING


def test_gh_cli_with_events_verdict_is_passing() -> None:
    # withEvents.json: "All checks were successful" (both runs succeeded).
    assert cli_report("withEvents.json").verdict is Verdict.PASSING


def test_gh_cli_with_events_push_and_pull_request_runs_are_two_signals() -> None:
    # withEvents.json: gh prints two rows, "tests/cool tests (pull_request)" and
    # "tests/cool tests (push)" (cli/cli#7618): runs of different events are different signals.
    report = cli_report("withEvents.json")
    assert sorted((r.signal.name, event_of(r.signal)) for r in report.rows) == [
        ("cool tests", "pull_request"),
        ("cool tests", "push"),
    ]


def test_gh_cli_with_events_a_failed_push_run_is_not_hidden_by_a_newer_pull_request_run() -> None:
    # withEvents.json with the push run's conclusion set to FAILURE and started a second earlier:
    # the contract says runs of different events never collapse, so the failure must show.
    nodes = cli_nodes("withEvents.json")
    push = next(n for n in nodes if n["checkSuite"]["workflowRun"]["event"] == "push")
    push["conclusion"] = "FAILURE"
    push["startedAt"] = "2020-08-27T18:58:45Z"
    report = report_of([parse_context(n) for n in nodes], now=CLI_NOW)
    assert report.verdict is Verdict.FAILING


def test_gh_cli_only_required_is_read() -> None:
    # onlyRequired.json: `gh pr checks --required` shows only "cool tests" (isRequired: true).
    report = cli_report("onlyRequired.json")
    required = {row.signal.name: row.signal.required for row in report.rows}
    assert required == {"cool tests": True, "rad tests": False, "skip tests": False}


def _pull_node(contexts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A PullRequest node in the shape the bot's own query asks for (fields per the schema)."""
    return {
        "number": NUMBER,
        "title": "t",
        "url": f"https://github.com/{REPO}/pull/{NUMBER}",
        "isDraft": False,
        "headRefOid": SHA,
        "author": {"login": "alice"},
        "statusCheckRollup": {
            "contexts": {
                "pageInfo": {"hasNextPage": False, "endCursor": None},
                "nodes": contexts,
            }
        },
        **extra,
    }


def test_gh_cli_fixture_through_parse_pull() -> None:
    # someFailing.json's contexts inside a PullRequest node: one FAILURE -> failing.
    snap = parse_pull_snapshot(_pull_node(cli_nodes("someFailing.json")), now=CLI_NOW)
    assert len(snap.signals) == 3
    report = reconcile(snap, {}, Policy(), now=CLI_NOW)
    assert report.verdict is Verdict.FAILING


def test_unknown_context_type_becomes_unknown_on_that_signal() -> None:
    # allPassing.json plus one context of a type GitHub may add later: the contract says
    # unknown values become `unknown` on that signal -> incomplete, never passing, no raise.
    contexts = [*cli_nodes("allPassing.json"), {"__typename": "FutureContext", "name": "x"}]
    snap = parse_pull_snapshot(_pull_node(contexts), now=CLI_NOW)
    report = reconcile(snap, {}, Policy(), now=CLI_NOW)
    assert report.verdict is Verdict.INCOMPLETE
    assert State.UNKNOWN in states(report).values()


def test_unparseable_time_stays_on_that_signal() -> None:
    # someFailing.json with one startedAt GitHub would never send: the failure must still show.
    contexts = cli_nodes("someFailing.json")
    contexts[0]["startedAt"] = "27/08/2020 18:58"
    snap = parse_pull_snapshot(_pull_node(contexts), now=CLI_NOW)
    report = reconcile(snap, {}, Policy(), now=CLI_NOW)
    assert report.verdict is Verdict.FAILING


def test_gh_cli_in_progress_run_with_empty_conclusion_as_handmade() -> None:
    # someFailing.json verbatim (conclusion "" on IN_PROGRESS, as gh's authors wrote it):
    # the status is IN_PROGRESS, so the run is pending whatever the conclusion string.
    node = next(n for n in cli_nodes("someFailing.json") if n["name"] == "slow tests")
    node["conclusion"] = ""
    assert parse_context(node).github_state == "in_progress"


# --- PyGithub ReplayData (real recordings) ------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One recorded HTTP exchange of a PyGithub ReplayData file."""

    method: str
    path: str
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        """The response body as JSON."""
        return json.loads(self.body)


def replay(name: str) -> list[Exchange]:
    """Every exchange of a ReplayData file (blocks of 10 lines, blank-line separated)."""
    lines = (DATA / "pygithub" / name).read_text(encoding="utf-8").split("\n")
    exchanges, i = [], 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block = lines[i : i + 10]
        i += 10
        headers = {k.lower(): v for k, v in ast.literal_eval(block[8])}
        exchanges.append(Exchange(block[1], block[4], int(block[7]), headers, block[9]))
    return exchanges


def rest_check_run_signal(run: dict[str, Any]) -> dict[str, Any]:
    """The keywords of World.add_check_run for a REST check run object (as recorded)."""
    app = run.get("app")
    output = run.get("output") or {}

    def when(key: str) -> datetime | None:
        return at(run[key]) if run.get(key) else None

    return {
        "name": run["name"],
        "app_slug": app.get("slug") if app else None,
        "status": run["status"],
        "conclusion": run.get("conclusion"),
        "started_at": when("started_at"),
        "completed_at": when("completed_at"),
        "details_url": run.get("details_url"),
        "title": output.get("title"),
        "summary": output.get("summary"),
    }


def rest_status(status: dict[str, Any]) -> dict[str, Any]:
    """The keywords of World.add_status for a REST status object (as recorded)."""
    return {
        "context": status.get("context") or "default",
        "state": status["state"],
        "description": status.get("description"),
        "target_url": status.get("target_url"),
        "created_at": at(status["created_at"]),
    }


@dataclass
class Seeded:
    """A sandbox world with one pull request whose head is SHA, and a config for it."""

    world: World
    sandbox: Sandbox
    config: Path

    def add_runs(self, runs: list[dict[str, Any]]) -> None:
        """Seed REST check runs (each in its own suite, as separate runs are on GitHub)."""
        for run in runs:
            self.world.add_check_run(REPO, SHA, new_suite=True, **rest_check_run_signal(run))

    def add_statuses(self, statuses: list[dict[str, Any]]) -> None:
        """Seed REST statuses."""
        for status in statuses:
            self.world.add_status(REPO, SHA, **rest_status(status))

    def show(self) -> dict[str, Any]:
        """`ci-status-bot show --format json` on the seeded pull request."""
        result = cli("show", f"{REPO}#{NUMBER}", "--format", "json", "--config", str(self.config))
        assert result.returncode == 0, result.stderr
        report: dict[str, Any] = json.loads(result.stdout)
        return report

    def show_fails(self) -> tuple[str, list[float]]:
        """`show` that must fail: exit 1, a message and no traceback; (stderr, waits asked)."""
        waits = Waits()
        result = cli(
            "show", f"{REPO}#{NUMBER}", "--format", "json", "--config", str(self.config),
            sleep=waits,
        )  # fmt: skip
        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert result.stderr.strip()
        return result.stderr, [seconds for _, seconds in waits.log]


@pytest.fixture
def world() -> World:
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    world.add_pull(REPO, NUMBER, title="t", author="alice", head_sha=SHA)
    return world


@pytest.fixture
def seeded(env: Env) -> Seeded:
    return Seeded(env.world, env.sandbox, env.config)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """JSON report signals by name."""
    return {s["name"]: s for s in report["signals"]}


def test_pygithub_recorded_check_runs_parse_and_one_failure_fails(seeded: Seeded) -> None:
    # CheckRun.testGetCheckRunsForRef.txt: GitHub answered 4 Actions runs for PyGithub's commit
    # 10a7135; "test (Python 3.6)" concluded failure -> verdict failing.
    runs = replay("CheckRun.testGetCheckRunsForRef.txt")[1].json()["check_runs"]
    assert len(runs) == 4
    seeded.add_runs(runs)
    report = seeded.show()
    signals = by_name(report)
    assert {n: s["state"] for n, s in signals.items()} == {r["name"]: r["conclusion"] for r in runs}
    assert signals["test (Python 3.6)"]["state"] == "failure"
    assert all(s["app"] == "github-actions" for s in signals.values())
    assert report["verdict"] == "failing"


def test_pygithub_recorded_check_runs_render_as_the_comment(seeded: Seeded) -> None:
    # The same recording rendered by `show` (markdown): the marker first, the failed job named.
    seeded.add_runs(replay("CheckRun.testGetCheckRunsForRef.txt")[1].json()["check_runs"])
    result = cli("show", f"{REPO}#{NUMBER}", "--config", str(seeded.config))
    assert result.returncode == 0, result.stderr
    from bot.core.model import MARKER

    assert result.stdout.split("\n", 1)[0] == MARKER
    assert re.search(r"Python 3\\?\.6", result.stdout)  # escaping is the renderer's choice


def test_pygithub_recorded_in_progress_check_run_is_pending(seeded: Seeded) -> None:
    # CheckRun.testCreateCheckRunInProgress.txt: GitHub answered status in_progress,
    # conclusion null, completed_at null -> pending (recorded 2020; the bot reads it now,
    # so past the stale limit it is stale: either way never passing).
    run = replay("CheckRun.testCreateCheckRunInProgress.txt")[0].json()
    assert run["conclusion"] is None and run["completed_at"] is None
    seeded.add_runs([run])
    signal = by_name(seeded.show())[run["name"]]
    assert signal["github_state"] == "in_progress"
    assert signal["state"] in ("pending", "stale")


def test_pygithub_recorded_combined_status_all_success_passes(seeded: Seeded) -> None:
    # CommitCombinedStatus.setUp.txt: edx/edx-platform's combined state "success" over 6
    # Jenkins contexts -> passing, one signal per context.
    combined = replay("CommitCombinedStatus.setUp.txt")[0].json()
    assert combined["state"] == "success"
    seeded.add_statuses(combined["statuses"])
    report = seeded.show()
    assert sorted(by_name(report)) == sorted(s["context"] for s in combined["statuses"])
    assert {s["kind"] for s in report["signals"]} == {"status"}
    assert {s["app"] for s in report["signals"]} == {None}
    assert report["verdict"] == "passing"


def test_octokit_recorded_statuses_combined_failure_fails(seeded: Seeded) -> None:
    # octokit create-status raw fixture: statuses example/1 failure and example/2 success;
    # GitHub's combined status answered "failure" -> verdict failing.
    exchanges = load("octokit", "create-status.raw-fixture.json")
    listed = next(x for x in exchanges if x["path"].endswith("/statuses"))["response"]
    combined = next(x for x in exchanges if x["path"].endswith("/status"))["response"]
    assert combined["state"] == "failure"
    seeded.add_statuses(listed)
    report = seeded.show()
    assert {n: s["state"] for n, s in by_name(report).items()} == {
        "example/1": "failure",
        "example/2": "success",
    }
    assert report["verdict"] == "failing"


def test_openapi_check_run_nulls_and_status_nulls(seeded: Seeded) -> None:
    # GitHub's OpenAPI: check-run-paginated.json (neutral, app "octoapp"); the check-run
    # schema makes conclusion, app and details_url nullable and status.description and
    # target_url nullable: a neutral run with app and details_url null, and a success status
    # with description and target_url null -> passing, with the nulls reported as null.
    example = load("openapi", "check-run-paginated.json")["check_runs"][0]
    orphan = {**example, "name": "no app", "app": None, "details_url": None}
    status = {**load("openapi", "status-items.json")[0], "description": None, "target_url": None}
    seeded.add_runs([example, orphan])
    seeded.add_statuses([status])
    report = seeded.show()
    signals = by_name(report)
    assert signals["mighty_readme"]["state"] == "neutral"
    assert signals["mighty_readme"]["app"] == "octoapp"
    assert signals["no app"]["app"] is None and signals["no app"]["url"] is None
    jenkins = signals["continuous-integration/jenkins"]
    assert jenkins["description"] is None and jenkins["url"] is None
    assert report["verdict"] == "passing"


def test_openapi_in_progress_check_run_null_conclusion_is_never_passing(seeded: Seeded) -> None:
    # check-run-example-of-in-progress-conclusion.json: in_progress, conclusion null.
    seeded.add_runs([load("openapi", "check-run-example-of-in-progress-conclusion.json")])
    report = seeded.show()
    assert report["verdict"] != "passing"
    assert report["signals"][0]["github_state"] == "in_progress"


def test_octokit_webhook_check_runs_through_the_sandbox(seeded: Seeded) -> None:
    # octokit/webhooks sample deliveries: check_run completed (success; its app object has no
    # slug), completed.1 (failure, github-actions), rerequested (neutral, no details_url key)
    # -> one failure -> failing.
    runs = [
        load("octokit", f"webhook.check_run.{name}.payload.json")["check_run"]
        for name in ("completed", "completed.1", "rerequested")
    ]
    assert "slug" not in runs[0]["app"] and "details_url" not in runs[2]
    renamed = [{**run, "name": f"{run['name']} #{i}"} for i, run in enumerate(runs)]
    seeded.add_runs(renamed)
    report = seeded.show()
    states_ = {s["name"]: s["state"] for s in report["signals"]}
    assert sorted(states_.values()) == sorted(r["conclusion"] for r in runs)
    assert report["verdict"] == "failing"


def test_octokit_webhook_status_with_null_description(seeded: Seeded) -> None:
    # octokit/webhooks status/payload.json: context "default", success, description and
    # target_url null -> one passing status with null text.
    seeded.add_statuses([load("octokit", "webhook.status.payload.json")])
    report = seeded.show()
    signal = by_name(report)["default"]
    assert signal["state"] == "success" and signal["description"] is None
    assert report["verdict"] == "passing"


def test_dco_fixture_missing_sign_off_fails(seeded: Seeded) -> None:
    # dcoapp/app test/fixtures/check_run.rerequested.json: DCO run from app "dco", conclusion
    # failure, summary "The sign-off is missing." -> failing, the summary carried verbatim.
    run = load("dco", "check_run.rerequested.json")["check_run"]
    seeded.add_runs([run])
    report = seeded.show()
    dco = by_name(report)["DCO"]
    assert (dco["app"], dco["state"], dco["summary"]) == (
        "dco",
        "failure",
        run["output"]["summary"],
    )
    assert report["verdict"] == "failing"


def test_dco_manual_override_is_a_newer_success_run(seeded: Seeded) -> None:
    # dcoapp/app: a manual override is a NEW run named DCO from app dco, conclusion success,
    # summary "Commit sign-off was manually approved." (domain facts); the newest DCO run is
    # taken -> the fixture's failure is superseded -> one DCO signal, success, passing.
    failed = load("dco", "check_run.rerequested.json")["check_run"]
    override = {
        **failed, "conclusion": "success",
        "started_at": "2017-09-23T08:00:00Z", "completed_at": "2017-09-23T08:00:00Z",
        "output": {**failed["output"], "summary": "Commit sign-off was manually approved."},
    }  # fmt: skip
    seeded.add_runs([failed, override])
    report = seeded.show()
    assert [(s["name"], s["state"]) for s in report["signals"]] == [("DCO", "success")]
    assert report["verdict"] == "passing"


def test_sandbox_push_and_pull_request_runs_of_one_workflow_stay_apart(seeded: Seeded) -> None:
    # cli withEvents.json's situation through the sandbox: the push run failed, the newer
    # pull_request run passed -> the contract keeps both -> failing.
    base = load("cli-cli", "withEvents.json")  # shape reference only; the runs are seeded
    assert base["data"]
    t0 = at("2020-08-27T18:58:46Z")
    for event, conclusion, start in (("push", "failure", t0), ("pull_request", "success", t0)):
        seeded.world.add_check_run(
            REPO, SHA, name="cool tests", workflow="tests", conclusion=conclusion,
            started_at=start + timedelta(seconds=1 if event == "pull_request" else 0),
            completed_at=start + timedelta(minutes=1), new_suite=True, event=event,
        )  # fmt: skip
    report = seeded.show()
    assert report["verdict"] == "failing"


# --- recorded error answers, replayed by the sandbox at the GraphQL endpoint ---------------


def _replayed(seeded: Seeded, exchange: Exchange, *, times: int = -1) -> None:
    keep = {"retry-after", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-limit"}
    headers = {k: v for k, v in exchange.headers.items() if k in keep}
    headers["Content-Type"] = exchange.headers.get("content-type", "application/json")
    seeded.sandbox.fail(
        "POST", "/graphql", exchange.status, times=times, body=exchange.body, headers=headers
    )


def test_recorded_bad_credentials_401_is_a_named_failure(seeded: Seeded) -> None:
    # SpecificExceptions.testBadCredentials.txt: GitHub answered 401 {"message":"Bad credentials"}.
    _replayed(seeded, replay("SpecificExceptions.testBadCredentials.txt")[0])
    stderr, _ = seeded.show_fails()
    assert "Bad credentials" in stderr
    assert "GitHub refused the bot's credential (HTTP 401)" in stderr
    assert "check-config" in stderr  # what to do next


def test_recorded_not_found_404_is_a_named_failure(seeded: Seeded) -> None:
    # SpecificExceptions.testUnknownObject.txt: 404 {"message":"Not Found"}.
    _replayed(seeded, replay("SpecificExceptions.testUnknownObject.txt")[1])
    stderr, _ = seeded.show_fails()
    assert "not found" in stderr.lower()


def test_recorded_403_that_is_not_a_rate_limit_fails_at_once(seeded: Seeded) -> None:
    # Workflow.testDisabledWhenAlreadyDisabled.txt: a 403 without x-ratelimit-remaining 0 or
    # retry-after is a permission error (domain facts): no waiting, no retry.
    exchange = replay("Workflow.testDisabledWhenAlreadyDisabled.txt")[2]
    assert exchange.status == 403 and "retry-after" not in exchange.headers
    _replayed(seeded, exchange)
    stderr, waited = seeded.show_fails()
    assert "403" in stderr
    assert waited == []  # no wait asked at all
    graphql = [r for r in seeded.sandbox.requests if r.graphql_operation is not None]
    assert len(graphql) == 1


def test_recorded_primary_rate_limit_403_is_said_as_a_rate_limit(seeded: Seeded) -> None:
    # SpecificExceptions.testRateLimitExceeded.txt: 403 after x-ratelimit-remaining hit 0
    # (the 2013 recording's reset time is long past, so any wait is short).
    exchanges = replay("SpecificExceptions.testRateLimitExceeded.txt")
    limited = exchanges[1]
    assert limited.status == 403 and limited.headers["x-ratelimit-remaining"] == "0"
    _replayed(seeded, limited)
    stderr, _ = seeded.show_fails()
    assert "RateLimited" in stderr or "rate limit" in stderr.lower()


def test_recorded_503_with_html_body_is_a_named_failure(seeded: Seeded) -> None:
    # Exceptions.testNonJsonDataReturnedByGithub.txt: 503 with an HTML page for a body.
    exchange = replay("Exceptions.testNonJsonDataReturnedByGithub.txt")[0]
    assert exchange.status == 503 and exchange.body.lstrip().startswith("<")
    _replayed(seeded, exchange)
    stderr, _ = seeded.show_fails()
    assert "503" in stderr


def test_recorded_graphql_error_with_http_200_is_a_named_failure(seeded: Seeded) -> None:
    # PullRequest.testEnableAutomergeError.txt: HTTP 200 with data.<field> null and
    # errors[{type: "UNPROCESSABLE", message}] -> not data, an error, named.
    exchange = replay("PullRequest.testEnableAutomergeError.txt")[0]
    assert exchange.status == 200 and exchange.json()["errors"]
    _replayed(seeded, exchange)
    stderr, _ = seeded.show_fails()
    assert exchange.json()["errors"][0]["message"][:40] in stderr


def test_recorded_secondary_rate_limit_waits_as_github_asked() -> None:
    # SpecificExceptions.testAuthenticatedRateLimitExceeded.txt: 403 with Retry-After: 60 is
    # a (secondary) rate limit -> wait 60 s; a 403 without either header is not one.
    limited = replay("SpecificExceptions.testAuthenticatedRateLimitExceeded.txt")[1]
    assert github_transport.rate_limit_wait(limited.headers, now=time.time()) == 60.0
    denied = replay("Workflow.testDisabledWhenAlreadyDisabled.txt")[2]
    assert github_transport.rate_limit_wait(denied.headers, now=time.time()) is None


def test_recorded_secondary_rate_limit_body_is_said_as_one() -> None:
    # The same recorded 403: GitHub's body then said "abuse detection mechanism" (today's says
    # "secondary rate limit", as the sandbox's does); a row says the category either way.
    limited = replay("SpecificExceptions.testAuthenticatedRateLimitExceeded.txt")[1]
    assert "abuse detection" in limited.json()["message"]
    said = github_errors.error_reason(limited.status, limited.json())
    assert said == "GitHub answered 403 (secondary rate limit)"


def test_recorded_error_bodies_are_named_in_the_message() -> None:
    # The recorded 422s (status "422" as a STRING in the 2024 shape; octokit's
    # Validation Failed) and the 401: the bot's message carries GitHub's own message.
    cases = [
        replay("Repository.testTransferOwnershipInvalidOwner.txt")[0],
        replay("SpecificExceptions.testBadCredentials.txt")[0],
    ]
    octokit = next(x for x in load("octokit", "errors.raw-fixture.json") if x["status"] == 422)
    bodies = [(c.status, c.json()) for c in cases] + [(422, octokit["response"])]
    for status, body in bodies:
        message = github_errors.error_message(GithubException(status, body, {}))
        assert str(status) in message and body["message"] in message


# --- REST comments and Link pagination as recorded ------------------------------------------


def _comment_parser() -> Any:
    return rest_comment


def test_recorded_issue_comment_parses() -> None:
    # IssueComment.setUp.txt: GET issues/comments/20227753 (2025 shape) -> id, author, body.
    data = replay("IssueComment.setUp.txt")[2].json()
    comment = _comment_parser()(data)
    assert comment.id == data["id"] == 20227753
    assert comment.author == data["user"]["login"]
    assert comment.body == data["body"]
    assert comment.node_id == data["node_id"]


def test_recorded_comment_lists_parse() -> None:
    # PaginatedList.* and OpenAPI issue-comment-items: every comment of a recorded list parses.
    pages = [x.json() for x in replay("PaginatedList.testCustomPerPageIteration.txt")[2:]]
    pages.append(replay("PaginatedList.testCustomPerPageReversedIterationSinglePage.txt")[2].json())
    pages.append(load("openapi", "issue-comment-items.json"))
    comments = [_comment_parser()(c) for page in pages for c in page]
    assert len(comments) == sum(len(p) for p in pages) >= 8
    assert all(c.id > 0 and c.author for c in comments)


def test_recorded_link_headers_are_followed_as_given() -> None:
    # PaginatedList.testCustomPerPageIteration.txt: page 1 links to /repositories/3544490/...
    # page 2 (followed as given), page 3 (the last) has no rel="next".
    exchanges = replay("PaginatedList.testCustomPerPageIteration.txt")[2:]
    next_link = partial(link_url, rel="next")
    assert next_link(exchanges[0].headers["link"]) == (
        "https://api.github.com/repositories/3544490/issues/1136/comments?per_page=3&page=2"
    )
    assert next_link(exchanges[1].headers["link"]).endswith("per_page=3&page=3")
    assert next_link(exchanges[2].headers["link"]) is None
    # octokit paginate-issues: every page but the last names its successor.
    recorded = [
        x for x in load("octokit", "paginate-issues.raw-fixture.json") if x["method"] == "get"
    ]
    links = [_raw_header(x["rawHeaders"], "link") for x in recorded]
    nexts = [next_link(link) for link in links]
    assert nexts[:-1] == [f"https://api.github.com{x['path']}" for x in recorded[1:]]
    assert nexts[-1] is None


def test_recorded_comment_page_links_pass_the_allowlist() -> None:
    # PaginatedList.testCustomPerPageIteration.txt: GitHub's next-page links for a PR's
    # comments point at /repositories/<id>/issues/<n>/comments; the bot follows them as given,
    # so its own allowlist must let them through (and still refuse what is not a comment read).
    from bot.guard import Guard, RefusedRequest

    guard = Guard.for_urls("https://api.github.com")
    next_link = partial(link_url, rel="next")
    links = [x.headers["link"] for x in replay("PaginatedList.testCustomPerPageIteration.txt")[2:]]
    urls = [u for u in map(next_link, links) if u]
    assert urls
    for url in urls:
        guard.check_github("GET", url)
    with pytest.raises(RefusedRequest):
        guard.check_github("POST", urls[0].replace("/comments", "/labels"))


def _raw_header(raw: list[str], name: str) -> str:
    """One header of a nock recording's flat [name, value, name, value, ...] list."""
    pairs = dict(zip(raw[::2], raw[1::2], strict=True))
    return next((v for k, v in pairs.items() if k.lower() == name), "")


# --- Read the Docs API v3 responses (RTD's own expected test responses) -----------------------

RTD_NOW = at("2019-04-29T10:05:00Z")


def rtd_lookup(builds: list[RtdBuild], notifications: tuple[str, ...] = ()) -> RtdLookup:
    """What RTD answered about project "project" and its commit."""
    return RtdLookup(
        "project", "a1b2c3", RTD_NOW, builds=tuple(builds), notifications=notifications
    )


def rtd_status(
    state: str, target_url: str | None, *, created: str = "2019-04-29T10:00:00Z"
) -> Signal:
    """RTD's commit status on GitHub for project "project" (context and texts per RTD's source)."""
    description = {
        "pending": "Read the Docs build is in progress!",
        "success": "Read the Docs build succeeded!",
        "failure": "Read the Docs build failed!",
    }[state]
    return Signal(
        name="docs/readthedocs.org:project",
        kind=Kind.STATUS,
        github_state=state,
        url=target_url,
        description=description,
        created_at=at(created),
    )


def test_rtd_build_list_parses() -> None:
    # projects-builds-list.json: one finished, successful build 1 of version v1.0.
    page = load("rtd", "projects-builds-list.json")
    builds = [parse_build(b) for b in page["results"]]
    assert builds == [
        RtdBuild(
            id=1, project="project", commit="a1b2c3", state="finished", success=True,
            version="v1.0", created=at("2019-04-29T10:00:00Z"),
            finished=at("2019-04-29T10:01:00Z"), duration=60,
            url="https://readthedocs.org/projects/project/builds/1/",
        )
    ]  # fmt: skip
    assert parse_build(load("rtd", "projects-builds-detail.json")) == builds[0]


def test_rtd_triggered_build_parses_with_nulls() -> None:
    # projects-versions-builds-list_POST.json: a freshly triggered build: success, finished,
    # duration and commit all null.
    build = parse_build(load("rtd", "projects-versions-builds-list_POST.json")["build"])
    assert (build.id, build.state, build.success, build.finished, build.duration) == (
        3, "triggered", None, None, None,
    )  # fmt: skip


def test_rtd_pending_status_naming_a_finished_build_is_settled_by_it() -> None:
    # projects-builds-list.json: build 1 finished with success true. A pending GitHub status
    # whose target_url names build 1 is settled by it: success, divergent from GitHub.
    build = parse_build(load("rtd", "projects-builds-list.json")["results"][0])
    status = rtd_status("pending", "https://readthedocs.org/projects/project/builds/1/")
    report = report_of([status], now=RTD_NOW, rtd={status.name: rtd_lookup([build])})
    row = report.rows[0]
    assert row.state is State.SUCCESS
    assert row.reconciliation is not None and row.reconciliation.divergent
    assert row.reconciliation.build_id == 1
    assert report.verdict is Verdict.PASSING


def test_rtd_triggered_build_named_by_a_pending_status_stays_pending() -> None:
    # projects-versions-builds-list_POST.json: build 3 triggered (success null) -> pending.
    build = parse_build(load("rtd", "projects-versions-builds-list_POST.json")["build"])
    status = rtd_status("pending", "https://readthedocs.org/projects/project/builds/3/")
    report = report_of([status], now=RTD_NOW, rtd={status.name: rtd_lookup([build])})
    assert report.rows[0].state is State.PENDING
    assert report.verdict is Verdict.PENDING


def test_rtd_branch_build_never_settles_a_pull_request_status() -> None:
    # projects-builds-list.json: build 1 is version "v1.0" (a branch/tag version, not a pull
    # request's version "<number>"). RTD builds PR #7430 as version "7430": a v1.0 build says
    # nothing about its status, so the pending status must stay pending (domain facts).
    build = parse_build(load("rtd", "projects-builds-list.json")["results"][0])
    status = rtd_status("pending", None)
    report = report_of([status], now=RTD_NOW, rtd={status.name: rtd_lookup([build])})
    assert report.rows[0].state is State.PENDING
    assert report.verdict is not Verdict.PASSING


def test_rtd_the_build_named_by_target_url_settles_the_status() -> None:
    # projects-builds-list.json's build 1 (finished, success) and the POST answer's build 3
    # (triggered 4 hours later; given this commit here, its own `commit` is null). The pending
    # status names build 1 in its target_url: the contract says that build settles it ->
    # success, not build 3's "triggered".
    finished = parse_build(load("rtd", "projects-builds-list.json")["results"][0])
    triggered = parse_build(load("rtd", "projects-versions-builds-list_POST.json")["build"])
    triggered = replace(triggered, commit=finished.commit)
    status = rtd_status("pending", "https://readthedocs.org/projects/project/builds/1/")
    lookup = rtd_lookup([triggered, finished])  # newest first, as the bot orders them
    report = report_of([status], now=RTD_NOW, rtd={status.name: lookup})
    row = report.rows[0]
    assert row.reconciliation is not None and row.reconciliation.build_id == 1
    assert row.state is State.SUCCESS


def _cancelled_pr_build() -> RtdBuild:
    # The cancelled-while-queued shape stated in fixtures/README.md from RTD's source
    # (no RTD fixture shows a cancelled build), for PR #7430's own version.
    detail = load("rtd", "projects-builds-detail.json")
    data = {
        **detail, "id": 34894885, "state": {"code": "cancelled", "name": "Cancelled"},
        "success": False, "duration": 0, "finished": None, "version": str(NUMBER),
    }  # fmt: skip
    return parse_build(data)


def test_rtd_cancelled_build_with_recorded_notification_is_incomplete() -> None:
    # projects-builds-notifications-list.json: message id "build:user:cancelled". A pending
    # status whose build was cancelled -> cancelled (incomplete), never passing.
    notes = load("rtd", "projects-builds-notifications-list.json")["results"]
    ids = tuple(n["message"]["id"] for n in notes)
    assert ids == ("build:user:cancelled",)
    status = rtd_status("pending", "https://readthedocs.org/projects/project/builds/34894885/")
    lookup = rtd_lookup([_cancelled_pr_build()], ids)
    report = report_of([status], now=RTD_NOW, rtd={status.name: lookup})
    assert report.rows[0].state is State.CANCELLED
    assert report.verdict is Verdict.INCOMPLETE


def test_rtd_failure_status_with_cancelled_build_is_cancelled_and_divergent() -> None:
    # RTD posts failure ("...failed!") when a RUNNING build is cancelled (domain facts): the
    # contract says state cancelled, divergent, and the finding says what RTD reported.
    status = rtd_status("failure", "https://readthedocs.org/projects/project/builds/34894885/")
    lookup = rtd_lookup([_cancelled_pr_build()], ("build:user:cancelled",))
    report = report_of([status], now=RTD_NOW, rtd={status.name: lookup})
    row = report.rows[0]
    assert row.state is State.CANCELLED
    assert row.reconciliation is not None and row.reconciliation.divergent
    assert "cancelled" in row.reconciliation.finding
    assert report.verdict is Verdict.INCOMPLETE


def test_rtd_empty_listing_keeps_githubs_state() -> None:
    # projects-list-empty.json: RTD read, no build for the commit -> builds_for_commit 0,
    # build_id null, divergent false, and the signal keeps GitHub's pending.
    page = load("rtd", "projects-list-empty.json")
    builds = [parse_build(b) for b in page["results"]]
    status = rtd_status("pending", None)
    report = report_of([status], now=RTD_NOW, rtd={status.name: rtd_lookup(builds)})
    rec = report.rows[0].reconciliation
    assert rec is not None
    assert (rec.builds_for_commit, rec.build_id, rec.divergent) == (0, None, False)
    assert report.rows[0].state is State.PENDING


def test_rtd_malformed_build_is_an_rtd_error() -> None:
    # projects-builds-detail.json with its state object removed: a named RtdError, not a crash.
    data = {**load("rtd", "projects-builds-detail.json"), "state": None}
    with pytest.raises(RtdError):
        parse_build(data)


# --- github3.py betamax recording: a queued check run HAS a start time ----------------------


def _github3py_queued_run() -> dict[str, Any]:
    recording = load("github3py", "CheckRun_check_run_by_id.decoded.json")
    run: dict[str, Any] = next(
        i["body"]
        for i in recording["interactions"]
        if isinstance(i["body"], dict) and i["body"].get("status") == "queued"
    )
    return run


def test_github3py_recorded_queued_run_has_a_start_time() -> None:
    # CheckRun_check_run_by_id (real, 2019-01): GitHub answered a queued run with
    # started_at set (its creation time) and completed_at null.
    run = _github3py_queued_run()
    assert run["status"] == "queued" and run["conclusion"] is None
    assert run["started_at"] is not None and run["completed_at"] is None


def test_queued_rerun_supersedes_an_older_success(seeded: Seeded) -> None:
    # The recorded queued run (started_at as GitHub gave it) re-runs a check that had passed
    # an hour earlier: the newest run is queued -> the verdict is not passing.
    queued = _github3py_queued_run()
    started = at(queued["started_at"])
    older = {
        **queued, "status": "completed", "conclusion": "success",
        "started_at": (started - timedelta(hours=1)).isoformat(),
        "completed_at": (started - timedelta(minutes=50)).isoformat(),
    }  # fmt: skip
    for run in (older, queued):
        fields = rest_check_run_signal(run)
        seeded.world.add_check_run(REPO, SHA, new_suite=False, **fields)
    report = seeded.show()
    assert [s["github_state"] for s in report["signals"]] == ["queued"]
    assert report["verdict"] != "passing"


def test_queued_rerun_without_a_start_time_supersedes_an_older_success(seeded: Seeded) -> None:
    # The same re-run as above, but queued runs as the sandbox serves them (startedAt null;
    # the schema allows it): a newer workflow run of the same job, not yet started. The newest
    # run is queued, so the verdict must not be passing; the bot keeps the older success.
    now = datetime.now(UTC)
    seeded.world.add_check_run(
        REPO, SHA, name="test", workflow="ci", started_at=now - timedelta(hours=1),
        completed_at=now - timedelta(minutes=50),
    )  # fmt: skip
    seeded.world.add_check_run(
        REPO, SHA, name="test", workflow="ci", status="queued", new_suite=True
    )
    report = seeded.show()
    assert report["verdict"] != "passing"
    assert [s["github_state"] for s in report["signals"]] == ["queued"]


# --- Read the Docs' own default context name (self-hosted instances) -------------------------


def test_self_hosted_rtd_context_is_reconciled(seeded: Seeded) -> None:
    # RTD's default status name is `docs/readthedocs:<slug>` (domain facts; RTD's
    # RTD_BUILD_STATUS_API_NAME); the contract reads it from `readthedocs.api_url`. A pending
    # status whose build was cancelled (the README's cancelled-while-queued shape) is cancelled.
    context = "docs/readthedocs:omni-docs"
    seeded.world.add_status(
        REPO, SHA, context=context, state="pending",
        description="Read the Docs build is in progress!",
        target_url="https://docs.example.org/projects/omni-docs/builds/34894885/",
        created_at=datetime.now(UTC) - timedelta(minutes=10),
    )  # fmt: skip
    seeded.world.add_rtd_build(
        "omni-docs", id=34894885, commit=SHA, version=str(NUMBER), state="cancelled",
        success=False, created=datetime.now(UTC) - timedelta(minutes=10), finished=None,
        duration=0,
    )  # fmt: skip
    seeded.world.add_rtd_notification("omni-docs", 34894885, "build:user:cancelled")
    signal = by_name(seeded.show())[context]
    assert signal["reconciliation"] is not None
    assert signal["state"] == "cancelled"


# --- a recorded comment list, replayed where the bot lists a pull request's comments ----------


def test_recorded_comment_list_with_someone_elses_marker_is_never_adopted(seeded: Seeded) -> None:
    # PaginatedList.testCustomPerPageReversedIterationSinglePage.txt: 4 real comments (2025
    # shape). The newest is given the bot's marker as its first line; its author is not the
    # bot, so the contract says it is never edited: `once` creates the bot's own comment.
    from bot.core.model import MARKER

    comments = replay("PaginatedList.testCustomPerPageReversedIterationSinglePage.txt")[2].json()
    assert len(comments) == 4 and all(c["user"]["login"] != LOGIN for c in comments)
    comments[-1]["body"] = f"{MARKER}\n{comments[-1]['body']}"
    path = f"/repos/{REPO}/issues/{NUMBER}/comments"
    seeded.sandbox.fail("GET", path, 200, body=json.dumps(comments), times=-1)
    seeded.world.add_check_run(REPO, SHA, name="build", started_at=datetime.now(UTC))
    result = cli("once", "--config", str(seeded.config))
    assert result.returncode == 0, result.stderr
    writes = [
        (r.method, r.path)
        for r in seeded.sandbox.requests
        if r.service == "github" and r.method in ("POST", "PATCH") and r.graphql_operation is None
    ]
    assert writes == [("POST", path)]


# --- Read the Docs' own responses, replayed where the bot reads RTD ---------------------------


BUILD_PAGE = "https://readthedocs.org/projects/omni-docs/builds/34894885/"


def _rtd_seed(seeded: Seeded, target_url: str | None = BUILD_PAGE) -> str:
    """RTD's pending status for omni-docs on the head (naming build 34894885); its context."""
    context = "docs/readthedocs.org:omni-docs"
    seeded.world.add_status(
        REPO, SHA, context=context, state="pending",
        description="Read the Docs build is in progress!", target_url=target_url,
        created_at=datetime.now(UTC) - timedelta(minutes=10),
    )  # fmt: skip
    return context


def test_rtd_recorded_notification_list_is_read_for_a_cancelled_build(seeded: Seeded) -> None:
    # projects-builds-notifications-list.json (RTD's own expected response) served where the
    # bot asks why build 34894885 ended: message id "build:user:cancelled" -> the cancelled
    # build's row names it, state cancelled, verdict incomplete.
    context = _rtd_seed(seeded)
    seeded.world.add_rtd_build(
        "omni-docs", id=34894885, commit=SHA, version=str(NUMBER), state="cancelled",
        success=False, created=datetime.now(UTC) - timedelta(minutes=10), finished=None,
        duration=0,
    )  # fmt: skip
    body = (DATA / "rtd" / "projects-builds-notifications-list.json").read_text(encoding="utf-8")
    path = "/projects/omni-docs/builds/34894885/notifications/"
    seeded.sandbox.fail("GET", path, 200, body=body, times=-1)
    report = seeded.show()
    signal = by_name(report)[context]
    assert signal["state"] == "cancelled"
    assert signal["reconciliation"]["notification"] == "build:user:cancelled"
    assert report["verdict"] == "incomplete"


def test_rtd_recorded_empty_listing_keeps_githubs_pending(seeded: Seeded) -> None:
    # projects-list-empty.json served as the commit's build list: RTD read, no build for the
    # exact commit -> builds_for_commit 0, build_id null, divergent false, GitHub's pending.
    # (The status names no build, so the commit's build list is where the bot must look.)
    context = _rtd_seed(seeded, target_url=None)
    body = (DATA / "rtd" / "projects-list-empty.json").read_text(encoding="utf-8")
    seeded.sandbox.fail("GET", "/projects/omni-docs/builds/", 200, body=body, times=-1)
    signal = by_name(seeded.show())[context]
    rec = signal["reconciliation"]
    assert (rec["builds_for_commit"], rec["build_id"], rec["divergent"]) == (0, None, False)
    assert signal["state"] == "pending"


# --- issue 27: re-runs (earlier attempts of a check on one commit) -------------------------


def test_pygithub_recorded_filter_all_equals_latest_when_nothing_was_rerun(seeded: Seeded) -> None:
    # CheckRun.testGetCheckRunsForRefFilterByFilter.txt: GitHub answered filter=latest and
    # filter=all of one commit with the same 4 runs: nothing was re-run, so no earlier attempt.
    exchanges = replay("CheckRun.testGetCheckRunsForRefFilterByFilter.txt")
    latest = next(e for e in exchanges if e.path.endswith("filter=latest")).json()
    every = next(e for e in exchanges if e.path.endswith("filter=all")).json()
    assert {r["id"] for r in latest["check_runs"]} == {r["id"] for r in every["check_runs"]}
    seeded.add_runs(every["check_runs"])
    signals = by_name(seeded.show())
    failing = signals["test (Python 3.6)"]
    assert failing["state"] == "failure"
    assert failing["history"] is None or failing["history"]["attempts"] == []
    asked = [r for r in seeded.sandbox.requests if b"query CheckAttempts" in r.body]
    assert len(asked) == 1 and asked[0].body.count(b"checkType: ALL") == 1  # the failing one


def test_pygithub_recorded_suite_filter_all_lists_every_run_once(seeded: Seeded) -> None:
    # CheckSuite.testGetCheckRunsFilterByFilter.txt: a suite's filter=all answer, 8 runs of 8
    # names (total_count 8), `fail_check_run` failed: it has no earlier attempt in that suite.
    answer = next(e for e in replay("CheckSuite.testGetCheckRunsFilterByFilter.txt")
                  if e.path.endswith("filter=all")).json()  # fmt: skip
    runs = answer["check_runs"]
    assert answer["total_count"] == len(runs) == len({r["name"] for r in runs}) == 8
    for run in runs:  # one suite, as recorded
        seeded.world.add_check_run(REPO, SHA, **rest_check_run_signal(run))
    failing = by_name(seeded.show())["fail_check_run"]
    assert failing["state"] == "failure"
    assert failing["history"] is None or failing["history"]["attempts"] == []


def test_pygithub_recorded_rerun_attempt_is_found_whichever_suite_it_sits_in(
    seeded: Seeded,
) -> None:
    # WorkflowRun.testGetAttempt.txt: a re-run workflow run is attempt 2 of the same run id
    # (`previous_attempt_url` .../attempts/1). Attempt 1's suite is not recorded, so the bot must
    # find an earlier attempt in another suite of the app as well as in the same one.
    run, attempt = (e.json() for e in replay("WorkflowRun.testGetAttempt.txt")[1:3])
    assert run["id"] == attempt["id"] and attempt["run_attempt"] == 2
    assert attempt["previous_attempt_url"].endswith(f"/actions/runs/{run['id']}/attempts/1")
    workflow = {"workflow": "CodeQL", "workflow_path": attempt["path"], "event": "pull_request"}
    first = at(attempt["created_at"]) - timedelta(days=5)
    second = at(attempt["run_started_at"])
    for name, new_suite in (("analyze (same suite)", False), ("analyze (new suite)", True)):
        add = partial(seeded.world.add_check_run, REPO, SHA, name=name, **workflow)
        add(conclusion="success", started_at=first, completed_at=first)
        add(conclusion="failure", started_at=second, completed_at=second, new_suite=new_suite)
    signals = by_name(seeded.show())
    for name in ("analyze (same suite)", "analyze (new suite)"):
        attempts = signals[name]["history"]["attempts"]
        assert [a["state"] for a in attempts] == ["success"], name
