"""The allowlist: what the bot may send to GitHub and Read the Docs, and what it refuses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bot.core.model import MARKER
from bot.core.remedies import READTHEDOCS
from bot.guard import Allowance, Guard, RefusedRequest
from bot.sources.readthedocs.provider import LABEL as RTD_LABEL
from bot.sources.readthedocs.provider import PATHS as RTD_PATHS


def rtd(url: str) -> tuple[Allowance, ...]:
    """Read the Docs' allowance (what its kind declares) for one API root."""
    return (Allowance.of(READTHEDOCS, RTD_LABEL, (url,), RTD_PATHS),)


DOTCOM = Guard.for_urls("https://api.github.com", rtd("https://app.readthedocs.org/api/v3"))
GHE = Guard.for_urls("https://ghe.example/api/v3", rtd("http://127.0.0.1:1/rtd/api/v3"))


def gql(query: str) -> str:
    return json.dumps({"query": query, "variables": {}})


ALLOWED = [
    (DOTCOM, "GET", "https://api.github.com/user", None),
    (DOTCOM, "GET", "https://api.github.com/repos/o/r/issues/7/comments?per_page=100", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/issues/7/comments", None),
    (DOTCOM, "PATCH", "https://api.github.com/repos/o/r/issues/comments/99", None),
    (DOTCOM, "GET", "https://api.github.com/repositories/3544490/issues/7/comments?page=2", None),
    (DOTCOM, "POST", "https://api.github.com/app/installations/7/access_tokens", None),
    (DOTCOM, "POST", "https://api.github.com/graphql", gql("query { viewer { login } }")),
    (GHE, "POST", "https://ghe.example/api/graphql", gql("{ viewer { login } }").encode()),
    # the word as a field's name or in a string: parsed, and only queries
    (
        DOTCOM,
        "POST",
        "https://api.github.com/graphql",
        gql('query { subscription(n: "mutation") }'),
    ),
    (GHE, "GET", "https://ghe.example/api/v3/repos/o/r/commits/abc/check-runs", None),
]

REFUSED = [
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/check-runs/4/rerequest", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/check-suites/5/rerequest", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/actions/runs/6/rerun", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/actions/runs/6/rerun-failed-jobs", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/actions/jobs/6/rerun", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/actions/runs/6/cancel", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/actions/runs/6/approve", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/dispatches", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/statuses/abc", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/check-runs", None),
    (DOTCOM, "PATCH", "https://api.github.com/repos/o/r/check-runs/4", None),
    (DOTCOM, "DELETE", "https://api.github.com/repos/o/r/issues/comments/99", None),
    (DOTCOM, "POST", "https://api.github.com/repos/o/r/pulls/7/requested_reviewers", None),
    (DOTCOM, "PUT", "https://api.github.com/repos/o/r/pulls/7/merge", None),
    (
        DOTCOM,
        "POST",
        "https://api.github.com/graphql",
        gql("mutation { rerequestCheckSuite(input: {}) { clientMutationId } }"),
    ),
    (DOTCOM, "POST", "https://api.github.com/graphql", gql("query { a } mutation { b }")),
    (DOTCOM, "POST", "https://api.github.com/graphql", gql("{ a }\nsubscription { b }")),
    (DOTCOM, "POST", "https://api.github.com/graphql", "not json"),
    (DOTCOM, "GET", "https://api.github.com/graphql", None),
]


@pytest.mark.parametrize(("guard", "method", "url", "body"), ALLOWED)
def test_allowed_github_requests_pass(guard: Guard, method: str, url: str, body: object) -> None:
    guard.check_github(method, url, body)


@pytest.mark.parametrize(("guard", "method", "url", "body"), REFUSED)
def test_requests_that_alter_ci_are_refused(
    guard: Guard, method: str, url: str, body: object
) -> None:
    with pytest.raises(RefusedRequest):
        guard.check_github(method, url, body)


@pytest.mark.parametrize(
    ("method", "url", "ok"),
    [
        ("GET", "https://app.readthedocs.org/api/v3/projects/p/builds/", True),
        ("GET", "https://app.readthedocs.org/api/v3/projects/p/builds/12/", True),
        ("GET", "https://app.readthedocs.org/api/v3/projects/p/builds/12/notifications/", True),
        ("POST", "https://app.readthedocs.org/api/v3/projects/p/versions/7/builds/", False),
        ("POST", "https://app.readthedocs.org/api/v3/projects/p/builds/", False),
        ("GET", "https://app.readthedocs.org/api/v3/projects/p/versions/", False),
        ("PATCH", "https://app.readthedocs.org/api/v3/projects/p/builds/12/", False),
    ],
)
def test_read_the_docs_is_get_only(method: str, url: str, ok: bool) -> None:
    if ok:
        DOTCOM.check_source(READTHEDOCS, method, url)
    else:
        with pytest.raises(RefusedRequest):
            DOTCOM.check_source(READTHEDOCS, method, url)


@pytest.mark.parametrize(
    ("guard", "method", "url"),
    [
        (DOTCOM, "GET", "https://evil.example/repos/o/r/issues/7/comments"),
        (DOTCOM, "GET", "http://api.github.com/repos/o/r/issues/7/comments"),
        (DOTCOM, "GET", "https://api.github.com:8443/repos/o/r/issues/7/comments"),
        (GHE, "GET", "https://ghe.example.evil/api/v3/repos/o/r/commits/abc/check-runs"),
        (GHE, "POST", "https://api.github.com/api/graphql"),
    ],
)
def test_github_requests_to_another_host_are_refused(guard: Guard, method: str, url: str) -> None:
    with pytest.raises(RefusedRequest, match="host"):
        guard.check_github(method, url, gql("{ viewer { login } }"))


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/api/v3/projects/p/builds/",
        "http://app.readthedocs.org/api/v3/projects/p/builds/",
        "https://app.readthedocs.org:444/api/v3/projects/p/builds/",
        "https://app.readthedocs.org.evil/api/v3/projects/p/builds/",
    ],
)
def test_read_the_docs_requests_to_another_host_are_refused(url: str) -> None:
    with pytest.raises(RefusedRequest, match="host"):
        DOTCOM.check_source(READTHEDOCS, "GET", url)


def test_default_ports_are_the_same_origin() -> None:
    DOTCOM.check_github("GET", "https://api.github.com:443/user")
    DOTCOM.check_source(
        READTHEDOCS, "GET", "https://app.readthedocs.org:443/api/v3/projects/p/builds/"
    )


def test_the_one_delete_is_of_an_admitted_comment_id_and_only_once() -> None:
    """Never two comments (issue 24): the allowlist admits DELETE of an issue comment only for
    an id the bot admitted just before (its own later comment), once; nothing else."""
    from bot.guard import admit_delete

    url = "https://api.github.com:443/repos/o/r/issues/comments/{}"
    with pytest.raises(RefusedRequest):
        DOTCOM.check_github("DELETE", url.format(101))
    admit_delete("/repos/o/r/issues/comments/101")
    with pytest.raises(RefusedRequest):  # another id is still refused
        DOTCOM.check_github("DELETE", url.format(102))
    DOTCOM.check_github("DELETE", url.format(101))
    with pytest.raises(RefusedRequest):  # admitted once
        DOTCOM.check_github("DELETE", url.format(101))
    for path in ("/repos/o/r/issues/7/comments", "/repos/o/r", "/repos/o/r/git/refs/heads/x"):
        with pytest.raises(RefusedRequest):
            admit_delete(path)


def test_the_client_refuses_to_delete_a_comment_that_is_not_the_bots_own() -> None:
    from github import Github

    from bot.github.client import GitHubApi
    from bot.github.parse import Comment

    api = GitHubApi(Github(base_url="http://127.0.0.1:9/api/v3"))  # nothing listens: refused first
    for comment in (
        Comment(1, "mallory", f"{MARKER}\nall green"),  # marked, another login
        Comment(2, "ci-status-bot", "no marker"),  # the bot's login, no marker
    ):
        with pytest.raises(RefusedRequest):
            api.delete_own_comment("o/r", comment, login="ci-status-bot")


def test_a_query_that_names_no_other_operation_type_is_checked_without_graphql_core() -> None:
    """The bot's own texts name neither word: its process never imports graphql-core for them
    (~0.1 s of every fresh process's CPU)."""
    from bot.github import query

    texts = [v for k, v in vars(query).items() if k.isupper() and isinstance(v, str)]
    assert texts and not [t for t in texts if "mutation" in t or "subscription" in t]
    probe = (
        "import json, sys\nfrom bot.guard import Guard\n"
        "guard = Guard.for_urls('https://api.github.com', ())\n"
        f"for text in {texts!r}:\n"
        "    body = json.dumps({'query': text})\n"
        "    guard.check_github('POST', 'https://api.github.com/graphql', body)\n"
        "assert 'graphql' not in sys.modules, 'graphql-core was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
