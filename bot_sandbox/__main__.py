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


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(prog="python -m bot_sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a seeded sandbox until SIGTERM")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--latency-ms", type=float, default=0.0)
    serve.add_argument("--scenario", choices=("demo", "scale"), default="demo")
    serve.add_argument("--prs", type=int, default=100)
    serve.add_argument("--checks", type=int, default=20)
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument("--webhook-url", default="", help="send signed webhooks here on changes")
    serve.add_argument("--webhook-secret", default="", help="the secret that signs them")
    return parser


def serve(args: argparse.Namespace) -> int:
    """Seed, serve, print one JSON line with the addresses, wait for SIGTERM/SIGINT."""
    world = World()
    if args.scenario == "demo":
        info = seeds.seed_demo(world)
    else:
        info = seeds.seed_scale(world, prs=args.prs, checks=args.checks, rng_seed=args.seed)
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
            "control_url": f"{sb.base_url}/_sandbox",
            "token": info["token"],
            "login": info["login"],
            "repo": info["repo"],
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
