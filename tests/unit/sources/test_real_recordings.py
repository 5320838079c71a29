"""Answers others recorded (tests/data/real/, see PROVENANCE.md) fed through the Codecov and
Azure Pipelines parsers and rows: what each source said is what the row says."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import TESTS

from bot.core.evidence import Judge, Since
from bot.core.model import Kind, Policy, Signal, SinceSource, State
from bot.sources.azure_pipelines.rows import AzureLookup
from bot.sources.azure_pipelines.rules import build_ref, dump, load, parse_build
from bot.sources.codecov.rows import CodecovLookup
from bot.sources.codecov.rules import CommitRecord, parse_commit, parse_uploads

REAL = TESTS / "data" / "real"
NOW = datetime(2021, 8, 13, 12, 0, tzinfo=UTC)


def _json(path: str) -> Any:
    return json.loads((REAL / path).read_text(encoding="utf-8"))


BUILDS: list[dict[str, Any]] = _json("azure-devops/buildList.json")["value"]


@pytest.mark.parametrize("data", BUILDS, ids=[str(b["id"]) for b in BUILDS])
def test_each_recorded_azure_build_settles_a_check_of_its_own_commit(data: dict[str, Any]) -> None:
    build = parse_build(data, data["id"])
    assert (build.status, build.result) == ("completed", "succeeded")
    assert build.finished is not None and build.finished.microsecond > 0  # 7 digits read
    assert load(dump(build)) == build  # the cache's text form keeps it whole
    url = data["_links"]["web"]["href"]
    ref = build_ref(url)
    assert ref is not None and ref.build_id == data["id"] and ref.org == "tpwange"
    check = Signal("poc - Python unit test", Kind.CHECK_RUN, "in_progress", app="azure-pipelines",
                   url=url, started_at=build.started)  # fmt: skip
    judge = Judge(Policy(), NOW)
    row = AzureLookup(ref, data["sourceVersion"], build, NOW).row(
        check, number=1, since=Since(build.started, SinceSource.GITHUB), judge=judge
    )
    assert row.state is State.SUCCESS and row.reconciliation is not None
    assert row.reconciliation.divergent and row.reconciliation.build_id == data["id"]
    # the same build, asked about another head, settles nothing
    other = AzureLookup(ref, "0" * 40, build, NOW).row(
        check, number=1, since=Since(build.started, SinceSource.GITHUB), judge=judge
    )
    assert other.reconciliation is not None and not other.reconciliation.divergent
    assert "not this head" in other.reconciliation.finding


def test_a_recorded_build_read_as_another_build_is_refused() -> None:
    with pytest.raises(Exception, match="another record than build 7"):
        parse_build(BUILDS[0], 7)


def test_codecov_s_own_commit_detail_and_uploads_read_as_a_processed_commit() -> None:
    detail, uploads = _json("codecov/commit-detail.json"), _json("codecov/commit-uploads.json")
    commit, state = parse_commit(detail, detail["commitid"])
    got, count = parse_uploads(uploads)
    record = CommitRecord(commit, state, got, count)
    assert (state, count, record.processed_at) == (
        "complete",
        2,
        datetime(2019, 1, 10, 10, 4, 12, tzinfo=UTC),
    )
    patch = Signal("codecov/patch", Kind.STATUS, "pending",
                   created_at=datetime(2019, 1, 10, 10, 0, tzinfo=UTC))  # fmt: skip
    judge = Judge(Policy(), datetime(2019, 1, 10, 10, 30, tzinfo=UTC))
    row = CodecovLookup("codecov/test-repo", record, judge.now).row(
        patch, number=1, since=Since(patch.created_at, SinceSource.GITHUB), judge=judge
    )
    assert row.reconciliation is not None and row.reconciliation.divergent
    assert row.reconciliation.finding == (
        "Codecov processed this commit at 2019-01-10 10:04 UTC (2 uploads); "
        "GitHub still shows pending."
    )
    with pytest.raises(Exception, match="not this head"):
        parse_commit(detail, "f" * 40)
    assert judge.now - patch.created_at < timedelta(hours=1)
