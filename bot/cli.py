"""The ci-status-bot command: builds settings and clients, hands them down, and reports."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from github import Auth, Github, GithubIntegration
from github.GithubException import GithubException

from bot.cycle import Cycle, read_rtd
from bot.github_io import GitHubApi, GitHubError, NotFound
from bot.guard import Guard, install_github_guard
from bot.logs import setup_logging
from bot.reconcile import reconcile
from bot.render import Renderer, report_json
from bot.rtd_io import RtdApi
from bot.settings import ConfigError, RepoSettings, Settings, describe, load_settings
from bot.store import Store

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
_PR_REF = re.compile(r"^(?P<repo>[^/#\s]+/[^/#\s]+)#(?P<number>\d+)$")


class UsageError(Exception):
    """The command line is wrong (exit 2)."""


def now_utc() -> datetime:
    """The current time, UTC (full precision: write pacing measures sub-second gaps)."""
    return datetime.now(UTC)


@dataclass
class Clients:
    """The clients one command needs, built from settings."""

    github: GitHubApi
    rtd: RtdApi
    login: str

    def close(self) -> None:
        """Release connections."""
        self.rtd.close()


def _github(settings: Settings, repos: Sequence[RepoSettings]) -> tuple[Github, str | None]:
    """A PyGithub client (no retries, no built-in pacing) and an App's login (None: a token's)."""
    cfg = settings.github
    common: dict[str, object] = {
        "base_url": cfg.api_url,
        "retry": None,
        "timeout": 30,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "per_page": 100,
    }
    if cfg.token.get_secret_value():
        gh = Github(auth=Auth.Token(cfg.token.get_secret_value()), lazy=True, **common)  # type: ignore[arg-type]
        return gh, None
    key = Path(cfg.private_key_path).read_text(encoding="utf-8")
    app_auth = Auth.AppAuth(cfg.app_id, key)
    integration = GithubIntegration(auth=app_auth, **common)  # type: ignore[arg-type]
    installation_id = cfg.installation_id
    if not installation_id:
        if not repos:
            raise ConfigError("github.installation_id: 0 and no repository to find it from")
        owner, name = repos[0].name.split("/", 1)
        installation_id = integration.get_repo_installation(owner, name).id
    login = f"{integration.get_app().slug}[bot]"
    gh = Github(auth=app_auth.get_installation_auth(installation_id), lazy=True, **common)  # type: ignore[arg-type]
    return gh, login


def build_clients(settings: Settings, repos: Sequence[RepoSettings]) -> Clients:
    """Install the request guard, then build the GitHub and Read the Docs clients."""
    rtd_cfg = settings.readthedocs
    rtd_urls = {"org": rtd_cfg.api_url, "com": rtd_cfg.business_api_url, "self": rtd_cfg.api_url}
    guard = Guard.for_urls(settings.github.api_url, tuple(rtd_urls.values()))
    install_github_guard(guard)
    gh, login = _github(settings, repos)
    github = GitHubApi(gh, with_labels=bool(settings.policy.skip_labels))
    if login is None:  # a token's user, read through GitHubApi so the request is counted
        login = github.viewer_login()
    rtd = RtdApi(
        api_urls=rtd_urls,
        tokens={
            "org": rtd_cfg.token.get_secret_value(),
            "com": rtd_cfg.business_token.get_secret_value(),
            "self": rtd_cfg.token.get_secret_value(),
        },
        guard=guard,
        timeout_s=settings.readthedocs.timeout_seconds,
        max_retries=settings.readthedocs.max_retries,
    )
    return Clients(github, rtd, login)


def _renderer(settings: Settings) -> Renderer:
    template_dir = settings.render.template_dir
    return Renderer(Path(template_dir) if template_dir else None)


def _select_repos(settings: Settings, names: Sequence[str] | None) -> list[RepoSettings]:
    configured = {r.name: r for r in settings.repos}
    if not names:
        if not configured:
            raise ConfigError("repos: no repository is configured (add a [[repos]] entry)")
        return list(configured.values())
    try:
        return [configured.get(n) or RepoSettings(name=n) for n in names]
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UsageError(f"--repo: expected OWNER/NAME, got {', '.join(names)}") from exc


# -- commands ----------------------------------------------------------------------------


def cmd_check_config(settings: Settings, _: argparse.Namespace) -> int:
    """Validate and print the effective settings, secrets masked."""
    settings.require_github_auth()
    print(describe(settings))
    print("configuration OK")
    return EXIT_OK


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    """Fetch, reconcile and print one pull request's report; never writes."""
    match = _PR_REF.match(args.pull)
    if not match:
        raise UsageError(f"show: expected OWNER/NAME#N, got {args.pull!r}")
    settings.require_github_auth()
    repo_name, number = match["repo"], int(match["number"])
    repo = next((r for r in settings.repos if r.name == repo_name), RepoSettings(name=repo_name))
    clients = build_clients(settings, [repo])
    try:
        now = now_utc()
        snapshot = clients.github.pull(repo_name, number, now=now)
        lookups = read_rtd(snapshot, repo, rtd=clients.rtd, now=now)
        report = reconcile(snapshot, lookups, settings.policy_model(), now=now)
    finally:
        clients.close()
    if args.format == "json":
        print(report_json(report))
    else:
        print(_renderer(settings).markdown(report))
    return EXIT_OK


def make_cycle(settings: Settings, clients: Clients, store: Store, *, dry_run: bool) -> Cycle:
    """Wire one Cycle from settings and clients."""
    return Cycle(
        github=clients.github,
        rtd=clients.rtd,
        store=store,
        renderer=_renderer(settings),
        policy=settings.policy,
        login=clients.login,
        clock=now_utc,
        dry_run=dry_run,
        out=print,
    )


def cmd_once(settings: Settings, args: argparse.Namespace) -> int:
    """One cycle over the configured (or named) repositories."""
    repos = _select_repos(settings, args.repo)
    settings.require_github_auth()
    clients = build_clients(settings, repos)
    path = settings.state.path
    # A dry run records nothing: it reads a copy of an existing state and never creates one.
    if args.dry_run:
        store = Store.open_readonly(path) if Path(path).exists() else Store.open(":memory:")
    else:
        store = Store.open(path)
    try:
        summary = make_cycle(settings, clients, store, dry_run=args.dry_run).run(repos)
    finally:
        store.close()
        clients.close()
    print(summary.line())
    if summary.failed:
        failed = "; ".join(f"{k}: {v}" for k, v in summary.failed.items())
        print(f"ci-status-bot: could not process {len(summary.failed)}: {failed}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def cmd_run(settings: Settings, _: argparse.Namespace) -> int:
    """The service: a cycle every interval until SIGTERM/SIGINT."""
    from bot.service import run_service

    repos = _select_repos(settings, None)
    settings.require_github_auth()
    return run_service(settings, repos, build_clients=build_clients, make_cycle=make_cycle)


def cmd_demo(_: Settings | None, args: argparse.Namespace) -> int:
    """Run the bot against the built-in loopback sandbox and print what it posted."""
    from bot.demo import run_demo

    return run_demo(out=print)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="TOML configuration file (default: config/bot.toml)")
    parser = argparse.ArgumentParser(
        prog="ci-status-bot",
        description="One factual CI-status comment per pull request. Retriggers nothing.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", parents=[common], help="the service: poll on the schedule")
    once = sub.add_parser("once", parents=[common], help="one cycle, then exit")
    once.add_argument("--repo", action="append", metavar="OWNER/NAME", help="only these")
    once.add_argument("--dry-run", action="store_true", help="print what would be written")
    show = sub.add_parser("show", parents=[common], help="print one pull request's report")
    show.add_argument("pull", metavar="OWNER/NAME#N")
    show.add_argument("--format", choices=("markdown", "json"), default="markdown")
    sub.add_parser("check-config", parents=[common], help="validate and print the settings")
    sub.add_parser("demo", parents=[common], help="run against the offline sandbox")
    return parser


COMMANDS = {
    "check-config": cmd_check_config,
    "show": cmd_show,
    "once": cmd_once,
    "run": cmd_run,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script and of python -m bot."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "demo":
            setup_logging("text", "WARNING")
            return cmd_demo(None, args)
        settings = load_settings(args.config)
        setup_logging(settings.log.format, settings.log.level)
        return COMMANDS[args.command](settings, args)
    except (ConfigError, UsageError) as exc:
        print(f"ci-status-bot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NotFound as exc:
        print(f"ci-status-bot: not found or not readable: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except (GitHubError, GithubException, OSError) as exc:
        print(f"ci-status-bot: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_FAIL
    except Exception as exc:
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        print(f"ci-status-bot: unexpected {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return EXIT_FAIL
