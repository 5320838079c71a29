"""`check-config` asks the services (reads only), unless --offline: the real CLI, end to end."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support import LOGIN, REPO, RTD, TOKEN, cli, outside_allowlist, seed_case

from bot_sandbox import Sandbox, World

RTD_TOKEN = "rtd-token-that-read-the-docs-knows"
BAD = "this-value-must-never-be-printed"
WRITES = {"POST", "PATCH", "PUT", "DELETE"}


@pytest.fixture
def env() -> Iterator[tuple[World, Sandbox]]:
    """The seed case; Read the Docs knows one token."""
    world = World()
    seed_case(world, now=datetime.now(UTC))
    world.add_rtd_token(RTD_TOKEN)
    with Sandbox(world) as sandbox:
        yield world, sandbox
        assert outside_allowlist(sandbox) == []
        assert not [
            r for r in sandbox.requests if r.method in WRITES and r.graphql_operation is None
        ]


def config(
    tmp: Path,
    sandbox: Sandbox,
    *,
    github: list[str],
    repos: tuple[str, ...] = (REPO,),
    rtd_token: str = "",
    business_token: str = "",
    rtd_projects: tuple[str, ...] = (),
    codecov_token: str = "",
) -> str:
    """A configuration file pointing at the sandbox."""
    lines = [
        "[github]",
        f'api_url = "{sandbox.github_url}"',
        *github,
        "[readthedocs]",
        f'api_url = "{sandbox.rtd_url}"',
        f'business_api_url = "{sandbox.rtd_url}"',
        f'token = "{rtd_token}"',
        f'business_token = "{business_token}"',
        "[codecov]",
        f'api_url = "{sandbox.codecov_url}"',
        f'token = "{codecov_token}"',
        "[azure_pipelines]",
        f'api_url = "{sandbox.azure_url}"',
    ]
    for index, name in enumerate(repos):
        lines += ["[[repos]]", f'name = "{name}"']
        if index < len(rtd_projects):
            lines.append(f'rtd_project = "{rtd_projects[index]}"')
    path = tmp / "bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_a_missing_repository_and_refused_rtd_tokens_are_all_reported_in_one_run(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """exit 2; one line per problem, all of them, then the summary; no secret printed."""
    _, sandbox = env
    path = config(
        tmp_path, sandbox, github=[f'token = "{TOKEN}"'], repos=(REPO, "octo/missing"),
        rtd_token=BAD, business_token=BAD + "-com",
    )  # fmt: skip
    done = cli("check-config", "--config", path)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout
    assert BAD not in out + done.stderr
    lines = out.splitlines()
    problems = [line for line in lines if line.strip().startswith("problem")]
    assert len(problems) == 3, out
    assert any("repos[1].name: octo/missing: not found" in line for line in problems)
    assert any("readthedocs.token: Read the Docs refused the token" in line for line in problems)
    assert any("readthedocs.business_token: Read the Docs refused" in line for line in problems)
    assert any(f"repos[0].name: {REPO} (public)" in line for line in lines if "ok" in line)
    assert lines[-1] == "configuration NOT OK: 3 problem(s)"


def test_a_token_github_refuses_is_named_and_the_repositories_are_not_called_readable(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """A refused GitHub token and a refused RTD token in one run; repositories 'not checked'."""
    _, sandbox = env
    path = config(tmp_path, sandbox, github=[f'token = "{BAD}"'], rtd_token=BAD)
    done = cli("check-config", "--config", path)
    assert done.returncode == 2
    out = done.stdout
    assert BAD not in out + done.stderr
    assert "github.token: GitHub refused the token (401: Bad credentials)" in out
    assert "readthedocs.token: Read the Docs refused the token" in out
    assert f"repos: not checked ({REPO}): the GitHub token was refused" in out
    assert "configuration OK" not in out


def test_offline_sends_no_request(env: tuple[World, Sandbox], tmp_path: Path) -> None:
    """--offline validates and prints, and asks no service at all."""
    _, sandbox = env
    path = config(tmp_path, sandbox, github=[f'token = "{BAD}"'], rtd_token=BAD)
    done = cli("check-config", "--offline", "--config", path)
    assert done.returncode == 0, done.stderr
    assert "configuration OK (offline: no service was asked)" in done.stdout
    assert sandbox.requests == []


def test_everything_accepted_says_what_it_could_and_could_not_verify(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """A classic token shows its scopes; an installation token (a workflow's GITHUB_TOKEN)
    says its permissions are not listed and that writing was not tried."""
    world, sandbox = env
    world.add_user(LOGIN, "classic-token", scopes="repo, read:org")
    world.add_actions_token("ghs_workflow", REPO)
    path = config(tmp_path, sandbox, github=['token = "classic-token"'], rtd_token=RTD_TOKEN)
    done = cli("check-config", "--config", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"acts as {LOGIN} (classic token, scopes: read:org, repo)" in done.stdout
    assert "readthedocs.token: accepted by" in done.stdout
    assert "readthedocs.business_token: not set" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("configuration OK: ")

    path = config(tmp_path, sandbox, github=['token = "ghs_workflow"'])
    done = cli("check-config", "--config", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "acts as github-actions[bot] (an installation token" in done.stdout
    assert "check-config never writes" in done.stdout


def test_a_classic_token_without_a_repo_scope_is_a_problem(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """It can read public repositories but GitHub refuses its comments."""
    world, sandbox = env
    world.add_user(LOGIN, "read-org-only", scopes="read:org")
    path = config(tmp_path, sandbox, github=['token = "read-org-only"'])
    done = cli("check-config", "--config", path)
    assert done.returncode == 2
    assert "needs the `repo` scope" in done.stdout


def _key(tmp: Path, name: str) -> tuple[str, str]:
    """A fresh RSA key: (path of its private PEM, its public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp / f"{name}.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return str(path), public.decode()


def test_an_app_key_github_refuses_names_the_app_keys(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """A key that is not the App's: exit 2 naming github.app_id / github.private_key_path."""
    world, sandbox = env
    _, public = _key(tmp_path, "the-apps")
    other, _ = _key(tmp_path, "another")
    world.add_app("ci-status-bot", 1, 7, [REPO], public_key_pem=public)
    path = config(tmp_path, sandbox, github=["app_id = 1", f'private_key_path = "{other}"'])
    done = cli("check-config", "--config", path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "github.app_id / github.private_key_path: GitHub refused the App's signed token" in (
        done.stdout
    )


def test_an_app_installation_says_its_permissions_and_what_it_lacks(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """The App's own key: installation permissions listed; a missing one is a problem."""
    world, sandbox = env
    key, public = _key(tmp_path, "the-apps")
    granted = {"metadata": "read", "pull_requests": "read", "checks": "read", "issues": "read"}
    world.add_app("ci-status-bot", 1, 7, [REPO], public_key_pem=public, permissions=granted)
    path = config(
        tmp_path, sandbox, github=["app_id = 1", f'private_key_path = "{key}"'],
        repos=(REPO, "octo/elsewhere"),
    )  # fmt: skip
    done = cli("check-config", "--config", path)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout
    assert "accepted: App `ci-status-bot` (comments by ci-status-bot[bot])" in out
    assert f"repos[0].name: {REPO}: installation 7 lacks statuses: read (has none); " in out
    assert "issues: write (has read)" in out
    assert "repos[1].name: octo/elsewhere: the App is not installed there" in out


def test_a_workflow_token_without_checks_and_statuses_read_is_told_what_it_lacks(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """A `permissions:` block that leaves out `checks: read` and `statuses: read`: GitHub
    refuses those reads (403), and check-config names each with the permission it needs."""
    world, sandbox = env
    granted = {"metadata": "read", "pull_requests": "read", "issues": "write"}
    world.add_actions_token("ghs_narrow", REPO, permissions=granted)
    path = config(tmp_path, sandbox, github=['token = "ghs_narrow"'])
    done = cli("check-config", "--config", path)
    assert done.returncode == 2, done.stdout + done.stderr
    problems = [line for line in done.stdout.splitlines() if line.strip().startswith("problem")]
    assert len(problems) == 2, done.stdout
    assert (
        "the check runs of #7430 cannot be read (checks: read) (403: Resource not " in (problems[0])
    )
    assert "the commit statuses of #7430 cannot be read (statuses: read)" in problems[1]


def test_a_fine_grained_token_without_pull_requests_read_is_a_problem(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    world, sandbox = env
    world.add_user(LOGIN, "fine-grained", permissions={"metadata": "read", "issues": "write"})
    path = config(tmp_path, sandbox, github=['token = "fine-grained"'])
    done = cli("check-config", "--config", path)
    assert done.returncode == 2
    assert (
        f"{REPO}: its pull requests cannot be read (pull_requests: read) (403: Resource not "
        "accessible by personal access token)"
    ) in done.stdout


def test_an_rtd_project_read_the_docs_does_not_know_is_a_problem(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """`rtd_project` is asked for on the Community site: 404 names `repos[i].rtd_project`."""
    world, sandbox = env
    world.add_repo("octo/other")
    path = config(
        tmp_path, sandbox, github=[f'token = "{TOKEN}"'], repos=(REPO, "octo/other"),
        rtd_token=RTD_TOKEN, rtd_projects=(RTD, "no-such-docs"),
    )  # fmt: skip
    done = cli("check-config", "--config", path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"repos[0].rtd_project: {RTD}: its builds can be read" in done.stdout
    assert "problem    repos[1].rtd_project: no-such-docs: no such project" in done.stdout


def test_a_postgresql_state_that_connects_and_is_current_is_ok(
    env: tuple[World, Sandbox], tmp_path: Path, postgres_url: str
) -> None:
    """state.url: check-config connects read-only and reads the schema version; an empty
    database is a note (the first run creates the schema), a migrated one is current."""
    from bot.state.store import Store

    _, sandbox = env
    path = config(tmp_path, sandbox, github=[f'token = "{TOKEN}"'])
    env_url = {"CI_STATUS_BOT_STATE__URL": postgres_url}
    empty = cli("check-config", "--config", path, env=env_url)
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert "note       state.url: " in empty.stdout and "empty, not this bot's" in empty.stdout
    with Store.open(postgres_url) as store:  # what the first `run` or `once` does
        epoch = store.epoch
    current = cli("check-config", "--config", path, env=env_url)
    assert current.returncode == 0, current.stdout + current.stderr
    assert "(current)" in current.stdout
    assert f"state epoch {epoch} " in current.stdout  # issue 24: the state's identity


def test_a_postgresql_state_it_cannot_connect_to_is_a_problem_without_the_password(
    env: tuple[World, Sandbox], tmp_path: Path, postgres_url: str
) -> None:
    """A database the server does not have: exit 2 naming state.url, the password masked."""
    from urllib.parse import urlsplit

    _, sandbox = env
    parts = urlsplit(postgres_url)
    missing = parts._replace(path="/cisb_no_such_database").geturl()
    path = config(tmp_path, sandbox, github=[f'token = "{TOKEN}"'])
    done = cli("check-config", "--config", path, env={"CI_STATUS_BOT_STATE__URL": missing})
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "state.url" in x)
    assert line.strip().startswith("problem") and "cannot connect and read" in line
    assert "cisb_no_such_database" in line
    if parts.password:
        assert f":{parts.password}@" not in done.stdout + done.stderr


def test_codecov_is_asked_about_each_repository_and_a_private_one_without_a_token_says_so(
    env: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """Issue 25: check-config's online Codecov check; a private repository without a token is
    told once, with the key to set; a token Codecov refuses is a problem."""
    from bot_sandbox.providers_api import add_codecov_commit, providers

    world, sandbox = env
    add_codecov_commit(world, REPO, "a" * 40, state="complete", private=True)
    world.add_user(LOGIN, "classic-token", scopes="repo")
    path = config(tmp_path, sandbox, github=['token = "classic-token"'])
    out = cli("check-config", "--config", path).stdout
    assert "codecov.token: not set: " in out
    said = [line for line in out.splitlines() if "Codecov shows no such repository" in line]
    assert len(said) == 1 and "private (set codecov.token)" in said[0], out
    assert "azure_pipelines.token: not set" in out
    providers(world).codecov_tokens.add("cc-token")
    out = cli(
        "check-config",
        "--config",
        config(tmp_path, sandbox, github=['token = "classic-token"'], codecov_token="cc-token"),
    ).stdout
    assert f"repos[0].name: {REPO}: Codecov answers for it at {sandbox.codecov_url}" in out
    done = cli(
        "check-config",
        "--config",
        config(tmp_path, sandbox, github=['token = "classic-token"'], codecov_token=BAD),
    )
    assert done.returncode == 2 and BAD not in done.stdout + done.stderr
    assert "problem    repos[0].name: octo/omni: Codecov answered HTTP 401" in done.stdout
