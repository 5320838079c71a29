"""Decode the bot's biggest answer (a page of 100 open pull requests): json, orjson, msgspec.

    python benchmarks/decode.py [--checks 60] [--repeat 20]

The page is the one the bot asks for (bot.github.query.pulls_page_query), answered by the
loopback sandbox over its scale scenario; each decoder turns the same raw bytes into Python
objects `--repeat` times. Prints the answer's size and each decoder's best time per page and
per MB (CPU, one core), so the choice of decoder is a measurement.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import orjson

from bot.github.query import pulls_page_query
from bot_sandbox import Sandbox, World
from bot_sandbox.seeds import SCALE_REPO, seed_scale


def best(decode: Callable[[bytes], Any], raw: bytes, repeat: int) -> float:
    """The fastest of `repeat` decodes, CPU seconds."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        decode(raw)
        times.append(time.process_time() - start)
    return min(times)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    world = World()
    info = seed_scale(world, prs=100, checks=args.checks)
    owner, name = SCALE_REPO.split("/")
    with Sandbox(world) as sandbox:
        answer = httpx.post(
            sandbox.graphql_url,
            headers={"Authorization": f"bearer {info['token']}"},
            json={
                "query": pulls_page_query(with_labels=False),
                "variables": {"owner": owner, "name": name, "first": 100, "after": None},
            },
            timeout=120,
        )
    raw = answer.content
    assert json.loads(raw) == orjson.loads(raw)
    size = len(raw) / 1e6
    print(f"one page of 100 pull requests x {args.checks} contexts: {size:.2f} MB")
    decoders: dict[str, Callable[[bytes], Any]] = {
        "json (stdlib, PyGithub's)": json.loads,
        "orjson": orjson.loads,
    }
    try:  # not one of the bot's dependencies: compared when installed
        import msgspec

        decoders["msgspec"] = msgspec.json.decode
    except ImportError:
        print("  (msgspec is not installed: not compared)")
    for label, decode in decoders.items():
        seconds = best(decode, raw, args.repeat)
        print(f"  {label:26} {seconds * 1000:7.1f} ms/page  {seconds / size * 1000:6.1f} ms/MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
