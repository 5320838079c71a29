"""Tests of bot.settings: file + environment loading, errors that name the key, auth, masking."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import ROOT

from bot.core.model import Policy
from bot.settings import (
    ConfigError,
    GitHubSettings,
    LogSettings,
    PolicySettings,
    ReadTheDocsSettings,
    RenderSettings,
    RepoSettings,
    ScheduleSettings,
    Settings,
    StateSettings,
    describe,
    load_settings,
)

EXAMPLE = ROOT / "config" / "bot.example.toml"
SECRET = "ghp_s3cr3tT0kenValue"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test in an empty directory so no real config/bot.toml is picked up."""
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    """Write a TOML file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


FULL_FILE = """
[github]
api_url = "https://ghe.example.com/api/v3"
token = "file-token"
[readthedocs]
api_url = "https://rtd.example.org/api/v3"
business_api_url = "https://rtd.example.com/api/v3"
token = "file-rtd"
timeout_seconds = 5.0
max_retries = 1
[schedule]
interval_seconds = 60
jitter_seconds = 5
[policy]
stale_after_minutes = 30
include_drafts = false
skip_labels = ["file"]
skip_authors = ["file-bot"]
max_writes_per_minute = 10
max_writes_per_hour = 100
min_seconds_between_writes = 2.0
[state]
path = "file.sqlite3"
[render]
template_dir = "file-templates"
[log]
format = "json"
level = "WARNING"
[[repos]]
name = "file/repo"
"""


def get(settings: Settings, dotted: str) -> Any:
    """Follow a dotted path of attributes; SecretStr is unwrapped."""
    value: Any = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value.get_secret_value() if hasattr(value, "get_secret_value") else value


@pytest.mark.parametrize(
    ("variable", "raw", "dotted", "from_file", "expected"),
    [
        (
            "GITHUB__API_URL",
            "https://h/api/v3",
            "github.api_url",
            "https://ghe.example.com/api/v3",
            "https://h/api/v3",
        ),
        ("GITHUB__TOKEN", "env-token", "github.token", "file-token", "env-token"),
        (
            "READTHEDOCS__API_URL",
            "http://rtd.local/api/v3",
            "readthedocs.api_url",
            "https://rtd.example.org/api/v3",
            "http://rtd.local/api/v3",
        ),
        (
            "READTHEDOCS__BUSINESS_API_URL",
            "http://b/api/v3",
            "readthedocs.business_api_url",
            "https://rtd.example.com/api/v3",
            "http://b/api/v3",
        ),
        ("READTHEDOCS__TOKEN", "env-rtd", "readthedocs.token", "file-rtd", "env-rtd"),
        ("READTHEDOCS__TIMEOUT_SECONDS", "2.5", "readthedocs.timeout_seconds", 5.0, 2.5),
        ("READTHEDOCS__MAX_RETRIES", "0", "readthedocs.max_retries", 1, 0),
        ("SCHEDULE__INTERVAL_SECONDS", "900", "schedule.interval_seconds", 60, 900),
        ("SCHEDULE__JITTER_SECONDS", "0", "schedule.jitter_seconds", 5, 0),
        ("POLICY__STALE_AFTER_MINUTES", "45", "policy.stale_after_minutes", 30, 45),
        ("POLICY__INCLUDE_DRAFTS", "true", "policy.include_drafts", False, True),
        ("POLICY__SKIP_LABELS", '["deps"]', "policy.skip_labels", ["file"], ["deps"]),
        (
            "POLICY__SKIP_AUTHORS",
            '["dependabot[bot]"]',
            "policy.skip_authors",
            ["file-bot"],
            ["dependabot[bot]"],
        ),
        ("POLICY__MAX_WRITES_PER_MINUTE", "20", "policy.max_writes_per_minute", 10, 20),
        ("POLICY__MAX_WRITES_PER_HOUR", "200", "policy.max_writes_per_hour", 100, 200),
        ("POLICY__MIN_SECONDS_BETWEEN_WRITES", "3", "policy.min_seconds_between_writes", 2.0, 3.0),
        (
            "STATE__PATH",
            "/var/lib/bot.sqlite3",
            "state.path",
            "file.sqlite3",
            "/var/lib/bot.sqlite3",
        ),
        (
            "RENDER__TEMPLATE_DIR",
            "/etc/bot/templates",
            "render.template_dir",
            "file-templates",
            "/etc/bot/templates",
        ),
        ("LOG__FORMAT", "text", "log.format", "json", "text"),
        ("LOG__LEVEL", "DEBUG", "log.level", "WARNING", "DEBUG"),
    ],
)
def test_environment_overrides_file(
    tmp_path: Path, variable: str, raw: str, dotted: str, from_file: Any, expected: Any
) -> None:
    path = write(tmp_path / "bot.toml", FULL_FILE)
    assert get(load_settings(path, environ={}), dotted) == from_file
    overridden = load_settings(path, environ={f"CI_STATUS_BOT_{variable}": raw})
    assert get(overridden, dotted) == expected


def test_environment_overrides_only_the_named_key(tmp_path: Path) -> None:
    path = write(tmp_path / "bot.toml", FULL_FILE)
    settings = load_settings(path, environ={"CI_STATUS_BOT_POLICY__STALE_AFTER_MINUTES": "7"})
    assert settings.policy.stale_after_minutes == 7
    assert settings.policy.skip_labels == ["file"]
    assert settings.policy.include_drafts is False


def test_repos_from_environment_replace_the_files(tmp_path: Path) -> None:
    path = write(tmp_path / "bot.toml", FULL_FILE)
    env = {"CI_STATUS_BOT_REPOS": '[{"name": "o/a"}, {"name": "o/b", "rtd_project": "b-docs"}]'}
    settings = load_settings(path, environ=env)
    assert settings.repos == [
        RepoSettings(name="o/a"),
        RepoSettings(name="o/b", rtd_project="b-docs"),
    ]


def test_environ_argument_does_not_read_or_change_os_environ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI_STATUS_BOT_SCHEDULE__INTERVAL_SECONDS", "999")
    before = dict(os.environ)
    settings = load_settings(environ={"CI_STATUS_BOT_STATE__PATH": "x.sqlite3"})
    assert settings.schedule.interval_seconds == 300
    assert settings.state.path == "x.sqlite3"
    assert dict(os.environ) == before


def test_environ_none_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI_STATUS_BOT_SCHEDULE__INTERVAL_SECONDS", "999")
    assert load_settings().schedule.interval_seconds == 999


def test_no_file_gives_defaults() -> None:
    settings = load_settings(environ={})
    assert settings.config_file is None
    assert settings.github == GitHubSettings()
    assert settings.policy == PolicySettings()
    assert settings.repos == []


def test_default_file_is_config_bot_toml_in_cwd(tmp_path: Path) -> None:
    write(tmp_path / "config" / "bot.toml", "[schedule]\ninterval_seconds = 31\n")
    settings = load_settings(environ={})
    assert settings.schedule.interval_seconds == 31
    assert settings.config_file == Path("config/bot.toml")


def test_file_precedence_explicit_then_env_then_default(tmp_path: Path) -> None:
    write(tmp_path / "config" / "bot.toml", "[schedule]\ninterval_seconds = 31\n")
    named = write(tmp_path / "named.toml", "[schedule]\ninterval_seconds = 32\n")
    explicit = write(tmp_path / "explicit.toml", "[schedule]\ninterval_seconds = 33\n")
    env = {"CI_STATUS_BOT_CONFIG": str(named)}
    assert load_settings(environ=env).schedule.interval_seconds == 32
    assert load_settings(str(explicit), environ=env).schedule.interval_seconds == 33


@pytest.mark.parametrize(
    ("config_path", "env", "named_by"),
    [
        ("missing.toml", {}, "--config"),
        (None, {"CI_STATUS_BOT_CONFIG": "missing.toml"}, "CI_STATUS_BOT_CONFIG"),
    ],
)
def test_explicitly_named_missing_file_is_an_error(
    config_path: str | None, env: dict[str, str], named_by: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_path, environ=env)
    assert "missing.toml" in str(caught.value)
    assert named_by in str(caught.value)


@pytest.mark.parametrize(
    ("toml", "env", "expected"),
    [
        (
            '[policy]\nstale_after_minutes = "abc"\n',
            {},
            ["policy.stale_after_minutes", "bot.toml", "'abc'"],
        ),
        (
            "",
            {"CI_STATUS_BOT_POLICY__STALE_AFTER_MINUTES": "abc"},
            ["policy.stale_after_minutes", "CI_STATUS_BOT_POLICY__STALE_AFTER_MINUTES"],
        ),
        (
            "[policy]\nstale_after_minutes = 0\n",
            {},
            ["policy.stale_after_minutes", "greater than or equal to 1"],
        ),
        ('[github]\ntokn = "x"\n', {}, ["github.tokn", "unknown key", "bot.toml"]),
        ("[githb]\napi_url = 1\n", {}, ["githb", "unknown key"]),
        ('[[repos]]\nname = "nope"\n', {}, ["repos[0].name", "OWNER/NAME", "nope"]),
        (
            "",
            {"CI_STATUS_BOT_REPOS": '[{"name": "nope"}]'},
            ["repos[0].name", "CI_STATUS_BOT_REPOS"],
        ),
        ('[[repos]]\nname = "o/a"\n[[repos]]\nname = "O/A"\n', {}, ["repos", "listed twice"]),
        ('[[repos]]\nname = "o/a"\nrtd = "x"\n', {}, ["repos[0].rtd", "unknown key"]),
        ('[github]\napi_url = "ftp://h"\n', {}, ["github.api_url", "http"]),
        (
            "",
            {"CI_STATUS_BOT_READTHEDOCS__API_URL": "not a url"},
            ["readthedocs.api_url", "CI_STATUS_BOT_READTHEDOCS__API_URL"],
        ),
        ("[readthedocs]\ntimeout_seconds = 0\n", {}, ["readthedocs.timeout_seconds"]),
        ("[readthedocs]\nmax_retries = -1\n", {}, ["readthedocs.max_retries"]),
        ("[schedule]\ninterval_seconds = 29\n", {}, ["schedule.interval_seconds", "30"]),
        ("[schedule]\njitter_seconds = -1\n", {}, ["schedule.jitter_seconds"]),
        ("[policy]\nmax_writes_per_minute = 81\n", {}, ["policy.max_writes_per_minute", "80"]),
        ("[policy]\nmax_writes_per_hour = 501\n", {}, ["policy.max_writes_per_hour", "500"]),
        ("[policy]\nmin_seconds_between_writes = 0.5\n", {}, ["policy.min_seconds_between_writes"]),
        ('[policy]\nskip_labels = "deps"\n', {}, ["policy.skip_labels"]),
        ('[log]\nlevel = "LOUD"\n', {}, ["log.level"]),
        ('[log]\nformat = "xml"\n', {}, ["log.format"]),
        ("", {"CI_STATUS_BOT_REPOS": "[{"}, ["repos (from CI_STATUS_BOT_REPOS)", "JSON"]),
        (
            "",
            {"CI_STATUS_BOT_POLICY__SKIP_LABELS": "deps"},
            ["policy.skip_labels (from CI_STATUS_BOT_POLICY__SKIP_LABELS)", "JSON"],
        ),
    ],
)
def test_bad_values_name_the_key_and_source(
    tmp_path: Path, toml: str, env: dict[str, str], expected: list[str]
) -> None:
    path = write(tmp_path / "bot.toml", toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ=env)
    for text in expected:
        assert text in str(caught.value)


def test_every_problem_is_reported_on_its_own_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "bot.toml", '[policy]\nstale_after_minutes = "abc"\n[log]\nlevel = "x"\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    lines = str(caught.value).splitlines()
    assert any(line.strip().startswith("policy.stale_after_minutes") for line in lines)
    assert any(line.strip().startswith("log.level") for line in lines)


def test_toml_syntax_error_gives_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bot.toml", '[github]\napi_url = "https://x"\ntoken = = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert str(path) in str(caught.value)
    assert "line 3" in str(caught.value)


def test_error_messages_do_not_echo_secrets(tmp_path: Path) -> None:
    path = write(tmp_path / "bot.toml", f'[github]\ntokn = "{SECRET}"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={"CI_STATUS_BOT_READTHEDOCS__TOKEN": SECRET})
    assert "github.tokn" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.fixture
def private_key(tmp_path: Path) -> Path:
    """A readable PEM file holding a real (small, throwaway) RSA key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return write(tmp_path / "app.pem", pem.decode())


@pytest.mark.parametrize(
    ("github", "expected_error"),
    [
        ({"token": "tokn"}, None),
        ({"app_id": 12, "private_key_path": "KEY"}, None),
        ({"app_id": 12, "private_key_path": "KEY", "installation_id": 34}, None),
        ({}, "github.token"),
        ({"app_id": 12}, "github.private_key_path"),
        ({"private_key_path": "KEY"}, "github.app_id"),
        ({"token": "tokn", "app_id": 12, "private_key_path": "KEY"}, "not both"),
        ({"token": "tokn", "app_id": 12}, "not both"),
        ({"app_id": 12, "private_key_path": "missing.pem"}, "github.private_key_path"),
    ],
)
def test_github_auth_rules(
    private_key: Path, github: dict[str, Any], expected_error: str | None
) -> None:
    if github.get("private_key_path") == "KEY":
        github = {**github, "private_key_path": str(private_key)}
    settings = Settings(github=GitHubSettings(**github))
    if expected_error is None:
        settings.require_github_auth()
        return
    with pytest.raises(ConfigError) as caught:
        settings.require_github_auth()
    assert expected_error in str(caught.value)


def test_missing_private_key_error_names_the_file() -> None:
    settings = Settings(github=GitHubSettings(app_id=1, private_key_path="keys/none.pem"))
    with pytest.raises(ConfigError) as caught:
        settings.require_github_auth()
    assert "keys/none.pem" in str(caught.value)


def test_loading_does_not_require_auth() -> None:
    assert load_settings(environ={}).github.token.get_secret_value() == ""


def test_describe_masks_secrets_and_shows_key_path(private_key: Path) -> None:
    env = {
        "CI_STATUS_BOT_GITHUB__TOKEN": SECRET,
        "CI_STATUS_BOT_GITHUB__PRIVATE_KEY_PATH": str(private_key),
        "CI_STATUS_BOT_REPOS": '[{"name": "o/a", "rtd_project": "a-docs"}]',
    }
    text = describe(load_settings(environ=env))
    assert SECRET not in text
    assert "BEGIN RSA" not in text
    assert 'token = "**** (set)"' not in text
    assert "token = **** (set)" in text
    assert "token = (not set)" in text  # readthedocs
    assert f'private_key_path = "{private_key}"' in text
    assert "[[repos]]" in text
    assert 'name = "o/a"' in text
    assert "stale_after_minutes = 120" in text


def test_secrets_never_appear_in_repr_str_or_dump() -> None:
    settings = load_settings(
        environ={"CI_STATUS_BOT_GITHUB__TOKEN": SECRET, "CI_STATUS_BOT_READTHEDOCS__TOKEN": SECRET}
    )
    for text in (repr(settings), str(settings), settings.model_dump_json(), repr(settings.github)):
        assert SECRET not in text
    assert settings.github.token.get_secret_value() == SECRET


def test_policy_model() -> None:
    settings = load_settings(environ={"CI_STATUS_BOT_POLICY__STALE_AFTER_MINUTES": "45"})
    assert settings.policy_model() == Policy(stale_after=timedelta(minutes=45))


def test_example_file_loads_with_the_documented_defaults() -> None:
    settings = load_settings(EXAMPLE, environ={})
    assert settings.github == GitHubSettings()
    assert settings.readthedocs == ReadTheDocsSettings()
    assert settings.schedule == ScheduleSettings()
    assert settings.policy == PolicySettings()
    assert settings.state == StateSettings()
    assert settings.render == RenderSettings()
    assert settings.log == LogSettings()
    assert [repo.name for repo in settings.repos] == ["octo-org/octo-lib", "octo-org/octo-docs"]
    assert settings.repos[1].rtd_project == "octo-docs"


def test_example_file_documents_every_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    sections: dict[str, type[BaseModel]] = {
        "github": GitHubSettings,
        "readthedocs": ReadTheDocsSettings,
        "schedule": ScheduleSettings,
        "policy": PolicySettings,
        "state": StateSettings,
        "render": RenderSettings,
        "log": LogSettings,
    }
    for section, model in sections.items():
        assert f"[{section}]" in text
        for key in model.model_fields:
            assert f"\n{key} = " in text, f"{section}.{key} missing from the example"


# -- issue 8: bounds checked once, at load; secrets cleaned or refused, masked ----------


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("CI_STATUS_BOT_READTHEDOCS__TIMEOUT_SECONDS", "1e20", "readthedocs.timeout_seconds"),
        ("CI_STATUS_BOT_READTHEDOCS__TIMEOUT_SECONDS", "inf", "readthedocs.timeout_seconds"),
        ("CI_STATUS_BOT_READTHEDOCS__TIMEOUT_SECONDS", "nan", "readthedocs.timeout_seconds"),
        ("CI_STATUS_BOT_POLICY__MIN_SECONDS_BETWEEN_WRITES", "inf", "policy.min_seconds"),
        ("CI_STATUS_BOT_POLICY__MIN_SECONDS_BETWEEN_WRITES", "nan", "policy.min_seconds"),
        ("CI_STATUS_BOT_POLICY__MIN_SECONDS_BETWEEN_WRITES", "1e20", "policy.min_seconds"),
        ("CI_STATUS_BOT_SCHEDULE__INTERVAL_SECONDS", "100000000000000000000", "schedule.interval"),
        ("CI_STATUS_BOT_SCHEDULE__JITTER_SECONDS", "100000000000", "schedule.jitter_seconds"),
        ("CI_STATUS_BOT_POLICY__STALE_AFTER_MINUTES", "100000000000", "policy.stale_after"),
        ("CI_STATUS_BOT_READTHEDOCS__MAX_RETRIES", "1000000", "readthedocs.max_retries"),
        ("CI_STATUS_BOT_REPOS", '[{"name": "octo/omni\\n"}]', "repos[0].name"),
        ("CI_STATUS_BOT_REPOS", '[{"name": "octo/omni", "rtd_project": "x\\n"}]', "rtd_project"),
        ("CI_STATUS_BOT_REPOS", '[{"name": "octo/omni", "rtd_project": "../x"}]', "rtd_project"),
        ("CI_STATUS_BOT_REPOS", '[{"name": "octo/omni", "rtd_project": ".docs"}]', "rtd_project"),
        ("CI_STATUS_BOT_WEBHOOKS__DEBOUNCE_SECONDS", "inf", "webhooks.debounce_seconds"),
        ("CI_STATUS_BOT_WEBHOOKS__SECRETS", '["a\\u0007b"]', "webhooks.secrets"),
        ("CI_STATUS_BOT_STATE__PATH", "state/x\nsqlite3", "state.path"),
    ],
)
def test_values_out_of_bounds_are_refused_at_load_naming_the_key(
    variable: str, value: str, key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={variable: value})
    assert key in str(caught.value)
    assert variable in str(caught.value)


def test_a_repository_name_with_a_trailing_newline_is_refused_from_the_file(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "bot.toml", '[[repos]]\nname = "octo/omni\\n"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert "repos[0].name" in str(caught.value)


def test_a_token_with_a_trailing_newline_is_stripped() -> None:
    settings = load_settings(
        environ={
            "CI_STATUS_BOT_GITHUB__TOKEN": f"  {SECRET}\n",
            "CI_STATUS_BOT_READTHEDOCS__TOKEN": f"{SECRET}\r\n",
        }
    )
    assert settings.github.token.get_secret_value() == SECRET
    assert settings.readthedocs.token.get_secret_value() == SECRET


@pytest.mark.parametrize("bad", [f"{SECRET}\nX-Injected: 1", f"ghp_\x07{SECRET}", f"{SECRET}\x00"])
@pytest.mark.parametrize("key", ["GITHUB__TOKEN", "READTHEDOCS__TOKEN"])
def test_a_token_with_a_control_character_is_refused_masked(key: str, bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={f"CI_STATUS_BOT_{key}": bad})
    message = str(caught.value)
    assert key.lower().replace("__", ".") in message and "control character" in message
    assert SECRET not in message and "ghp_" not in message


def test_a_garbage_private_key_gives_a_clear_message(tmp_path: Path) -> None:
    garbage = write(tmp_path / "app.pem", "-----BEGIN RSA PRIVATE KEY-----\nabc\n")
    settings = Settings(github=GitHubSettings(app_id=1, private_key_path=str(garbage)))
    with pytest.raises(ConfigError) as caught:
        settings.require_github_auth()
    assert "github.private_key_path" in str(caught.value)
    assert "not an unencrypted PEM private key" in str(caught.value)


def test_no_repos_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={}).require_repos()
    assert "repos" in str(caught.value) and "[[repos]]" in str(caught.value)


# -- issue 17: the operator's typos ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "CI_STATUS_BOT_WEBHOOK__SECRETS",
        "CI_STATUS_BOT_GITHUB_TOKEN",
        "CI_STATUS_BOT_GITHUB__TOKN",
        "CI_STATUS_BOT_GITHUB__TOKEN__X",
        "ci_status_bot_state__pth",
    ],
)
def test_an_environment_variable_naming_no_key_is_an_error_naming_it(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={name: "value"})
    assert name in str(caught.value)
    assert "value" not in str(caught.value).replace(name, "")


def test_every_key_of_the_model_and_the_config_path_are_known_variables(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "")
    env = {"CI_STATUS_BOT_CONFIG": str(config), "CI_STATUS_BOT_STATE__PATH": "x.sqlite3"}
    assert load_settings(environ=env).state.path == "x.sqlite3"
    for section, field in Settings.model_fields.items():
        annotation = field.annotation
        keys = [""]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys = ["__" + key.upper() for key in annotation.model_fields]
        for key in keys:  # every key of the model is known by name (its value is checked apart)
            name = f"CI_STATUS_BOT_{section.upper()}{key}"
            try:
                load_settings(environ={**env, name: "1"})
            except ConfigError as exc:
                assert "names no configuration key" not in str(exc), str(exc)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[webhooks]\nsecrets = [" "]\n', ["webhooks.secrets[0]", "empty"]),
        ('[webhooks]\nsecrets = ["abc"]\n', ["webhooks.secrets", "shorter than 4"]),
        ('[github]\ntoken = "ab"\n', ["github.token", "shorter than 4"]),
        ('[server]\nhost = "not a host"\n', ["server.host", "not a host"]),
        ('[server]\nhost = "-bad-.example"\n', ["server.host"]),
        (
            '[github]\napi_url = "https://user:pass@ghe.example.com/api/v3"\n',
            ["github.api_url", "user name or password"],
        ),
        (
            '[readthedocs]\napi_url = "https://u:hunter22@rtd.example.org/api/v3"\n',
            ["readthedocs.api_url", "user name or password"],
        ),
    ],
)
def test_values_that_would_not_work_or_are_unsafe_are_refused(
    tmp_path: Path, toml: str, expected: list[str]
) -> None:
    path = write(tmp_path / "bot.toml", toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    text = str(caught.value)
    for part in expected:
        assert part in text, text
    for secret in ("hunter22", "pass@", '"abc"', '"ab"'):
        assert secret not in text


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost", "bot.internal"])
def test_usable_server_hosts_are_accepted(tmp_path: Path, host: str) -> None:
    path = write(tmp_path / "bot.toml", f'[server]\nhost = "{host}"\n')
    assert load_settings(path, environ={}).server.host == host
