"""Which comments are the bot's and who edited them last (issue 24): pure, from GraphQL nodes."""

from __future__ import annotations

from typing import Any

from bot.core.model import MARKER
from bot.github.ownership import foreign_marked, is_claimed, kept_and_later, last_edit_is_the_bots
from bot.github.parse import UNNAMED_EDITOR, Comment, last_editor, parse_graphql_comment
from bot.render.stamp import generation_of, parse_stamp

BOT = "ci-status-bot[bot]"


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
        Comment(2, BOT, "<!-- ci-status-bot:stamp v2 x -->\n✅ all green"),  # marker removed
        Comment(3, BOT, f"{MARKER}\nlater"),
        Comment(4, BOT, "an unrelated comment of the same login"),
        Comment(5, BOT, f"{MARKER}\nlatest"),
    ]
    kept, later = kept_and_later(comments, BOT)
    assert kept is not None and kept.id == 2 and is_claimed(kept, BOT)
    assert [c.id for c in later] == [3, 5]
    assert foreign_marked(comments, BOT) == {"mallory": 1}


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
