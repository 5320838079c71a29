"""The import graph: the contracts in pyproject.toml ([tool.importlinter]) and no lazy imports.

Data flows one way (command line -> service -> composition root -> cycle -> parts -> core);
a lazy import inside a function is how a cycle or an upward import hides, so each one left is
named here with the heavy third-party library it keeps off the start-up path.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

# (file, module imported inside a function) -> why it is not imported at the top of the file.
# `ci-status-bot report`, `--help` and a config error start without these libraries (each
# command imports what it uses: `--help` and `--version` start with argparse alone).
LAZY_ALLOWED: dict[tuple[str, str], str] = {
    ("bot/cli.py", "bot.app"): "PyGithub and httpx (the clients), only for commands that read",
    ("bot/cli.py", "bot.render.comment"): "jinja2, only for commands that render a comment",
    ("bot/cli.py", "bot.service.scheduler"): "APScheduler, Starlette, uvicorn, only for `run`",
    ("bot/cli.py", "bot.service.worker"): "Procrastinate and PyGithub, only for `worker`",
    ("bot/cli.py", "bot.preflight"): "PyGithub and httpx, only for `check-config` online",
    ("bot/cli.py", "bot.demo"): "the loopback fake (Starlette, graphql-core), only for `demo`",
    ("bot/cli.py", "bot.triage.formats"): "jinja2 (the page), only when `report` formats",
    ("bot/cli.py", "bot.settings"): "pydantic and pydantic-settings, not for `--help`",
    ("bot/cli.py", "bot.state.ports"): "the data model (bot.core.model), not for `--help`",
    ("bot/cli.py", "bot.state.readonly"): "SQLAlchemy, only for `report` from the state",
    ("bot/cli.py", "bot.triage"): "the sources' contract and the guard, only for `report`",
    ("bot/cli.py", "bot.triage.keeper"): "the triage rows, only for `report` and `--summary`",
    ("bot/cli.py", "bot.render.report"): "the report's JSON (bot.core), only for `show`",
}


def _lint(
    config: Path, *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    run = "import sys; from importlinter.cli import lint_imports_command as lint; sys.exit(lint())"
    command = [sys.executable, "-c", run, "--config", str(config), "--no-cache"]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_the_import_contracts_are_kept() -> None:
    assert importlib.util.find_spec("importlinter"), "pip install -e '.[test]' (import-linter)"
    result = _lint(PYPROJECT, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_a_contract(tmp_path: Path) -> None:
    """The check can fail: a copy of the packages whose core imports the cycle is refused."""
    for package in ("bot", "bot_sandbox"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    model = tmp_path / "bot" / "core" / "model.py"
    model.write_text(
        model.read_text(encoding="utf-8") + "\nimport bot.cycle  # noqa\n", encoding="utf-8"
    )
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = _lint(tmp_path / "pyproject.toml", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bot.core.model -> bot.cycle" in result.stdout
    assert "The pure core imports nothing of bot outside bot.core BROKEN" in result.stdout


def _lazy_imports(path: Path) -> set[str]:
    """Modules of bot or bot_sandbox imported inside a function body of `path`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                names = [inner.module]
            elif isinstance(inner, ast.Import):
                names = [alias.name for alias in inner.names]
            else:
                continue
            found.update(n for n in names if n.split(".")[0] in ("bot", "bot_sandbox"))
    return found


def _all_lazy_imports() -> set[tuple[str, str]]:
    return {
        (path.relative_to(ROOT).as_posix(), module)
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for module in _lazy_imports(path)
    }


def test_no_function_imports_the_bot_lazily_except_the_named_few() -> None:
    lazy = _all_lazy_imports()
    unexplained = sorted(lazy - LAZY_ALLOWED.keys())
    assert unexplained == [], f"import these at the top of the file: {unexplained}"
    stale = sorted(LAZY_ALLOWED.keys() - lazy)
    assert stale == [], f"no longer lazy, drop from LAZY_ALLOWED: {stale}"


@pytest.mark.parametrize(
    "source", ["def f():\n    from bot.cycle import Cycle\n", "def f():\n    import bot_sandbox\n"]
)
def test_the_lazy_import_scan_sees_a_function_level_import(tmp_path: Path, source: str) -> None:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    assert _lazy_imports(path)


def test_every_part_of_the_bot_has_its_place_in_the_layers() -> None:
    """A new module or package of bot/ must be placed in the layers (else nothing checks it)."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    parts = {
        f"bot.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "bot").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert sorted(parts - placed) == []


# What a command that does not need them must start without (top-level packages).
_CLIENTS = ("github", "graphql", "httpx", "httpcore", "requests", "trio")
_STARTS_WITHOUT: dict[tuple[str, ...], tuple[str, ...]] = {
    ("--help",): ("pydantic", "pydantic_settings", "sqlalchemy", "jinja2", *_CLIENTS),
    ("--version",): ("pydantic", "pydantic_settings", "sqlalchemy", "jinja2", *_CLIENTS),
    ("check-config", "--offline"): ("sqlalchemy", *_CLIENTS),
    ("report",): ("jinja2", *_CLIENTS),
}


@pytest.mark.parametrize("command", list(_STARTS_WITHOUT), ids=" ".join)
def test_a_command_imports_only_what_it_uses(command: tuple[str, ...], tmp_path: Path) -> None:
    """`python -X importtime -m bot ...` names every module the process imported (stderr)."""
    config = tmp_path / "bot.toml"
    config.write_text(
        '[github]\ntoken = "ghp_probe"\n\n[state]\npath = "'
        + (tmp_path / "state.sqlite3").as_posix()
        + '"\n\n[[repos]]\nname = "octo/repo"\n',
        encoding="utf-8",
    )
    args = [*command] if command[0].startswith("--") else [*command, "--config", str(config)]
    run = [sys.executable, "-X", "importtime", "-m", "bot", *args]
    out = subprocess.run(run, capture_output=True, text=True, check=False, cwd=tmp_path)
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "bot" in imported, out.stderr[-2000:]  # the probe saw the bot's own imports
    assert out.returncode in (0, 1), out.stdout + out.stderr[-2000:]  # report: no state yet
    assert sorted(imported & set(_STARTS_WITHOUT[command])) == []


def test_once_starts_without_what_no_cycle_uses(tmp_path: Path) -> None:
    """`once` (GitHub on a closed loopback port: it fails at its first request, exit 1) imports
    the clients, never trio, httpx's command-line client (click, pygments, rich) or graphql-core
    for its own query texts."""
    config = tmp_path / "bot.toml"
    config.write_text(
        '[github]\napi_url = "http://127.0.0.1:1/api/v3"\ntoken = "ghp_probe"\n\n'
        '[readthedocs]\napi_url = "http://127.0.0.1:1/api/v3"\n\n[state]\npath = "'
        + (tmp_path / "state.sqlite3").as_posix()
        + '"\n\n[[repos]]\nname = "octo/repo"\n',
        encoding="utf-8",
    )
    run = [sys.executable, "-X", "importtime", "-m", "bot", "once", "--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CI_STATUS_BOT_")}
    out = subprocess.run(run, capture_output=True, text=True, check=False, cwd=tmp_path, env=env)
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    assert {"httpx", "github", "sqlalchemy"} <= imported, out.stderr[-2000:]
    assert sorted(imported & {"trio", "click", "pygments", "rich", "graphql"}) == []
