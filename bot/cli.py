"""The ci-status-bot command: builds settings and clients, hands them down, and reports."""

from __future__ import annotations

import argparse
import gc
import logging
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

from bot.logs import redact, register_secrets, setup_logging
from bot.state.lock import StateBusy

if TYPE_CHECKING:
    from bot.render.comment import Renderer
    from bot.retry import Sleep
    from bot.settings import RepoSettings, Settings
    from bot.state.ports import TriageRows
    from bot.triage import rows

# Each command imports what it uses, in its own body: `--help` starts with argparse alone,
# `report` and `check-config` without the GitHub and HTTP clients (PyGithub, httpx,
# graphql-core), the settings' pydantic only once a command reads them.

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
_PR_REF = re.compile(r"^(?P<repo>[^/#\s]+/[^/#\s]+)#(?P<number>\d+)$")


class UsageError(Exception):
    """The command line is wrong (exit 2)."""


def _renderer(settings: Settings) -> Renderer:
    from bot.render.comment import renderer_for  # not bot.app: check-config needs no client

    return renderer_for(settings.render.template_dir)


def _check_templates(settings: Settings) -> None:
    """Refuse a user template that does not render or does not put the marker first (exit 2)."""
    from bot.render.comment import TemplateInvalid
    from bot.settings import ConfigError

    try:
        _renderer(settings).validate()
    except TemplateInvalid as exc:
        raise ConfigError(f"render.template_dir: {exc}") from exc


def _select_repos(settings: Settings, names: Sequence[str] | None) -> list[RepoSettings]:
    """The repositories named (in their configured spelling: GitHub ignores case), or all."""
    from bot.settings import RepoSettings

    if not names:
        settings.require_repos()
        return list(settings.repos)
    try:
        chosen = [settings.configured_repo(n) or RepoSettings(name=n) for n in names]
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UsageError(f"--repo: expected OWNER/NAME, got {', '.join(map(repr, names))}") from exc
    return list({r.name.casefold(): r for r in chosen}.values())


# -- commands ----------------------------------------------------------------------------


def cmd_check_config(settings: Settings, args: argparse.Namespace, _: Sleep | None) -> int:
    """Validate and print the effective settings, secrets masked; then, unless --offline, ask
    GitHub and Read the Docs (reads only) and print every finding, then a summary."""
    from bot.settings import describe

    settings.require_github_auth()
    _check_templates(settings)
    settings.require_repos()
    print(describe(settings))
    if args.offline:
        print("configuration OK (offline: no service was asked)")
        return EXIT_OK
    from bot.preflight import check_services

    print("asking the services (reads only):")
    report = check_services(settings)
    for finding in report.findings:
        print(redact(finding.line()))
    print(report.summary())
    if any(f.outcome == "problem" for f in report.findings):
        return EXIT_USAGE
    return EXIT_FAIL if report.problems else EXIT_OK


def cmd_show(settings: Settings, args: argparse.Namespace, sleep: Sleep | None) -> int:
    """Fetch, reconcile and print one pull request's report: the comment the bot keeps for it,
    dated by the state or the comment's stamp; never writes, never creates a state."""
    from bot.app import build_clients, make_cycle, open_reader
    from bot.render.report import report_json
    from bot.settings import RepoSettings

    match = _PR_REF.match(args.pull)
    if not match:
        raise UsageError(f"show: expected OWNER/NAME#N, got {args.pull!r}")
    settings.require_github_auth()
    number = int(match["number"])
    repo = settings.configured_repo(match["repo"]) or RepoSettings(name=match["repo"])
    clients = build_clients(settings, [repo], sleep=sleep)
    try:
        with open_reader(settings) as state:
            cycle = make_cycle(settings, clients, state, dry_run=True, out=None)
            report, body = cycle.preview(repo, number)
    finally:
        clients.close()
    print(report_json(report) if args.format == "json" else body)
    return EXIT_OK


def cmd_once(settings: Settings, args: argparse.Namespace, sleep: Sleep | None) -> int:
    """One cycle over the configured (or named) repositories."""
    from bot.app import build_clients, hold_state, make_cycle, open_reader, open_store, run_once

    repos = _select_repos(settings, args.repo)
    settings.require_github_auth()
    _check_templates(settings)
    # One process owns a state: held until exit; a dry run writes nothing and takes no lock.
    # With no state at all (state.path = "") there is nothing on disk to hold or create.
    lock = None if args.dry_run or settings.state.stateless else hold_state(settings)
    try:
        clients = build_clients(settings, repos, sleep=sleep)
        if settings.every_installation and not args.repo:
            from bot.app import discovered_repos

            repos = discovered_repos(settings, clients)
        # A dry run records nothing: it reads an existing state and never creates one.
        try:
            if args.dry_run:
                with open_reader(settings) as reader:
                    summary = make_cycle(settings, clients, reader, dry_run=True).run(repos)
                    if args.summary:
                        _write_summary(args.summary, reader, repos)
            else:
                with open_store(settings) as store:
                    summary = run_once(settings, clients, store, repos, progress=_progress_sink())
                    if args.summary:
                        _write_summary(args.summary, store, repos)
        finally:
            clients.close()
    finally:
        if lock is not None:
            lock.release()
    print(summary.line())
    return _once_failures(summary.failed, summary.heads)


def _write_summary(path: str, store: TriageRows, repos: Sequence[RepoSettings]) -> None:
    """Append the triage table of what the run saw to `path` (a job summary: markdown)."""
    import bot.triage.formats as formats
    from bot.triage import rows
    from bot.triage.keeper import stored_entries

    entries = stored_entries(store)
    view = rows.ordered(entries, rows.Filters(frozenset(r.name for r in repos)))
    text = formats.markdown(view, now=datetime.now(UTC))
    with open(path, "a", encoding="utf-8") as out:
        out.write(text if text.endswith("\n") else text + "\n")


# GitHub's 403 for a token (a workflow's GITHUB_TOKEN) whose permissions lack what is asked
_NOT_ACCESSIBLE = "Resource not accessible by integration"


def _once_failures(failed: dict[str, str], heads: dict[str, str]) -> int:
    """Say what could not be processed; a missing workflow permission as one line naming it."""
    if not failed:
        return EXIT_OK
    refused = {k: v for k, v in failed.items() if _NOT_ACCESSIBLE in v}
    reading = sorted(k for k in refused if "#" not in k)  # a repository: its pull requests
    writing = sorted(k for k in refused if k in heads)  # read, then refused: its comment
    for names, what, permission in (
        (reading, "to read the pull requests of", "pull-requests: read"),
        (writing, "to write the comment on", "issues: write"),
    ):
        if names:
            _error(
                f"GitHub refused {what} {_names(names)} (403 {_NOT_ACCESSIBLE}): "
                f'add "{permission}" to the workflow\'s permissions:'
            )
    rest = {k: _unseen(v) for k, v in failed.items() if k not in reading and k not in writing}
    if rest:
        listed = "; ".join(f"{k}: {v}" for k, v in rest.items())
        _error(f"could not process {len(rest)}: {listed}")
    return EXIT_FAIL


def _unseen(reason: str) -> str:
    """GitHub answers the same for a repository that does not exist and one the token cannot
    see (GraphQL NOT_FOUND, REST 404): say both."""
    if "Could not resolve to a Repository" in reason:
        return f"does not exist, or this token cannot see it ({reason})"
    return reason


def _names(names: Sequence[str]) -> str:
    """At most three names, then how many more."""
    shown = ", ".join(names[:3])
    return shown if len(names) <= 3 else f"{shown} and {len(names) - 3} more"


def _progress_sink() -> Callable[[str], None] | None:
    """On a terminal, one line of stderr rewritten in place ("" clears it); else None."""
    if not sys.stderr.isatty():
        return None

    def show(line: str) -> None:
        sys.stderr.write(f"\r{line}\x1b[K" if line else "\r\x1b[K")
        sys.stderr.flush()

    return show


def cmd_run(settings: Settings, _: argparse.Namespace, __: Sleep | None) -> int:
    """The service: a cycle every interval until SIGTERM/SIGINT."""
    from bot.app import hold_state
    from bot.service.scheduler import run_service

    _serving()
    repos = _select_repos(settings, None)
    settings.require_github_auth()
    _check_templates(settings)
    if settings.state.stateless:
        raise UsageError(
            'state.path = "": no state at all is for `once` (a fresh folder each run); '
            "`run` keeps its state between cycles: name a file"
        )
    lock = hold_state(settings)
    try:
        return run_service(settings, repos)
    finally:
        if lock is not None:
            lock.release()


def cmd_worker(settings: Settings, _: argparse.Namespace, __: Sleep | None) -> int:
    """Work the queue's jobs until SIGTERM."""
    from bot.service.worker import run_worker
    from bot.settings import require_queue

    _serving()
    require_queue(settings)
    settings.require_github_auth()
    _check_templates(settings)
    return run_worker(settings)


def _serving() -> None:
    """A command that keeps running (and allocating) until stopped collects cyclic garbage,
    once its libraries are imported (console() holds the collector off until then)."""
    gc.enable()


def cmd_demo(_: Settings | None, args: argparse.Namespace) -> int:
    """Run the bot against the built-in loopback sandbox and print what it posted."""
    from bot.demo import run_demo

    _serving()
    return run_demo(out=print, serve=args.serve)


def cmd_report(settings: Settings, args: argparse.Namespace, sleep: Sleep | None) -> int:
    """The triage view from the state (no GitHub request); --live reads GitHub first, read-only."""
    from bot.state.ports import StoreError
    from bot.triage import rows

    filters = _report_filters(settings, args)
    try:
        live = args.live
        entries = _live_entries(settings, args.repo, sleep) if live else _stored_entries(settings)
    except StoreError as exc:
        print(f"ci-status-bot: {exc}", file=sys.stderr)
        return EXIT_FAIL
    view = rows.ordered(entries, filters)
    tty = sys.stdout.isatty() and not args.output
    text = _triage_text(view, args.format, tty=tty, wide=args.wide, by=args.by)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote the triage view ({len(view)} pull requests) to {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _report_filters(settings: Settings, args: argparse.Namespace) -> rows.Filters:
    from bot.settings import RepoSettings
    from bot.triage import rows

    try:
        verdicts = rows.parse_verdicts(args.verdict or "")
        named = [
            (settings.configured_repo(n) or RepoSettings(name=n)).name for n in args.repo or ()
        ]
    except ValueError as exc:
        raise UsageError(f"report: {exc}") from exc
    unknown = [n for n in args.repo or () if settings.configured_repo(n) is None]
    if unknown:
        raise UsageError(
            f"report --repo: {', '.join(unknown)} is not a configured repository (the view "
            f"holds only [[repos]]: {', '.join(r.name for r in settings.repos) or 'none'})"
        )
    configured = [r.name for r in settings.repos]
    stuck = bool(args.stuck_in_merge_queue)
    return rows.Filters(frozenset(named or configured), verdicts, args.drafts, stuck)


def _stored_entries(settings: Settings) -> list[rows.TriageEntry]:
    if settings.state.stateless:
        raise UsageError(
            'report: state.path = "": there is no state to read; --live reads GitHub instead'
        )
    from bot.state.readonly import open_read_only
    from bot.triage.keeper import stored_entries

    with open_read_only(settings.state.location) as reader:
        return stored_entries(reader)


def _live_entries(
    settings: Settings, names: Sequence[str] | None, sleep: Sleep | None
) -> list[rows.TriageEntry]:
    """Read and reconcile every selected open pull request now, writing nothing."""
    settings.require_github_auth()
    from bot.app import build_clients, make_cycle, open_reader
    from bot.triage import rows

    repos = _select_repos(settings, names)
    clients = build_clients(settings, repos, sleep=sleep)
    store = open_reader(settings)
    try:
        cycle = make_cycle(settings, clients, store, dry_run=True)
        read_at = datetime.now(UTC)
        return [
            rows.entry_for(s, r, docs=cycle.docs, comment_id=c, read_at=read_at)
            for s, r, c in cycle.read_reports(repos)
        ]
    finally:
        store.close()
        clients.close()


def _triage_text(
    view: Sequence[rows.TriageEntry], fmt: str, *, tty: bool, wide: bool = False, by: str = "pull"
) -> str:
    import bot.triage.formats as formats

    now = datetime.now(UTC)
    if by == "check" and fmt != "html":  # the page groups by check in the browser
        from bot.triage import bycheck

        grouped = {"json": bycheck.checks_json, "markdown": bycheck.checks_markdown}
        text = grouped.get(fmt, bycheck.checks_table)(view, now=now)
        return text if text.endswith("\n") else text + "\n"
    width = shutil.get_terminal_size((formats.NARROW, 24)).columns if tty else formats.NARROW
    if fmt == "json":
        return formats.triage_json(view, now=now) + "\n"
    if fmt == "markdown":
        return formats.markdown(view, now=now)
    if fmt == "html":
        return formats.PageRenderer().render(view, now=now)
    return formats.table(view, now=now, width=width, colour=tty, wide=wide)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="TOML configuration file (default: config/bot.toml)")
    parser = argparse.ArgumentParser(
        prog="ci-status-bot",
        description="One factual CI-status comment per pull request. Retriggers nothing.",
        parents=[common],
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", parents=[common], help="the service: poll on the schedule")
    sub.add_parser("worker", parents=[common], help="work the queue's jobs ([queue] url)")
    once = sub.add_parser("once", parents=[common], help="one cycle, then exit")
    once.add_argument("--repo", action="append", metavar="OWNER/NAME", help="only these")
    once.add_argument("--dry-run", action="store_true", help="print what would be written")
    once.add_argument(
        "--summary", metavar="FILE", help="append the triage table of what it saw (markdown)"
    )
    show = sub.add_parser("show", parents=[common], help="print one pull request's report")
    show.add_argument("pull", metavar="OWNER/NAME#N")
    show.add_argument("--format", choices=("markdown", "json"), default="markdown")
    check = sub.add_parser(
        "check-config", parents=[common], help="validate the settings and ask the services"
    )
    check.add_argument("--offline", action="store_true", help="ask no service (no request)")
    demo = sub.add_parser("demo", parents=[common], help="run against the offline sandbox")
    demo.add_argument(
        "--serve", action="store_true", help="then keep the sandbox and `run`'s page up (Ctrl-C)"
    )
    _report_options(
        sub.add_parser("report", parents=[common], help="the triage view, most urgent first")
    )
    return parser


def _report_options(report: argparse.ArgumentParser) -> None:
    """`report`'s options: what to show, how, and where."""
    report.add_argument("--repo", action="append", metavar="OWNER/NAME", help="only these")
    report.add_argument("--verdict", metavar="V[,V]", help="only these verdicts")
    report.add_argument("--drafts", choices=("only", "exclude"), help="only or no drafts")
    report.add_argument(
        "--stuck-in-merge-queue",
        action="store_true",
        help="only those whose merge-group commit lacks or fails a required check",
    )
    report.add_argument("--format", choices=("table", "json", "markdown", "html"), default="table")
    report.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    report.add_argument("--live", action="store_true", help="read GitHub first (read-only)")
    report.add_argument(
        "--wide", action="store_true", help="the full table: every column, nothing cut"
    )
    report.add_argument(
        "--by", choices=("pull", "check"), default="pull",
        help="one line per pull request, or per failing check with the pull requests it fails",
    )  # fmt: skip


COMMANDS = {
    "check-config": cmd_check_config,
    "show": cmd_show,
    "once": cmd_once,
    "run": cmd_run,
    "worker": cmd_worker,
    "report": cmd_report,
}


class _Version(argparse.Action):
    """--version: the installed distribution's version, read only when it is asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"ci-status-bot {_version()}")
        parser.exit()


def _version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ci-status-bot")
    except PackageNotFoundError:  # run from a tree that was never installed
        return "(not installed)"


def _quiet_migrations(level: str) -> None:
    """Alembic says every migration step at INFO (a dozen lines before a stateless run's
    first real output): held at WARNING unless DEBUG is asked for."""
    if level.upper() != "DEBUG":
        logging.getLogger("alembic").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None, *, sleep: Sleep | None = None) -> int:
    """Entry point of the console script and of python -m bot.

    `sleep` is how the commands' clients and cycle wait (retry backoff, Retry-After, write
    pacing); None, the console script's, waits on the stop Event that ends every wait.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from bot.settings import ConfigError, load_settings
    from bot.state.ports import StoreError

    settings: Settings | None = None
    try:
        if args.command == "demo":
            setup_logging("text", "WARNING")
            return cmd_demo(None, args)
        settings = load_settings(args.config)
        register_secrets(settings.secret_values())
        setup_logging(settings.log.format, settings.log.level)
        _quiet_migrations(settings.log.level)
        return COMMANDS[args.command](settings, args, sleep)
    except (ConfigError, UsageError) as exc:
        _error(f"{exc}")
        return EXIT_USAGE
    except (StateBusy, StoreError) as exc:  # the message names the state and the problem
        _error(f"{exc}")
        return EXIT_FAIL
    except OSError as exc:
        _error(f"{exc.__class__.__name__}: {exc}")
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_FAIL
    except Exception as exc:
        return _failed(exc, settings)


def console() -> NoReturn:
    """The process: `ci-status-bot` and `python -m bot`. main(), then exit with its code.

    Costs of a fresh process that are none of a command's work are left out. httpcore imports
    trio where it is installed (the test extra's selenium brings it), to serve async code
    running under trio: the bot's HTTP clients are synchronous and its server runs on asyncio
    (~80 ms of CPU at every start). httpx imports its command-line client where click,
    pygments and rich are installed (the test extra brings them): the bot never runs it
    (~50 ms). The cyclic garbage collector waits while the libraries are imported and while
    a command that ends runs (its cycle pauses it anyway, bot.cycle.run); a command that
    serves collects from then on (_serving). And on the way out the interpreter's collector
    would walk every object the command left (a cycle's reads: ~0.3 s of CPU after `once`
    at 500 pull requests); they are frozen first, freed
    with the process.
    """
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    gc.disable()
    code = main()
    gc.freeze()
    raise SystemExit(code)


def _failed(exc: Exception, settings: Settings | None) -> int:
    """Exit 1 with one line for an error of the GitHub clients (imported only if they were)."""
    github_io = sys.modules.get("bot.github.errors")
    pygithub = sys.modules.get("github.GithubException")
    if github_io is not None and isinstance(exc, github_io.GitHubError) and exc.status is None:
        api = settings.github.api_url if settings is not None else "github.api_url"
        where = urlsplit(api).netloc or api
        _error(f"{exc} (no answer from {where}: github.api_url = {api})")
    elif github_io is not None and isinstance(exc, github_io.NotFound):
        _error(f"not found or not readable: {exc}")
    elif github_io is not None and isinstance(exc, github_io.GitHubError) and exc.status == 401:
        _error(
            f"GitHub refused the bot's credential (HTTP 401): {exc}; check github.token or the "
            "App's key (`ci-status-bot check-config` asks GitHub and names what it refuses)"
        )
    elif (github_io is not None and isinstance(exc, github_io.GitHubError)) or (
        pygithub is not None and isinstance(exc, pygithub.GithubException)
    ):
        _error(f"{exc.__class__.__name__}: {exc}")
    else:
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        _error(f"unexpected {exc.__class__.__name__}: {exc}")
    return EXIT_FAIL


def _error(message: str) -> None:
    """One line on stderr, secrets masked."""
    print(f"ci-status-bot: {redact(message)}", file=sys.stderr)
