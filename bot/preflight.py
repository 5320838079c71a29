"""`check-config`'s questions to GitHub and Read the Docs (reads only): every finding at once.

Each finding names the configuration key it concerns and never shows a secret's value.
A refusal (a credential GitHub or Read the Docs refuses, a repository that does not exist
or cannot be read, an App installation without a permission the bot needs) is a problem; a
service that could not be asked is "could not verify"; what could not be verified without
writing is said as such.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from github import Auth, Github, GithubIntegration
from github.GithubException import GithubException
from sqlalchemy.exc import SQLAlchemyError

from bot.app import SOURCES, pygithub_options, request_guard
from bot.core.summary import foreign_words
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError
from bot.github.ownership import foreign_marked
from bot.github.transport import Probe
from bot.guard import Guard, install_github_guard
from bot.settings import Settings, read_private_key
from bot.sources.base import Kind, Outcome
from bot.state import db as store
from bot.state.ports import StoreError

# What the bot needs of each repository (README, "Credentials"); an App says what it has.
NEEDED = {
    "metadata": "read",
    "pull_requests": "read",
    "checks": "read",
    "statuses": "read",
    "issues": "write",
}
_LEVEL = {"none": 0, "read": 1, "write": 2, "admin": 3}
_NOT_WRITTEN = "writing the comment (issues: write) is not tried: check-config never writes"


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the report."""

    outcome: Outcome
    key: str
    text: str

    def line(self) -> str:
        """The printed line: outcome, key, what was found."""
        return f"  {self.outcome:<10} {self.key}: {self.text}"


@dataclass(frozen=True, slots=True)
class Report:
    """Every finding of one check."""

    findings: tuple[Finding, ...]

    @property
    def problems(self) -> list[Finding]:
        """The refusals and what could not be verified."""
        return [f for f in self.findings if f.outcome in ("problem", "unverified")]

    def summary(self) -> str:
        """The last line."""
        refused = sum(f.outcome == "problem" for f in self.findings)
        unverified = sum(f.outcome == "unverified" for f in self.findings)
        if not refused and not unverified:
            return "configuration OK: the services accept every credential and repository"
        parts = [f"{refused} problem(s)"] if refused else []
        parts += [f"{unverified} could not be verified"] if unverified else []
        return "configuration NOT OK: " + ", ".join(parts)


def check_services(settings: Settings, kinds: Sequence[Kind] = SOURCES) -> Report:
    """Ask GitHub and every second source (reads only) about every credential and repository."""
    guard = request_guard(settings, kinds)
    install_github_guard(guard)
    found = [*_github(settings), *_sources(settings, guard, kinds), *_shared_state(settings)]
    return Report(tuple(found))


# -- GitHub ------------------------------------------------------------------------------


def _github(settings: Settings) -> Iterator[Finding]:
    if settings.github.token.get_secret_value():
        yield from _token(settings)
    else:
        yield from _app(settings)


def _token_api(settings: Settings) -> GitHubApi:
    token = Auth.Token(settings.github.token.get_secret_value())
    return GitHubApi(Github(auth=token, lazy=True, **pygithub_options(settings)), max_attempts=1)


def _token(settings: Settings) -> Iterator[Finding]:
    api = _token_api(settings)
    answer = api.probe("/rate_limit")
    if answer.status == 401:
        yield Finding("problem", "github.token", f"GitHub refused the token ({_said(answer)})")
        yield _not_checked(settings, "the GitHub token was refused")
        return
    if answer.status != 200:
        yield Finding("unverified", "github.token", f"GitHub could not be asked ({_said(answer)})")
        yield _not_checked(settings, "GitHub could not be asked")
        return
    try:
        login = api.viewer_login()
    except GitHubError as exc:
        yield Finding("unverified", "github.token", f"GitHub did not say who the token is: {exc}")
        return
    yield from _token_kind(login, answer.headers.get("x-oauth-scopes"))
    for index, repo in enumerate(settings.repos):
        yield from _token_repo(api, f"repos[{index}].name", repo.name)
        yield from _foreign_comments(api, f"repos[{index}].name", repo.name, login)


def _token_kind(login: str, scopes: str | None) -> Iterator[Finding]:
    """What kind of token this is, and what of its rights GitHub tells."""
    if scopes is not None:  # a classic token lists its scopes
        granted = {s.strip() for s in scopes.split(",") if s.strip()}
        shown = ", ".join(sorted(granted)) or "none"
        yield Finding(
            "ok", "github.token", f"accepted; acts as {login} (classic token, scopes: {shown})"
        )
        if not granted & {"repo", "public_repo"}:
            yield Finding(
                "problem",
                "github.token",
                "a classic token needs the `repo` scope (or `public_repo` for public repositories "
                "only) to write comments",
            )
        return
    kind = "an installation token" if login.endswith("[bot]") else "a fine-grained token"
    yield Finding(
        "ok",
        "github.token",
        f"accepted; acts as {login} ({kind}: GitHub does not list its permissions, so the "
        "reads below were tried; " + _NOT_WRITTEN + ")",
    )


def _token_repo(api: GitHubApi, key: str, repo: str) -> Iterator[Finding]:
    found = api.probe(f"/repos/{repo}")
    if found.status == 404:
        yield Finding("problem", key, f"{repo}: not found, or not visible to this token (404)")
        return
    if found.status != 200:
        yield _refused_or_unverified(key, f"{repo}: cannot be read", found)
        return
    pulls = api.probe(f"/repos/{repo}/pulls?state=open&per_page=1")
    if pulls.status != 200:
        yield _refused_or_unverified(
            key, f"{repo}: its pull requests cannot be read (pull_requests: read)", pulls
        )
        return
    private = isinstance(found.data, dict) and found.data.get("private")
    where = f"{repo} ({'private' if private else 'public'})"
    head = pulls.data[0] if isinstance(pulls.data, list) and pulls.data else None
    if not isinstance(head, dict):
        yield Finding(
            "ok", key, f"{where}: the repository and its pull requests can be read (none is "
            "open: check runs, statuses and comments were not tried)",
        )  # fmt: skip
        return
    yield from _open_pull(api, key, repo=repo, head=head, where=where)


def _open_pull(
    api: GitHubApi, key: str, *, repo: str, head: dict[str, Any], where: str
) -> Iterator[Finding]:
    """Whether an open pull request's check runs, statuses and comments can be read."""
    number, sha = head.get("number"), (head.get("head") or {}).get("sha")
    reads = (
        ("check runs", "checks: read", f"/repos/{repo}/commits/{sha}/check-runs?per_page=1"),
        ("commit statuses", "statuses: read", f"/repos/{repo}/commits/{sha}/status?per_page=1"),
        ("comments", "issues: read", f"/repos/{repo}/issues/{number}/comments?per_page=1"),
    )
    refused = False
    for what, needs, path in reads:
        answer = api.probe(path)
        if answer.status != 200:
            refused = True
            yield _refused_or_unverified(
                key, f"{repo}: the {what} of #{number} cannot be read ({needs})", answer
            )
    if not refused:
        yield Finding(
            "ok", key, f"{where}: the repository, its pull requests and #{number}'s check runs, "
            "statuses and comments can be read",
        )  # fmt: skip


FOREIGN_PULLS = 100  # the open pull requests whose comments check-config looks through


def _foreign_comments(api: GitHubApi, key: str, repo: str, login: str) -> Iterator[Finding]:
    """A changed token: marked comments another login wrote on the first open pull requests
    (this login never edits them; they keep their last verdict until someone deletes them)."""
    pulls = api.probe(f"/repos/{repo}/pulls?state=open&per_page={FOREIGN_PULLS}")
    if pulls.status != 200 or not isinstance(pulls.data, list):
        return
    numbers = [
        p["number"] for p in pulls.data if isinstance(p, dict) and type(p.get("number")) is int
    ]
    if not numbers:
        return
    try:
        listed = api.pulls_comments(repo, numbers)
    except GitHubError as exc:
        yield Finding("unverified", key, f"{repo}: its comments could not be listed: {exc}")
        return
    foreign: dict[str, int] = {}
    for comments in listed.values():
        for author, count in foreign_marked(comments, login).items():
            foreign[author] = foreign.get(author, 0) + count
    if foreign:
        yield Finding(
            "note", key, f"{repo}: {foreign_words(foreign)} (this login is {login}; looked at "
            f"{len(numbers)} open pull requests)",
        )  # fmt: skip


def _app(settings: Settings) -> Iterator[Finding]:
    cfg = settings.github
    auth = Auth.AppAuth(cfg.app_id, read_private_key(cfg.private_key_path))
    integration = GithubIntegration(auth=auth, **pygithub_options(settings))
    keys = "github.app_id / github.private_key_path"
    try:
        slug = integration.get_app().slug
    except GithubException as exc:
        said = _said(Probe(exc.status, {}, exc.data))
        outcome: Outcome = "problem" if exc.status in (401, 403, 404) else "unverified"
        yield Finding(
            outcome,
            keys,
            f"GitHub refused the App's signed token ({said}): is the key App {cfg.app_id}'s?"
            if outcome == "problem"
            else f"GitHub could not be asked ({said})",
        )
        yield _not_checked(settings, "the App's key was refused")
        return
    yield Finding("ok", keys, f"accepted: App `{slug}` (comments by {slug}[bot])")
    for index, repo in enumerate(settings.repos):
        yield from _app_repo(integration, f"repos[{index}].name", repo.name)


def _app_repo(integration: GithubIntegration, key: str, repo: str) -> Iterator[Finding]:
    owner, name = repo.split("/", 1)
    try:
        installation = integration.get_repo_installation(owner, name)
    except GithubException as exc:
        if exc.status == 404:
            yield Finding(
                "problem",
                key,
                f"{repo}: the App is not installed there, or it does not exist (404)",
            )
        else:
            yield Finding(
                "unverified",
                key,
                f"{repo}: GitHub answered {_said(Probe(exc.status, {}, exc.data))}",
            )
        return
    granted = {str(k): str(v) for k, v in (installation.permissions or {}).items()}
    missing = [
        f"{perm}: {level} (has {granted.get(perm, 'none')})"
        for perm, level in NEEDED.items()
        if _LEVEL.get(granted.get(perm, "none"), 0) < _LEVEL[level]
    ]
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(granted.items()))
    if missing:
        yield Finding(
            "problem",
            key,
            f"{repo}: installation {installation.id} lacks {'; '.join(missing)} (granted: {shown})",
        )
    else:
        yield Finding("ok", key, f"{repo}: installation {installation.id} grants {shown}")


def _not_checked(settings: Settings, why: str) -> Finding:
    names = ", ".join(r.name for r in settings.repos)
    return Finding("unverified", "repos", f"not checked ({names}): {why}")


def _said(answer: Probe) -> str:
    return f"{answer.status}: {answer.message}" if answer.status else answer.message


def _refused_or_unverified(key: str, what: str, answer: Probe) -> Finding:
    refused = answer.status in (401, 403, 404, 451)
    return Finding("problem" if refused else "unverified", key, f"{what} ({_said(answer)})")


# -- every second source (bot.sources: each provider's own probe) ------------------------


def _sources(settings: Settings, guard: Guard, kinds: Sequence[Kind]) -> Iterator[Finding]:
    for kind in kinds:
        try:
            for said in kind.probe(settings, guard):
                yield Finding(said.outcome, said.key, said.text)
        except Exception as exc:  # a provider's probe never ends the check
            yield Finding("unverified", kind.name, f"{kind.label} could not be asked ({exc})")


# -- the shared state (PostgreSQL) -----------------------------------------------------------


def _shared_state(settings: Settings) -> Iterator[Finding]:
    """A PostgreSQL state: it connects (read-only) and its schema is this bot's."""
    if not settings.state.shared:
        return
    where = settings.state.url.get_secret_value()
    shown = store.describe(where)
    engine = store.pg_engine(where, read_only=True)
    try:
        with engine.connect() as conn:
            version = store.schema_version(conn)
            epoch = store.read_epoch(conn) if version >= store.EPOCH_SINCE else ""
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        yield Finding("problem", "state.url", f"{shown}: cannot connect and read ({reason})")
        return
    except StoreError as exc:
        yield Finding("problem", "state.url", f"{shown}: {exc}")
        return
    finally:
        engine.dispose()
    yield _schema_finding(shown, version, store.HEAD)
    if epoch:
        yield Finding(
            "ok", "state.url", f"{shown}: state epoch {epoch} (written in every comment's stamp; "
            "another database is another epoch)",
        )  # fmt: skip


def _schema_finding(shown: str, version: int, head: int) -> Finding:
    if version == head:
        return Finding("ok", "state.url", f"{shown}: connects; schema version {version} (current)")
    if version > head:
        return Finding(
            "problem", "state.url", f"{shown}: schema version {version} is newer than this "
            f"bot's {head} (written by a newer version?): this bot would refuse it",
        )  # fmt: skip
    what = "empty" if version == 0 else f"schema version {version}"
    return Finding(
        "note", "state.url", f"{shown}: connects; {what}, not this bot's {head}: the first "
        "`run` or `once` migrates it (check-config writes nothing)",
    )  # fmt: skip
