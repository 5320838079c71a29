"""`show` against the sandbox: every RTD row, pagination, reruns, unreadable sources, queries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import graphql
import pytest
from support import CONTEXT, LOGIN, REPO, RTD, TESTS, TOKEN, Env, writes

from bot.cli import main
from bot.github import query as queries
from bot.github.query import (
    ANNOTATIONS_QUERY,
    COMMENTS_QUERY,
    MORE_LABELS_QUERY,
    VIEWER_QUERY,
    attempts_query,
    branch_history_query,
    branch_tips_query,
    commits_query,
    more_annotations_query,
    more_contexts_query,
    pull_comments_query,
    pull_query,
    pulls_by_number_query,
    pulls_page_query,
    required_sets_query,
)
from bot_sandbox import World

SHA = "c0ffee0" + "1" * 33
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def world() -> World:
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    world.add_pull(REPO, 1, title="t", author="alice", head_sha=SHA)
    world.add_rtd_project(RTD)
    return world


@pytest.fixture
def env(env: Env) -> Iterator[Env]:
    """The shared env (allowlist checked); `show` writes nothing to GitHub."""
    yield env
    assert writes(env.sandbox) == []


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int = 1) -> dict[str, Any]:
    code = main(["show", f"{REPO}#{number}", "--format", "json", "--config", str(env.config)])
    out = capsys.readouterr()
    assert code == 0, out.err
    report: dict[str, Any] = json.loads(out.out)
    return report


def signal(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["signals"] if s["name"] == name)
    return found


def docs_status(env: Env, state: str, *, age: timedelta = timedelta(minutes=10)) -> None:
    env.world.add_status(
        REPO, SHA, context=CONTEXT, state=state, created_at=NOW - age,
        # a URL naming no build (like RTD's preview link): the newest build of the PR settles
        target_url=f"https://{RTD}--1.org.readthedocs.build/en/1/",
    )  # fmt: skip


def build(env: Env, build_id: int, state: str, success: bool | None, *, age: timedelta) -> None:
    done = state == "finished"
    env.world.add_rtd_build(
        RTD, id=build_id, commit=SHA, version="1", state=state, success=success,
        created=NOW - age, finished=NOW - age + timedelta(minutes=1) if done else None,
        duration=60 if done else 0,
    )  # fmt: skip


ROWS = [
    # (github status, builds [(id, state, success, age_min)], notification, state, divergent)
    ("pending", [], None, "pending", False),
    ("pending", [(11, "building", None, 5)], None, "pending", False),
    ("pending", [(11, "triggered", None, 600)], None, "stale", False),
    ("pending", [(11, "cancelled", False, 5)], "build:user:cancelled", "cancelled", True),
    ("pending", [(11, "cancelled", False, 5)], "build:user:exit-code-183", "skipped", True),
    ("pending", [(11, "finished", True, 5)], None, "success", True),
    ("pending", [(11, "finished", False, 5)], None, "failure", True),
    ("success", [(11, "finished", True, 5)], None, "success", False),
    ("failure", [(11, "finished", False, 5)], None, "failure", False),
    ("success", [(11, "finished", False, 5)], None, "failure", True),
    ("failure", [(10, "finished", False, 20), (11, "building", None, 5)], None, "pending", True),
]


@pytest.mark.parametrize(("gh", "builds", "note", "state", "divergent"), ROWS)
def test_every_rtd_row_through_show(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    gh: str,
    builds: list[tuple[int, str, bool | None, int]],
    note: str | None,
    state: str,
    divergent: bool,
) -> None:
    docs_status(env, gh)
    for build_id, code, success, age in builds:
        build(env, build_id, code, success, age=timedelta(minutes=age))
    if note:
        env.world.add_rtd_notification(RTD, builds[-1][0] if len(builds) == 1 else 11, note)
    row = signal(show(env, capsys), CONTEXT)
    rec = row["reconciliation"]
    assert (row["github_state"], row["state"], rec["divergent"]) == (gh, state, divergent)
    assert rec["builds_for_commit"] == len(builds)
    assert rec["build_id"] == (max(b[0] for b in builds) if builds else None)
    if note:
        assert note in rec["finding"]


def test_a_build_of_another_commit_is_not_counted(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    docs_status(env, "pending")
    env.world.add_rtd_build(
        RTD, id=99, commit="d" * 40, version="1", state="finished", success=True,
        created=NOW, finished=NOW, duration=60,
    )  # fmt: skip
    rec = signal(show(env, capsys), CONTEXT)["reconciliation"]
    assert rec["builds_for_commit"] == 0 and rec["build_id"] is None
    assert signal(show(env, capsys), CONTEXT)["state"] == "pending"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (500, None, "HTTP 500"),
        (403, {"detail": "Authentication credentials were not provided."}, "HTTP 403"),
        (200, "this is not json", "not JSON"),
        (200, {"count": 1, "results": [{"id": "x"}]}, "lacks its id"),
    ],
)
def test_rtd_unreadable_is_could_not_verify(
    env: Env, capsys: pytest.CaptureFixture[str], status: int, body: Any, expected: str
) -> None:
    docs_status(env, "pending")
    env.sandbox.fail("GET", r"/projects/[^/]+/builds/", status=status, body=body, times=-1)
    row = signal(show(env, capsys), CONTEXT)
    rec = row["reconciliation"]
    assert row["state"] == "pending" and rec["build_id"] is None and rec["divergent"] is False
    assert "Could not verify" in rec["finding"] and expected in rec["finding"]


def test_more_than_100_contexts_are_all_read(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(130):
        env.world.add_check_run(REPO, SHA, name=f"job {i}", app_slug="github-actions",
                                workflow="ci", started_at=NOW, completed_at=NOW)  # fmt: skip
    for i in range(45):
        env.world.add_status(REPO, SHA, context=f"ci/status-{i}", state="success", created_at=NOW)
    report = show(env, capsys)
    assert len(report["signals"]) == 175
    assert report["verdict"] == "passing"


def test_a_rerun_in_a_new_suite_supersedes_the_old_run(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    hour_ago = NOW - timedelta(hours=1)
    env.world.add_check_run(REPO, SHA, name="DCO", app_slug="dco", conclusion="action_required",
                            started_at=hour_ago, completed_at=hour_ago)  # fmt: skip
    env.world.add_check_run(REPO, SHA, name="DCO", app_slug="dco", conclusion="success",
                            started_at=NOW, completed_at=NOW, new_suite=True,
                            summary="Commit sign-off was manually approved.")  # fmt: skip
    report = show(env, capsys)
    dco = [s for s in report["signals"] if s["name"] == "DCO"]
    assert len(dco) == 1 and dco[0]["state"] == "success"


def test_no_signals_is_none_reported_not_pending(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    report = show(env, capsys)
    assert report["signals"] == [] and report["verdict"] == "incomplete"
    main(["show", f"{REPO}#1", "--config", str(env.config)])
    text = capsys.readouterr().out
    assert "No check runs or commit statuses are reported" in text
    assert "pending" not in text.lower()


def test_a_queued_check_without_timestamp_is_pending_with_no_time(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    env.world.add_check_run(REPO, SHA, name="slow", app_slug="github-actions", status="queued",
                            conclusion=None, started_at=None, completed_at=None)  # fmt: skip
    row = signal(show(env, capsys), "slow")
    assert row["state"] == "pending" and row["since_source"] == "first_seen"  # GitHub gave none


def test_github_rate_limit_is_a_clear_error(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    env.sandbox.set_rate_limit("graphql", remaining=0, reset_in_s=3600)
    code = main(["show", f"{REPO}#1", "--config", str(env.config)])
    err = capsys.readouterr().err
    assert code == 1 and "rate limit" in err.lower() and "Traceback" not in err


def test_a_short_retry_after_is_obeyed(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    env.sandbox.fail("POST", r"/graphql", status=403, times=1, headers={"retry-after": "1"},
                     body={"message": "You have exceeded a secondary rate limit."})  # fmt: skip
    report = show(env, capsys)
    assert report["number"] == 1
    graphql_posts = [r for r in env.sandbox.requests if r.path.endswith("graphql")]
    assert len(graphql_posts) == 2
    assert graphql_posts[1].at - graphql_posts[0].at >= 0.9


def test_a_502_on_graphql_is_retried(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    env.sandbox.fail("POST", r"/graphql", status=502, times=1)
    assert show(env, capsys)["number"] == 1


SCHEMA_TEXT = (TESTS.parent / "bot_sandbox" / "github-schema.graphql").read_text()


@pytest.fixture(scope="module")
def schema() -> graphql.GraphQLSchema:
    built = graphql.build_schema(SCHEMA_TEXT, assume_valid_sdl=True)
    built._validation_errors = []
    return built


@pytest.mark.parametrize(
    "query",
    [
        pulls_page_query(with_labels=False),
        pulls_page_query(with_labels=True),
        pulls_page_query(with_labels=False, with_comments=True),
        pulls_page_query(with_labels=True, with_comments=True),
        pull_query(with_labels=False),
        pull_query(with_labels=True),
        more_contexts_query(1),
        more_contexts_query(20),
        more_contexts_query(1, required=True),
        more_contexts_query(20, required=True),
        MORE_LABELS_QUERY,
        COMMENTS_QUERY,
        ANNOTATIONS_QUERY,
        more_annotations_query(1),
        more_annotations_query(3),
        commits_query([SHA]),
        commits_query([SHA, "d" * 40]),
        pulls_by_number_query([1], with_labels=False),
        pulls_by_number_query([1, 2], with_labels=True),
        required_sets_query(1),
        required_sets_query(2),
        VIEWER_QUERY,
        pull_comments_query(1),
        pull_comments_query(3),
        attempts_query(1),
        attempts_query(3),
        branch_history_query(1),
        branch_history_query(2),
        pulls_page_query(with_labels=False, tips=0),
        pulls_page_query(with_labels=True, with_comments=True, tips=2),
        pulls_by_number_query([1, 2], with_labels=False, tips=0),
        pulls_by_number_query([1], with_labels=True, tips=3),
        branch_tips_query(1),
        branch_tips_query(3),
    ],
)
def test_every_query_validates_against_the_real_schema(
    schema: graphql.GraphQLSchema, query: str
) -> None:
    document = graphql.parse(query)
    assert graphql.validate(schema, document) == []
    assert all(
        getattr(d, "operation", graphql.OperationType.QUERY) is graphql.OperationType.QUERY
        for d in document.definitions
    )


VALIDATED = {
    "pulls_page_query", "pull_query", "more_contexts_query", "MORE_LABELS_QUERY",
    "COMMENTS_QUERY", "ANNOTATIONS_QUERY", "more_annotations_query", "commits_query",
    "pulls_by_number_query", "required_sets_query", "VIEWER_QUERY", "pull_comments_query",
    "attempts_query", "branch_history_query", "branch_tips_query",
}  # fmt: skip


def test_every_query_the_bot_sends_is_in_the_schema_check() -> None:
    """A query added to bot.github.query is validated above too, not only by the sandbox."""
    sent = {
        name
        for name in vars(queries)
        if name.endswith("_QUERY") or (name.endswith("_query") and callable(getattr(queries, name)))
    }
    assert sent == VALIDATED
