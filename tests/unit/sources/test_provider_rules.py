"""Codecov's and Azure Pipelines' rules (pure): which signals each recognises, which builds a
URL names, and the allowlist each declares (its read endpoints, nothing else)."""

from __future__ import annotations

import pytest

from bot.core.model import Kind, Signal
from bot.guard import ForeignHost, Guard, RefusedRequest
from bot.settings import Settings
from bot.sources.azure_pipelines.provider import allowances as azure_allowances
from bot.sources.azure_pipelines.rules import asked_about as azure_asked
from bot.sources.azure_pipelines.rules import build_ref
from bot.sources.codecov.provider import allowances as codecov_allowances
from bot.sources.codecov.rules import asked_about as codecov_asked
from bot.sources.codecov.rules import load
from bot.sources.readthedocs.provider import allowances as rtd_allowances

SHA = "5f0c6a8be2d94c1e7a3b9d8f6e2c4a1b0d9e8f7a"


@pytest.mark.parametrize(
    ("name", "kind", "state", "app", "asked"),
    [
        ("codecov/patch", Kind.STATUS, "pending", None, True),
        ("codecov/project", Kind.STATUS, "pending", None, True),
        ("codecov/project/backend", Kind.STATUS, "pending", None, True),
        ("codecov/patch/ui-tests", Kind.STATUS, "pending", None, True),
        ("codecov/changes", Kind.STATUS, "pending", None, True),
        ("codecov/patch", Kind.STATUS, "success", None, False),  # final on GitHub: not asked
        ("codecov/patch", Kind.CHECK_RUN, "in_progress", "codecov", True),
        ("codecov/patch", Kind.CHECK_RUN, "in_progress", "github-actions", False),  # not its app
        ("codecov/patchy", Kind.STATUS, "pending", None, False),
        ("codecov/project/a b", Kind.STATUS, "pending", None, False),
        ("codecov", Kind.STATUS, "pending", None, False),
    ],
)
def test_codecov_recognises_its_documented_names_not_final_on_github(
    name: str, kind: Kind, state: str, app: str | None, asked: bool
) -> None:
    assert codecov_asked(Signal(name, kind, state, app=app)) is asked


@pytest.mark.parametrize(
    ("url", "ref"),
    [
        ("https://dev.azure.com/rust-lang/rust/_build/results?buildId=5", ("rust-lang", "rust", 5)),
        ("https://dev.azure.com/o/p/_build/results?buildId=12&view=logs&j=abc", ("o", "p", 12)),
        ("https://azure-sdk.visualstudio.com/i/_build/results?buildId=7", ("azure-sdk", "i", 7)),
        ("https://dev.azure.com/o/My%20Project/_build/results?buildId=3", ("o", "My Project", 3)),
        ("http://dev.azure.com/o/p/_build/results?buildId=1", None),  # not https
        ("https://dev.azure.com.evil.example/o/p/_build/results?buildId=1", None),
        ("https://dev.azure.com/o/p/_git/p?buildId=1", None),  # not a build page
        ("https://dev.azure.com/o/p/_build/results?buildId=1&buildId=2", None),
        ("https://dev.azure.com/o/p/_build/results?buildId=x", None),
        ("https://dev.azure.com/o/../_build/results?buildId=1", None),
        ("https://dev.azure.com/o/./_build/results?buildId=1", None),
        (None, None),
    ],
)  # fmt: skip
def test_the_build_a_url_names(url: str | None, ref: tuple[str, str, int] | None) -> None:
    found = build_ref(url)
    assert (tuple(found) if found else None) == ref


def test_azure_asks_about_its_app_s_running_checks_and_build_page_statuses_only() -> None:
    url = "https://dev.azure.com/o/p/_build/results?buildId=9"
    assert azure_asked(Signal("ci", Kind.CHECK_RUN, "queued", app="azure-pipelines", url=url))
    assert azure_asked(Signal("ci", Kind.STATUS, "pending", url=url))
    assert not azure_asked(Signal("ci", Kind.CHECK_RUN, "queued", app="other", url=url))
    assert not azure_asked(Signal("ci", Kind.CHECK_RUN, "success", app="azure-pipelines", url=url))
    assert not azure_asked(Signal("ci", Kind.STATUS, "pending", url="https://ci.example/9"))


def _guard() -> Guard:
    settings = Settings.model_validate({})
    return Guard.for_urls(
        "https://api.github.com",
        (*rtd_allowances(settings), *codecov_allowances(settings), *azure_allowances(settings)),
    )


def test_the_allowlist_admits_exactly_the_read_endpoints() -> None:
    guard = _guard()
    base = "https://api.codecov.io/api/v2/github/octo/repos/omni"
    for url in (f"{base}/", f"{base}/commits/{SHA}/", f"{base}/commits/{SHA}/uploads/"):
        guard.check_source("codecov", "GET", url)
    guard.check_source("azure-pipelines", "GET", "https://dev.azure.com/o/p/_apis/build/builds/9")
    refused = [
        ("codecov", "POST", f"{base}/commits/{SHA}/"),
        ("codecov", "GET", f"{base}/commits/{SHA}/report/"),
        ("codecov", "GET", f"{base}/commits/main/"),
        ("codecov", "GET", "https://api.codecov.io/upload/v4"),
        ("azure-pipelines", "PATCH", "https://dev.azure.com/o/p/_apis/build/builds/9"),
        ("azure-pipelines", "GET", "https://dev.azure.com/o/p/_apis/build/builds/9/logs"),
        ("azure-pipelines", "GET", "https://dev.azure.com/o/p/_apis/build/builds"),
        ("codecov", "GET", "https://dev.azure.com/o/p/_apis/build/builds/9"),  # not its host
    ]
    for source, method, url in refused:
        with pytest.raises(RefusedRequest):
            guard.check_source(source, method, url)
    with pytest.raises(ForeignHost):
        guard.check_source(
            "azure-pipelines", "GET", "https://evil.example/o/p/_apis/build/builds/9"
        )


@pytest.mark.parametrize("text", ["", "{", "[]", '{"commit": 1}', '{"uploads": "x", "count": 1}'])
def test_a_kept_record_that_cannot_be_read_back_is_asked_again(text: str) -> None:
    assert load(text) is None
