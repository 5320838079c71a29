"""Issue 16, items 5 and 6, the pure parts: the names a triage row carries and shows, the code
span a table cell can hold, and what the page says about its data's age."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from bot.core.model import (
    BaseCheck,
    Kind,
    PullSnapshot,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
    format_utc,
)
from bot.render.escape import cell_code
from bot.triage import formats
from bot.triage.formats import Freshness, freshness_notes
from bot.triage.rows import TriageEntry, entry_for, shortlist

REPO = "octo/omni"
NOW = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)


def _row(name: str, state: State, *, required: bool | None = None, github: str = "") -> Row:
    signal = Signal(name=name, kind=Kind.STATUS, github_state=github or state.value,
                    required=required)  # fmt: skip
    return Row(signal, state, NOW - timedelta(minutes=5), SinceSource.GITHUB)


def _entry(*rows: Row, verdict: Verdict = Verdict.FAILING) -> TriageEntry:
    report = Report(
        repo=REPO, number=1, title="t", url=f"https://github.com/{REPO}/pull/1", head_sha="a" * 40,
        draft=False, observed_at=NOW, verdict=verdict, rows=rows,
    )  # fmt: skip
    snapshot = PullSnapshot(repo=REPO, number=1, title="t", author="a", draft=False,
                            head_sha="a" * 40, url=f"https://github.com/{REPO}/pull/1")  # fmt: skip
    return entry_for(snapshot, report, docs=(), read_at=NOW)


def test_failing_names_required_first_and_never_reported_apart() -> None:
    entry = _entry(
        _row("lint", State.FAILURE, required=False),
        _row("tests", State.TIMED_OUT, required=True),
        _row("ok", State.SUCCESS, required=True),
        _row("docs", State.ACTION_REQUIRED),
        _row("extra", State.PENDING, required=False, github="expected"),
        _row("DCO", State.PENDING, required=True, github="expected"),
    )
    assert entry.failing == ("tests", "lint", "docs")
    assert entry.required_failing == ("tests",)
    assert entry.never_reported == ("DCO", "extra")  # required first
    assert entry.required_never_reported == ("DCO",)
    assert formats.pull_dict(entry)["never_reported"] == ["DCO", "extra"]
    assert formats.pull_dict(entry)["required_never_reported"] == ["DCO"]
    assert formats.totals([entry]).never_reported == 1
    only_configured = _entry(_row("extra", State.PENDING, required=False, github="expected"))
    assert only_configured.never_reported == ("extra",)
    assert formats.totals([only_configured]).never_reported == 0  # no rule requires it
    page = formats.PageRenderer().render([only_configured], now=NOW)
    assert 'data-never-reported="0"' in page


@pytest.mark.parametrize(
    ("names", "shown", "more"),
    [((), (), 0), (("a",), ("a",), 0), (("a", "b", "c"), ("a", "b", "c"), 0),
     (("a", "b", "c", "d", "e"), ("a", "b", "c"), 2)],
)  # fmt: skip
def test_three_names_then_a_count(
    names: tuple[str, ...], shown: tuple[str, ...], more: int
) -> None:
    assert shortlist(names) == (shown, more)


@pytest.mark.parametrize(
    "name", ["build-wheel (3.11)", "a|b", "x\\|y", "`tick`", "@admin #1 <b>&amp;", "ends\\"]
)
def test_a_name_in_a_table_cell_renders_verbatim(name: str) -> None:
    table = f"| a | b |\n|---|---|\n| {cell_code(name)} | z |\n"
    page = cmarkgfm.github_flavored_markdown_to_html(table, options=Options.CMARK_OPT_UNSAFE)
    cells = re.findall(r"<td>(.*?)</td>", page, flags=re.S)
    assert len(cells) == 2 and cells[1] == "z"  # a pipe in the name splits no cell
    assert html.unescape(re.sub(r"</?code>", "", cells[0])) == name


def test_the_markdown_and_the_table_name_what_never_reported() -> None:
    entry = _entry(_row("DCO", State.PENDING, required=True, github="expected"),
                   verdict=Verdict.PENDING)  # fmt: skip
    markdown = formats.markdown([entry], now=NOW)
    assert "| never reported: `DCO` (required) |" in markdown
    assert "1 with a required check never reported" in markdown
    table = formats.table([entry], now=NOW)
    assert "never reported: DCO (required)" in table
    assert "1 with a required check never reported;" in table  # the same label everywhere
    page = formats.PageRenderer().render([entry], now=NOW)
    assert 'data-never-reported="1"' in page
    assert 'never reported: <code>DCO</code> <span class="req">required</span>' in page


START = NOW - timedelta(hours=2)


@pytest.mark.parametrize(
    ("freshness", "rows", "said"),
    [
        (None, False, []),
        (Freshness(START), False, [
            f"No cycle has finished yet (the service started at {format_utc(START)}); the pull "
            "requests appear here when the first one does."]),
        (Freshness(START), True, [
            f"No cycle has finished since the service started at {format_utc(START)}: these "
            f"rows are kept from an earlier run; the data was read at {format_utc(NOW)}."]),
        (Freshness(START, NOW), True, []),
        (Freshness(START, NOW, NOW + timedelta(minutes=5)), True, [
            f"The last cycle failed at {format_utc(NOW + timedelta(minutes=5))}; the data was "
            f"read at {format_utc(NOW)}."]),
        (Freshness(START, NOW, None, (("graphql", NOW + timedelta(hours=1)), ("core", None))),
         True, [
            f"GitHub's graphql budget is exhausted until {format_utc(NOW + timedelta(hours=1))};"
            f" the data was read at {format_utc(NOW)}.",
            f"GitHub's core budget is exhausted; the data was read at {format_utc(NOW)}."]),
    ],
)  # fmt: skip
def test_what_the_page_says_about_its_data(
    freshness: Freshness | None, rows: bool, said: list[str]
) -> None:
    entries = [_entry(_row("ok", State.SUCCESS), verdict=Verdict.PASSING)] if rows else []
    assert freshness_notes(entries, freshness) == said


def test_failures_also_on_the_merge_base_are_marked_in_every_format() -> None:
    broken = _row("tests", State.FAILURE, required=True)._replace(
        base=BaseCheck("b" * 40, State.FAILURE)
    )
    mine = _row("lint", State.FAILURE)._replace(base=BaseCheck("b" * 40, State.SUCCESS))
    entry = _entry(broken, mine)
    assert entry.failing_on_base == ("tests",)
    assert formats.pull_dict(entry)["failing_on_base"] == ["tests"]
    table = formats.table([entry], width=200, now=NOW)
    assert "tests (required, also on the merge base), lint" in table
    assert "`tests` (required, also on the merge base)" in formats.markdown([entry], now=NOW)
    page = formats.PageRenderer().render([entry], now=NOW)
    assert '<code>tests</code> <span class="req">required</span> <span class="req">also on' in page
