"""A GitHub App's routing: each repository's calls go to its owner's installation.

BotGitHub is the one GitHub client the bot uses: it counts writes in flight (so a stop waits
for them) and sends each repository's reads and writes to the client that serves it (a
token's own client, or the repository owner's App installation, looked up once per owner).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from github import Auth, Github, GithubIntegration
from github.GithubException import GithubException

from bot.core.base import MergeBase
from bot.core.merge_queue import QueueConfig
from bot.core.model import Annotation, PullSnapshot, RequiredChecks, Signal
from bot.core.summary import Usage
from bot.github.client import GitHubApi
from bot.github.commits import MERGE_BASE, Tips
from bot.github.errors import GitHubError, NotFound
from bot.github.parse import Comment, PullFailure
from bot.state.ports import RequiredCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Installed:
    """One installation of the App: its account, whether it is suspended, its repositories."""

    id: int
    account: str
    suspended: bool = False
    repos: tuple[str, ...] = ()


@dataclass(frozen=True)
class Directory:
    """Every installation of the App as last discovered, and which one serves a repository."""

    installations: Mapping[int, Installed] = field(default_factory=dict)

    def repos(self) -> dict[str, int]:
        """Every repository of every active installation -> its installation id."""
        return {
            repo: found.id
            for found in self.installations.values()
            if not found.suspended
            for repo in found.repos
        }

    def installation_of(self, repo: str) -> int | None:
        """The installation that serves `repo` (compared ignoring case, as GitHub does)."""
        folded = repo.casefold()
        return next((i for r, i in self.repos().items() if r.casefold() == folded), None)

    def why_not(self, installation_id: int, repo: str) -> str | None:
        """Why installation `installation_id` may not work `repo` now (None: it may)."""
        found = self.installations.get(installation_id)
        if found is None:
            return f"installation {installation_id} no longer has the App (uninstalled)"
        if found.suspended:
            return f"installation {installation_id} ({found.account}) is suspended"
        if repo.casefold() not in {r.casefold() for r in found.repos}:
            return f"{repo} was removed from installation {installation_id} ({found.account})"
        return None


class Installations:
    """A GitHub App's installation client per repository owner, looked up once per owner."""

    def __init__(
        self,
        integration: GithubIntegration,
        app_auth: Auth.AppAuth,
        *,
        connect: Callable[[Auth.Auth], GitHubApi],
        installation_id: int | None = None,
    ) -> None:
        """`connect` builds a client for an installation's auth; `installation_id` pins one."""
        self.integration, self.app_auth, self.connect = integration, app_auth, connect
        self.pinned = installation_id
        self.usage = Usage()  # every installation's spending, in one budget view
        self.by_owner: dict[str, GitHubApi] = {}
        self.by_installation: dict[int, GitHubApi] = {}
        self.directory: Directory | None = None  # `installations = "all"`: as discovered
        self._lock = threading.Lock()

    def discover(self) -> Directory:
        """Every installation of the App (`GET /app/installations`) and, for each active one,
        the repositories its own token reaches (`GET /installation/repositories`)."""
        try:
            listed = [
                (int(i.id), str(i.account.login) if i.account else "", i.suspended_at is not None)
                for i in self.integration.get_installations()
            ]
        except GithubException as exc:
            raise GitHubError(f"the App's installations: GitHub answered {exc.status}") from exc
        found: dict[int, Installed] = {}
        for iid, account, suspended in listed:
            if suspended:
                found[iid] = Installed(iid, account, suspended=True)
                continue
            try:
                repos = tuple(self.client(iid).installation_repositories())
            except GitHubError as exc:  # refused since it was listed: suspended or removed
                log.warning("installation %d (%s): its repositories: %s", iid, account, exc)
                repos = ()
            found[iid] = Installed(iid, account, repos=repos)
        directory = Directory(found)
        with self._lock:
            self.directory = directory
            self.by_owner.clear()  # routed by the directory from now on
        return directory

    def discover_one(self, iid: int, *, account: str, action: str) -> Directory:
        """The directory with one installation read again (after its webhook): gone when
        deleted, suspended when suspended, else its repositories asked of its token."""
        with self._lock:
            found = dict((self.directory or Directory()).installations)
        if action == "deleted":
            found.pop(iid, None)
        elif action == "suspend":
            found[iid] = Installed(iid, account, suspended=True)
        else:
            try:
                found[iid] = Installed(
                    iid, account, repos=tuple(self.client(iid).installation_repositories())
                )
            except GitHubError as exc:  # suspended or removed meanwhile: nothing to work
                log.warning("installation %d (%s): its repositories: %s", iid, account, exc)
                found.pop(iid, None)
        directory = Directory(found)
        with self._lock:
            self.directory = directory
            self.by_owner.clear()
            if iid not in found or found[iid].suspended:
                self.by_installation.pop(iid, None)  # its token is refused from now on
        return directory

    def client(self, installation_id: int) -> GitHubApi:
        """The client of one installation (its own token, renewed before it expires)."""
        with self._lock:
            return self._client(installation_id)

    def _client(self, iid: int) -> GitHubApi:
        api = self.by_installation.get(iid)
        if api is None:
            api = self.connect(self.app_auth.get_installation_auth(iid))
            if self.shared_usage:
                api.usage = self.usage
            self.by_installation[iid] = api
            log.debug("GitHub App installation %d connected", iid)
        return api

    shared_usage = True  # False: each installation's client keeps its own budget view

    def installation_id(self, repo: str) -> int:
        """The configured installation, the discovered one, or the one GitHub names."""
        if self.pinned:
            return self.pinned
        directory = self.directory
        if directory is not None:
            found = directory.installation_of(repo)
            if found is None:
                raise NotFound(f"no installation of the GitHub App covers {repo}", status=404)
            return found
        owner, name = repo.split("/", 1)
        try:
            return int(self.integration.get_repo_installation(owner, name).id)
        except GithubException as exc:
            if exc.status == 404:
                raise NotFound(
                    f"the GitHub App is not installed on {repo} (or cannot see it)", status=404
                ) from exc
            raise GitHubError(f"installation of {repo}: GitHub answered {exc.status}") from exc

    def for_repo(self, repo: str) -> GitHubApi:
        """The client of the installation that serves `repo`."""
        owner = repo.split("/", 1)[0].lower()
        with self._lock:
            api = self.by_owner.get(owner)
            if api is None:
                api = self._client(self.installation_id(repo))
                self.by_owner[owner] = api
            return api

    def clients(self) -> list[GitHubApi]:
        """Every installation client looked up so far."""
        with self._lock:
            return list(self.by_installation.values())


class BotGitHub(GitHubApi):
    """GitHubApi that counts writes in flight and routes each repository to its client."""

    def __init__(
        self, gh: Github, *, installations: Installations | None = None, **options: Any
    ) -> None:
        """Over `gh`; with `installations` (an App) every repository's call is routed there."""
        super().__init__(gh, **options)
        self._installations = installations
        if installations is not None:
            self.usage = installations.usage
        self._own = GitHubApi(gh, **options)  # a token's reads and writes
        self._own.usage = self.usage
        self._writes = 0
        self._lock = threading.Lock()

    @property
    def installations(self) -> Installations | None:
        """The App's installations (None: a token's client)."""
        return self._installations

    @property
    def writing(self) -> bool:
        """Whether a comment write is in flight."""
        return self._writes > 0

    def route(self, repo: str) -> GitHubApi:
        """The client that serves `repo`: the token's own, or its owner's installation."""
        return self._own if self._installations is None else self._installations.for_repo(repo)

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._writes += 1
        try:
            yield
        finally:
            with self._lock:
                self._writes -= 1

    def open_pulls(
        self, repo: str, *, now: datetime, required: RequiredCache | None = None
    ) -> Iterator[PullSnapshot | PullFailure]:
        """The open pull requests of `repo`, through its client."""
        return self.route(repo).open_pulls(repo, now=now, required=required)

    def read_nodes(self, repo: str) -> Mapping[bytes, PullSnapshot]:
        """The pull requests of `repo` its last whole listing read, through its client."""
        return self.route(repo).read_nodes(repo)

    def keep_nodes(self, repo: str, nodes: Mapping[bytes, PullSnapshot]) -> None:
        """Pull requests an earlier process read from these nodes, through its client."""
        self.route(repo).keep_nodes(repo, nodes)

    def pulls_by_number(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        now: datetime,
        required: RequiredCache | None = None,
    ) -> dict[int, PullSnapshot | PullFailure]:
        """Named pull requests of `repo` (a webhook refresh), through its client."""
        return self.route(repo).pulls_by_number(repo, numbers, now=now, required=required)

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request, through its repository's client."""
        return self.route(repo).pull(repo, number, now=now)

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """The comments of one pull request, through its repository's client."""
        return self.route(repo).list_comments(repo, number)

    def pulls_comments(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        until: Callable[[Comment], bool] | None = None,
    ) -> dict[int, list[Comment]]:
        """The comments of these pull requests, through their repository's client."""
        return self.route(repo).pulls_comments(repo, numbers, until=until)

    def get_comment(self, repo: str, comment_id: int) -> Comment | None:
        """One comment, through its repository's client."""
        return self.route(repo).get_comment(repo, comment_id)

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Comments by node id: with several installations, each is asked and the finds merged."""
        if self._installations is None:
            return self._own.read_comments(node_ids)
        found: dict[str, Comment | None] = dict.fromkeys(node_ids)
        for api in self._installations.clients():
            for key, comment in api.read_comments(node_ids).items():
                found[key] = found.get(key) or comment
        return found

    def check_run_annotations(self, node_ids: Sequence[str]) -> dict[str, tuple[Annotation, ...]]:
        """Annotations by check run node id: with several installations, each is asked and the
        finds merged (a token reaches only its installation's runs)."""
        if self._installations is None:
            return self._own.check_run_annotations(node_ids)
        found: dict[str, tuple[Annotation, ...]] = {}
        for api in self._installations.clients():
            try:
                answer = api.check_run_annotations(node_ids)
            except GitHubError as exc:  # another installation's runs: not this token's to read
                log.debug("annotations not read through one installation: %s", exc)
                continue
            for key, runs in answer.items():
                found[key] = found.get(key) or runs
        return found

    def required_checks(self, repo: str, bases: Sequence[str]) -> dict[str, RequiredChecks]:
        """What each base branch requires, through the repository's client."""
        return self.route(repo).required_checks(repo, bases)

    def branch_tips(self, repo: str, branches: Sequence[str]) -> Tips:
        """Each branch's newest commit, through the repository's client."""
        return self.route(repo).branch_tips(repo, branches)

    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The merge base of `base` and `head`, through the repository's client."""
        return self.route(repo).merge_base(repo, base, head)

    def commits_signals(self, repo: str, shas: Sequence[str]) -> dict[str, MergeBase]:
        """The contexts of each commit, through the repository's client."""
        return self.route(repo).commits_signals(repo, shas)

    def commits_and_queues(
        self,
        repo: str,
        shas: Sequence[str],
        branches: Sequence[str] = (),
        *,
        what: tuple[str, str] = MERGE_BASE,
    ) -> tuple[dict[str, MergeBase], dict[str, QueueConfig]]:
        """Commits' contexts and merge queues, through the repository's client."""
        return self.route(repo).commits_and_queues(repo, shas, branches, what=what)

    def check_attempts(
        self, repo: str, asks: Sequence[tuple[str, str, int | None]]
    ) -> dict[int, list[Signal]]:
        """Every attempt of the asked checks, through the repository's client."""
        return self.route(repo).check_attempts(repo, asks)

    def commit_statuses(self, repo: str, sha: str) -> list[Signal] | None:
        """Every state posted on the commit, through the repository's client."""
        return self.route(repo).commit_statuses(repo, sha)

    def branch_histories(
        self, repo: str, branches: Sequence[str]
    ) -> dict[str, tuple[MergeBase, ...] | str]:
        """Each branch's last commits, through the repository's client."""
        return self.route(repo).branch_histories(repo, branches)

    def delete_own_comment(self, repo: str, comment: Comment, *, login: str) -> None:
        """Delete one of the bot's own later comments (counted as a write in flight)."""
        with self._write():
            self.route(repo).delete_own_comment(repo, comment, login=login)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Create the comment (counted as a write in flight)."""
        with self._write():
            return self.route(repo).create_comment(repo, number, body)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        """Edit the comment (counted as a write in flight)."""
        with self._write():
            return self.route(repo).edit_comment(repo, comment_id, body)
