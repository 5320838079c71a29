"""Issue 25's goldens: Codecov and Azure Pipelines rows, byte for byte, read through GitHub's
markdown engine as the other goldens are (tests/unit/render/test_comment.py's checks).

Regenerate on purpose, then review the diff:
    UPDATE_GOLDEN=1 python -m pytest -q -n 0 tests/unit/sources/test_provider_goldens.py
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from support import NOW, SHA, at, run, snapshot, status
from unit.render.test_comment import check_html, golden

from bot.core.evidence import Evidence, evidence_key
from bot.core.model import Policy, Report, Signal
from bot.core.reconcile import reconcile
from bot.render.comment import Renderer
from bot.render.report import report_dict
from bot.sources.azure_pipelines.rows import AzureLookup
from bot.sources.azure_pipelines.rules import Build, build_ref
from bot.sources.codecov.rows import CodecovLookup
from bot.sources.codecov.rules import CommitRecord, Upload

REPO = "example/omni"
CODECOV_URL = f"https://app.codecov.io/gh/{REPO}/commit/{SHA}"
AZURE_URL = "https://dev.azure.com/example/omni/_build/results?buildId=20455&view=results"


def _passing() -> tuple[Signal, ...]:
    return tuple(
        run(name, "success", workflow="tests", completed_at=at(9, 58))
        for name in ("tests (3.11)", "tests (3.12)")
    )


def _codecov(record: CommitRecord) -> Report:
    patch = status("codecov/patch", "pending", url=CODECOV_URL, created_at=at(9, 59),
                   description="Waiting for status to be reported")  # fmt: skip
    lookup = CodecovLookup(REPO, record, read_at=at(13, 58), page=CODECOV_URL)
    docs: dict[str, Evidence] = {evidence_key(patch): lookup}
    return reconcile(snapshot(*_passing(), patch), docs, Policy(), now=NOW)


def codecov_complete() -> Report:
    """Codecov processed both uploads at 10:04; GitHub never heard."""
    up = Upload("processed", at(10, 1), at(10, 4), "github-actions")
    return _codecov(CommitRecord(SHA, "complete", (up, up), 2))


def codecov_pending() -> Report:
    """Codecov holds one upload (10:02) and waits for more (after_n_builds)."""
    return _codecov(CommitRecord(SHA, "pending", (Upload("uploaded", at(10, 2), None),), 1))


def codecov_error() -> Report:
    """Codecov's processing failed."""
    return _codecov(CommitRecord(SHA, "error", (Upload("error", at(10, 2), at(10, 3)),), 1))


def _azure(build: Build | None, **kwargs: object) -> Report:
    check = run("omni (Linux)", "in_progress", app="azure-pipelines", url=AZURE_URL,
                started_at=at(10, 0))  # fmt: skip
    ref = build_ref(AZURE_URL)
    assert ref is not None
    lookup = AzureLookup(ref, SHA, build, at(13, 58), **kwargs)  # type: ignore[arg-type]
    docs: dict[str, Evidence] = {evidence_key(check): lookup}
    return reconcile(snapshot(*_passing(), check), docs, Policy(), now=NOW)


def _build(result: str) -> Build:
    return Build(20455, "completed", result, "9" * 40, SHA, "20261005.3", at(10, 0), at(10, 31),
                 AZURE_URL.removesuffix("&view=results"))  # fmt: skip


def azure_succeeded() -> Report:
    """The build succeeded at 10:31; GitHub's check still says in progress."""
    return _azure(_build("succeeded"))


def azure_failed() -> Report:
    """The build failed at 10:31; GitHub's check still says in progress."""
    return _azure(_build("failed"))


def azure_unreachable() -> Report:
    """Azure DevOps has answered 503 since 11:00: could not verify, no conclusion."""
    return _azure(
        None,
        failure="Azure DevOps answered HTTP 503 (a server error)",
        failing_since=at(11, 0),
        status=503,
    )


CASES: dict[str, Callable[[], Report]] = {
    "codecov_complete": codecov_complete,
    "codecov_pending": codecov_pending,
    "codecov_error": codecov_error,
    "azure_succeeded": azure_succeeded,
    "azure_failed": azure_failed,
    "azure_unreachable": azure_unreachable,
}


@pytest.mark.parametrize("case", list(CASES))
def test_provider_golden_comment(case: str) -> None:
    report = CASES[case]()
    body = Renderer().markdown(report)
    assert body == golden(f"{case}.md", body)
    check_html(report, body)


@pytest.mark.parametrize(
    ("case", "provider", "state", "divergent"),
    [
        ("codecov_complete", "codecov", "stale", True),
        ("codecov_pending", "codecov", "stale", False),  # pending at Codecov for 4 hours
        ("codecov_error", "codecov", "stale", True),
        ("azure_succeeded", "azure-pipelines", "success", True),
        ("azure_failed", "azure-pipelines", "failure", True),
        ("azure_unreachable", "azure-pipelines", "stale", False),
    ],
)
def test_the_report_names_the_provider(
    case: str, provider: str, state: str, divergent: bool
) -> None:
    data = json.loads(json.dumps(report_dict(CASES[case]())))
    row = next(s for s in data["signals"] if s["reconciliation"] is not None)
    assert (row["reconciliation"]["provider"], row["state"]) == (provider, state)
    assert row["reconciliation"]["divergent"] is divergent


def test_the_findings_say_what_the_contract_says() -> None:
    def finding(report: Report) -> str:
        return next(r.reconciliation.finding for r in report.rows if r.reconciliation)

    assert finding(codecov_complete()) == (
        "Codecov processed this commit at 2026-10-05 10:04 UTC (2 uploads); "
        "GitHub still shows pending."
    )
    assert finding(codecov_pending()) == (
        "Codecov has not finished this commit: 1 upload received, the last at 2026-10-05 10:02 UTC."
    )
    assert finding(azure_unreachable()) == (
        "Could not verify with Azure Pipelines since 2026-10-05 11:00 UTC: Azure DevOps "
        "answered HTTP 503 (a server error)."
    )
    assert NOW - at(11, 0) > timedelta(minutes=30)
