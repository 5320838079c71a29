"""check-config's questions to Read the Docs (reads only): each token, each `rtd_project`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bot.guard import Guard
from bot.settings import Settings
from bot.sources.base import Said
from bot.sources.readthedocs.client import RtdApi, RtdError


def probe(settings: Settings, guard: Guard) -> Iterator[Said]:
    """Whether each site accepts its token, and each `rtd_project` exists."""
    cfg = settings.readthedocs
    sites = (
        ("org", "readthedocs.token", cfg.api_url, cfg.token.get_secret_value()),
        ("com", "readthedocs.business_token", cfg.business_api_url,
         cfg.business_token.get_secret_value()),
    )  # fmt: skip
    refused: set[str] = set()
    for host, key, url, token in sites:
        if not token:
            yield Said("note", key, f"not set: {url} is read anonymously (throttled)")
            continue
        with _rtd(settings, guard, host, url, token) as rtd:
            try:
                count = rtd.own_projects(host)
            except RtdError as exc:
                if exc.status in (401, 403):
                    refused.add(host)
                    yield Said("problem", key, f"Read the Docs refused the token ({url}: {exc})")
                else:
                    yield Said(
                        "unverified", key, f"Read the Docs could not be asked ({url}: {exc})"
                    )
            else:
                yield Said("ok", key, f"accepted by {url} ({count} project(s) of the token's user)")
    if "org" not in refused:
        yield from _rtd_projects(settings, guard)


def _rtd_projects(settings: Settings, guard: Guard) -> Iterator[Said]:
    """Each `rtd_project` exists on the Community site (readthedocs.api_url)."""
    cfg = settings.readthedocs
    named = [(i, r.rtd_project) for i, r in enumerate(settings.repos) if r.rtd_project]
    if not named:
        return
    with _rtd(settings, guard, "org", cfg.api_url, cfg.token.get_secret_value()) as rtd:
        for index, slug in named:
            key = f"repos[{index}].rtd_project"
            try:
                found = rtd.project_exists("org", slug)
            except RtdError as exc:
                yield Said("unverified", key, f"{slug}: Read the Docs could not be asked ({exc})")
                continue
            if found:
                yield Said("ok", key, f"{slug}: its builds can be read at {cfg.api_url}")
            else:
                yield Said(
                    "problem", key, f"{slug}: no such project at {cfg.api_url} (404), or it is "
                    "not visible to this token",
                )  # fmt: skip


@contextmanager
def _rtd(settings: Settings, guard: Guard, host: str, url: str, token: str) -> Iterator[RtdApi]:
    """A Read the Docs client for one site, not retried (check-config asks once)."""
    rtd = RtdApi(
        api_urls={host: url}, tokens={host: token}, guard=guard,
        timeout_s=settings.readthedocs.timeout_seconds, max_retries=0,
    )  # fmt: skip
    try:
        yield rtd
    finally:
        rtd.close()
