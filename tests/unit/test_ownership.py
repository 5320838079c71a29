"""Which comments are the bot's and who edited them last (issue 24): pure, from GraphQL nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.core.model import MARKER
from bot.github.ownership import foreign_marked, is_claimed, kept_and_later, last_edit_is_the_bots
from bot.github.parse import UNNAMED_EDITOR, Comment, last_editor, parse_graphql_comment
from bot.github.query import COMMENTS_QUERY, pull_comments_query, pulls_page_query
from bot.render.stamp import generation_of, parse_stamp
from bot_sandbox.graphql_api import schema

BOT = "ci-status-bot[bot]"
ROOT = Path(__file__).resolve().parents[2]  # the repository


def node(**fields: Any) -> dict[str, Any]:
    author = {"__typename": "Bot", "login": "ci-status-bot"}
    return {"databaseId": 1, "body": MARKER, "author": author, **fields}


def edit(login: str | None, at: str) -> dict[str, Any]:
    return {
        "editedAt": at,
        "editor": None if login is None else {"__typename": "User", "login": login},
    }


def test_the_last_editor_is_the_newest_edit_whichever_end_github_lists_it_at() -> None:
    assert last_editor(node(lastEditedAt=None, editor=None)) is None  # never edited
    older, newer = (
        edit("mallory", "2026-01-01T00:00:00Z"),
        edit("ci-status-bot", "2026-01-02T00:00:00Z"),
    )
    for first, last in ((older, newer), (newer, older)):
        found = node(lastEditedAt="x", editor={"__typename": "User", "login": "mallory"},
                     firstEdit={"nodes": [first]}, lastEdit={"nodes": [last]})  # fmt: skip
        assert last_editor(found) == "ci-status-bot"
    same = edit("ci-status-bot", "2026-01-01T00:00:00Z")
    tie = node(firstEdit={"nodes": [same]}, lastEdit={"nodes": [older]})
    assert last_editor(tie) == UNNAMED_EDITOR  # one time, two editors: nobody is trusted
    assert last_editor(node(lastEditedAt="2026-01-01T00:00:00Z", editor=None)) == UNNAMED_EDITOR
    ghost = node(lastEdit={"nodes": [edit(None, "2026-01-01T00:00:00Z")]})
    assert last_editor(ghost) == UNNAMED_EDITOR


def test_only_graphql_says_whether_the_last_edit_is_the_bots() -> None:
    read = parse_graphql_comment(node(lastEditedAt=None, editor=None), "n")
    assert read.author == BOT and last_edit_is_the_bots(read, BOT) is True
    assert last_edit_is_the_bots(Comment(1, BOT, MARKER), BOT) is None  # REST: not said
    foreign = Comment(1, BOT, MARKER, editor="mallory", editor_read=True)
    assert last_edit_is_the_bots(foreign, BOT) is False


def test_the_oldest_of_the_bots_is_kept_and_only_its_own_marked_later_ones_go() -> None:
    comments = [
        Comment(1, "mallory", f"{MARKER}\nforged"),  # older, marked, another login: never
        # its marker removed by mallory's edit (GitHub says so): still the bot's, restored
        Comment(
            2,
            BOT,
            "<!-- ci-status-bot:stamp v2 x -->\n✅ all green",
            editor="mallory",
            editor_read=True,
        ),
        Comment(3, BOT, f"{MARKER}\nlater"),
        Comment(4, BOT, "an unrelated comment of the same login"),
        Comment(5, BOT, f"{MARKER}\nlatest"),
    ]
    kept, later = kept_and_later(comments, BOT)
    assert kept is not None and kept.id == 2 and is_claimed(kept, BOT)
    assert [c.id for c in later] == [3, 5]
    assert foreign_marked(comments, BOT) == {"mallory": 1}


# Where every workflow of a repository writes as one login (the Action's github-actions[bot]),
# a comment of that login is the bot's only when it starts with the marker: another
# workflow's comment that quotes the marker, a stamp or a carried line is never taken
# (adversarial finding 1). A comment of the login without the marker first is the bot's only
# where GitHub says someone else edited it last and it still holds one of its hidden lines:
# a person's edit of the bot's comment, restored.
QUOTED = f"**PR summary** by the welcome workflow:\n<!-- ci-status-bot:stamp v2 x -->\n{MARKER}"


def test_a_comment_of_the_login_is_the_bots_only_with_the_marker_first() -> None:
    assert is_claimed(Comment(1, BOT, f"{MARKER}\n### ✅ Passing"), BOT)
    assert is_claimed(Comment(1, BOT, MARKER, editor_read=True), BOT)
    assert not is_claimed(Comment(1, "mallory", f"{MARKER}\n### ✅ Passing"), BOT)
    for unedited in (
        Comment(1, BOT, QUOTED),  # over REST: who edited it is not said
        Comment(1, BOT, QUOTED, editor_read=True),  # never edited
        Comment(1, BOT, QUOTED, editor=BOT, editor_read=True),  # edited by the login itself
        Comment(1, BOT, f" {MARKER}\n### ✅ Passing", editor_read=True),  # not first
    ):
        assert not is_claimed(unedited, BOT), unedited
    edited = Comment(1, BOT, QUOTED, editor="mallory", editor_read=True)
    assert is_claimed(edited, BOT)  # a person's edit: restored
    assert is_claimed(Comment(1, BOT, QUOTED, editor=UNNAMED_EDITOR, editor_read=True), BOT)
    assert not is_claimed(Comment(1, BOT, "plain words", editor="mallory", editor_read=True), BOT)


def test_another_workflows_comment_quoting_the_marker_is_passed_over() -> None:
    comments = [
        Comment(1, BOT, QUOTED, editor_read=True),  # older: a template preview, a PR summary
        Comment(2, BOT, f"{MARKER}\nthe bot's", editor_read=True),
    ]
    kept, later = kept_and_later(comments, BOT)
    assert kept is not None and kept.id == 2 and later == []
    assert kept_and_later(comments[:1], BOT) == (None, [])


def test_a_malformed_oversized_duplicated_or_foreign_stamp_never_raises() -> None:
    line = "<!-- ci-status-bot:stamp v2 {} -->"
    bodies = [
        f"{MARKER}\n" + line.format("A" * 200_000),  # oversized
        f"{MARKER}\n" + line.format("e30") + "\n" + line.format("e30"),  # duplicated, empty
        f"{MARKER}\n<!-- ci-status-bot:stamp v3 eyJnIjo5fQ -->",  # another version
        f"{MARKER}\n" + line.format("eyJnIjogOTIyMzM3MjAzNjg1NDc3NTgwOH0"),  # g = 2**63
        f"{MARKER}\n" + line.format("W1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tb"),
        "\x00" * 10,
        "",
    ]
    for body in bodies:
        assert parse_stamp(body) is None
        assert generation_of(body, epoch="0123456789abcdef") is None


def test_the_trust_page_says_which_reads_ask_which_editor_fields() -> None:
    """docs/trust.md says what each read asks about a comment's last editor (adversarial
    finding 5: it said every read took both ends of `userContentEdits`, the listings read
    `editor` and `lastEditedAt` only), and the premise the listings rest on is GitHub's own
    schema text: `lastEditedAt` is when "the editor" made the last edit."""
    fields = schema().get_type("IssueComment").fields  # type: ignore[union-attr]
    assert fields["editor"].description == "The actor who edited the comment."
    assert fields["lastEditedAt"].description == "The moment the editor made the last edit"
    listings = (
        pull_comments_query(1),
        pulls_page_query(with_labels=False, with_comments=True),
    )
    for query in listings:
        assert "lastEditedAt" in query and "editor { __typename login }" in query
        assert "userContentEdits" not in query
    assert "userContentEdits(first: 1)" in COMMENTS_QUERY
    assert "userContentEdits(last: 1)" in COMMENTS_QUERY
    said = " ".join((ROOT / "docs" / "trust.md").read_text(encoding="utf-8").split())
    assert "it reads each comment's `editor` and `lastEditedAt`" in said
    assert "it also reads both ends of `userContentEdits`" in said
    assert "The moment the editor made the last edit" in said  # the schema quoted
