"""Issue 28, items 1 and 5, the pure parts: every triage format names the incomplete and
pending signals as it names failing ones, with their state word; one label per number in
correct English; the terminal table fits 80 columns; `--by check` groups failing signals."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from bot.core.model import (
    Kind,
    PullSnapshot,
    Reconciliation,
    Report,
    Row,
    Signal,
    SinceSource,
    State,
    Verdict,
)
from bot.state.ports import StoredTriage
from bot.triage import formats
from bot.triage.keeper import _details_json, _from_stored
from bot.triage.rows import TriageEntry, entry_for, labels, totals

REPO = "octo/omni"
NOW = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)
DOCS = "docs/readthedocs.org:omni-docs"
LONG = "a title far too long for any terminal column, with more words than fit " * 2


def _row(name: str, state: State, *, kind: Kind = Kind.CHECK_RUN, github: str = "",
         required: bool | None = None, minutes: int = 5, rec: bool = False) -> Row:  # fmt: skip
    signal = Signal(name=name, kind=kind, github_state=github or state.value, required=required)
    reconciliation = (
        Reconciliation("readthedocs", "omni-docs", 1, "cancelled", False, 1, True, "cancelled")
        if rec
        else None
    )
    return Row(signal, state, NOW - timedelta(minutes=minutes), SinceSource.GITHUB, reconciliation)


def _entry(*rows: Row, verdict: Verdict, number: int = 1, title: str = "t") -> TriageEntry:
    url = f"https://github.com/{REPO}/pull/{number}"
    report = Report(repo=REPO, number=number, title=title, url=url, head_sha="a" * 40,
                    draft=False, observed_at=NOW, verdict=verdict, rows=rows)  # fmt: skip
    snap = PullSnapshot(repo=REPO, number=number, title=title, author="alice", draft=False,
                        head_sha="a" * 40, url=url)  # fmt: skip
    return entry_for(snap, report, docs=(), read_at=NOW)


def seed_entry() -> TriageEntry:
    """The seed case: a docs build RTD cancelled while GitHub still shows pending."""
    docs = _row(DOCS, State.CANCELLED, kind=Kind.STATUS, github="pending", rec=True, minutes=300)
    return _entry(docs, _row("DCO", State.SUCCESS), verdict=Verdict.INCOMPLETE, number=7430)


def waiting_entry() -> TriageEntry:
    never = _row("tests (3.12)", State.PENDING, kind=Kind.EXPECTED, github="expected",
                 required=True, minutes=20)  # fmt: skip
    running = _row("lint", State.PENDING, github="in_progress", minutes=30)
    return _entry(never, running, _row("ok", State.SUCCESS), verdict=Verdict.PENDING, number=2)


# --- item 1: stuck and pending signals named in every format --------------------------------


def test_the_seed_case_names_its_cancelled_docs_build_everywhere() -> None:
    entry = seed_entry()
    assert [(n.name, n.state) for n in entry.incomplete] == [(DOCS, "cancelled")]
    pull = formats.pull_dict(entry)
    assert pull["incomplete"] == [
        {"name": DOCS, "state": "cancelled", "required": None,
         "since": "2026-10-05T09:00:00Z"},
    ]  # fmt: skip
    assert pull["pending"] == []
    assert f"cancelled: {DOCS}" in formats.table([entry], now=NOW)
    assert f"cancelled: `{DOCS}`" in formats.markdown([entry], now=NOW)
    page = formats.PageRenderer().render([entry], now=NOW)
    assert f"cancelled: <code>{DOCS}</code>" in page
    row = re.search(r'<tr [^>]*data-text="([^"]*)"', page)
    assert row is not None and DOCS in row.group(1) and "cancelled" in row.group(1)


def test_what_never_reported_and_what_runs_are_named_with_their_state_word() -> None:
    entry = waiting_entry()
    assert [(n.name, n.state, n.required) for n in entry.pending] == [
        ("tests (3.12)", "never reported", True), ("lint", "pending", None),
    ]  # fmt: skip
    table = formats.table([entry], now=NOW)
    assert "never reported: tests (3.12) (required)" in table
    assert "pending since 10-05 13:30: lint" in table
    page = formats.PageRenderer().render([entry], now=NOW)
    assert "never reported" in re.search(r'data-text="([^"]*)"', page).group(1)  # type: ignore[union-attr]


def test_names_are_cut_to_three_then_counted() -> None:
    rows = [_row(f"job-{i}", State.CANCELLED) for i in range(5)]
    entry = _entry(*rows, verdict=Verdict.INCOMPLETE)
    assert "cancelled: job-0, job-1, job-2 +2" in formats.table([entry], now=NOW)
    assert "+2" in formats.markdown([entry], now=NOW)
    assert '<span class="more">+2</span>' in formats.PageRenderer().render([entry], now=NOW)


def test_stored_rows_keep_the_names() -> None:
    entry = waiting_entry()
    stored = StoredTriage(
        repo=REPO, number=2, title="t", author="alice", draft=False, head_sha="a" * 40,
        verdict="pending", url=entry.url, details=_details_json(entry), observed_at=NOW,
        updated_at=NOW, comment_id=None,
    )  # fmt: skip
    again = _from_stored(stored, None)
    assert again.pending == entry.pending and again.incomplete == entry.incomplete


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (1, "1 docs build cancelled, stale or unknown"),
        (2, "2 docs builds cancelled, stale or unknown"),
    ],
)
def test_one_label_per_number_in_correct_english(count: int, said: str) -> None:
    entries = [replace(seed_entry(), docs_stuck=1)] * count  # as an RTD provider counts it
    words = dict((key, text) for key, _, text in labels(totals(entries)))
    assert words["docs-stuck"] == said
    assert said in formats.table(entries, now=NOW)
    assert said in formats.markdown(entries, now=NOW)
    page = formats.PageRenderer().render(entries, now=NOW)
    chip = re.search(r'data-count="docs-stuck"[^>]*>(.*?)</li>', page)
    assert chip is not None and re.sub(r"<[^>]+>", "", chip.group(1)) == said
    assert "stale docs builds" not in page
    drafts = dict((key, text) for key, _, text in labels(totals([seed_entry()])))
    assert drafts["drafts"] == "0 drafts"


# --- item 5: 80 columns, --wide, --by check ---------------------------------------------------


def many_entries() -> list[TriageEntry]:
    failing = [_row(f"tests (3.{i}) on a runner with a long name", State.FAILURE, required=True)
               for i in range(4)]  # fmt: skip
    return [
        _entry(*failing, verdict=Verdict.FAILING, number=101, title=LONG),
        seed_entry(),
        waiting_entry(),
        _entry(_row("ok", State.SUCCESS), verdict=Verdict.PASSING, number=99999, title=LONG),
    ]


def test_the_table_fits_80_columns() -> None:
    text = formats.table(many_entries(), now=NOW, width=80)
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert wide == []
    assert "…" in text  # the long title is cut, with an ellipsis
    names = [line for line in text.splitlines() if line.startswith("  ") and ":" in line]
    assert names and all(line.startswith("    ") for line in names)  # their own indented line


def test_wide_shows_the_whole_table() -> None:
    text = formats.table(many_entries(), now=NOW, wide=True)
    assert LONG.strip() in text  # nothing cut
    assert "aaaaaaa" in text  # the head's sha, a column of the full table
    assert max(len(line) for line in text.splitlines()) > 80


def test_the_markdown_fits_an_issues_width() -> None:
    text = formats.markdown(many_entries(), now=NOW)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].count(" | ") + 1 <= 6  # at most six columns
    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    assert page.count("<th") <= 6
    assert all(line.count(" | ") == table[0].count(" | ") for line in table)
    assert "comment" in table[0]
