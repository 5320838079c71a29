"""One wiring: settings-derived clients, store and cycle for CLI, demo, service and benchmark."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from github import Auth, Github, GithubIntegration
from github.GithubException import GithubException

from bot.core.model import PullSnapshot
from bot.cycle import Cycle
from bot.docs.readthedocs.client import RtdApi
from bot.github.client import Comment, GitHubApi, GitHubError, NotFound, RequiredCache
from bot.github.parse import PullFailure
from bot.guard import Guard, install_github_guard
from bot.logs import register_secrets
from bot.render.comment import Renderer
from bot.settings import RepoSettings, Settings, read_private_key
from bot.state.sqlite import StateLock, Store
from bot.triage.keeper import TriageKeeper

log = logging.getLogger(__name__)

GITHUB_TIMEOUT_S = 30


def now_utc() -> datetime:
    """The current time, UTC (full precision: write pacing measures sub-second gaps)."""
    return datetime.now(UTC)


@dataclass
class Clients:
    """The clients one command needs, built from settings, sharing one stop Event."""

    github: BotGitHub
    rtd: RtdApi
    login: str
    stop: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        """Release connections."""
        self.rtd.close()


def _common(settings: Settings) -> dict[str, Any]:
    """PyGithub options: no retries and no built-in pacing (the bot does both)."""
    return {
        "base_url": settings.github.api_url,
        "retry": None,
        "timeout": GITHUB_TIMEOUT_S,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "per_page": 100,
    }


class BotGitHub(GitHubApi):
    """GitHubApi that counts writes in flight (so a stop waits for them) and, for a GitHub
    App, routes each repository to its owner's installation (looked up once per owner)."""

    def __init__(
        self,
        gh: Github,
        *,
        installation_for: _InstallationRouter | None = None,
        **options: Any,
    ) -> None:
        super().__init__(gh, **options)
        self._installation_for = installation_for
        self._writes = 0
        self._lock = threading.Lock()

    @property
    def writing(self) -> bool:
        """Whether a comment write is in flight."""
        return self._writes > 0

    def _for(self, repo: str) -> GitHubApi:
        return self if self._installation_for is None else self._installation_for(repo)

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
        """The open pull requests of `repo`, through its installation."""
        api = self._for(repo)
        if api is self:
            return super().open_pulls(repo, now=now, required=required)
        return api.open_pulls(repo, now=now, required=required)

    def pulls_by_number(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        now: datetime,
        required: RequiredCache | None = None,
    ) -> dict[int, PullSnapshot | PullFailure]:
        """Named pull requests of `repo` (a webhook refresh), through its installation."""
        api = self._for(repo)
        if api is self:
            return super().pulls_by_number(repo, numbers, now=now, required=required)
        return api.pulls_by_number(repo, numbers, now=now, required=required)

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request, through its repository's installation."""
        api = self._for(repo)
        if api is self:
            return super().pull(repo, number, now=now)
        return api.pull(repo, number, now=now)

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """The comments of one pull request, through its repository's installation."""
        api = self._for(repo)
        if api is self:
            return super().list_comments(repo, number)
        return api.list_comments(repo, number)

    def get_comment(self, repo: str, comment_id: int) -> Comment | None:
        """One comment, through its repository's installation."""
        api = self._for(repo)
        if api is self:
            return super().get_comment(repo, comment_id)
        return api.get_comment(repo, comment_id)

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Comments by node id: with several installations, each is asked and the finds merged."""
        if self._installation_for is None:
            return super().read_comments(node_ids)
        apps = list(self._installation_for.by_installation.values())
        found: dict[str, Comment | None] = dict.fromkeys(node_ids)
        for api in apps:
            for key, comment in api.read_comments(node_ids).items():
                found[key] = found.get(key) or comment
        return found

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Create the comment (counted as a write in flight)."""
        with self._write():
            api = self._for(repo)
            if api is self:
                return super().create_comment(repo, number, body)
            return api.create_comment(repo, number, body)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        """Edit the comment (counted as a write in flight)."""
        with self._write():
            api = self._for(repo)
            if api is self:
                return super().edit_comment(repo, comment_id, body)
            return api.edit_comment(repo, comment_id, body)


class _InstallationRouter:
    """A GitHub App's installation client per repository owner, looked up once per owner."""

    def __init__(
        self,
        settings: Settings,
        integration: GithubIntegration,
        app_auth: Auth.AppAuth,
        options: Mapping[str, Any],
        shared: BotGitHub | None = None,
    ) -> None:
        self.settings, self.integration, self.app_auth = settings, integration, app_auth
        self.options = dict(options)
        self.by_owner: dict[str, GitHubApi] = {}
        self.by_installation: dict[int, GitHubApi] = {}
        self.shared = shared
        self._lock = threading.Lock()

    def installation_id(self, repo: str) -> int:
        """The configured installation, or the one GitHub names for this repository."""
        if self.settings.github.installation_id:
            return self.settings.github.installation_id
        owner, name = repo.split("/", 1)
        try:
            return int(self.integration.get_repo_installation(owner, name).id)
        except GithubException as exc:
            if exc.status == 404:
                raise NotFound(
                    f"the GitHub App is not installed on {repo} (or cannot see it)", status=404
                ) from exc
            raise GitHubError(f"installation of {repo}: GitHub answered {exc.status}") from exc

    def __call__(self, repo: str) -> GitHubApi:
        owner = repo.split("/", 1)[0].lower()
        with self._lock:
            api = self.by_owner.get(owner)
            if api is None:
                iid = self.installation_id(repo)
                api = self.by_installation.get(iid)
                if api is None:
                    auth = self.app_auth.get_installation_auth(iid)
                    gh = Github(auth=auth, lazy=True, **_common(self.settings))
                    api = GitHubApi(gh, **self.options)
                    if self.shared is not None:
                        api.usage = self.shared.usage  # one budget view for the service
                    self.by_installation[iid] = api
                    log.debug("GitHub App installation %d serves %s", iid, owner)
                self.by_owner[owner] = api
            return api


def _github(settings: Settings, stop: threading.Event) -> tuple[BotGitHub, str | None]:
    """The bot's GitHub client and an App's login `<slug>[bot]` (None: a token's user)."""
    cfg = settings.github
    options: dict[str, Any] = {
        "with_labels": bool(settings.policy.skip_labels),
        "stop": stop,  # every wait (retry, Retry-After, rate limit) ends on a stop request
    }
    token = cfg.token.get_secret_value()
    if token:
        gh = Github(auth=Auth.Token(token), lazy=True, **_common(settings))
        return BotGitHub(gh, **options), None
    app_auth = Auth.AppAuth(cfg.app_id, read_private_key(cfg.private_key_path))
    integration = GithubIntegration(auth=app_auth, **_common(settings))
    try:
        login = f"{integration.get_app().slug}[bot]"
    except GithubException as exc:
        raise GitHubError(f"GitHub App {cfg.app_id}: GitHub answered {exc.status}") from exc
    router = _InstallationRouter(settings, integration, app_auth, options)
    # The shell's own requester is never used for a repository: every call is routed.
    shell = BotGitHub(Github(lazy=True, **_common(settings)), installation_for=router, **options)
    router.shared = shell
    return shell, login


def build_clients(
    settings: Settings, repos: Sequence[RepoSettings], *, stop: threading.Event | None = None
) -> Clients:
    """Install the request guard, then build the GitHub and Read the Docs clients."""
    stop = stop or threading.Event()
    register_secrets(settings.secret_values())
    rtd_cfg = settings.readthedocs
    rtd_urls = {"org": rtd_cfg.api_url, "com": rtd_cfg.business_api_url, "self": rtd_cfg.api_url}
    guard = Guard.for_urls(settings.github.api_url, tuple(rtd_urls.values()))
    install_github_guard(guard)
    github, login = _github(settings, stop)
    if login is None:  # a token's user, read through GitHubApi so the request is counted
        login = github.viewer_login()
    rtd = RtdApi(
        api_urls=rtd_urls,
        tokens={  # each site's own token, sent only to that site
            "org": rtd_cfg.token.get_secret_value(),
            "com": rtd_cfg.business_token.get_secret_value(),
            "self": rtd_cfg.token.get_secret_value(),
        },
        guard=guard,
        timeout_s=settings.readthedocs.timeout_seconds,
        max_retries=settings.readthedocs.max_retries,
        stop=stop,
    )
    return Clients(github, rtd, login, stop)


def renderer(settings: Settings) -> Renderer:
    """The comment renderer, user templates first."""
    template_dir = settings.render.template_dir
    return Renderer(Path(template_dir) if template_dir else None)


def make_cycle(
    settings: Settings,
    clients: Clients,
    store: Store,
    *,
    dry_run: bool,
    out: Callable[[str], None] | None = print,
) -> Cycle:
    """Wire one Cycle from settings and clients; it stops (and stops waiting) on clients.stop.

    A writing cycle keeps the triage rows; a dry run records nothing, so it has no observer.
    """
    observers = () if dry_run else (TriageKeeper(store, clock=now_utc),)
    return Cycle(
        github=clients.github,
        rtd=clients.rtd,
        store=store,
        renderer=renderer(settings),
        policy=settings.policy,
        login=clients.login,
        clock=now_utc,
        dry_run=dry_run,
        out=out,
        should_stop=clients.stop.is_set,
        stop=clients.stop,
        observers=observers,
    )


def hold_state(settings: Settings) -> StateLock:
    """Take the one-writer lock of the configured state (raises StateBusy when held)."""
    return StateLock.acquire(settings.state.path)


def open_store(settings: Settings, *, dry_run: bool = False) -> Store:
    """The state store; a dry run reads an existing state and never creates one."""
    path = settings.state.path
    if dry_run:  # a private copy: works on a read-only state and writes nothing to it
        return Store.open_readonly(path) if Path(path).exists() else Store.open(":memory:")
    return Store.open(path)
