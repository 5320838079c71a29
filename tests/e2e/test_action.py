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
    workspace: Path, runner_temp: Path, inputs: dict[str, str], **runner: str
) -> subprocess.CompletedProcess[str]:
    """Run the action's command line exactly as action.yml writes it, in `workspace`
    (`runner`: what the runner sets besides, e.g. GITHUB_STEP_SUMMARY)."""
    command, step_env = action_step(inputs)
    env = clean_env()
    env.update(runner)
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


def test_the_job_summary_holds_the_triage_table_of_what_the_run_saw(
    actions_sandbox: tuple[World, Sandbox], tmp_path: Path
) -> None:
    """$GITHUB_STEP_SUMMARY (the run's page) gets the triage table, appended to what is there."""
    _, sandbox = actions_sandbox
    workspace = tmp_path / "work"
    workspace.mkdir()
    summary = tmp_path / "step_summary.md"
    summary.write_text("an earlier step's summary\n", encoding="utf-8")
    inputs = {"config": workflow_config(workspace, sandbox), "github-token": ACTIONS_TOKEN}
    done = run_action(workspace, tmp_path, inputs, GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 0, done.stderr
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("an earlier step's summary\n### CI triage · 1 open pull request ")
    assert f"{REPO}#7430" in text and "incomplete" in text


# What a workflow's `permissions:` block grants when it leaves one line of the example out
EXAMPLE_PERMISSIONS = {
    "pull_requests": "read", "issues": "write", "checks": "read", "statuses": "read",
    "contents": "read", "metadata": "read",
}  # fmt: skip


@pytest.mark.parametrize(
    ("granted", "hint"),
    [
        ({**EXAMPLE_PERMISSIONS, "issues": "read"}, '"issues: write"'),
        ({k: v for k, v in EXAMPLE_PERMISSIONS.items() if k != "pull_requests"},
         '"pull-requests: read"'),
    ],
)  # fmt: skip
def test_a_missing_permission_is_one_line_naming_it(
    tmp_path: Path, granted: dict[str, str], hint: str
) -> None:
    """GitHub's 403s for a token without `issues: write` or `pull-requests: read` become one
    line that names the permission to add, not a line of 403s."""
    world = World()
    seed_case(world, now=datetime.now(UTC))
    world.add_actions_token(ACTIONS_TOKEN, REPO, permissions=granted)
    with Sandbox(world) as sandbox:
        workspace = tmp_path / "work"
        workspace.mkdir()
        inputs = {"config": workflow_config(workspace, sandbox), "github-token": ACTIONS_TOKEN}
        done = run_action(workspace, tmp_path, inputs)
        assert outside_allowlist(sandbox) == []
    assert done.returncode == 1
    said = [line for line in done.stderr.splitlines() if line.startswith("ci-status-bot:")]
    assert len(said) == 1, done.stderr
    assert f"add {hint} to the workflow's permissions:" in said[0]
    assert "Resource not accessible by integration" in said[0]
    assert bot_comments(world, 7430, login=ACTIONS_LOGIN) == []
