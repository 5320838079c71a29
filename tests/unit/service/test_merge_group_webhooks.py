"""`merge_group` deliveries (issue 26) mark the pull request of the group: GitHub's documented
sample (octokit/webhooks), the sandbox's deliveries, and checks on a merge-group commit."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from support import TESTS

from bot.service.webhooks.events import EVENTS, Mark, read_event
from bot_sandbox import World
from bot_sandbox.webhook_sender import merge_group_payload

REAL = TESTS / "data" / "real" / "octokit" / "webhook.merge_group.checks_requested.payload.json"
OCTO = "octo-org/octo-repo"
REPOS = {OCTO.lower(): OCTO}


def real() -> dict[str, Any]:
    """GitHub's documented merge_group sample (see tests/data/real/PROVENANCE.md)."""
    return json.loads(REAL.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_documented_payload_marks_the_pull_request_its_group_is_named_after() -> None:
    payload = real()
    ref = payload["merge_group"]["head_ref"]
    assert ref.startswith("refs/heads/gh-readonly-queue/main/pr-104-")
    assert "merge_group" in EVENTS
    reading = read_event("merge_group", payload, repos=REPOS)
    assert (reading.outcome, reading.marks) == ("marked", (Mark(OCTO, 104),))


def test_the_sandboxs_deliveries_read_the_same() -> None:
    world = World(clock=lambda: datetime(2026, 10, 5, 14, 3, tzinfo=UTC))
    world.add_repo("octo/omni")
    world.add_pull("octo/omni", 7, title="x", author="alice", head_sha="1" * 40)
    world.set_merge_queue("octo/omni")
    entry = world.enqueue("octo/omni", 7, group_sha="2" * 40)
    repos = {"octo/omni": "octo/omni"}
    for action, reason in (("checks_requested", None), ("destroyed", "merged")):
        payload = merge_group_payload(world, action, "octo/omni", entry, reason)
        assert set(payload["merge_group"]) == set(real()["merge_group"])  # the documented keys
        assert read_event("merge_group", payload, repos=repos).marks == (Mark("octo/omni", 7),)


@pytest.mark.parametrize(
    "group",
    [
        None,
        {"head_sha": "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", "head_ref": "refs/heads/main"},
        {"head_sha": "short", "head_ref": "refs/heads/gh-readonly-queue/main/pr-1-" + "0" * 40},
    ],
)
def test_a_merge_group_of_another_shape_is_malformed(group: object) -> None:
    payload = {**real(), "merge_group": group}
    assert read_event("merge_group", payload, repos=REPOS).outcome == "malformed"


def test_a_check_on_a_merge_group_commit_marks_its_pull_request() -> None:
    """Checks on the merge-group commit list no pull request; their branch names it."""
    ref = "gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64"
    payload = {
        "repository": {"full_name": OCTO},
        "check_run": {"head_sha": "2" * 40, "pull_requests": [],
                      "check_suite": {"head_branch": ref, "pull_requests": []}},
    }  # fmt: skip
    assert read_event("check_run", payload, repos=REPOS).marks == (Mark(OCTO, 104),)
    status = {"repository": {"full_name": OCTO}, "sha": "2" * 40, "branches": [{"name": ref}]}
    assert read_event("status", status, repos=REPOS).marks == (
        Mark(OCTO, sha="2" * 40),
        Mark(OCTO, 104),
    )
