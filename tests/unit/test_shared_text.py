"""Text that repeats across pull requests is held once (issue 31, the service's memory): two
signals decoded from two answers share their name, app, workflow, state and title objects,
and their times."""

from __future__ import annotations

import orjson
import pytest

from bot.core.model import parse_time
from bot.github.parse import parse_context

CHECK_RUN = {
    "__typename": "CheckRun", "name": "tests (3.12)", "status": "COMPLETED",
    "conclusion": "FAILURE", "title": "2 failed", "detailsUrl": "https://ci.example/1",
    "summary": "a summary", "startedAt": "2026-12-01T10:00:00Z", "id": "CR_1",
    "checkSuite": {"app": {"slug": "github-actions", "databaseId": 15368},
                   "workflowRun": {"event": "pull_request", "workflow": {"name": "CI"},
                                   "file": {"path": ".github/workflows/ci.yml"}}},
}  # fmt: skip
STATUS = {
    "__typename": "StatusContext", "context": "docs/readthedocs.org:proj", "state": "SUCCESS",
    "description": "Read the Docs build succeeded!", "targetUrl": "https://rtd.example/1",
    "createdAt": "2026-12-01T10:00:00Z",
}  # fmt: skip

SHARED = ("name", "github_state", "app", "workflow", "event", "workflow_path", "description")


def _twice(node: dict[str, object]) -> tuple[object, object]:
    """The same context decoded from two answers, as two pull requests' heads give it."""
    raw = orjson.dumps(node)
    return parse_context(orjson.loads(raw)), parse_context(orjson.loads(raw))


def test_a_check_run_s_repeated_text_is_one_object_and_its_own_text_is_not_touched() -> None:
    first, second = _twice(CHECK_RUN)
    assert first == second
    for name in SHARED:
        assert getattr(first, name) is getattr(second, name), name
    assert first.url is not second.url  # a run's own text: no table of every URL


def test_a_status_s_repeated_text_is_one_object() -> None:
    first, second = _twice(STATUS)
    assert first == second
    for name in ("name", "github_state", "description"):
        assert getattr(first, name) is getattr(second, name), name


def test_the_same_time_text_is_one_time_and_a_malformed_one_still_raises() -> None:
    first, second = _twice(CHECK_RUN)
    assert first.started_at is second.started_at
    assert parse_time("2026-12-01T10:00:00+01:00") == parse_time("2026-12-01T09:00:00Z")
    with pytest.raises(ValueError):
        parse_time("yesterday")
