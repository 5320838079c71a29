"""The stages' import contracts (pyproject.toml) can fail: a copy of the packages where judge
reads the state, plan calls back into gather and the service imports what drives a pass is
refused, each by its contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

BREAKS = {
    "bot/cycle/judge.py": "import bot.state.ports  # noqa",
    "bot/cycle/plan.py": "import bot.cycle.gather  # noqa",
    "bot/service/http.py": "import bot.cycle.run  # noqa",
}


def test_the_stage_contracts_refuse_a_stage_that_reads_or_calls_back(tmp_path: Path) -> None:
    for package in ("bot", "bot_sandbox"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for path, line in BREAKS.items():
        module = tmp_path / path
        module.write_text(module.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    run = "import sys; from importlinter.cli import lint_imports_command as lint; sys.exit(lint())"
    result = subprocess.run(
        [sys.executable, "-c", run, "--config", str(tmp_path / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "bot.cycle.judge -> bot.state.ports" in out
    assert "judge and plan are pure" in out and "BROKEN" in out
    assert (
        "A pass flows one way: run drives the stages, no stage imports another or run BROKEN" in out
    )
    assert "bot.service.http -> bot.cycle.run" in out
    assert "Only the composition root imports what drives a pass (bot.cycle.run) BROKEN" in out
