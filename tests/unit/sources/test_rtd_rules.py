"""Issue 15, items 5, 6 and 11, the pure parts: what Read the Docs' answers mean (the status
code alone, the pre-2020 name's project from its target_url) and what a row says when RTD
could not be read (since when, on every row; never a finding about the build a status names)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core.evidence import Judge, Since
from bot.core.model import Kind, Policy, Signal, SinceSource, format_utc
from bot.sources.readthedocs.rows import RtdLookup
from bot.sources.readthedocs.rules import (
    LEGACY_CONTEXT,
    RtdBuild,
    Target,
    describe_status,
    legacy_target,
    project_of,
    status_target,
)

RTD = "omni-docs"
CONTEXT = f"docs/readthedocs.org:{RTD}"
LEGACY = LEGACY_CONTEXT


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://readthedocs.org/projects/pip/builds/99999999/", ("org", "pip", True)),
        ("https://app.readthedocs.org/projects/pip/builds/1/", ("org", "pip", True)),
        ("https://readthedocs.com/projects/corp-docs/builds/7/", ("com", "corp-docs", True)),
        ("https://omni-docs--7430.org.readthedocs.build/en/7430/", ("org", "omni-docs", True)),
        ("https://a--b--12.com.readthedocs.build/", ("com", "a--b", True)),
        ("https://readthedocs.org/projects/../builds/1/", ("org", "..", False)),
        ("http://omni-docs--7430.org.readthedocs.build/en/7430/", None),  # not https
        ("https://evil.example/projects/pip/builds/1/", None),  # not an RTD site
        ("https://readthedocs.org/projects/pip/", None),  # no build page
        ("<pr_build_url>", None),
        ("https://[::1", None),  # not a URL
        (None, None),
    ],
)
def test_the_pre_2020_name_takes_its_project_from_target_url(
    url: str | None, target: tuple[str, str, bool] | None
) -> None:
    assert legacy_target(url) == (None if target is None else Target(*target))
    assert status_target(LEGACY, url) == legacy_target(url)
    valid = target is not None and target[2]
    assert project_of(LEGACY, url) == ((target[0], target[1]) if valid and target else None)
    assert status_target(CONTEXT, url) == Target("org", RTD, True)  # the new name: its own slug


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (403, "Read the Docs answered HTTP 403 (access refused: a private project, or an "
              "address refused without a token)"),
        (404, "Read the Docs answered HTTP 404 (no such project or build is visible)"),
        (401, "Read the Docs answered HTTP 401 (the token was not accepted)"),
        (429, "Read the Docs answered HTTP 429 (too many requests)"),
        (503, "Read the Docs answered HTTP 503 (a server error)"),
        (418, "Read the Docs answered HTTP 418 (I'm a Teapot)"),
        (499, "Read the Docs answered HTTP 499"),
    ],
)  # fmt: skip
def test_an_answer_is_told_by_its_status_code_alone(status: int, words: str) -> None:
    assert describe_status(status) == words


NOW = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)
SHA = "e" * 40


def _row(lookup: RtdLookup, *, url: str | None, state: str = "pending") -> Any:
    signal = Signal(name=CONTEXT, kind=Kind.STATUS, github_state=state, url=url,
                    created_at=NOW - timedelta(minutes=5))  # fmt: skip
    since = Since(NOW - timedelta(minutes=5), SinceSource.GITHUB)
    return lookup.row(signal, number=7, since=since, judge=Judge(Policy(), NOW))


@pytest.mark.parametrize("minutes", [29, 31])
def test_every_last_good_answer_says_since_when_rtd_could_not_be_read(minutes: int) -> None:
    since, read = NOW - timedelta(minutes=minutes), NOW - timedelta(hours=2)
    failure = "Read the Docs answered HTTP 403 (access refused: a private project, or ...)"
    running = RtdBuild(id=5, project=RTD, commit=SHA, state="building", success=None,
                       version="7", created=read)  # fmt: skip
    cases = [
        (RtdLookup(RTD, SHA, read, unverified_since=since, failure=failure), None),
        (RtdLookup(RTD, SHA, read, (running,), unverified_since=since, failure=failure), None),
        (RtdLookup(RTD, SHA, read, (running,), unverified_since=since), None),
    ]
    for lookup, url in cases:
        finding = _row(lookup, url=url).reconciliation.finding
        marked = f"could not be read since {format_utc(since)}" in finding
        assert marked is (minutes > 30), finding  # nothing changes before the limit
        if marked:
            assert f"what it reported at {format_utc(read)}" in finding
            assert (failure.rstrip(".") in finding) is (lookup.failure is not None)


def test_a_failure_to_read_never_becomes_a_finding_about_the_named_build() -> None:
    url = f"https://readthedocs.org/projects/{RTD}/builds/222/"
    outage = RtdLookup(RTD, SHA, NOW, error="Read the Docs answered HTTP 503 (a server error)",
                       unverified_since=NOW - timedelta(hours=1))  # fmt: skip
    row = _row(outage, url=url)
    assert "did not give" not in row.reconciliation.finding and row.reconciliation.build_id is None
    assert row.reconciliation.finding.startswith(
        f"Could not verify with Read the Docs since {format_utc(NOW - timedelta(hours=1))}"
    )
    answered = RtdLookup(RTD, SHA, NOW)  # RTD answered: no such build for this commit
    assert "did not give" in _row(answered, url=url).reconciliation.finding
