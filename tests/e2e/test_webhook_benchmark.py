"""benchmarks/webhooks.py (issue 19): its settle leaves what the bot writes, and the service's
first cycle over it writing anything fails the benchmark loudly, naming what differs."""

from __future__ import annotations

import hashlib
import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bot_sandbox import Sandbox, World
from bot_sandbox.seeds import SCALE_REPO, seed_scale

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "webhooks.py"


def load_benchmark() -> ModuleType:
    """The benchmark script as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("webhooks_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wb() -> ModuleType:
    return load_benchmark()


def settled(wb: ModuleType, tmp_path: Path, sandbox: Sandbox, world: World) -> Path:
    config = wb.write_config(sandbox, tmp_path, port=wb.free_port(), debounce=1)
    result = wb.settle(world, config)
    assert result["comments"] == len(world.repo(SCALE_REPO).pulls)
    assert "comments created 0, edited 0" in result["cycles"][-1]  # a quiet cycle ended it
    return config


def first_cycle(wb: ModuleType, config: Path, sandbox: Sandbox, world: World) -> dict[str, str]:
    before = wb.own_bodies(world)
    sandbox.reset_stats()
    with (config.parent / "bot.log").open("w", encoding="utf-8") as log:
        bot = wb.Bot(config, log)
        try:
            return dict(wb.first_cycle(bot, sandbox, world, before, 120))
        finally:
            bot.stop()


def test_the_settled_state_is_what_the_service_would_write(wb: ModuleType, tmp_path: Path) -> None:
    """The service's first cycle over the settle writes nothing: the settle is the bot's own
    cycle (required set, isRequired, merge bases and stamps learned as a cold start does)."""
    world = World()
    seed_scale(world, prs=12, checks=5)
    with Sandbox(world) as sandbox:
        config = settled(wb, tmp_path, sandbox, world)
        first = first_cycle(wb, config, sandbox, world)
    assert first["writes"] == 0
    assert "comments created 0, edited 0, left 12, deferred 0" in first["summary"]


def test_a_first_cycle_that_writes_fails_the_benchmark(wb: ModuleType, tmp_path: Path) -> None:
    """A settle that disagrees with the bot (one comment recorded with other facts, as the old
    render-and-record settle did) makes the first cycle edit: FirstCycleWrote names it."""
    world = World()
    seed_scale(world, prs=6, checks=5)
    with Sandbox(world) as sandbox:
        config = settled(wb, tmp_path, sandbox, world)
        number = min(world.repo(SCALE_REPO).pulls)
        with world.lock:  # the settle put a body the bot would not write, and recorded it
            rec = next(r for r in world.comment_recs.values() if r.number == number)
            rec.body = rec.body.replace("passing", "passing (settled)", 1)
            body = rec.body
        with sqlite3.connect(tmp_path / "state.sqlite3") as db:
            db.execute(
                "UPDATE comments SET body_hash = ?, facts_key = 'other' WHERE number = ?",
                (hashlib.sha256(body.encode()).hexdigest(), number),
            )
        with pytest.raises(wb.FirstCycleWrote) as failed:
            first_cycle(wb, config, sandbox, world)
    message = str(failed.value)
    assert message.startswith("FAIL: the service's first cycle")
    assert "edited 1," in message
    assert f"logged: {SCALE_REPO}#{number}" in message, message
    lines = message.splitlines()  # the diff of the changed body: settled line out, bot's in
    removed = [line[3:] for line in lines if line.startswith("  -") and "(settled)" in line]
    added = {line[3:] for line in lines if line.startswith("  +") and not line.startswith("  +++")}
    assert removed and removed[0].replace("passing (settled)", "passing", 1) in added, message
    assert f"  --- settled #{number}" in lines, message
