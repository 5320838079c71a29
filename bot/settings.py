"""Configuration: the TOML file and CI_STATUS_BOT_* environment, validated (the only reader)."""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from bot.core.model import Policy

ENV_PREFIX = "CI_STATUS_BOT_"
ENV_DELIMITER = "__"
CONFIG_ENV_VAR = f"{ENV_PREFIX}CONFIG"
DEFAULT_CONFIG_PATH = Path("config/bot.toml")

_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")
# "" (none) or a slug as Read the Docs makes them (the rule docs/readthedocs/rules.py checks too)
_RTD_SLUG = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9_-]{0,254})?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HOST_NAME = re.compile(
    r"(?=.{1,253}\Z)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?"
)
MIN_SECRET_CHARS = 4  # bot.logs masks every secret at least this long
MAX_SECONDS = 86_400.0  # no wait, timeout or interval of the bot is longer than a day
MAX_PRIVATE_KEY_BYTES = 64 * 1024
_SECRET_WORDS = ("token", "tokn", "secret", "key", "password")


class ConfigError(Exception):
    """The configuration is invalid or cannot be read; the message names the key and source."""


def _http_url(value: str) -> str:
    """Accept an absolute http(s) URL without credentials in it; drop a trailing slash."""
    text = value.strip()
    parts = urlsplit(text)
    if "@" in parts.netloc:  # checked first: the message must never show the password
        raise ValueError(
            "must not contain a user name or password (value not shown); put the credential "
            "in the token key"
        )
    if parts.scheme not in ("http", "https") or not parts.netloc or _CONTROL.search(text):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return text.rstrip("/")


def _host(value: str) -> str:
    """Accept an IP address or a DNS host name (what the server can bind to)."""
    text = value.strip()
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if not _HOST_NAME.fullmatch(text):
            raise ValueError(f"must be an IP address or a host name, got {value!r}") from None
    return text


def _clean_secret(value: object) -> object:
    """Strip surrounding whitespace (a pasted newline); refuse control characters, masked."""
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    if not isinstance(raw, str):
        return value
    text = raw.strip()
    if 0 < len(text) < MIN_SECRET_CHARS:  # too short to be masked in logs without harm
        raise ValueError(
            f"is shorter than {MIN_SECRET_CHARS} characters (value not shown): no real "
            "credential is, and it could not be masked in the logs"
        )
    if _CONTROL.search(text):
        raise ValueError("contains a control character (value not shown); paste it again")
    if len(text) > 4096:
        raise ValueError("is longer than 4096 characters (value not shown)")
    return text


def _non_empty(value: SecretStr) -> SecretStr:
    """Refuse a secret that is empty after stripping (it would silently turn a feature off)."""
    if not value.get_secret_value():
        raise ValueError("is empty (after stripping spaces): remove it, or paste the secret")
    return value


def _no_control(value: str) -> str:
    """Refuse control characters (a newline in a path or name is never intended)."""
    if _CONTROL.search(value):
        raise ValueError(f"contains a control character: {value!r}")
    return value


def read_private_key(path: str) -> str:
    """The PEM text of a GitHub App private key, surrounding whitespace stripped."""
    key = Path(path).expanduser()
    if key.stat().st_size > MAX_PRIVATE_KEY_BYTES:
        raise ConfigError(f"github.private_key_path: {key} is too large for a private key")
    return key.read_text(encoding="utf-8", errors="replace").strip() + "\n"


def check_private_key(path: str) -> None:
    """Raise ConfigError (never showing the key) unless `path` holds a usable PEM private key."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(read_private_key(path).encode(), password=None)
    except (ValueError, TypeError) as exc:
        kind = exc.__class__.__name__
        raise ConfigError(
            f"github.private_key_path: {path} is not an unencrypted PEM private key ({kind}); "
            "download the App's private key (.pem) from its settings page"
        ) from None


class _Section(BaseModel):
    """Base of every section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class GitHubSettings(_Section):
    """[github]: where GitHub is and how the bot authenticates."""

    api_url: str = "https://api.github.com"
    # "all": the repositories are every repository of every installation of the App
    installations: Literal["", "all"] = ""
    token: SecretStr = SecretStr("")
    app_id: int = Field(default=0, ge=0, le=2**53)
    private_key_path: str = ""
    installation_id: int = Field(default=0, ge=0, le=2**53)

    @field_validator("api_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("token", mode="before")
    @classmethod
    def _check_token(cls, value: object) -> object:
        return _clean_secret(value)

    @field_validator("private_key_path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        return _no_control(value.strip())

    @property
    def uses_app(self) -> bool:
        """Whether any GitHub App key is set."""
        return self.app_id != 0 or self.private_key_path != ""


class ReadTheDocsSettings(_Section):
    """[readthedocs]: the Read the Docs API v3 endpoints and client limits."""

    api_url: str = "https://app.readthedocs.org/api/v3"
    business_api_url: str = "https://app.readthedocs.com/api/v3"
    token: SecretStr = SecretStr("")
    business_token: SecretStr = SecretStr("")  # the .com site's own token
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    max_retries: int = Field(default=3, ge=0, le=10)

    @field_validator("api_url", "business_api_url")
    @classmethod
    def _check_urls(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("token", "business_token", mode="before")
    @classmethod
    def _check_token(cls, value: object) -> object:
        return _clean_secret(value)


class CodecovSettings(_Section):
    """[codecov]: Codecov's API v2, read for `codecov/*` statuses and check runs not final on
    GitHub (bot/sources/codecov). Public repositories need no token."""

    enabled: bool = True
    api_url: str = "https://api.codecov.io/api/v2"
    service: Literal["github", "github_enterprise"] = "github"  # Codecov's name of the host
    token: SecretStr = SecretStr("")  # a Codecov API token: private repositories only
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    max_retries: int = Field(default=3, ge=0, le=10)

    @field_validator("api_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("token", mode="before")
    @classmethod
    def _check_token(cls, value: object) -> object:
        return _clean_secret(value)


class AzurePipelinesSettings(_Section):
    """[azure_pipelines]: the Azure DevOps build API, read for Azure Pipelines check runs and
    statuses not final on GitHub (bot/sources/azure_pipelines). Public projects need no token."""

    enabled: bool = True
    api_url: str = "https://dev.azure.com"
    token: SecretStr = SecretStr("")  # a personal access token (Build: read): private projects
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    max_retries: int = Field(default=3, ge=0, le=10)

    @field_validator("api_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("token", mode="before")
    @classmethod
    def _check_token(cls, value: object) -> object:
        return _clean_secret(value)


class ScheduleSettings(_Section):
    """[schedule]: how often `run` polls."""

    interval_seconds: int = Field(default=300, ge=30, le=int(MAX_SECONDS))
    jitter_seconds: int = Field(default=30, ge=0, le=3600)


class PolicySettings(_Section):
    """[policy]: what is reported and how fast the bot may write."""

    stale_after_minutes: int = Field(default=120, ge=1, le=43_200)  # up to 30 days
    unverified_after_minutes: int = Field(default=30, ge=1, le=43_200)
    include_drafts: bool = True
    skip_labels: list[str] = Field(default_factory=list, max_length=100)
    skip_authors: list[str] = Field(default_factory=list, max_length=1000)
    max_writes_per_minute: int = Field(default=80, ge=1, le=80)
    max_writes_per_hour: int = Field(default=500, ge=1, le=500)
    min_seconds_between_writes: float = Field(default=1.0, ge=1.0, le=60, allow_inf_nan=False)
    history: bool = True  # failing rows state their history (docs/history.md)
    # a kept merge base whose base branch moved is asked again at most this often per head
    merge_base_recheck_minutes: int = Field(default=60, ge=0, le=43_200)

    @field_validator("skip_labels", "skip_authors")
    @classmethod
    def _check_names(cls, values: list[str]) -> list[str]:
        return [_no_control(v) for v in values]

    @property
    def base_recheck(self) -> timedelta:
        """How long a kept merge base serves, whatever its base branch did since it was asked
        (`merge_base_recheck_minutes`)."""
        return timedelta(minutes=self.merge_base_recheck_minutes)

    def core(self) -> Policy:
        """The parts of the policy the pure core needs."""
        return Policy(
            stale_after=timedelta(minutes=self.stale_after_minutes),
            unverified_after=timedelta(minutes=self.unverified_after_minutes),
        )


class ServerSettings(_Section):
    """[server]: where `run` serves the triage page, health and metrics (port 0: off)."""

    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8080, ge=0, le=65535)
    # a request whose headers and body have not arrived by then is dropped (GitHub: 10 s)
    request_timeout_seconds: float = Field(default=10.0, ge=0.5, le=60, allow_inf_nan=False)
    max_connections: int = Field(default=256, ge=8, le=10_000)  # idle ones closed first

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        return _host(value)


class WebhooksSettings(_Section):
    """[webhooks]: GitHub webhook secrets (several allow rotation; none = off) and debounce."""

    secrets: list[Annotated[SecretStr, AfterValidator(_non_empty)]] = Field(
        default_factory=list, max_length=10
    )
    debounce_seconds: float = Field(default=10.0, ge=0, le=600, allow_inf_nan=False)

    @field_validator("secrets", mode="before")
    @classmethod
    def _check_secrets(cls, values: object) -> object:
        return [_clean_secret(v) for v in values] if isinstance(values, list) else values

    @property
    def enabled(self) -> bool:
        """Whether any non-empty secret is configured."""
        return any(s.get_secret_value() for s in self.secrets)


class StateSettings(_Section):
    """[state]: where the state lives: a SQLite file (the default), a PostgreSQL URL (several
    `run` replicas share it), or nothing at all (an empty path: `once` only)."""

    path: str = "state/ci-status-bot.sqlite3"
    # postgresql://user:password@host:port/database: several `run` replicas share it
    url: SecretStr = SecretStr("")
    # a repository's lease not renewed for this long is taken over by another replica
    lease_seconds: float = Field(default=60.0, ge=2, le=3600, allow_inf_nan=False)

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        if value and not value.strip():
            raise ValueError('blank: name a file, or "" for no state at all')
        return _no_control(value)

    @property
    def stateless(self) -> bool:
        """No state at all: each run reads what it needs from the bot's comments."""
        return not self.path and not self.shared

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: SecretStr) -> SecretStr:
        text = _no_control(value.get_secret_value().strip())
        if text:
            _check_postgres_url(text)
        return SecretStr(text)

    @property
    def location(self) -> str:
        """Where the state is: the PostgreSQL URL when set, else the SQLite path (or, with no
        state at all, this run's memory)."""
        return self.url.get_secret_value() or self.path or ":memory:"

    @property
    def shared(self) -> bool:
        """Whether several replicas may share the state (PostgreSQL)."""
        return bool(self.url.get_secret_value())


class QueueSettings(_Section):
    """[queue]: jobs on a job queue (Procrastinate, on PostgreSQL), worked by `worker`."""

    # postgresql://user:password@host:port/database (may be the state's own database)
    url: SecretStr = SecretStr("")
    jobs_per_worker: int = Field(default=4, ge=1, le=64)  # jobs one worker runs at once
    # a worker that has not beaten its heartbeat for this long is dead: its jobs run again
    stalled_seconds: float = Field(default=30.0, ge=2, le=3600, allow_inf_nan=False)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: SecretStr) -> SecretStr:
        text = _no_control(value.get_secret_value().strip())
        scheme = text.partition("://")[0].lower()
        if scheme in ("redis", "rediss", "amqp", "amqps", "sqs"):
            raise ValueError(
                f"{scheme}:// is not supported: the bot's job queue is Procrastinate, on "
                "PostgreSQL (chosen so that a queue needs no second stateful service beside the "
                "shared state, and so that no broker redelivers a job still running, as Redis "
                "does after its visibility timeout); use a postgresql://user:password@host:port/"
                "database URL (the state's database will do; see docs/installations.md)"
            )
        if text:
            _check_postgres_url(text)
        return SecretStr(text)

    @property
    def enabled(self) -> bool:
        """Whether the work runs as jobs on the queue."""
        return bool(self.url.get_secret_value())


def _check_postgres_url(text: str) -> None:
    """Raise ValueError unless `text` is a postgresql:// URL naming a host and a database."""
    parts = urlsplit(text)
    if parts.scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValueError("must be a postgresql://user:password@host:port/database URL")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the port is not a number") from None
    if not (parts.hostname or "host=" in parts.query):
        raise ValueError("names no host (postgresql://user:password@host:port/database)")
    if not parts.path.strip("/"):
        raise ValueError("names no database (postgresql://user:password@host:port/database)")
    if port == 0:
        raise ValueError("port 0 is not a server's port")


class RenderSettings(_Section):
    """[render]: an optional folder of templates searched before the built-in ones."""

    template_dir: str = ""

    @field_validator("template_dir")
    @classmethod
    def _check_dir(cls, value: str) -> str:
        return _no_control(value)


class LogSettings(_Section):
    """[log]: log record format and level."""

    format: Literal["text", "json"] = "text"
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class RepoSettings(_Section):
    """One [[repos]] entry."""

    name: str
    rtd_project: str = ""
    # contexts expected on every head even where no rule requires them (the DCO app, a docs build)
    expected: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("expected")
    @classmethod
    def _check_expected(cls, value: list[str]) -> list[str]:
        for context in value:
            if not context.strip() or len(context) > 255:
                raise ValueError(
                    f"must be check or status names (1-255 characters), got {context!r}"
                )
        return list(dict.fromkeys(value))

    def same_repo(self, name: str) -> bool:
        """Whether `name` is this repository: GitHub compares owner and name ignoring case."""
        return name.casefold() == self.name.casefold()

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _REPO_NAME.fullmatch(value):
            raise ValueError(f"must be OWNER/NAME as on GitHub, got {value!r}")
        return value

    @field_validator("rtd_project")
    @classmethod
    def _check_slug(cls, value: str) -> str:
        if not _RTD_SLUG.fullmatch(value):
            raise ValueError(f"must be a Read the Docs project slug, got {value!r}")
        return value


class Settings(BaseSettings):
    """The whole configuration; build it with `load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        frozen=True,
    )

    github: GitHubSettings = Field(default_factory=GitHubSettings)
    readthedocs: ReadTheDocsSettings = Field(default_factory=ReadTheDocsSettings)
    codecov: CodecovSettings = Field(default_factory=CodecovSettings)
    azure_pipelines: AzurePipelinesSettings = Field(default_factory=AzurePipelinesSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    state: StateSettings = Field(default_factory=StateSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    webhooks: WebhooksSettings = Field(default_factory=WebhooksSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    render: RenderSettings = Field(default_factory=RenderSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    repos: list[RepoSettings] = Field(default_factory=list, max_length=1000)

    _config_file: Path | None = PrivateAttr(default=None)
    # what else configured the bot (to say so when a needed key is missing)
    _unconfigured_note: str = PrivateAttr(default="")
    _github_token_note: str = PrivateAttr(default="")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Take values only from `load_settings`, which merges the file and the environment."""
        return (init_settings,)

    @field_validator("repos")
    @classmethod
    def _unique_repos(cls, repos: list[RepoSettings]) -> list[RepoSettings]:
        seen: set[str] = set()
        for repo in repos:
            if repo.name.lower() in seen:
                raise ValueError(f"repository {repo.name!r} is listed twice")
            seen.add(repo.name.lower())
        return repos

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from, if any."""
        return self._config_file

    def secret_values(self) -> list[str]:
        """Every configured secret, to keep out of logs and messages."""
        tokens = (
            self.github.token,
            self.readthedocs.token,
            self.readthedocs.business_token,
            self.codecov.token,
            self.azure_pipelines.token,
            *self.webhooks.secrets,
        )
        found = [t.get_secret_value() for t in tokens if t.get_secret_value()]
        urls = (self.state.url.get_secret_value(), self.queue.url.get_secret_value())
        passwords = [p for url in urls if (p := urlsplit(url).password)]
        return [*found, *passwords]

    def configured_repo(self, name: str) -> RepoSettings | None:
        """The [[repos]] entry GitHub would take `name` for (owner and name ignoring case)."""
        return next((r for r in self.repos if r.same_repo(name)), None)

    @property
    def every_installation(self) -> bool:
        """Whether the repositories are found from the App's installations."""
        return self.github.installations == "all"

    def require_repos(self) -> None:
        """Raise ConfigError when no [[repos]] entry is configured (and none is discovered)."""
        if not self.repos and not self.every_installation:
            raise ConfigError(
                "repos: no repository is configured (add a [[repos]] entry, or set "
                f"CI_STATUS_BOT_REPOS){self._unconfigured_note}"
            )

    def policy_model(self) -> Policy:
        """The parts of the policy the pure core needs."""
        return self.policy.core()

    def require_github_auth(self) -> None:
        """Raise ConfigError unless exactly one GitHub credential (token or App) is usable."""
        github = self.github
        has_token = bool(github.token.get_secret_value())
        if has_token and github.uses_app:
            raise ConfigError(
                "github: set either github.token or github.app_id + github.private_key_path, "
                "not both"
            )
        if has_token and self.every_installation:
            raise ConfigError(
                'github.installations = "all" needs the App\'s credentials (github.app_id and '
                "github.private_key_path), not github.token"
            )
        if has_token:
            return
        if not github.uses_app:
            raise ConfigError(
                "github: no credentials: set github.token (CI_STATUS_BOT_GITHUB__TOKEN) or "
                "github.app_id and github.private_key_path"
                f"{self._github_token_note}{self._unconfigured_note}"
            )
        _require_app_keys(github)


def require_queue(settings: Settings) -> None:
    """Raise ConfigError unless the queue can be used: a URL and a shared (PostgreSQL) state
    (every worker writes under the state's fenced leases)."""
    if not settings.queue.enabled:
        raise ConfigError("queue.url: not set: `worker` works the jobs of a queue (set queue.url)")
    if not settings.state.shared:
        raise ConfigError(
            "state.url: a queue's workers share one PostgreSQL state (their writes are fenced "
            "by its leases): set state.url (the queue's database will do)"
        )


def _require_app_keys(github: GitHubSettings) -> None:
    """Check the GitHub App keys: both set and the private key readable."""
    if github.app_id == 0:
        raise ConfigError("github.app_id: required when github.private_key_path is set")
    if not github.private_key_path:
        raise ConfigError("github.private_key_path: required when github.app_id is set")
    key = Path(github.private_key_path).expanduser()
    if not key.is_file():
        raise ConfigError(f"github.private_key_path: no such file: {key}")
    if not os.access(key, os.R_OK):
        raise ConfigError(f"github.private_key_path: not readable: {key}")
    check_private_key(str(key))


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read the TOML file (if any) and the environment, env winning; raise ConfigError."""
    env = os.environ if environ is None else environ
    path = _choose_file(config_path, env)
    file_data = _read_toml(path) if path is not None else {}
    env_data = _read_env(env)
    try:
        settings = Settings(**_deep_merge(file_data, env_data))
    except ValidationError as exc:
        sources = _Sources(path=path, file_data=file_data, env=env, env_data=env_data)
        raise ConfigError(_describe_errors(exc, sources)) from None
    settings._config_file = path
    settings._unconfigured_note = _unconfigured_note(path, env_data)
    if env.get("GITHUB_TOKEN") and not env.get(ENV_PREFIX + "GITHUB" + ENV_DELIMITER + "TOKEN"):
        settings._github_token_note = (
            "; GITHUB_TOKEN is set, but the bot reads its token from "
            'CI_STATUS_BOT_GITHUB__TOKEN (export CI_STATUS_BOT_GITHUB__TOKEN="$GITHUB_TOKEN")'
        )
    return settings


def _unconfigured_note(path: Path | None, env_data: Mapping[str, Any]) -> str:
    """What to say when a needed key is missing and nothing configured the bot at all."""
    if path is not None or env_data:
        return ""
    return (
        f"; no configuration file was found at {DEFAULT_CONFIG_PATH.absolute()} (copy "
        f"config/bot.example.toml there, or name one with --config or {CONFIG_ENV_VAR}) and "
        f"no {ENV_PREFIX}* variable is set"
    )


def _choose_file(config_path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """--config, then $CI_STATUS_BOT_CONFIG, then config/bot.toml when present."""
    if config_path is not None:
        return _existing(Path(config_path), "--config")
    named = env.get(CONFIG_ENV_VAR, "")
    if named:
        return _existing(Path(named), CONFIG_ENV_VAR)
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.is_file() else None


def _existing(path: Path, named_by: str) -> Path:
    """An explicitly named configuration file must exist."""
    if not path.expanduser().is_file():
        raise ConfigError(f"config file {path} (named by {named_by}): no such file")
    return path.expanduser()


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse the file with pydantic-settings' TOML source."""
    try:
        return dict(TomlConfigSettingsSource(Settings, toml_file=path)())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The CI_STATUS_BOT_* variables of `env`, exploded into nested sections."""
    unknown = sorted(name for name in env if _names_no_key(name))
    if unknown:
        lines = [f"  {name}: names no configuration key ({_env_hint(name)})" for name in unknown]
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))
    source = EnvSettingsSource(Settings)
    source.env_vars = {key.lower(): value for key, value in env.items()}
    try:
        return dict(source())
    except SettingsError as exc:
        raise ConfigError(_env_error_text(exc, env)) from None


def _env_error_text(exc: SettingsError, env: Mapping[str, str]) -> str:
    """Name the variables whose list or table value is not valid JSON."""
    bad = [name for name, value in env.items() if _is_complex(name) and not _is_json(value)]
    if not bad:
        return f"environment: {exc}"
    lines = [f"{_dotted_env(name)} (from {name}): not valid JSON" for name in sorted(bad)]
    return "invalid configuration:\n" + "\n".join(f"  {line}" for line in lines)


def _dotted_env(name: str) -> str:
    """CI_STATUS_BOT_POLICY__SKIP_LABELS -> policy.skip_labels."""
    return ".".join(name[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER))


def _names_no_key(name: str) -> bool:
    """Whether a CI_STATUS_BOT_* variable names no key of the model (CONFIG is the file)."""
    if not name.upper().startswith(ENV_PREFIX) or name.upper() == CONFIG_ENV_VAR:
        return False
    model: type[BaseModel] = Settings
    parts = _dotted_env(name).split(".")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return True
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        return depth != len(parts) - 1  # a list or a scalar ends the name
    return False


def _env_names(model: type[BaseModel] = Settings, prefix: str = ENV_PREFIX) -> list[str]:
    """Every variable that names a key (or a whole section) of `model`."""
    names: list[str] = []
    for key, field in model.model_fields.items():
        name = prefix + key.upper()
        names.append(name)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += _env_names(annotation, name + ENV_DELIMITER)
    return names


def _env_hint(name: str) -> str:
    """'did you mean X?' for the closest variable that names a key, else a spelling hint."""
    close = difflib.get_close_matches(name.upper(), _env_names(), n=1, cutoff=0.75)
    return f"did you mean {close[0]}?" if close else "check its spelling"


def _key_hint(loc: tuple[int | str, ...]) -> str:
    """'did you mean section.key?' for an unknown key of the file, else a spelling hint."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        annotation = None if field is None else field.annotation
        args = typing.get_args(annotation)
        inner = args[0] if typing.get_origin(annotation) is list and args else annotation
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return "check its spelling"
        model = inner
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    if not close:
        return "check its spelling"
    return f"did you mean {_dotted((*loc[:-1], close[0]))}?"


def _is_complex(name: str) -> bool:
    """Whether a CI_STATUS_BOT_* variable names a list or a section (a JSON value)."""
    if not name.upper().startswith(ENV_PREFIX):
        return False
    model: type[BaseModel] = Settings
    for part in _dotted_env(name).split("."):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        return typing.get_origin(annotation) in (list, dict)
    return True


def _is_json(text: str) -> bool:
    """Whether `text` parses as JSON."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge nested tables, `override` winning; lists and scalars are replaced whole."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True, slots=True)
class _Sources:
    """What each source supplied, to say where a bad value came from."""

    path: Path | None
    file_data: Mapping[str, Any]
    env: Mapping[str, str]
    env_data: Mapping[str, Any]


def _describe_errors(exc: ValidationError, sources: _Sources) -> str:
    """One line per validation error: dotted key, where it came from, what is wrong."""
    lines = [f"invalid configuration ({exc.error_count()} problem(s)):"]
    for error in exc.errors():
        loc = tuple(error["loc"])
        origin = _origin(loc, sources)
        lines.append(f"  {_dotted(loc)}{origin}: {_error_text(error, loc)}")
    return "\n".join(lines)


def _dotted(loc: tuple[int | str, ...]) -> str:
    """('repos', 0, 'name') -> 'repos[0].name'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "(top level)"


def _error_text(error: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    """Pydantic's message, with the offending value unless it may be a secret."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"unknown key ({_key_hint(loc)})"
    secret = any(word in str(part).lower() for part in loc for word in _SECRET_WORDS)
    value = error.get("input")
    if secret or isinstance(value, dict | list) or error["type"] == "value_error":
        return message
    return f"{message} (got {value!r})"


def _origin(loc: tuple[int | str, ...], sources: _Sources) -> str:
    """' (from VAR)' or ' (in FILE)' for the source that supplied this key."""
    if not _reaches(sources.env_data, loc):
        found = sources.path is not None and _reaches(sources.file_data, loc)
        return f" (in {sources.path})" if found else ""
    names = {key.upper(): key for key in sources.env}
    keys = [str(part) for part in loc if isinstance(part, str)]
    for depth in range(len(keys), 0, -1):
        candidate = ENV_PREFIX + ENV_DELIMITER.join(keys[:depth]).upper()
        if candidate in names:
            return f" (from {names[candidate]})"
    return " (from the environment)"


def _reaches(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Whether the whole path `loc` is present in `data`."""
    for part in loc:
        in_table = isinstance(data, Mapping) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if not (in_table or in_list):
            return False
        data = data[part]
    return bool(loc)


def describe(settings: Settings) -> str:
    """The effective settings as TOML-like text, secrets masked."""
    source = settings.config_file
    lines = [f"# configuration file: {source if source else '(none: defaults and environment)'}"]
    for name in Settings.model_fields:
        if name == "repos":
            continue
        section: BaseModel = getattr(settings, name)
        lines += ["", f"[{name}]"]
        lines += [f"{key} = {_show(getattr(section, key))}" for key in type(section).model_fields]
    for repo in settings.repos:
        lines += ["", "[[repos]]", f"name = {_show(repo.name)}"]
        lines.append(f"rtd_project = {_show(repo.rtd_project)}")
        lines.append(f"expected = {_show(repo.expected)}")
    if not settings.repos:
        lines += ["", "# no [[repos]] configured"]
    return "\n".join(lines) + "\n"


def _show(value: object) -> str:
    """One value in TOML-like form; secrets only say whether they are set."""
    if isinstance(value, SecretStr):
        return "**** (set)" if value.get_secret_value() else "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    return str(value)


def _quote(text: str) -> str:
    """A TOML basic string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
