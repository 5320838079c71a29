"""Run the sandbox in its own process: python -m bot_sandbox serve [options]."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType

from bot_sandbox import seeds
from bot_sandbox.server import Sandbox
from bot_sandbox.world import World

DESCRIPTION = """\
The loopback sandbox: a fake GitHub (REST and GraphQL, the GraphQL executed against GitHub's
real public schema) and a fake Read the Docs (API v3), in one local HTTP server, seeded with
example pull requests. It records every request. The bot's tests, `ci-status-bot demo` and
the benchmarks use it; run it alone to point a configuration at it (nothing leaves the
machine)."""

SERVE_EPILOG = """\
It prints one JSON line with the addresses to put in a configuration ("github_url" as
github.api_url, "rtd_url" as readthedocs.api_url and readthedocs.business_api_url) and the
token and repository it accepts, then serves until SIGTERM or Ctrl-C. Example:
  python -m bot_sandbox serve --port 8900
  CI_STATUS_BOT_GITHUB__API_URL=http://127.0.0.1:8900/api/v3 ..."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(prog="python -m bot_sandbox", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="serve a seeded sandbox until SIGTERM or Ctrl-C",
        description="Serve a seeded sandbox until SIGTERM or Ctrl-C.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    serve.add_argument(
        "--port", type=int, default=0, help="port to listen on (default 0: any free port)"
    )
    serve.add_argument(
        "--latency-ms", type=float, default=0.0, metavar="MS",
        help="added to every answer, like a real network (default %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--scenario", choices=("demo", "scale"), default="demo",
        help="demo: the five pull requests of `ci-status-bot demo`; scale: --prs generated "
        "pull requests with --checks check runs each (default %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--prs", type=int, default=100, help="scale: open pull requests (default %(default)s)"
    )
    serve.add_argument(
        "--checks", type=int, default=20, help="scale: check runs per head (default %(default)s)"
    )
    serve.add_argument(
        "--repos", type=int, default=1,
        help="scale: spread the pull requests over this many repositories (default %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--seed", type=int, default=0, help="scale: random seed of the generated world"
    )
    serve.add_argument(
        "--failing-fraction", type=float, default=None, metavar="F",
        help="scale: this fraction of heads fails (one failing check run each); default: each "
        "check run fails with 3%% chance (most heads of 60 checks fail)",
    )  # fmt: skip
    serve.add_argument(
        "--actions-token", default="", metavar="TOKEN",
        help="also accept TOKEN as a workflow's GITHUB_TOKEN for the seeded repository (an "
        "installation token of `github-actions`: GET /user refuses it, comments are by "
        "github-actions[bot])",
    )  # fmt: skip
    serve.add_argument(
        "--webhook-url", default="", metavar="URL",
        help="send signed GitHub webhook deliveries here when the world changes",
    )  # fmt: skip
    serve.add_argument(
        "--webhook-secret", default="", metavar="SECRET", help="the secret that signs them"
    )
    return parser


def serve(args: argparse.Namespace) -> int:
    """Seed, serve, print one JSON line with the addresses, wait for SIGTERM/SIGINT."""
    world = World()
    if args.scenario == "demo":
        info = seeds.seed_demo(world)
    else:
        info = seeds.seed_scale(
            world, prs=args.prs, checks=args.checks, rng_seed=args.seed, repos=args.repos,
            failing_fraction=args.failing_fraction,
        )  # fmt: skip
    if args.actions_token:
        world.add_actions_token(args.actions_token, str(info["repo"]))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sender = None
    if args.webhook_url:
        from bot_sandbox.webhook_sender import WebhookSender

        sender = WebhookSender(args.webhook_url, args.webhook_secret).attach(world)
    with Sandbox(world, latency_ms=args.latency_ms, host=args.host, port=args.port) as sb:
        line = {
            "github_url": sb.github_url,
            "graphql_url": sb.graphql_url,
            "rtd_url": sb.rtd_url,
            "codecov_url": sb.codecov_url,
            "azure_url": sb.azure_url,
            "control_url": f"{sb.base_url}/_sandbox",
            "token": info["token"],
            "login": info["login"],
            "repo": info["repo"],
            "repos": info.get("repos", [info["repo"]]),
            "rtd_project": info["rtd_project"],
            "prs": sorted(info["pulls"]) if "pulls" in info else info["prs"],
        }
        print(json.dumps(line), flush=True)
        while not stop.wait(0.5):
            pass
    if sender is not None:
        sender.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
