"""Read the Docs' allowlist, now declared by its kind through the sources contract, admits
exactly what the guard's own Read the Docs table admitted before (`Guard.check_rtd` and
`RTD_ALLOWED`, as of 6e0b2e0, copied below as the reference): every request either passes
both or is refused by both, with the same exception and the same words."""

from __future__ import annotations

import itertools
import re
from urllib.parse import urlsplit

import pytest

from bot.app import request_guard
from bot.core.remedies import READTHEDOCS
from bot.guard import ForeignHost, RefusedRequest, origin
from bot.settings import Settings
from bot.sources.readthedocs.provider import api_urls

# -- the reference: bot/guard.py's Read the Docs allowlist before the contract, verbatim -------

RTD_ALLOWED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    ("GET", re.compile(pattern))
    for pattern in (
        r"/projects/",  # check-config: the token's own projects (whether RTD accepts it)
        r"/projects/[^/]+/builds/",
        r"/projects/[^/]+/builds/\d+/",
        r"/projects/[^/]+/builds/\d+/notifications/",
    )
)


def old_check_rtd(rtd_api_urls: tuple[str, ...], method: str, url: str) -> None:
    """`Guard.for_urls(..., rtd_api_urls)` then `check_rtd(method, url)`, as they were."""
    rtd_prefixes = tuple(urlsplit(u).path.rstrip("/") for u in rtd_api_urls)
    rtd_roots = tuple(origin(u) + urlsplit(u).path.rstrip("/") for u in rtd_api_urls)
    method = method.upper()
    path = urlsplit(url).path
    where = origin(url)
    if rtd_roots and not any(r.startswith(where + "/") or r == where for r in rtd_roots):
        raise ForeignHost(f"refused: {method} to host {where}, not a configured Read the Docs host")
    roots = rtd_roots or tuple(where + p for p in rtd_prefixes)
    for prefix in (r[len(where) :] for r in roots if r.startswith(where)):
        if path.startswith(prefix + "/"):
            rest = path[len(prefix) :]
            if any(m == method and p.fullmatch(rest) for m, p in RTD_ALLOWED):
                return
    raise RefusedRequest(f"refused: {method} {path} is not on the bot's Read the Docs allowlist")


# -- the cases ---------------------------------------------------------------------------------

CONFIGS = {
    "defaults": {},
    "self-hosted, http, a port, a path, a trailing slash": {
        "readthedocs": {
            "api_url": "http://127.0.0.1:8123/rtd/api/v3/",
            "business_api_url": "https://RTD.example.com:443/api/v3",
        }
    },
    "a root at the top of its host, both sites one root": {
        "readthedocs": {
            "api_url": "https://docs.example:8443",
            "business_api_url": "https://docs.example:8443",
        }
    },
    # other sources rooted on Read the Docs' own host (one at its very root): their paths
    # must not become Read the Docs', nor Read the Docs' theirs
    "other sources on its host": {
        "codecov": {"api_url": "https://app.readthedocs.org/api/v2"},
        "azure_pipelines": {"api_url": "https://app.readthedocs.org/api/v3"},
    },
}

SUFFIXES = (
    "/projects/",
    "/projects/p/builds/",
    "/projects/p/builds/12/",
    "/projects/p/builds/12/notifications/",
    "/projects/p/builds/?commit=" + "a" * 40 + "&page=2",
    "/projects/p/builds/12/notifications/?limit=100#x",
    "/projects",
    "/projects/p/builds",
    "/projects/p/builds/12",
    "/projects/p/builds/12/notifications",
    "/projects/p/builds/x/",
    "/projects/p/builds/\u0661\u0662/",  # digits of another script
    "/projects/p/",
    "/projects/p/versions/",
    "/projects/p/versions/7/builds/",
    "/projects/p/q/builds/",
    "/projects//builds/",
    "/projects/p%2Fq/builds/",
    "/projects/../builds/",
    "/projects/p/builds/12/notifications/extra/",
    "/projects/p/builds/12/cancel/",
    "/PROJECTS/",
    "//projects/",
    "/o/p/_apis/build/builds/9",
    "/github/o/repos/r/",
    "",
    "/",
)
METHODS = ("GET", "get", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _bases(root: str) -> list[str]:
    """A configured root and its near misses: scheme, port, host and path changed."""
    parts = urlsplit(root)
    host, path = parts.hostname or "", parts.path.rstrip("/")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    other = "http" if parts.scheme == "https" else "https"
    return [
        f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{path}",
        f"{parts.scheme}://{host}:{port}{path}",  # the default port said
        f"{parts.scheme}://{host.upper()}:{port}{path}",
        f"{parts.scheme}://user:pw@{host}:{port}{path}",
        f"{other}://{host}:{port}{path}",
        f"{parts.scheme}://{host}:{port + 1}{path}",
        f"{parts.scheme}://{host}:{str(port)[:-1] or '1'}{path}",  # a prefix of the port
        f"{parts.scheme}://{host}.evil:{port}{path}",
        f"{parts.scheme}://evil.example{path}",
        f"{parts.scheme}://{host}:{port}{path}x",
        f"{parts.scheme}://{host}:{port}{path.rsplit('/', 1)[0]}",
        f"{parts.scheme}://{host}:{port}/api/v2",
        f"{parts.scheme}://{host}:{port}",
    ]


def _outcome(check: object, method: str, url: str) -> tuple[str, str] | None:
    try:
        check(method, url)  # type: ignore[operator]
    except RefusedRequest as exc:
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_contract_allows_exactly_what_the_guard_s_own_table_allowed(name: str) -> None:
    settings = Settings.model_validate(CONFIGS[name])
    guard = request_guard(settings)
    roots = tuple(api_urls(settings).values())
    urls = {
        base + suffix
        for root in (*roots, "https://app.readthedocs.com/api/v3")
        for base in _bases(root)
        for suffix in SUFFIXES
    }
    allowed = 0
    for method, url in itertools.product(METHODS, sorted(urls)):
        new = _outcome(lambda m, u: guard.check_source(READTHEDOCS, m, u), method, url)
        old = _outcome(lambda m, u: old_check_rtd(roots, m, u), method, url)
        assert new == old, (method, url)
        allowed += new is None
    assert allowed >= 3 * 4  # not vacuous: each root admits its reads (GET and get)
