"""Quiet and clear at the edges: what a newcomer's first commands say when something is off."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from support import REPO, Env, cli, seed_case

from bot_sandbox import World


@pytest.fixture
def world(now: datetime) -> World:
    """The seed case: one pull request of octo/omni."""
    w = World()
    seed_case(w, now=now)
    return w


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ci-status-bot {version('ci-status-bot')}"


def test_a_stateless_once_prints_no_migration_lines_at_info(env: Env) -> None:
    """Alembic's dozen "Running upgrade …" lines are not said at INFO before the real output."""
    done = cli("once", "--config", str(env.config), env={"CI_STATUS_BOT_STATE__PATH": ""})
    assert done.returncode == 0, done.stderr
    assert "Running upgrade" not in done.stderr and "alembic" not in done.stderr
    assert done.stdout.startswith("cycle: ")


def test_the_first_once_on_a_new_state_and_show_print_no_migration_lines(env: Env) -> None:
    for args in (("once",), ("show", f"{REPO}#7430")):
        done = cli(*args, "--config", str(env.config))
        assert done.returncode == 0, done.stderr
        assert "Running upgrade" not in done.stderr, args


def test_no_configuration_at_all_says_which_file_was_looked_for(tmp_path: Path) -> None:
    done = cli("once", cwd=tmp_path)
    assert done.returncode == 2
    assert "no repository is configured" in done.stderr
    looked = tmp_path / "config" / "bot.toml"
    assert f"no configuration file was found at {looked}" in done.stderr


def test_a_configured_bot_is_not_told_about_the_missing_default_file(tmp_path: Path) -> None:
    """Configured by the environment alone: no word about config/bot.toml."""
    done = cli("once", cwd=tmp_path, env={"CI_STATUS_BOT_REPOS": '[{"name": "a/b"}]'})
    assert done.returncode == 2
    assert "github: no credentials" in done.stderr
    assert "no configuration file was found" not in done.stderr


def test_github_token_set_without_the_bots_variable_is_said(tmp_path: Path) -> None:
    done = cli(
        "once", cwd=tmp_path,
        env={"CI_STATUS_BOT_REPOS": '[{"name": "a/b"}]', "GITHUB_TOKEN": "ghs_abcdefgh"},
    )  # fmt: skip
    assert done.returncode == 2
    assert "GITHUB_TOKEN is set, but the bot reads its token from CI_STATUS_BOT_GITHUB__TOKEN" in (
        done.stderr
    )
    assert "ghs_abcdefgh" not in done.stderr


@pytest.mark.parametrize(
    ("variable", "meant"),
    [
        ("CI_STATUS_BOT_GITHUB_TOKEN", "CI_STATUS_BOT_GITHUB__TOKEN"),
        ("CI_STATUS_BOT_WEBHOOK__SECRETS", "CI_STATUS_BOT_WEBHOOKS__SECRETS"),
    ],
)
def test_an_unknown_variable_gets_did_you_mean(tmp_path: Path, variable: str, meant: str) -> None:
    done = cli("check-config", "--offline", cwd=tmp_path, env={variable: "x"})
    assert done.returncode == 2
    assert f"{variable}: names no configuration key (did you mean {meant}?)" in done.stderr


def test_an_unknown_key_of_the_file_gets_did_you_mean(tmp_path: Path) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        '[github]\ntokn = "abcd"\n[[repos]]\nname = "a/b"\nrtd_projekt = "x"\n', encoding="utf-8"
    )
    done = cli("check-config", "--offline", "--config", str(config))
    assert done.returncode == 2
    assert "github.tokn" in done.stderr and "(did you mean github.token?)" in done.stderr
    assert "(did you mean repos[0].rtd_project?)" in done.stderr


def test_once_repo_the_token_cannot_see_says_so(env: Env) -> None:
    done = cli("once", "--config", str(env.config), "--repo", "octo/missing")
    assert done.returncode == 1
    assert "octo/missing: does not exist, or this token cannot see it" in done.stderr


def test_a_connection_error_names_the_host(tmp_path: Path) -> None:
    done = cli(
        "once", cwd=tmp_path,
        env={
            "CI_STATUS_BOT_REPOS": '[{"name": "a/b"}]', "CI_STATUS_BOT_GITHUB__TOKEN": "abcd",
            "CI_STATUS_BOT_GITHUB__API_URL": "http://127.0.0.1:9/api/v3",
            "CI_STATUS_BOT_STATE__PATH": "",
        },
    )  # fmt: skip
    assert done.returncode == 1
    assert "no answer from 127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr


def test_report_repo_of_an_unconfigured_repository_is_an_error(env: Env) -> None:
    assert cli("once", "--config", str(env.config)).returncode == 0
    done = cli("report", "--config", str(env.config), "--repo", "octo/other")
    assert done.returncode == 2
    assert "octo/other is not a configured repository" in done.stderr
    assert done.stdout == ""
    # the configured one, in another spelling, is still fine
    assert cli("report", "--config", str(env.config), "--repo", "OCTO/omni").returncode == 0
