"""Issue 7, GitHub side: each defect reproduced end to end through the CLI against the sandbox.

Events (1), `required` (5), Bot logins (6), one odd value never fails a repository (7),
silent truncation (8). Odd values GitHub can send but the sandbox's World cannot hold (a
context type newer than the bot, a malformed time, a null head) are made by replaying the
bot's own recorded query to the sandbox, changing one value of the real answer, and serving
that answer once (the sandbox's fault rule with status 200).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from support import REPO, TESTS, TOKEN, Env, bot_comments, repo_world

from bot.cli import main

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)


def sha(n: int) -> str:
    return f"{n:07x}" + "a" * 33


world = pytest.fixture(repo_world, name="world")


def pull(env: Env, number: int, *, author: str = "alice", **kw: Any) -> str:
    head = sha(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author=author, head_sha=head, **kw)
    return head


def green(env: Env, head: str, name: str = "lint", **kw: Any) -> None:
    env.world.add_check_run(
        REPO, head, name=name, workflow=kw.pop("workflow", "ci"),
        started_at=HOUR_AGO, completed_at=HOUR_AGO, **kw,
    )  # fmt: skip


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int, **policy: Any) -> Any:
    code = main(
        ["show", f"{REPO}#{number}", "--format", "json", "--config", str(env.configure(**policy))],
        sleep=env.waits,
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@dataclass
class Once:
    code: int
    out: str
    err: str


def once(env: Env, capsys: pytest.CaptureFixture[str], *args: str, **policy: Any) -> Once:
    code = main(["once", "--config", str(env.configure(**policy)), *args], sleep=env.waits)
    out = capsys.readouterr()
    return Once(code, out.out, out.err)


def graphql_bodies(env: Env) -> list[dict[str, Any]]:
    return [
        json.loads(r.body)
        for r in env.sandbox.requests
        if r.service == "github" and r.path.endswith("graphql")
    ]


def replay(env: Env, body: dict[str, Any]) -> dict[str, Any]:
    """The sandbox's real answer to one of the bot's recorded GraphQL requests."""
    answer = httpx.post(
        env.sandbox.graphql_url, json=body, headers={"Authorization": f"token {TOKEN}"}
    )
    data: dict[str, Any] = answer.json()
    return data


def serve_changed(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[dict[str, Any]], None],
    *,
    request: int = 0,
) -> None:
    """Record the bot's queries (a dry run), then serve request `request` changed, once."""
    once(env, capsys, "--dry-run")
    answers = [replay(env, body) for body in graphql_bodies(env)[: request + 1]]
    change(answers[request])
    for answer in answers:
        env.sandbox.fail("POST", r"/graphql", status=200, body=answer, times=1)
    env.sandbox.clear_requests()


def nodes(answer: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = answer["data"]["repository"]["pullRequests"]["nodes"]
    return found


def by_number(answer: dict[str, Any], number: int) -> dict[str, Any]:
    return next(n for n in nodes(answer) if n["number"] == number)


# -- 1. runs of different events are different signals --------------------------------------


def test_a_failed_push_run_is_not_merged_into_a_passing_pull_request_run(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 1)
    env.world.add_check_run(
        REPO, head, name="tests", workflow="ci", event="push", conclusion="failure",
        started_at=HOUR_AGO, completed_at=HOUR_AGO,
    )  # fmt: skip
    env.world.add_check_run(
        REPO, head, name="tests", workflow="ci", event="pull_request", conclusion="success",
        started_at=NOW - timedelta(minutes=5), completed_at=NOW - timedelta(minutes=5),
    )  # fmt: skip
    report = show(env, capsys, 1)
    tests = sorted(s["github_state"] for s in report["signals"] if s["name"] == "tests")
    assert tests == ["failure", "success"]
    assert report["verdict"] == "failing"


def test_a_rerun_of_the_same_event_still_supersedes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 1)
    env.world.add_check_run(
        REPO, head, name="tests", workflow="ci", event="push", conclusion="failure",
        started_at=HOUR_AGO, completed_at=HOUR_AGO,
    )  # fmt: skip
    env.world.add_check_run(
        REPO, head, name="tests", workflow="ci", event="push", conclusion="success",
        started_at=NOW, completed_at=NOW, new_suite=True,
    )  # fmt: skip
    report = show(env, capsys, 1)
    assert [s["github_state"] for s in report["signals"] if s["name"] == "tests"] == ["success"]
    assert report["verdict"] == "passing"


def test_the_sandbox_serves_each_runs_event(env: Env) -> None:
    head = pull(env, 1)
    green(env, head, "tests", event="push")
    green(env, head, "tests", event="pull_request")
    query = """query($o: String!, $n: String!) { repository(owner: $o, name: $n) {
      pullRequest(number: 1) { statusCheckRollup { contexts(first: 10) { nodes {
        ... on CheckRun { name checkSuite { workflowRun { event databaseId } } } } } } } } }"""
    answer = replay(env, {"query": query, "variables": {"o": "octo", "n": "omni"}})
    runs = answer["data"]["repository"]["pullRequest"]["statusCheckRollup"]["contexts"]["nodes"]
    events = [r["checkSuite"]["workflowRun"]["event"] for r in runs]
    assert events == ["push", "pull_request"]
    run_id = runs[0]["checkSuite"]["workflowRun"]["databaseId"]
    rest = httpx.get(
        f"{env.sandbox.github_url}/repos/{REPO}/actions/runs/{run_id}",
        headers={"Authorization": f"token {TOKEN}"},
    ).json()
    assert rest["event"] == "push"
    env.sandbox.clear_requests()  # the test's own reads, not the bot's


# -- 5. required, per pull request, learned once and cached ---------------------------------


def protected(env: Env) -> tuple[str, str]:
    """#1 into main (where `tests` is required) and #2 into a release branch (nothing is)."""
    env.world.set_required_checks(REPO, ["tests", "ci/legacy"], branch="main")
    one = pull(env, 1)
    two = pull(env, 2, base_ref="release-1.x")
    for head in (one, two):
        green(env, head, "tests")
        green(env, head, "lint")
        env.world.add_status(REPO, head, context="ci/legacy", state="success", created_at=NOW)
    return one, two


def test_show_reports_required_true_and_false_as_github_says(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    protected(env)
    one = {s["name"]: s["required"] for s in show(env, capsys, 1)["signals"]}
    assert one == {"tests": True, "lint": False, "ci/legacy": True}
    two = {s["name"]: s["required"] for s in show(env, capsys, 2)["signals"]}
    assert two == {"tests": False, "lint": False, "ci/legacy": False}


def test_the_sandbox_rejects_is_required_without_a_pull_request(env: Env) -> None:
    head = pull(env, 1)
    green(env, head, "tests")
    query = """query { repository(owner: "octo", name: "omni") {
      pullRequests(first: 5) { nodes { statusCheckRollup { contexts(first: 5) { nodes {
        ... on CheckRun { name isRequired } } } } } } } }"""
    answer = replay(env, {"query": query})
    assert answer["errors"] and "isRequired" in json.dumps(answer["errors"])
    assert answer["errors"][0]["path"][:3] == ["repository", "pullRequests", "nodes"]


def _cache_rows(env: Env) -> list[tuple[Any, ...]]:
    with sqlite3.connect(env.tmp / "state.sqlite3") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        table = next(t for t in tables if "required" in t)
        return db.execute(f"SELECT * FROM {table}").fetchall()


def test_a_cycle_learns_required_once_and_a_warm_cycle_asks_nothing_more(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    env.world.set_required_checks(REPO, ["tests"], branch="main")
    for number in range(1, 8):
        head = pull(env, number)
        green(env, head, "tests", conclusion="failure")
        green(env, head, "lint")
    cold = once(env, capsys)
    assert cold.code == 0, cold.err
    learned = len(graphql_bodies(env))
    body = bot_comments(env.world, 1)[0]["body"]
    assert "required" in body.split("tests", 1)[1].splitlines()[0]
    assert len(_cache_rows(env)) == 2  # (main, tests) and (main, lint)
    env.sandbox.clear_requests()
    warm = once(env, capsys)
    assert warm.code == 0, warm.err
    queries = [b["query"] for b in graphql_bodies(env)]
    assert not any("isRequired" in q for q in queries)
    assert len(queries) < learned  # the cold cycle asked once more, to learn
    # a new base branch is learned for its own pairs only
    head = pull(env, 9, base_ref="dev")
    green(env, head, "tests", conclusion="failure")
    env.sandbox.clear_requests()
    assert once(env, capsys).code == 0
    asked = [b for b in graphql_bodies(env) if "isRequired" in b["query"]]
    assert len(asked) == 1 and asked[0]["variables"]["n0"] == 9
    assert "required" not in bot_comments(env.world, 9)[0]["body"].split("tests", 1)[1][:80]


def test_the_read_path_fills_required_from_the_cache(env: Env) -> None:
    from bot.app import build_clients
    from bot.settings import load_settings
    from bot.state.store import Store

    protected(env)
    settings = load_settings(env.configure())
    clients = build_clients(settings, settings.repos)
    with Store.open(env.tmp / "state.sqlite3") as store:
        for _ in range(2):  # cold (learns), then warm (from the cache)
            snaps = {s.number: s for s in clients.github.open_pulls(REPO, now=NOW, required=store)}
            one = {s.name: s.required for s in snaps[1].signals}
            two = {s.name: s.required for s in snaps[2].signals}
            assert one == {"tests": True, "lint": False, "ci/legacy": True}
            assert two == {"tests": False, "lint": False, "ci/legacy": False}
    clients.close()


# -- 6. Bot logins: one normal form (REST's) ----------------------------------------------


def test_skip_authors_matches_a_bot_in_rest_form(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    env.world.add_app("dependabot", 29110, 9, [REPO])
    green(env, pull(env, 1, author="dependabot[bot]"))
    green(env, pull(env, 2))
    result = once(env, capsys, skip_authors=["dependabot[bot]"])
    assert result.code == 0, result.err
    assert "1 skipped by policy" in result.out
    assert bot_comments(env.world, 1) == [] and len(bot_comments(env.world, 2)) == 1


def test_the_sandbox_gives_both_bot_login_shapes(env: Env) -> None:
    env.world.add_app("dependabot", 29110, 9, [REPO])
    pull(env, 1, author="dependabot[bot]")
    query = 'query { repository(owner: "octo", name: "omni") { pullRequest(number: 1) {'
    query += " author { __typename login } } } }"
    author = replay(env, {"query": query})["data"]["repository"]["pullRequest"]["author"]
    assert author == {"__typename": "Bot", "login": "dependabot"}
    rest = httpx.get(
        f"{env.sandbox.github_url}/repos/{REPO}/pulls/1",
        headers={"Authorization": f"token {TOKEN}"},
    ).json()
    assert (rest["user"]["login"], rest["user"]["type"]) == ("dependabot[bot]", "Bot")
    env.sandbox.clear_requests()


# -- 7. one odd value never fails a repository --------------------------------------------


def three_pulls(env: Env) -> None:
    for number in (1, 2, 3):
        green(env, pull(env, number))


def test_an_unknown_context_type_is_an_unknown_signal(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    three_pulls(env)

    def change(answer: dict[str, Any]) -> None:
        contexts = by_number(answer, 2)["statusCheckRollup"]["contexts"]["nodes"]
        contexts.append({"__typename": "DeploymentGate"})

    serve_changed(env, capsys, change)
    result = once(env, capsys)
    assert result.code == 0, result.err
    assert "3 pull requests seen" in result.out
    body = bot_comments(env.world, 2)[0]["body"]
    assert headline(body).startswith("### ⚪ Incomplete"), headline(body)
    assert "unknown" in body.lower()


@pytest.mark.parametrize("field", ["startedAt", "completedAt"])
def test_an_unparseable_time_is_no_time_not_a_crash(
    env: Env, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    three_pulls(env)

    def change(answer: dict[str, Any]) -> None:
        by_number(answer, 2)["statusCheckRollup"]["contexts"]["nodes"][0][field] = "yesterday"

    serve_changed(env, capsys, change)
    result = once(env, capsys)
    assert result.code == 0, result.err
    assert all(len(bot_comments(env.world, n)) == 1 for n in (1, 2, 3))


def test_a_null_head_fails_that_pull_request_only(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    three_pulls(env)

    def change(answer: dict[str, Any]) -> None:
        by_number(answer, 2)["headRefOid"] = None

    serve_changed(env, capsys, change)
    result = once(env, capsys)
    assert result.code == 1
    assert f"{REPO}#2" in result.out and f"{REPO}#2" in result.err
    assert f"{REPO}:" not in result.err  # the repository as a whole did not fail
    assert len(bot_comments(env.world, 1)) == 1 and len(bot_comments(env.world, 3)) == 1
    assert bot_comments(env.world, 2) == []


def test_an_error_on_one_pull_requests_path_fails_that_pull_request_only(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    three_pulls(env)

    def change(answer: dict[str, Any]) -> None:
        index = next(i for i, n in enumerate(nodes(answer)) if n["number"] == 2)
        nodes(answer)[index]["statusCheckRollup"] = None
        answer["errors"] = [{
            "type": "SERVICE_UNAVAILABLE",
            "path": ["repository", "pullRequests", "nodes", index, "statusCheckRollup"],
            "message": "Something went wrong while executing your query.",
        }]  # fmt: skip

    serve_changed(env, capsys, change)
    result = once(env, capsys)
    assert result.code == 1
    assert f"{REPO}#2" in result.err and f"{REPO}:" not in result.err
    assert len(bot_comments(env.world, 1)) == 1 and len(bot_comments(env.world, 3)) == 1
    assert bot_comments(env.world, 2) == []


# -- 8. no silent truncation ------------------------------------------------------------


def test_a_skip_label_past_the_twentieth_is_read(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = [f"area/{i:02d}" for i in range(24)] + ["do-not-report"]
    green(env, pull(env, 1, labels=labels))
    green(env, pull(env, 2))
    result = once(env, capsys, skip_labels=["do-not-report"])
    assert result.code == 0, result.err
    assert "1 skipped by policy" in result.out
    assert bot_comments(env.world, 1) == []


def headline(body: str) -> str:
    """The comment's first visible line (after the marker and the hidden facts stamp)."""
    line = next(line for line in body.splitlines() if line.startswith("### "))
    return line


def test_a_short_contexts_page_is_truncated_never_passing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # The follow-up page answers with no nodes and no next page: fewer contexts were read than
    # GitHub counts (totalCount), so the read is incomplete, never "passing".
    head = pull(env, 1)
    for i in range(105):
        green(env, head, f"job {i:03d}")

    def change(answer: dict[str, Any]) -> None:
        repository = answer["data"]["repository"]
        for alias in [k for k in repository if k.startswith("p")]:
            contexts = repository[alias]["statusCheckRollup"]["contexts"]
            contexts["nodes"] = []
            contexts["pageInfo"] = {"hasNextPage": False, "endCursor": None}

    serve_changed(env, capsys, change, request=1)
    result = once(env, capsys)
    assert result.code == 0, result.err
    body = bot_comments(env.world, 1)[0]["body"]
    assert headline(body).startswith("### ⚪ Incomplete"), headline(body)
    assert "not read" in body


def test_a_missing_contexts_page_is_truncated_never_passing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 1)
    for i in range(130):
        green(env, head, f"job {i:03d}")

    def change(answer: dict[str, Any]) -> None:
        repository = answer["data"]["repository"]
        for alias in [k for k in repository if k.startswith("p")]:
            repository[alias] = None

    serve_changed(env, capsys, change, request=1)
    result = once(env, capsys)
    assert result.code == 0, result.err
    body = bot_comments(env.world, 1)[0]["body"]
    assert headline(body).startswith("### ⚪ Incomplete"), headline(body)
    assert "not read" in body  # the report says the read was incomplete


def test_the_required_cache_expires() -> None:
    from bot.state.store import REQUIRED_TTL, Store

    with Store.open(":memory:") as store:
        learned = {("main", "tests"): True, ("main", "lint"): False, ("main", "docs"): None}
        store.remember_required(REPO, learned, now=NOW)
        assert store.required_known(REPO, ["main", "dev"], now=NOW) == learned
        later = NOW + REQUIRED_TTL + timedelta(seconds=1)
        assert store.required_known(REPO, ["main"], now=later) == {}
        assert store.required_known(REPO, ["dev"], now=NOW) == {}


def test_a_failed_relearn_keeps_the_last_answers_and_edits_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    env.world.set_required_checks(REPO, ["tests"], branch="main")
    for number in (1, 2):
        green(env, pull(env, number), "tests", conclusion="failure")
    assert once(env, capsys).code == 0
    bodies = [bot_comments(env.world, n)[0]["body"] for n in (1, 2)]
    with sqlite3.connect(env.tmp / "state.sqlite3") as db:  # a day later: the cache expired
        db.execute("UPDATE required_checks SET learned_at = '2000-01-01T00:00:00.000000Z'")
    env.sandbox.clear_requests()
    page = replay(env, graphql_bodies_of_kind(env, capsys, "PullPage"))
    env.sandbox.fail("POST", r"/graphql", status=200, body=page, times=1)
    env.sandbox.fail("POST", r"/graphql", status=502, times=3)  # the relearn fails
    result = once(env, capsys)
    assert result.code == 0, result.err
    assert [bot_comments(env.world, n)[0]["body"] for n in (1, 2)] == bodies
    assert "PATCH" not in {r.method for r in env.sandbox.requests}


def graphql_bodies_of_kind(
    env: Env, capsys: pytest.CaptureFixture[str], operation: str
) -> dict[str, Any]:
    """The bot's request of one GraphQL operation, recorded by a dry run."""
    once(env, capsys, "--dry-run")
    found = next(b for b in graphql_bodies(env) if f"query {operation}" in b["query"])
    env.sandbox.clear_requests()
    return found


DATA = TESTS / "data" / "github_truth"


def test_one_login_form_for_real_rest_and_graphql_bot_authors() -> None:
    from bot.github.parse import normal_login, parse_graphql_comment, parse_rest_comment

    real = json.loads((DATA / "rest_comment_by_bot.json").read_text())["comment"]
    assert (real["user"]["login"], real["user"]["type"]) == ("stale[bot]", "Bot")
    assert parse_rest_comment(real).author == "stale[bot]"
    graphql = {"databaseId": real["id"], "body": real["body"],
               "author": {"__typename": "Bot", "login": "stale"}}  # fmt: skip
    assert parse_graphql_comment(graphql, real["node_id"]).author == "stale[bot]"
    assert normal_login("alice", "User") == "alice"
    assert normal_login("dependabot", "Bot") == normal_login("dependabot[bot]", "Bot")


def test_signal_key_names_the_event_and_stays_stable_without_one() -> None:
    from bot.core.model import Kind, Signal
    from bot.core.reconcile import dedupe

    plain = Signal(name="DCO", kind=Kind.CHECK_RUN, github_state="success", app="dco")
    assert plain.key == Signal(name="DCO", kind=Kind.CHECK_RUN, github_state="failure",
                               app="dco").key  # fmt: skip  # the state is not part of it
    assert plain.key != plain._replace(app="").key  # no app is not an empty app
    push = Signal(
        name="tests", kind=Kind.CHECK_RUN, github_state="failure", app="github-actions",
        workflow="ci", event="push", started_at=HOUR_AGO,
    )  # fmt: skip
    pr = push._replace(event="pull_request", github_state="success", started_at=NOW)
    assert push.key != pr.key and '"push"' in push.key
    assert {s.event for s in dedupe([push, pr])} == {"push", "pull_request"}
    newer = push._replace(github_state="success", started_at=NOW)
    assert dedupe([push, newer]) == (newer,)


def test_skip_labels_match_as_github_names_labels_ignoring_case() -> None:
    from bot.core.model import PullSnapshot
    from bot.cycle.gather import selected
    from bot.settings import PolicySettings

    pull = PullSnapshot(repo="o/r", number=1, title="t", author="a", draft=False,
                        head_sha="0" * 40, url="u", labels=("WIP",))  # fmt: skip
    assert not selected(pull, PolicySettings(skip_labels=["wip"]))
    assert selected(pull, PolicySettings(skip_labels=["blocked"]))


def test_a_pull_request_found_without_our_comment_is_not_listed_again_while_it_waits(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # A cold start where the write budget allows one create an hour: the first cycle lists the
    # three pull requests' comments once; the next cycles list none while the creates wait
    # (listing them again every cycle would spend GitHub's REST budget on a long cold start).
    for number in (1, 2, 3):
        green(env, pull(env, number))

    def listings() -> int:  # over REST one pull request a request; over GraphQL 50 a query
        rest = sum(1 for r in env.sandbox.requests if r.method == "GET" and "/comments" in r.path)
        return rest + sum(1 for r in env.sandbox.requests if b"PullComments" in r.body)

    first = once(env, capsys, max_writes_per_hour=1)
    assert first.code == 0, first.err
    assert "created 1" in first.out and "deferred 2" in first.out
    assert listings() == 1  # the three pull requests' comments in one query
    env.sandbox.clear_requests()
    second = once(env, capsys, max_writes_per_hour=1)
    assert second.code == 0, second.err
    assert "created 0" in second.out and listings() == 0
    assert sum(len(bot_comments(env.world, n)) for n in (1, 2, 3)) == 1
