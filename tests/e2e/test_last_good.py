"""A second source of GitHub's that cannot be read now is no new fact, end to end through the CLI.

The merge base's checks (`CommitContexts`), the compare, and a failing run's annotations
(`CheckRunAnnotations`) are each a read a cycle may fail: the last good answer stands and the
comment is not edited for the failure, with a state or without one (the Action); error text
that reaches a row never changes from one request to the next (request ids, error pages).
"""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import LOGIN, REPO, Env, bot_comments, repo_world, writes

from bot.cli import main
from bot.render.stamp import without_carried

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)
DAY_AGO = NOW - timedelta(days=1)
BASE = "b" * 40  # the merge-base commit
SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID 0C2D:{:04X}:5A1B"
)


world = pytest.fixture(repo_world, name="world")


def head(n: int) -> str:
    return f"{n:07x}" + "a" * 33


def failing_pull(env: Env, number: int = 1, **kw: Any) -> str:
    sha = head(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=sha)
    env.world.set_merge_base(REPO, "main", sha, BASE)
    env.world.add_check_run(
        REPO, sha, name="tests", workflow="ci", conclusion="failure",
        started_at=HOUR_AGO, completed_at=HOUR_AGO, **kw,
    )  # fmt: skip
    return sha


def base_fails_and_never_settles(env: Env) -> None:
    """The merge base: `tests` failing there too, and a status that never settles on main (the
    answer is never final, so it is read again every cycle)."""
    env.world.add_check_run(
        REPO, BASE, name="tests", workflow="ci", conclusion="failure", event="push",
        started_at=DAY_AGO, completed_at=DAY_AGO,
    )  # fmt: skip
    env.world.add_status(REPO, BASE, context="ci/nightly", state="pending", created_at=DAY_AGO)


def stateless(env: Env) -> None:
    """No state at all: a new, empty one every run (as the Action without a cache)."""
    text = env.config.read_text()
    changed = text.replace(f'path = "{env.tmp / "state.sqlite3"}"', 'path = ""')
    assert changed != text
    env.config.write_text(changed)


def once(env: Env) -> None:
    assert main(["once", "--config", str(env.config)], sleep=env.waits) == 0


def body(env: Env, number: int = 1) -> str:
    text: str = bot_comments(env.world, number)[0]["body"]
    return text.replace("\u00a0", " ").replace("\u2011", "-")


def as_an_older_bot_wrote_it(env: Env, number: int = 1) -> str:
    """The comment without its carried line (issue 31), edited so by the bot itself: a run
    with no state then reads the annotations again, as before the line existed. Its body."""
    comment = bot_comments(env.world, number)[0]
    text = without_carried(str(comment["body"]))
    assert text != comment["body"]
    env.world.edit_comment(int(str(comment["id"])), text, editor=LOGIN)
    return body(env, number)


def answered(env: Env, read: str, *, failing: bool) -> int:
    """How many requests of `read` (a GraphQL operation or a REST path part) since the last
    clear were answered with a failure (5xx/403) or with 200."""
    return sum(
        1
        for r in env.sandbox.requests
        if (read.encode() in r.body or read in r.path)
        and (r.status >= 500 or r.status == 403 if failing else r.status == 200)
    )


def quiet(env: Env, runs: int = 1, *, failed: str | None = None, read: str | None = None) -> None:
    """More runs write nothing; `failed`: that read was asked and failed in them (else the test
    proves nothing), `read`: it was asked and answered."""
    env.sandbox.clear_requests()
    for _ in range(runs):
        once(env)
    assert writes(env.sandbox) == [], "the comment was edited for a failed read"
    if failed is not None:
        assert answered(env, failed, failing=True), f"{failed} was never asked and failed"
    if read is not None:
        assert answered(env, read, failing=False), f"{read} was never read"


# --- error text in a row is stable ---------------------------------------------------------------


def test_a_request_id_in_github_s_answer_never_edits_the_comment(env: Env) -> None:
    failing_pull(env)
    ids = itertools.count()
    env.sandbox.fail(
        "GET", f"/repos/{REPO}/compare/.*", 403, times=-1,
        body=lambda: {"message": SECONDARY.format(next(ids))},
    )  # fmt: skip
    once(env)
    said = body(env)
    assert "GitHub answered 403 (secondary rate limit)" in said, said
    assert "request ID" not in said and "0C2D" not in said
    quiet(env, 2, failed="/compare/")


def test_an_error_page_that_differs_per_request_is_never_quoted(env: Env) -> None:
    failing_pull(env)
    pages = itertools.count()
    env.sandbox.fail(
        "GET", f"/repos/{REPO}/compare/.*", 502, times=-1,
        body=lambda: f"<html><body>Bad gateway, ray {next(pages):08x}</body></html>",
    )  # fmt: skip
    once(env)
    said = body(env)
    assert "GitHub answered 502" in said and "ray" not in said and "html" not in said, said
    quiet(env, 2, failed="/compare/")


def test_the_required_checks_unread_say_a_stable_reason(env: Env) -> None:
    failing_pull(env)
    pages = itertools.count()
    env.sandbox.fail(
        "POST", "/graphql", 502, times=-1, when="query RequiredChecks",
        body=lambda: f"<html>upstream {next(pages)}</html>",
    )  # fmt: skip
    once(env)
    said = body(env)
    assert "could not be read (GitHub answered 502)" in said, said
    quiet(env, 2, failed="query RequiredChecks")


# --- the merge base's checks: the last good answer stands ----------------------------------------


def test_a_failed_re_read_of_the_merge_base_s_checks_edits_nothing(env: Env) -> None:
    failing_pull(env)
    base_fails_and_never_settles(env)
    once(env)
    first = body(env)
    assert "also failed on the merge base" in first, first
    env.sandbox.fail("POST", "/graphql", 502, when="CommitContexts", times=3)
    quiet(env, failed="query CommitContexts")  # the last good answer stands
    assert body(env) == first
    quiet(env, read="query CommitContexts")  # read again, the same answer


def test_a_long_failure_of_the_merge_base_s_checks_says_since_when(env: Env) -> None:
    failing_pull(env)
    base_fails_and_never_settles(env)
    once(env)
    env.sandbox.fail("POST", "/graphql", 502, when="CommitContexts", times=-1)
    quiet(env, failed="query CommitContexts")
    with sqlite3.connect(env.tmp / "state.sqlite3") as db:
        (payload,) = db.execute("SELECT payload FROM base_contexts").fetchone()
        assert '"failing_since"' in payload
        moment = NOW - timedelta(minutes=45)
        changed = payload.replace(
            payload.split('"failing_since": "')[1].split('"')[0], moment.isoformat()
        )
        db.execute("UPDATE base_contexts SET payload = ?", (changed,))
    once(env)
    said = body(env)
    assert "also failed on the merge base" in said, said  # the last good answer, still
    since = moment.strftime("%Y-%m-%d %H:%M UTC")
    assert f"could not be verified since {since}" in said, said
    assert "GitHub answered 502" in said
    quiet(env, failed="query CommitContexts")


def test_without_a_state_a_failed_read_of_the_merge_base_s_checks_edits_nothing(env: Env) -> None:
    stateless(env)
    failing_pull(env)
    base_fails_and_never_settles(env)
    once(env)
    first = body(env)
    assert "also failed on the merge base" in first, first
    env.sandbox.fail("POST", "/graphql", 502, when="CommitContexts", times=3)
    quiet(env, failed="query CommitContexts")
    assert body(env) == first
    quiet(env, read="query CommitContexts")


def test_a_lost_state_and_a_failing_read_of_the_merge_base_s_checks_edit_nothing(env: Env) -> None:
    """The state is lost while GitHub fails the merge base's checks for several cycles: the
    comment is the last good evidence until they are read again."""
    failing_pull(env)
    base_fails_and_never_settles(env)
    once(env)
    first = body(env)
    for path in env.tmp.glob("state.sqlite3*"):
        path.unlink()
    env.sandbox.fail("POST", "/graphql", 502, when="CommitContexts", times=6)
    quiet(env, 3, failed="query CommitContexts", read="query CommitContexts")
    # two cycles failing, then read again
    assert body(env) == first


# --- annotations ---------------------------------------------------------------------------------

QUOTE = "`t.py:3`: `AssertionError: boom`"
BOOM = [{"path": "t.py", "start_line": 3, "message": "AssertionError: boom"}]


def test_without_a_state_a_failed_annotations_read_edits_nothing(env: Env) -> None:
    stateless(env)
    failing_pull(env, annotations=BOOM)
    once(env)
    first = as_an_older_bot_wrote_it(env)  # the annotations are not carried: read again
    assert QUOTE in first, first
    env.sandbox.fail("POST", "/graphql", 502, when="CheckRunAnnotations", times=5)
    quiet(env, failed="query CheckRunAnnotations")
    assert body(env) == first
    quiet(env)


def test_a_real_change_still_edits_while_the_annotations_cannot_be_read(env: Env) -> None:
    """The failed read holds back only what it would have changed: another fact still edits."""
    stateless(env)
    sha = failing_pull(env, annotations=BOOM)
    once(env)
    as_an_older_bot_wrote_it(env)  # the annotations are not carried: read again
    env.sandbox.fail("POST", "/graphql", 502, when="CheckRunAnnotations", times=-1)
    env.world.add_check_run(
        REPO, sha, name="lint", workflow="ci", status="in_progress", started_at=NOW,
    )  # fmt: skip
    env.sandbox.clear_requests()
    once(env)
    assert len(writes(env.sandbox)) == 1
    assert "`lint`" in body(env)
    assert answered(env, "query CheckRunAnnotations", failing=True)  # it could not be read


def _null_first_path(payload: Any) -> Any:
    """A broken answer: the first annotation of the first run has a null path."""
    payload["data"]["nodes"][0]["annotations"]["nodes"][0]["path"] = None
    return payload


def test_one_malformed_annotation_is_skipped_and_the_rest_kept(env: Env) -> None:
    bad = {"path": "bad.py", "start_line": 1, "message": "AssertionError: broken"}
    failing_pull(env, annotations=[bad, *BOOM])
    env.sandbox.fail(
        "POST", "/graphql", 200, times=-1, when="CheckRunAnnotations", transform=_null_first_path
    )
    once(env)
    said = body(env)
    assert QUOTE in said and "broken" not in said, said
    env.sandbox.clear_requests()
    once(env)  # kept: not asked again
    assert not any(b"CheckRunAnnotations" in r.body for r in env.sandbox.requests)
    assert writes(env.sandbox) == []


def test_failure_annotations_after_a_page_of_warnings_are_quoted(env: Env) -> None:
    warnings = [
        {"path": f"w{i}.py", "start_line": i + 1, "annotation_level": "warning", "message": "w"}
        for i in range(60)
    ]
    failing_pull(env, annotations=[*warnings, *BOOM])
    once(env)
    said = body(env)
    assert QUOTE in said, said  # GitHub has no level filter: the run's next page was read
    assert sum(1 for r in env.sandbox.requests if b"query MoreAnnotations" in r.body) == 1
