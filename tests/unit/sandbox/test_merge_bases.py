"""The sandbox's merge bases behave like GitHub's: a fact of a (base commit, head) pair.

GitHub's compare takes a branch or a commit on either side (`{base}...{head}`) and answers
the merge base of the two commits; a base branch that moves (a merge commit that takes in
another branch's commits: the stacked case; a force push) moves the merge base of its tip
and a head, never that of an older tip and the same head. A branch always points at a
commit (`Ref.target`), the repository's default branch too (`defaultBranchRef`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot_sandbox import Sandbox, World
from tests.support import TESTS

TOKEN = "test-token"
REPO = "octo/stack"
T0 = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)
TIPS = """
query($owner: String!, $name: String!) {
  repository(owner: $owner, name: $name) {
    defaultBranchRef { name target { oid } }
    lower: ref(qualifiedName: "refs/heads/lower") { name target { oid } }
  }
}
"""


def sha(name: str) -> str:
    return (name.encode().hex() + "0" * 40)[:40]


M0, M1, LOWER, UPPER, MERGE = (sha(n) for n in ("m0", "m1", "lower", "upper", "merge"))


@pytest.fixture
def client(world: World, sandbox: Sandbox) -> Iterator[httpx.Client]:
    world.add_user(login="ci-status-bot", token=TOKEN)
    headers = {"Authorization": f"token {TOKEN}"}
    with httpx.Client(base_url=sandbox.github_url, headers=headers, timeout=30) as client:
        yield client


def compare(client: httpx.Client, repo: str, base: str, head: str) -> Any:
    answer = client.get(f"/repos/{repo}/compare/{base}...{head}", params={"per_page": 1})
    assert answer.status_code == 200, answer.text
    return answer.json()


def stacked(world: World) -> None:
    """main: M0 <- M1; the lower pull request's head on M1, the upper's on the lower's."""
    world.add_repo(REPO)
    world.push_branch_commit(REPO, "main", M0, date=T0)
    world.push_branch_commit(REPO, "main", M1, date=T0 + timedelta(minutes=1))
    world.add_commit(REPO, LOWER, parents=(M1,), date=T0 + timedelta(minutes=2))
    world.add_commit(REPO, UPPER, parents=(LOWER,), date=T0 + timedelta(minutes=3))
    world.add_pull(REPO, 1, title="lower", author="alice", head_sha=LOWER, head_ref="lower")
    world.add_pull(REPO, 2, title="upper", author="alice", head_sha=UPPER, head_ref="upper")


def test_the_compare_of_two_commits_answers_as_the_recorded_one(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    """GitHub's recorded compare of two commits (the DCO app's test data): the same fields,
    the same base and merge-base commits, counts and URLs (the sandbox's API root put back
    to GitHub's), asked the same way."""
    real = json.loads((TESTS / "data" / "real" / "dco" / "compare.json").read_text())
    base, head = real["base_commit"]["sha"], real["commits"][0]["sha"]
    world.add_repo("robotland/test")
    world.add_commit("robotland/test", base, message=real["base_commit"]["commit"]["message"])
    world.add_commit("robotland/test", head, parents=(base,))
    answer = json.dumps(compare(client, "robotland/test", base, head))
    found = json.loads(answer.replace(sandbox.github_url, "https://api.github.com"))
    assert set(found) == set(real)
    for key in ("url", "html_url", "permalink_url", "diff_url", "patch_url", "status"):
        assert found[key] == real[key], key
    for key in ("ahead_by", "behind_by", "total_commits"):
        assert found[key] == real[key], key
    assert found["base_commit"]["sha"] == real["base_commit"]["sha"]
    assert found["merge_base_commit"]["sha"] == real["merge_base_commit"]["sha"]
    assert [c["sha"] for c in found["commits"]] == [c["sha"] for c in real["commits"]]
    assert [p["sha"] for p in found["commits"][0]["parents"]] == [base]


def test_a_merge_commit_of_the_lower_pull_request_moves_the_upper_ones_merge_base(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    stacked(world)
    before = compare(client, REPO, "main", UPPER)
    assert before["merge_base_commit"]["sha"] == M1 and before["base_commit"]["sha"] == M1
    assert (before["status"], before["ahead_by"], before["behind_by"]) == ("ahead", 2, 0)
    world.merge_into(REPO, "main", MERGE, merged=LOWER, date=T0 + timedelta(minutes=4))
    after = compare(client, REPO, "main", UPPER)
    assert after["merge_base_commit"]["sha"] == LOWER  # part of the head is on main now
    assert after["base_commit"]["sha"] == MERGE
    assert (after["status"], after["ahead_by"], after["behind_by"]) == ("diverged", 1, 1)
    assert compare(client, REPO, MERGE, UPPER)["merge_base_commit"]["sha"] == LOWER
    # a fixed pair never changes: the old tip and the head still have M1
    assert compare(client, REPO, M1, UPPER)["merge_base_commit"]["sha"] == M1
    tips = client.post(sandbox.graphql_url, json={"query": TIPS, "variables": {
        "owner": "octo", "name": "stack"}}).json()  # fmt: skip
    assert tips["data"]["repository"]["defaultBranchRef"] == {
        "name": "main", "target": {"oid": MERGE},
    }  # fmt: skip


def test_a_force_pushed_base_branch_moves_the_merge_base_back(
    world: World, client: httpx.Client
) -> None:
    stacked(world)
    assert compare(client, REPO, "main", LOWER)["merge_base_commit"]["sha"] == M1
    world.force_push(REPO, "main", M0)
    moved = compare(client, REPO, "main", LOWER)
    assert moved["merge_base_commit"]["sha"] == M0 and moved["base_commit"]["sha"] == M0
    assert (moved["status"], moved["ahead_by"], moved["behind_by"]) == ("ahead", 2, 0)
    assert compare(client, REPO, M1, LOWER)["merge_base_commit"]["sha"] == M1
    assert world.branch_tip(REPO, "main") == M0


def test_every_branch_points_at_a_commit_and_a_tip_can_be_refused(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    """A branch no test pushed to still has a commit (the one compare answered before); a
    branch whose tip GitHub will not give answers an error there, and null."""
    world.add_repo(REPO)
    world.add_pull(REPO, 1, title="t", author="alice", head_sha=sha("h"), base_ref="lower")
    tip = world.branch_tip(REPO, "lower")
    assert compare(client, REPO, "lower", sha("h"))["merge_base_commit"]["sha"] == tip
    world.refuse_tip(REPO, "lower", "Resource not accessible by integration")
    answer = client.post(sandbox.graphql_url, json={"query": TIPS, "variables": {
        "owner": "octo", "name": "stack"}}).json()  # fmt: skip
    assert answer["data"]["repository"]["lower"] == {"name": "lower", "target": None}
    assert answer["data"]["repository"]["defaultBranchRef"]["target"] == {
        "oid": world.branch_tip(REPO, "main")
    }
    [error] = answer["errors"]
    assert error["path"] == ["repository", "lower", "target"]
    assert error["message"] == "Resource not accessible by integration"
