"""The loopback sandbox behaves like the recorded GitHub and Read the Docs exchanges."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import github
import httpx
import pytest

from bot_sandbox import Sandbox, World
from bot_sandbox.graphql_api import operation_of, prepare, query_cost
from bot_sandbox.seeds import change_heads, seed_demo, seed_scale

TOKEN = "test-token"
REPO = "octo/omni"
# PyGithub without its own pacing (0.25 s between requests, 1 s between POSTs), as the bot has
NO_PACING = {"seconds_between_requests": None, "seconds_between_writes": None}
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
NOW = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)

ROLLUP_QUERY = """
query($owner: String!, $name: String!, $after: String) {
  rateLimit { cost limit remaining resetAt used nodeCount }
  repository(owner: $owner, name: $name) {
    pullRequests(states: OPEN, first: 50, after: $after) {
      pageInfo { hasNextPage endCursor }
      nodes {
        number title isDraft headRefOid author { login }
        statusCheckRollup {
          state
          contexts(first: 100) {
            totalCount checkRunCount statusContextCount
            pageInfo { hasNextPage endCursor }
            nodes {
              __typename
              ... on CheckRun {
                name status conclusion startedAt completedAt detailsUrl databaseId title summary
                isRequired(pullRequestNumber: 7430)
                checkSuite { app { slug name } workflowRun { workflow { name } } }
              }
              ... on StatusContext {
                context state description targetUrl createdAt isRequired(pullRequestNumber: 7430)
              }
            }
          }
        }
      }
    }
  }
}
"""


@pytest.fixture
def client(world: World, sandbox: Sandbox) -> httpx.Client:
    """An httpx client authenticated as the bot."""
    world.add_user(login="ci-status-bot", token=TOKEN)
    world.add_repo(REPO)
    world.add_pull(REPO, 7430, title="Add the omni resolver", author="alice", head_sha=SHA)
    # a generous timeout: the first GraphQL answer parses GitHub's whole schema, which on a
    # loaded two-core machine running four workers takes longer than httpx's default 5 s
    return httpx.Client(
        base_url=sandbox.github_url, headers={"Authorization": f"token {TOKEN}"}, timeout=30
    )


def gql(sandbox: Sandbox, client: httpx.Client, query: str, **variables: object) -> httpx.Response:
    """POST one GraphQL request."""
    return client.post(sandbox.graphql_url, json={"query": query, "variables": variables})


def links(response: httpx.Response) -> dict[str, str]:
    """rel -> URL of a Link header."""
    return {
        rel: url for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', response.headers["link"])
    }


# -- REST ------------------------------------------------------------------------------------


def test_check_runs_paginate_with_links_to_repositories_id(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    for name in ("a", "b", "c", "d"):
        world.add_check_run(REPO, SHA, name=name)
    first = client.get(f"/repos/{REPO}/commits/{SHA}/check-runs", params={"per_page": 1})
    repo_id = world.repo(REPO).id
    base = f"{sandbox.github_url}/repositories/{repo_id}/commits/{SHA}/check-runs"
    # the same shape as CheckRun.testGetCheckRunsForRef.txt
    assert first.headers["link"] == (
        f'<{base}?per_page=1&page=2>; rel="next", <{base}?per_page=1&page=4>; rel="last"'
    )
    assert first.json()["total_count"] == 4
    names = [first.json()["check_runs"][0]["name"]]
    url: str | None = links(first)["next"]
    while url:
        page = client.get(url)
        names += [r["name"] for r in page.json()["check_runs"]]
        url = links(page).get("next")
    assert sorted(names) == ["a", "b", "c", "d"]
    assert set(links(page)) == {"prev", "first"}


def test_pygithub_follows_the_links_and_reads_pulls_and_runs(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    for name in ("a", "b", "c"):
        world.add_check_run(REPO, SHA, name=name, workflow="ci")
    gh = github.Github(
        auth=github.Auth.Token(TOKEN), base_url=sandbox.github_url, per_page=1, **NO_PACING
    )
    repo = gh.get_repo(REPO)
    assert [p.number for p in repo.get_pulls(state="open")] == [7430]
    runs = list(repo.get_commit(SHA).get_check_runs())
    assert sorted(r.name for r in runs) == ["a", "b", "c"]
    assert any("/repositories/" in r.path for r in sandbox.requests)
    assert gh.get_user().login == "ci-status-bot"


def test_filter_latest_collapses_reruns_inside_a_suite_only(
    world: World, client: httpx.Client
) -> None:
    world.add_check_run(REPO, SHA, name="tests", workflow="ci", conclusion="failure")
    world.add_check_run(REPO, SHA, name="tests", workflow="ci", conclusion="success")  # rerun
    world.add_check_run(
        REPO, SHA, name="tests", workflow="ci", conclusion="failure", new_suite=True
    )
    path = f"/repos/{REPO}/commits/{SHA}/check-runs"
    latest = client.get(path).json()
    assert latest["total_count"] == 2
    assert sorted(r["conclusion"] for r in latest["check_runs"]) == ["failure", "success"]
    assert client.get(path, params={"filter": "all"}).json()["total_count"] == 3


def test_combined_status_stops_at_30_without_per_page(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    for i in range(35):
        world.add_status(REPO, SHA, context=f"ci/{i:02d}", state="pending")
    world.add_status(REPO, SHA, context="ci/00", state="success")
    plain = client.get(f"/repos/{REPO}/commits/{SHA}/status")
    assert len(plain.json()["statuses"]) == 30
    assert plain.json()["total_count"] == 35
    full = client.get(f"/repos/{REPO}/commits/{SHA}/status", params={"per_page": 100}).json()
    assert len(full["statuses"]) == 35
    assert next(s for s in full["statuses"] if s["context"] == "ci/00")["state"] == "success"
    gh = github.Github(auth=github.Auth.Token(TOKEN), base_url=sandbox.github_url, lazy=True)
    combined = gh.get_repo(REPO).get_commit(SHA).get_combined_status()
    assert len(combined.statuses) == 30 and combined.total_count == 35
    history = client.get(f"/repos/{REPO}/commits/{SHA}/statuses", params={"per_page": 100}).json()
    assert len(history) == 36 and history[0]["context"] == "ci/00"


def test_unknown_token_is_refused_like_github(sandbox: Sandbox, client: httpx.Client) -> None:
    answer = client.get("/user", headers={"Authorization": "token nope"})
    assert answer.status_code == 401 and answer.json()["message"] == "Bad credentials"
    gh = github.Github(auth=github.Auth.Token("nope"), base_url=sandbox.github_url, retry=None)
    with pytest.raises(github.BadCredentialsException):
        gh.get_user().login  # noqa: B018 - the attribute access sends the request
    missing = client.get(f"/repos/{REPO}/pulls/1")
    assert missing.status_code == 404 and missing.json()["message"] == "Not Found"


def test_etag_answers_304_without_charging(sandbox: Sandbox, client: httpx.Client) -> None:
    first = client.get(f"/repos/{REPO}/pulls")
    etag = first.headers["etag"]
    assert etag.startswith('W/"')
    again = client.get(f"/repos/{REPO}/pulls", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"]
    third = client.get(f"/repos/{REPO}/pulls")
    assert (
        int(third.headers["x-ratelimit-remaining"])
        == int(first.headers["x-ratelimit-remaining"]) - 1
    )


def test_primary_rate_limit_answers_403_like_the_fixture(
    sandbox: Sandbox, client: httpx.Client
) -> None:
    sandbox.set_rate_limit("core", limit=5000, remaining=1, reset_in_s=600)
    last = client.get(f"/repos/{REPO}")
    assert last.status_code == 200 and last.headers["x-ratelimit-remaining"] == "0"
    refused = client.get(f"/repos/{REPO}")
    assert refused.status_code == 403
    assert refused.json()["message"].startswith("API Rate Limit Exceeded for ")
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert refused.headers["x-ratelimit-resource"] == "core"
    assert int(refused.headers["x-ratelimit-reset"]) >= int(time.time()) + 590
    gh = github.Github(auth=github.Auth.Token(TOKEN), base_url=sandbox.github_url, retry=None)
    with pytest.raises(github.RateLimitExceededException):
        gh.get_repo(REPO)


def test_fail_apply_stores_the_comment_then_answers_502(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    sandbox.fail("POST", r"/repos/[^/]+/[^/]+/issues/\d+/comments", status=502, apply=True)
    answer = client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "hello"})
    assert answer.status_code == 502
    assert [c["body"] for c in world.comments(REPO, 7430)] == ["hello"]
    assert world.comments(REPO, 7430)[0]["user"]["login"] == "ci-status-bot"
    assert sandbox.requests[-1].status == 502
    again = client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "second"})
    assert again.status_code == 201  # times=1


def test_fail_without_apply_changes_nothing(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    sandbox.fail("POST", r"/api/v3/repos/.*/comments", status=500, times=-1)
    for _ in range(2):
        assert (
            client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "x"}).status_code
            == 500
        )
    assert world.comments(REPO, 7430) == []


def test_comment_rules_match_github(world: World, client: httpx.Client) -> None:
    too_long = client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "x" * 65537})
    assert too_long.status_code == 422
    assert "too long" in too_long.json()["errors"][0]["message"]
    foreign = world.add_comment(REPO, 7430, author="mallory", body="<!-- marker -->")
    assert (
        client.patch(
            f"/repos/{REPO}/issues/comments/{foreign['id']}", json={"body": "y"}
        ).status_code
        == 403
    )
    mine = client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "mine"}).json()
    edited = client.patch(f"/repos/{REPO}/issues/comments/{mine['id']}", json={"body": "edited"})
    assert edited.status_code == 200 and edited.json()["body"] == "edited"
    listed = client.get(f"/repos/{REPO}/issues/7430/comments").json()
    assert [c["id"] for c in listed] == sorted(c["id"] for c in listed)
    assert client.delete(f"/repos/{REPO}/issues/comments/{mine['id']}").status_code == 204
    assert client.get(f"/repos/{REPO}/issues/comments/{mine['id']}").status_code == 404


def test_ci_altering_endpoints_are_answered_but_never_executed(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    run = world.add_check_run(REPO, SHA, name="tests", conclusion="failure")
    assert client.post(f"/repos/{REPO}/check-runs/{run['id']}/rerequest").status_code == 201
    assert (
        client.post(
            f"/repos/{REPO}/statuses/{SHA}", json={"state": "success", "context": "x"}
        ).status_code
        == 201
    )
    assert client.post(f"/repos/{REPO}/actions/runs/1/rerun").status_code == 201
    assert world.latest_statuses(REPO, SHA) == []
    assert world.latest_check_runs(REPO, SHA)[0].conclusion == "failure"
    assert [r.route for r in sandbox.requests] == [
        "ci.rerequest-check-run",
        "ci.create-status",
        "ci.rerun",
    ]
    assert sandbox.stats()["writes"] == 3


def test_app_tokens_act_as_the_bot_account(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    world.add_app(slug="ci-status-bot", app_id=1, installation_id=7, repos=[REPO])
    jwt = {"Authorization": "Bearer aaa.eyJpc3MiOiAxfQ.sig"}
    assert client.get("/app", headers=jwt).json()["slug"] == "ci-status-bot"
    assert client.get(f"/repos/{REPO}/installation", headers=jwt).json()["id"] == 7
    token = client.post("/app/installations/7/access_tokens", headers=jwt).json()
    assert token["token"].startswith("ghs_") and token["expires_at"].endswith("Z")
    as_app = {"Authorization": f"token {token['token']}"}
    posted = client.post(f"/repos/{REPO}/issues/7430/comments", json={"body": "hi"}, headers=as_app)
    assert posted.json()["user"]["login"] == "ci-status-bot[bot]"
    assert posted.json()["user"]["type"] == "Bot"
    assert client.get("/user", headers=as_app).status_code == 403  # as on GitHub
    viewer = client.post(
        sandbox.graphql_url, json={"query": "{ viewer { login } }"}, headers=as_app
    )
    assert viewer.json()["data"]["viewer"]["login"] == "ci-status-bot[bot]"


def test_pygithub_app_auth_gets_an_installation_token(world: World, sandbox: Sandbox) -> None:
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    world.add_repo(REPO)
    world.add_pull(REPO, 1, title="t", author="alice", head_sha=SHA)
    world.add_app(slug="ci-status-bot", app_id=1, installation_id=7, repos=[REPO])
    auth = github.Auth.AppAuth(1, pem)
    installation = github.GithubIntegration(auth=auth, base_url=sandbox.github_url)
    assert installation.get_repo_installation("octo", "omni").id == 7
    gh = github.Github(auth=auth.get_installation_auth(7), base_url=sandbox.github_url, **NO_PACING)
    comment = gh.get_repo(REPO).get_pull(1).create_issue_comment("hi")
    assert comment.user.login == "ci-status-bot[bot]"
    assert [c["body"] for c in world.comments(REPO, 1)] == ["hi"]


# -- GraphQL ---------------------------------------------------------------------------------


def test_graphql_rollup_is_validated_and_executed_over_the_world(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    world.add_check_run(REPO, SHA, name="DCO", app_slug="dco", title="DCO")
    world.add_check_run(REPO, SHA, name="tests", workflow="ci", conclusion="failure")
    world.add_check_run(
        REPO, SHA, name="tests", workflow="ci", conclusion="success", new_suite=True
    )
    world.add_status(REPO, SHA, context="docs/readthedocs.org:omni-docs", state="pending")
    world.set_required_checks(REPO, ["required/ci"])
    answer = gql(sandbox, client, ROLLUP_QUERY, owner="octo", name="omni")
    assert answer.status_code == 200 and "errors" not in answer.json()
    pull = answer.json()["data"]["repository"]["pullRequests"]["nodes"][0]
    contexts = pull["statusCheckRollup"]["contexts"]
    kinds = [n["__typename"] for n in contexts["nodes"]]
    # a required context that never reported is not among the contexts (GitHub's "Expected")
    assert kinds == ["CheckRun", "CheckRun", "CheckRun", "StatusContext"]
    assert contexts["checkRunCount"] == 3 and contexts["statusContextCount"] == 1
    tests = [n["conclusion"] for n in contexts["nodes"] if n.get("name") == "tests"]
    assert tests == ["FAILURE", "SUCCESS"]  # the superseded run of the other suite stays
    assert contexts["nodes"][0]["checkSuite"]["app"]["slug"] == "dco"
    assert contexts["nodes"][1]["checkSuite"]["workflowRun"]["workflow"]["name"] == "ci"
    assert "required/ci" not in {n.get("context") for n in contexts["nodes"]}
    assert pull["statusCheckRollup"]["state"] == "FAILURE"
    assert sandbox.requests[-1].graphql_operation == "query"


def test_graphql_invalid_query_is_rejected_with_http_200(
    sandbox: Sandbox, client: httpx.Client
) -> None:
    answer = gql(sandbox, client, '{ repository(owner: "octo", name: "omni") { noSuchField } }')
    assert answer.status_code == 200
    assert "noSuchField" in answer.json()["errors"][0]["message"]
    assert "data" not in answer.json()


def test_graphql_unknown_repository_is_null_with_not_found(
    sandbox: Sandbox, client: httpx.Client
) -> None:
    answer = gql(sandbox, client, '{ repository(owner: "octo", name: "nope") { id } }')
    assert answer.status_code == 200
    assert answer.json()["data"] == {"repository": None}
    error = answer.json()["errors"][0]
    assert error["type"] == "NOT_FOUND" and error["path"] == ["repository"]
    assert error["message"] == "Could not resolve to a Repository with the name 'octo/nope'."


def test_graphql_mutation_is_refused_and_recorded(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    mutation = 'mutation { addComment(input: {subjectId: "x", body: "hi"}) { clientMutationId } }'
    answer = gql(sandbox, client, mutation)
    assert answer.status_code == 200 and answer.json()["errors"]
    assert world.comments(REPO, 7430) == []
    assert sandbox.requests[-1].graphql_operation == "mutation"
    assert sandbox.stats()["writes"] == 1


def test_graphql_cost_follows_githubs_formula(sandbox: Sandbox, client: httpx.Client) -> None:
    # GitHub's documented example: 1 + 100 + 100*50 = 5,101 requests -> 51 points.
    example = """query { viewer { login repositories(first: 100) { edges { node { id
        issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } }
    } } } } }"""
    document = prepare(example)
    assert not isinstance(document, tuple)
    operation = operation_of(document, None)
    assert operation is not None
    cost = query_cost(document, operation, {})
    assert (cost.requests, cost.points, cost.nodes) == (5101, 51, 305100)
    # Two levels over HTTP: 1 + 100 (contexts) + 100 (labels) = 201 requests -> 2 points.
    two_levels = """{ rateLimit { cost used }
      repository(owner: "octo", name: "omni") { pullRequests(first: 100) { nodes {
        labels(first: 100) { nodes { name } }
        statusCheckRollup { contexts(first: 100) { totalCount } } } } } }"""
    answer = gql(sandbox, client, two_levels)
    assert answer.json()["data"]["rateLimit"]["cost"] == 2
    assert sandbox.requests[-1].graphql_cost == 2
    assert answer.headers["x-ratelimit-resource"] == "graphql"
    assert answer.headers["x-ratelimit-used"] == "2"
    small = gql(sandbox, client, "{ viewer { login } }")
    assert small.headers["x-ratelimit-used"] == "3"  # minimum 1 point


def test_graphql_requires_pagination_bounds(sandbox: Sandbox, client: httpx.Client) -> None:
    answer = gql(
        sandbox,
        client,
        '{ repository(owner: "octo", name: "omni") { pullRequests { totalCount } } }',
    )
    assert answer.json()["errors"][0]["type"] == "MISSING_PAGINATION_BOUNDARIES"
    answer = gql(
        sandbox,
        client,
        '{ repository(owner: "octo", name: "omni") { pullRequests(first: 101) { totalCount } } }',
    )
    assert answer.json()["errors"][0]["type"] == "EXCESSIVE_PAGINATION"


def test_graphql_through_pygithub(world: World, sandbox: Sandbox, client: httpx.Client) -> None:
    world.add_check_run(REPO, SHA, name="DCO", app_slug="dco")
    gh = github.Github(auth=github.Auth.Token(TOKEN), base_url=sandbox.github_url)
    _headers, data = gh.requester.graphql_query(ROLLUP_QUERY, {"owner": "octo", "name": "omni"})
    nodes = data["data"]["repository"]["pullRequests"]["nodes"]
    assert nodes[0]["statusCheckRollup"]["contexts"]["nodes"][0]["name"] == "DCO"


def test_graphql_answers_100_pulls_with_100_contexts(world: World, sandbox: Sandbox) -> None:
    # (its speed is the benchmark's to measure, not a timed test's)
    seed_scale(world, prs=100, checks=100, now=NOW)
    client = httpx.Client(headers={"Authorization": "token sandbox-token"}, timeout=30)
    query = ROLLUP_QUERY.replace("first: 50", "first: 100")
    gql(sandbox, client, "{ viewer { login } }")  # schema and caches warm
    answer = gql(sandbox, client, query, owner="octo", name="big")
    pulls = answer.json()["data"]["repository"]["pullRequests"]["nodes"]
    assert len(pulls) == 100
    assert sum(len(p["statusCheckRollup"]["contexts"]["nodes"]) for p in pulls) >= 100 * 100
    assert any(p["statusCheckRollup"]["contexts"]["pageInfo"]["hasNextPage"] for p in pulls)


# -- Read the Docs ---------------------------------------------------------------------------


def test_rtd_lists_builds_of_the_exact_commit_newest_first(world: World, sandbox: Sandbox) -> None:
    for i in range(3):
        world.add_rtd_build(
            "omni-docs", id=100 + i, commit=SHA, version="7430", state="finished",
            created=NOW + timedelta(minutes=i), finished=NOW + timedelta(minutes=i, seconds=60),
            duration=60,
        )  # fmt: skip
    world.add_rtd_build("omni-docs", id=200, commit="0" * 40, version="latest", created=NOW)
    rtd = httpx.Client(base_url=sandbox.rtd_url)
    prefix = rtd.get("/projects/omni-docs/builds/", params={"commit": SHA[:7]}).json()
    assert prefix["count"] == 0 and prefix["results"] == []
    page = rtd.get("/projects/omni-docs/builds/", params={"commit": SHA, "limit": 2}).json()
    assert page["count"] == 3 and [b["id"] for b in page["results"]] == [102, 101]
    assert page["next"].startswith(sandbox.rtd_url + "/projects/omni-docs/builds/?")
    rest = rtd.get(page["next"]).json()
    assert [b["id"] for b in rest["results"]] == [100] and rest["next"] is None
    assert rest["previous"] is not None
    assert rest["results"][0]["error"] == ""
    running = rtd.get("/projects/omni-docs/builds/", params={"commit": SHA, "running": "true"})
    assert running.json()["count"] == 0
    assert rtd.get("/projects/nope/builds/").json() == {"detail": "Not found."}
    assert rtd.get("/projects/omni-docs/builds/999/").status_code == 404


def test_rtd_build_trigger_is_answered_but_starts_nothing(world: World, sandbox: Sandbox) -> None:
    world.add_rtd_build("omni-docs", id=1, commit=SHA, version="7430", created=NOW)
    answer = httpx.post(f"{sandbox.rtd_url}/projects/omni-docs/versions/7430/builds/")
    assert answer.status_code == 202 and answer.json()["triggered"] is True
    assert list(world.rtd_projects["omni-docs"].builds) == [1]
    assert sandbox.requests[-1].service == "rtd" and sandbox.requests[-1].method == "POST"


def test_rtd_token_can_be_required(world: World, sandbox: Sandbox) -> None:
    world.add_rtd_project("omni-docs")
    world.rtd_require_token = True
    url = f"{sandbox.rtd_url}/projects/omni-docs/builds/"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Token abc"}).status_code == 200


# -- seeds and the serve command -------------------------------------------------------------


def test_seed_demo_holds_the_seed_case(world: World, sandbox: Sandbox) -> None:
    info = seed_demo(world, now=NOW)
    sha = info["pulls"][7430]["head_sha"]
    assert sha.startswith("eb46d06") and world.pull("octo/omni", 7430).draft
    rtd = httpx.get(f"{sandbox.rtd_url}/projects/omni-docs/builds/", params={"commit": sha}).json()
    assert rtd["count"] == 1
    build = rtd["results"][0]
    assert (build["id"], build["state"]["code"], build["success"], build["duration"]) == (
        34894885, "cancelled", False, 0,
    )  # fmt: skip
    assert build["finished"] is None and build["version"] == "7430"
    notes = httpx.get(f"{sandbox.rtd_url}/projects/omni-docs/builds/34894885/notifications/").json()
    assert notes["results"][0]["message"]["id"] == "build:user:cancelled"
    status = world.latest_statuses("octo/omni", sha)[0]
    assert (status.state, status.created_at) == ("pending", NOW.replace(hour=9, minute=12))
    passing = sorted(r.name for r in world.latest_check_runs("octo/omni", sha))
    assert passing == ["DCO", "build-wheel (3.11)", "build-wheel (3.12)", "pre-commit"]
    dco = world.latest_check_runs("octo/omni", info["pulls"][7433]["head_sha"])[0]
    assert dco.conclusion == "action_required" and "Commit sha:" in (dco.summary or "")


def test_change_heads_changes_the_asked_fraction(world: World) -> None:
    seed_scale(world, prs=40, checks=10, now=NOW)
    assert (
        max(
            len(world.latest_check_runs("octo/big", p.head_sha))
            for p in world.repo("octo/big").pulls.values()
        )
        > 100
    )
    changed = change_heads(world, 0.1, rng_seed=3)
    assert len(changed) == 4
    for change in changed:
        runs = world.latest_check_runs(change["repo"], change["head_sha"])
        assert any(r.name == change["context"] and r.conclusion == change["state"] for r in runs)


def test_serve_prints_one_line_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot_sandbox",
            "serve",
            "--scenario",
            "scale",
            "--prs",
            "20",
            "--checks",
            "5",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
        assert line["repo"] == "octo/big" and line["token"] == "sandbox-token"
        base = line["github_url"].removesuffix("/api/v3")
        client = httpx.Client(headers={"Authorization": f"token {line['token']}"})
        assert client.get(line["github_url"] + "/repos/octo/big/pulls").status_code == 200
        changed = httpx.post(base + "/_sandbox/change", json={"fraction": 0.1, "seed": 1}).json()
        assert len(changed["changed"]) == 2
        stats = httpx.get(base + "/_sandbox/stats").json()
        assert stats["by_route"] == {"github GET pulls.list": 1}
        raised = {"resource": "core", "limit": 100000, "remaining": 100000}
        limits = httpx.post(base + "/_sandbox/rate-limit", json=raised).json()
        assert limits["limit"] == 100000 and limits["remaining"] == 100000
        answer = client.get(line["github_url"] + "/repos/octo/big/pulls")
        assert answer.headers["x-ratelimit-limit"] == "100000"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_check_run_annotations_over_graphql_nodes_and_rest_as_github_shapes_them(
    world: World, sandbox: Sandbox, client: httpx.Client
) -> None:
    given = [
        {"path": "a.py", "start_line": 3, "end_line": 4, "annotation_level": "warning",
         "message": "w"},
        {"path": ".github", "start_line": 9, "message": "Process completed with exit code 1."},
    ]  # fmt: skip
    run = world.add_check_run(REPO, SHA, name="t", conclusion="failure", annotations=given)
    query = (
        "query($ids: [ID!]!) { nodes(ids: $ids) { __typename ... on CheckRun { databaseId"
        " annotations(first: 50) { totalCount nodes { annotationLevel path message"
        " location { start { line } end { line } } } } } } }"
    )
    answer = gql(sandbox, client, query, ids=[run["node_id"], "MDg6Q2hlY2tSdW4x"]).json()
    node, missing = answer["data"]["nodes"]
    assert missing is None and answer["errors"][0]["type"] == "NOT_FOUND"
    assert node["databaseId"] == run["id"] and node["annotations"]["totalCount"] == 2
    assert node["annotations"]["nodes"] == [
        {"annotationLevel": "WARNING", "path": "a.py", "message": "w",
         "location": {"start": {"line": 3}, "end": {"line": 4}}},
        {"annotationLevel": "FAILURE", "path": ".github",
         "message": "Process completed with exit code 1.",
         "location": {"start": {"line": 9}, "end": {"line": 9}}},
    ]  # fmt: skip
    rest = client.get(f"/repos/{REPO}/check-runs/{run['id']}/annotations").json()
    assert [a["annotation_level"] for a in rest] == ["warning", "failure"]
    assert rest[1]["start_column"] is None and rest[1]["blob_href"].endswith("/.github")
    assert run["output"]["annotations_count"] == 2
    with pytest.raises(ValueError):
        world.add_check_run(REPO, SHA, name="u", annotations=[{**given[0], "annotation_level": 1}])
