"""One wiring: settings-derived clients, store and cycle for CLI, demo, service and benchmark."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from github import Auth, Github, GithubIntegration
from github.GithubException import GithubException

from bot.core.summary import Summary
from bot.cycle.digests import version
from bot.cycle.model import Reports
from bot.cycle.publish import WritePacing
from bot.cycle.run import (
    Cycle as Cycle,  # the service gets its type here (bot.cycle.run is the root's)
)
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError
from bot.github.installations import BotGitHub, Installations
from bot.guard import Guard, install_github_guard
from bot.logs import register_secrets
from bot.render.comment import Renderer, renderer_for
from bot.retry import Sleep
from bot.settings import ConfigError, RepoSettings, Settings, read_private_key
from bot.sources.azure_pipelines.provider import KIND as AZURE_PIPELINES
from bot.sources.base import Connection, Kind, Wiring
from bot.sources.carried import CarriedReads
from bot.sources.codecov.provider import KIND as CODECOV
from bot.sources.readthedocs.provider import KIND as READ_THE_DOCS
from bot.state.leases import Leases, all_leases
from bot.state.lock import StateLock
from bot.state.ports import CycleState, ReadState, StoreError
from bot.state.readonly import open_or_empty
from bot.state.store import Store
from bot.triage.keeper import RowMemo, TriageKeeper

log = logging.getLogger(__name__)

GITHUB_TIMEOUT_S = 30
QUEUE_INLINE_WAIT_S = 2.0  # a worker's job waits for a rate limit on the queue, not inline

# The one list of second sources: each is a folder of bot/sources/ (its contract: base.py).
SOURCES: tuple[Kind, ...] = (READ_THE_DOCS, CODECOV, AZURE_PIPELINES)


def now_utc() -> datetime:
    """The current time, UTC (full precision: write pacing measures sub-second gaps)."""
    return datetime.now(UTC)


@dataclass
class Clients:
    """The clients one command needs, built from settings, sharing one stop Event."""

    github: BotGitHub
    sources: tuple[Connection, ...]  # every enabled second source's client, in SOURCES' order
    login: str
    stop: threading.Event = field(default_factory=threading.Event)
    sleep: Sleep | None = None  # how every wait waits; None: on `stop`, so a stop ends it
    # this process's writes on a monotonic clock, shared by every cycle and webhook refresh
    pacing: WritePacing = field(default_factory=WritePacing)
    # the last report of each pull request, reused by the next cycle when nothing changed
    reports: Reports = field(default_factory=Reports)
    # the triage row of each pull request's last report (not computed again for it)
    rows: RowMemo = field(default_factory=dict)
    # the second sources' kinds the clients were built from (their carried records' rules)
    kinds: tuple[Kind, ...] = SOURCES

    def close(self) -> None:
        """Release connections."""
        for source in self.sources:
            source.close()


def pygithub_options(settings: Settings) -> dict[str, Any]:
    """PyGithub options: no retries and no built-in pacing (the bot does both)."""
    return {
        "base_url": settings.github.api_url,
        "retry": None,
        "timeout": GITHUB_TIMEOUT_S,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "per_page": 100,
    }


def _github(
    settings: Settings, stop: threading.Event, sleep: Sleep | None
) -> tuple[BotGitHub, str | None]:
    """The bot's GitHub client and an App's login `<slug>[bot]` (None: a token's user)."""
    cfg = settings.github
    options: dict[str, Any] = {
        "with_labels": bool(settings.policy.skip_labels),
        # no state: the comments come with the pull requests' pages (no second pass for them)
        "comments_in_page": settings.state.stateless,
        "stop": stop,  # every wait (retry, Retry-After, rate limit) ends on a stop request
        "sleep": sleep,
    }
    token = cfg.token.get_secret_value()
    if token:
        gh = Github(auth=Auth.Token(token), lazy=True, **pygithub_options(settings))
        return BotGitHub(gh, **options), None
    app_auth = Auth.AppAuth(cfg.app_id, read_private_key(cfg.private_key_path))
    integration = GithubIntegration(auth=app_auth, **pygithub_options(settings))
    try:
        login = f"{integration.get_app().slug}[bot]"
    except GithubException as exc:
        raise GitHubError(f"GitHub App {cfg.app_id}: GitHub answered {exc.status}") from exc
    shell: BotGitHub | None = None

    def connect(auth: Auth.Auth) -> GitHubApi:
        api = GitHubApi(Github(auth=auth, lazy=True, **pygithub_options(settings)), **options)
        if shell is not None:
            api.usage = shell.usage  # one budget view for the service
        return api

    pinned = cfg.installation_id or None
    installations = Installations(integration, app_auth, connect=connect, installation_id=pinned)
    # The shell's own requester is never used for a repository: every call is routed.
    shell = BotGitHub(
        Github(lazy=True, **pygithub_options(settings)), installations=installations, **options
    )
    return shell, login


def installation_github(settings: Settings, clients: Clients, installation: int) -> BotGitHub:
    """A client of one App installation, over that installation's own token (PyGithub renews
    it before it expires) and with its own budget view; installation 0: the token's client."""
    found = clients.github.installations
    if installation == 0 or found is None:
        return clients.github
    auth = found.app_auth.get_installation_auth(installation)
    gh = Github(auth=auth, lazy=True, **pygithub_options(settings))
    return BotGitHub(
        gh, with_labels=bool(settings.policy.skip_labels), stop=clients.stop,
        sleep=clients.sleep, max_inline_wait_s=QUEUE_INLINE_WAIT_S,
    )  # fmt: skip


def discovered_repos(settings: Settings, clients: Clients) -> list[RepoSettings]:
    """`installations = "all"`: every repository of every installation of the App, the
    [[repos]] entries giving their options; otherwise the [[repos]] entries."""
    found = clients.github.installations
    if not settings.every_installation or found is None:
        return list(settings.repos)
    directory = found.discover()
    names = sorted(directory.repos(), key=str.casefold)
    log.info("installations: %d, repositories: %d", len(directory.installations), len(names))
    return [settings.configured_repo(n) or RepoSettings(name=n) for n in names]


def request_guard(settings: Settings, kinds: Sequence[Kind] = SOURCES) -> Guard:
    """The allowlist of every request: GitHub's, and what each second source declares."""
    allowed = tuple(a for kind in kinds for a in kind.allowances(settings))
    return Guard.for_urls(settings.github.api_url, allowed)


def build_clients(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    stop: threading.Event | None = None,
    sleep: Sleep | None = None,
    kinds: Sequence[Kind] = SOURCES,
) -> Clients:
    """Install the request guard, then build the GitHub client and each enabled source's.

    `sleep` is how they (and a cycle made from them) wait: retry backoff, a server's
    Retry-After, write pacing; None waits on `stop`, so that a stop request ends every wait.
    """
    stop = stop or threading.Event()
    register_secrets(settings.secret_values())
    guard = request_guard(settings, kinds)
    install_github_guard(guard)
    github, login = _github(settings, stop, sleep)
    if login is None:  # a token's user, read through GitHubApi so the request is counted
        login = github.viewer_login()
    wiring = Wiring(guard, stop, sleep)
    connected = (kind.connect(settings, wiring) for kind in kinds)
    sources = tuple(c for c in connected if c is not None)
    return Clients(github, sources, login, stop, sleep, kinds=tuple(kinds))


def renderer(settings: Settings) -> Renderer:
    """The comment renderer, user templates first."""
    return renderer_for(settings.render.template_dir)


def make_cycle(
    settings: Settings,
    clients: Clients,
    store: CycleState,
    *,
    dry_run: bool,
    out: Callable[[str], None] | None = print,
    leases: Leases | None = None,
    progress: Callable[[str], None] | None = None,
) -> Cycle:
    """Wire one Cycle from settings and clients; it stops (and stops waiting) on clients.stop.

    The cycle keeps the triage rows in `store` (a read-only state, a dry run's, drops them).
    """
    # the sources keep their reads through `carried`, which notes a head's final records for
    # its comment's carried line (and gives a stateless run those its own comment carried)
    carried = CarriedReads(store, clients.kinds)
    docs = tuple(source.source(carried) for source in clients.sources)
    stuck = tuple(source for source in docs if source.docs)
    keeper = TriageKeeper(store, clock=now_utc, docs=stuck, memo=clients.rows, version=version())
    observers = (keeper,)
    return Cycle(
        github=clients.github,
        docs=docs,
        store=store,
        carried=carried,
        renderer=renderer(settings),
        policy=settings.policy,
        login=clients.login,
        clock=now_utc,
        dry_run=dry_run,
        out=out,
        sleep=clients.sleep,
        should_stop=clients.stop.is_set,
        stop=clients.stop,
        observers=observers,
        pacing=clients.pacing,
        generation=_no_lease if leases is None else leases.generation,
        fence=None if leases is None else leases.valid,
        reports=clients.reports,
        progress=progress,
        # stamped beside the generation where there is one: a lease's (one process writes 0,
        # and its stamps carry no epoch, so a lost SQLite state re-stamps nothing)
        epoch="" if leases is None else store.epoch,
    )


def _no_lease(_repo: str) -> int:
    """One process: its comments carry generation 0."""
    return 0


CONTAINER_UID = 10001  # the Dockerfile's user


class StatePathError(StoreError):
    """The state cannot be created where state.path points; the message says what to do."""


def state_path_error(path: str, exc: OSError) -> Exception:
    """A clear error naming state.path, the folder and what to do (ConfigError: exit 2)."""
    folder = Path(path).parent
    if isinstance(exc, FileExistsError | NotADirectoryError):
        blocker = exc.filename or folder
        return ConfigError(
            f"state.path = {path!r}: {blocker} is not a folder (a file is in the way); "
            "set state.path to a file inside a folder, or remove what is in the way"
        )
    if isinstance(exc, PermissionError):
        return StatePathError(
            f"state.path = {path!r}: the folder {folder} cannot be written by this process "
            f"(uid {os.getuid()}; the container image runs as uid {CONTAINER_UID}): make it "
            f"writable by that user (for a bind mount: `chown {CONTAINER_UID} <host folder>` "
            "on the host) or set state.path to a writable place"
        )
    return StatePathError(f"state.path = {path!r}: {exc.strerror or exc} ({folder})")


def hold_state(settings: Settings) -> StateLock | None:
    """Take the one-writer lock of a SQLite state (raises StateBusy when held).

    A PostgreSQL state has no such lock (its replicas share the repositories by lease), and
    no state at all has nothing to hold.
    """
    if settings.state.shared or settings.state.stateless:  # no file to hold
        return None
    try:
        return StateLock.acquire(settings.state.path)
    except OSError as exc:
        raise state_path_error(settings.state.path, exc) from None


@contextmanager
def hold_leases(store: Store, repos: Sequence[str], *, lease_seconds: float) -> Iterator[Leases]:
    """`once` on a shared (PostgreSQL) state: the leases of the repositories no live holder
    has, renewed every third of `lease_seconds` while the cycle runs and given up after it;
    its writes are fenced and stamped with their generations, as a replica's are."""
    leases = Leases(store, lease_seconds=lease_seconds)
    leases.take_free(repos)
    done = threading.Event()

    def keep() -> None:
        while not done.wait(lease_seconds / 3):
            leases.renew()

    keeper = threading.Thread(target=keep, name="leases", daemon=True)
    keeper.start()
    try:
        yield leases
    finally:
        done.set()
        keeper.join()
        leases.release_all()


def held_elsewhere(store: Store, repos: Sequence[str], leases: Leases) -> dict[str, str]:
    """Why each of `repos` that `leases` does not hold was left: who holds it, until when."""
    held = leases.held
    rows = {lease.repo: lease for lease in all_leases(store)}
    why: dict[str, str] = {}
    for repo in repos:
        if repo not in held:
            row = rows.get(repo)
            at = "" if row is None else f" {row.holder} until {row.expires_at:%Y-%m-%dT%H:%M:%SZ}"
            who = "a `run` replica or another `once`"
            why[repo] = f"its lease is held by another process{at} ({who})"
    return why


def run_once(
    settings: Settings,
    clients: Clients,
    store: Store,
    repos: Sequence[RepoSettings],
    *,
    progress: Callable[[str], None] | None = None,
) -> Summary:
    """One writing cycle (`once`). On a shared (PostgreSQL) state only over the repositories
    no `run` replica holds, under their leases; the others are named as not processed.
    `progress` hears how far the writes are (a terminal's line)."""
    if not settings.state.shared:
        return make_cycle(settings, clients, store, dry_run=False, progress=progress).run(repos)
    names = [r.name for r in repos]
    with hold_leases(store, names, lease_seconds=settings.state.lease_seconds) as leases:
        mine = [r for r in repos if r.name in leases.held]
        cycle = make_cycle(
            settings, clients, store, dry_run=False, leases=leases, progress=progress
        )
        summary = cycle.run(mine)
        summary.failed.update(held_elsewhere(store, names, leases))
    return summary


def open_store(settings: Settings) -> Store:
    """The writable state (created and migrated on first use; with no state at all, this
    run's memory only: nothing is created anywhere)."""
    try:
        return Store.open(settings.state.location)
    except OSError as exc:
        raise state_path_error(settings.state.path, exc) from None


class ServiceState:
    """The service's writable state, shared by its cycles and webhooks; opened on first use."""

    def __init__(self, settings: Settings) -> None:
        """Nothing is opened yet (a SQLite state that cannot be opened is a cycle's problem)."""
        self.settings = settings
        self._store: Store | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Store:
        """The open state; StoreError when it cannot be opened (tried again on the next call)."""
        with self._lock:
            if self._store is None:
                self._store = open_store(self.settings)
            return self._store

    def release(self) -> None:
        """After a cycle: close idle connections (a SQLite WAL is checkpointed into the file)."""
        with self._lock:
            if self._store is not None:
                self._store.close()

    def close(self) -> None:
        """Close the state's connections."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def open_reader(settings: Settings) -> ReadState:
    """The state, read-only: an existing one, or an empty one where none exists yet."""
    return open_or_empty(settings.state.location)
