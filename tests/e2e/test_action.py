"""The GitHub Action (action.yml): its command, run as written, against the loopback sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support import (
    REPO,
    action_step,
    bot_comments,
    clean_env,
    outside_allowlist,
    seed_case,
    writes,
)

from bot_sandbox import Sandbox, World

ROOT = Path(__file__).resolve().parents[2]
ACTIONS_TOKEN = "ghs_actions-token-of-this-workflow-run"
ACTIONS_LOGIN = "github-actions[bot]"


def run_action(
    workspace: Path, runner_temp: Path, inputs: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run the action's command line exactly as action.yml writes it, in `workspace`."""
    command, step_env = action_step(inputs)
    env = clean_env()
    env.update(step_env)
    env["GITHUB_ACTION_PATH"] = str(ROOT)
    env["RUNNER_TEMP"] = str(runner_temp)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-e", "-c", command],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def workflow_config(workspace: Path, sandbox: Sandbox) -> str:
    """The repository's config file as a workflow would check it out (no secret in it)."""
    path = workspace / ".github" / "ci-status-bot.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "\n".join(
            [
                "[github]",
                f'api_url = "{sandbox.github_url}"',
                "[readthedocs]",
                f'api_url = "{sandbox.rtd_url}"',
                f'business_api_url = "{sandbox.rtd_url}"',
                "max_retries = 1",
                "[[repos]]",
                f'name = "{REPO}"',
                "",
            ]
        ),
        encoding="utf-8",
    )
    return ".github/ci-status-bot.toml"


@pytest.fixture
def actions_sandbox() -> Iterator[tuple[World, Sandbox]]:
    """The seed case, readable with a workflow's GITHUB_TOKEN (an installation token)."""
    world = World()
    seed_case(world, now=datetime.now(UTC))
    world.add_actions_token(ACTIONS_TOKEN, REPO)
    with Sandbox(world) as sandbox:
        yield world, sandbox
        assert outside_allowlist(sandbox) == []


def test_the_action_runs_the_script_in_the_repository() -> None:
    """action.yml's command is the repository's script, so the test below runs what it runs."""
    command, env = action_step({})
    assert command.strip().strip("'") == '"$GITHUB_ACTION_PATH/scripts/action-once.sh"'
    assert env["INPUT_GITHUB_TOKEN"] == "${{ github.token }}"  # the default: GITHUB_TOKEN
    assert os.access(ROOT / "scripts" / "action-once.sh", os.X_OK)


def test_the_action_three_times_in_fresh_folders_comments_once_as_github_actions(
    actions_sandbox: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """Each run starts in an empty workspace and runner temp (as a scheduled job does) and
    leaves nothing on disk: the first posts the comment as github-actions[bot], the next two
    write nothing, so the comment (and every time in it) stays as first posted."""
    world, sandbox = actions_sandbox
    runs, bodies = [], []
    for attempt in (1, 2, 3):
        workspace, runner_temp = tmp_path / f"work{attempt}", tmp_path / f"temp{attempt}"
        workspace.mkdir()
        runner_temp.mkdir()
        inputs = {"config": workflow_config(workspace, sandbox), "github-token": ACTIONS_TOKEN}
        before = len(writes(sandbox))
        done = run_action(workspace, runner_temp, inputs)
        assert done.returncode == 0, done.stderr
        assert ACTIONS_TOKEN not in done.stdout + done.stderr
        runs.append(len(writes(sandbox)) - before)
        mine = bot_comments(world, 7430, login=ACTIONS_LOGIN)
        assert len(mine) == 1
        bodies.append(mine[0]["body"])
        assert list(runner_temp.iterdir()) == []  # no state anywhere: state.path = ""
        assert list(workspace.iterdir()) == [workspace / ".github"]
    assert runs == [1, 0, 0], f"writes per run: {runs}"
    assert bodies[0] == bodies[1] == bodies[2]


def test_the_state_dir_input_keeps_a_state_for_the_cache(
    actions_sandbox: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """With `state-dir` (the folder actions/cache restores) the run keeps its state there."""
    _, sandbox = actions_sandbox
    workspace, cache = tmp_path / "work", tmp_path / "cache"
    workspace.mkdir()
    inputs = {
        "config": workflow_config(workspace, sandbox),
        "github-token": ACTIONS_TOKEN,
        "state-dir": str(cache),
    }
    done = run_action(workspace, tmp_path, inputs)
    assert done.returncode == 0, done.stderr
    assert (cache / "ci-status-bot.sqlite3").is_file()


def test_an_empty_config_input_is_refused(tmp_path: Path) -> None:
    """The script refuses to run without a configuration file named (exit 2, said why)."""
    done = run_action(tmp_path, tmp_path, {"config": ""})
    assert done.returncode == 2
    assert "'config' input is empty" in done.stderr
