"""Many installations (issue 30): the settings' rules, the directory's reasons, the schedule's
spread and a job's keys (pure parts; the end to end is tests/e2e/test_installations.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bot.github.installations import Directory, Installed
from bot.service.dispatch import slot
from bot.service.queue import Job, percentile
from bot.settings import ConfigError, load_settings, require_queue

PG = "postgresql://u:pw@127.0.0.1:5432/db"


def settings_of(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "bot.toml"
    path.write_text(text)
    return load_settings(str(path), environ={})


def test_a_redis_queue_url_is_refused_naming_the_queue_the_bot_uses(tmp_path: Path) -> None:
    """The contract's example is a redis:// URL: the refusal says why, and what to give."""
    why = (
        r"queue\.url.*redis:// is not supported: the bot's job queue is Procrastinate, on "
        r"PostgreSQL \(.*no second stateful service.*redelivers.*\); use a postgresql://"
    )
    with pytest.raises(ConfigError, match=why):
        settings_of(tmp_path, '[queue]\nurl = "redis://127.0.0.1:6379/0"\n')
    with pytest.raises(ConfigError, match=r"amqp:// is not supported"):
        settings_of(tmp_path, '[queue]\nurl = "amqp://guest@127.0.0.1:5672//"\n')


def test_a_queue_needs_a_shared_state(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, f'[queue]\nurl = "{PG}"\n')
    with pytest.raises(ConfigError, match=r"state\.url"):
        require_queue(settings)
    shared = settings_of(tmp_path, f'[queue]\nurl = "{PG}"\n[state]\nurl = "{PG}"\n')
    require_queue(shared)
    assert "pw" in shared.secret_values()  # the queue's password is kept out of logs


def test_every_installation_needs_the_apps_credentials_not_a_token(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, '[github]\ninstallations = "all"\ntoken = "ghp_longenough"\n')
    with pytest.raises(ConfigError, match="installations"):
        settings.require_github_auth()
    settings.require_repos()  # no [[repos]] needed: they are discovered


def test_an_unknown_installations_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"github\.installations"):
        settings_of(tmp_path, '[github]\ninstallations = "some"\n')


DIRECTORY = Directory({
    1: Installed(1, "octo", repos=("octo/a", "octo/b")),
    2: Installed(2, "acme", suspended=True),
})  # fmt: skip


@pytest.mark.parametrize(
    ("iid", "repo", "why"),
    [
        (1, "OCTO/A", None),
        (1, "octo/c", "octo/c was removed from installation 1 (octo)"),
        (2, "acme/x", "installation 2 (acme) is suspended"),
        (3, "zeta/d", "installation 3 no longer has the App (uninstalled)"),
    ],
)
def test_the_directory_says_why_a_job_may_not_run(iid: int, repo: str, why: str | None) -> None:
    assert DIRECTORY.why_not(iid, repo) == why


def test_a_suspended_installations_repositories_are_not_worked() -> None:
    assert DIRECTORY.repos() == {"octo/a": 1, "octo/b": 1}
    assert DIRECTORY.installation_of("Octo/B") == 1


def test_the_schedule_spreads_the_repositories_over_the_interval() -> None:
    repos = [f"org{i}/r{j}" for i in range(200) for j in range(10)]
    seconds = Counter(slot(repo, 300) for repo in repos)
    assert len(seconds) > 250  # 2,000 repositories over most of 300 seconds
    assert max(seconds.values()) <= 20  # never a herd in one second
    assert slot("Octo/A", 300) == slot("octo/a", 300)


def test_a_jobs_keys_one_waiting_per_pull_request_one_running_per_repository() -> None:
    job = Job(7, "Octo/Omni", 3)
    assert job.key == "pull:7:octo/omni#3"
    assert job.lock == Job(7, "octo/omni").lock == "repo:7:octo/omni"
    assert Job(7, "octo/omni").key == "repo:7:octo/omni"
    assert Job.from_args(job.args()) == job


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0
    assert percentile([], 0.95) == 0.0


def test_every_read_or_write_of_a_repository_is_routed_to_its_installation() -> None:
    """An App's client (BotGitHub) sends each repository's calls to that repository's
    installation token: a GitHubApi method it does not route goes out under the App's JWT,
    which GitHub refuses (401) on every repository endpoint. Each method taking a repository
    or node ids first must be routed, including the ones added after BotGitHub was written."""
    import inspect

    from bot.github.client import GitHubApi
    from bot.github.installations import BotGitHub

    def first_argument(method: object) -> str:
        names = list(inspect.signature(method).parameters)  # type: ignore[arg-type]
        return names[1] if len(names) > 1 else ""

    scoped = [
        name
        for name, method in inspect.getmembers(GitHubApi, inspect.isfunction)
        if not name.startswith("_") and first_argument(method) in ("repo", "node_ids")
    ]
    assert "open_pulls" in scoped and "branch_histories" in scoped
    assert [name for name in scoped if name not in vars(BotGitHub)] == []
