"""Issue 15, item 7, the pure parts: the state's record of a repository that cannot be read,
and how each triage format marks its rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.model import Verdict, format_utc
from bot.render.escape import iso_utc
from bot.state.store import Store
from bot.triage import formats
from bot.triage.formats import pull_dict
from bot.triage.rows import NotRead, TriageEntry

REPO = "octo/omni"
NOW = datetime.now(UTC)


def test_the_state_keeps_the_first_failure_time_and_forgets_it_once_read(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        store.repo_read_failed(REPO, now=NOW, failure="not found")
        store.repo_read_failed(REPO, now=NOW + timedelta(minutes=5), failure="HTTP 403")
        assert store.unread_repos() == {REPO: (NOW, "HTTP 403")}
        store.repo_read_ok(REPO)
        assert store.unread_repos() == {}


def _marked(not_read: bool) -> TriageEntry:
    return TriageEntry(
        repo=REPO, number=7, title="t", author="a", draft=False, head_sha="a" * 40,
        verdict=Verdict.PASSING, url=f"https://github.com/{REPO}/pull/7", observed_at=NOW,
        counts={"failing": 0, "pending": 0, "incomplete": 0, "passing": 1},
        read_at=NOW - timedelta(hours=2),
        not_read=NotRead(NOW - timedelta(hours=1), "gone `x` | y") if not_read else None,
    )  # fmt: skip


def test_every_format_marks_a_row_not_read_and_only_that_row() -> None:
    marked, fresh = _marked(True), _marked(False)
    last = format_utc(NOW - timedelta(hours=2))
    since = format_utc(NOW - timedelta(hours=1))
    assert pull_dict(marked)["not_read"] == {
        "since": iso_utc(NOW - timedelta(hours=1)), "reason": "gone `x` | y",
    }  # fmt: skip
    assert pull_dict(fresh)["not_read"] is None
    assert pull_dict(fresh)["read_at"] == iso_utc(NOW - timedelta(hours=2))
    for render in (formats.markdown, formats.table):
        text = " ".join(render([marked], now=NOW).split())  # the table wraps it at 80 columns
        assert f"{REPO} could not be read since {since}; its rows are as last read" in text
        assert "last read" not in render([fresh], now=NOW)
    assert f"last read {last}" in formats.markdown([marked], now=NOW)
    table_rows = [x for x in formats.markdown([marked], now=NOW).splitlines() if x[:2] == "| "]
    assert all(r.count(" | ") == table_rows[0].count(" | ") for r in table_rows)
    page = formats.PageRenderer().render([marked], now=NOW)
    assert f"last read {last}" in page and "data-not-read=" in page
    assert "data-not-read=" not in formats.PageRenderer().render([fresh], now=NOW)
