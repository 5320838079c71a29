"""Which comments are the bot's, and whether GitHub says the bot made their last edit (pure).

A comment is the bot's own when the bot's login wrote it and it starts with the marker. One the
bot wrote whose marker someone removed is still the bot's where it can be told: the state knows
its id, or (with no state) it still carries one of the bot's hidden lines. The hidden stamp is
the bot's claim, never an authority: anyone who may edit the comment may have written it, so it
is trusted only where GitHub attributes the comment's last edit to the bot's login (or nobody
edited it since the bot wrote it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.core.model import MARKER
from bot.github.parse import Comment

HIDDEN: Final = "<!-- ci-status-bot:"  # how every hidden line of the bot's begins


def is_own(comment: Comment, login: str) -> bool:
    """The bot's comment: it carries the marker AND the bot wrote it."""
    return comment.author == login and comment.body.startswith(MARKER)


def is_claimed(comment: Comment, login: str) -> bool:
    """The bot wrote it and it still carries one of the bot's hidden lines somewhere (its marker
    moved or removed, its stamp kept): found by a run that knows no comment id."""
    return comment.author == login and HIDDEN in comment.body


def last_edit_is_the_bots(comment: Comment, login: str) -> bool | None:
    """Whether GitHub attributes the comment's last edit to `login` (True also when nobody
    edited it since it was written); None where it was read over REST, which does not say."""
    if not comment.editor_read:
        return None
    return comment.editor is None or comment.editor == login


def oldest_first(comments: Sequence[Comment]) -> list[Comment]:
    """Comments oldest first: by GitHub's creation time, then id (ids grow with time)."""
    return sorted(comments, key=lambda c: (c.created_at or "~", c.id))


def foreign_marked(comments: Sequence[Comment], login: str) -> dict[str, int]:
    """How many comments carrying the marker each other login wrote (a changed token's old
    comments: never edited nor deleted by the bot)."""
    found: dict[str, int] = {}
    for comment in comments:
        if comment.body.startswith(MARKER) and comment.author not in (login, None):
            found[comment.author] = found.get(comment.author, 0) + 1
    return found


def kept_and_later(comments: Sequence[Comment], login: str) -> tuple[Comment | None, list[Comment]]:
    """The bot's comment to keep on a pull request (the oldest it wrote that it can tell as its
    own) and its own later ones (marker AND login: only those are ever deleted)."""
    ordered = oldest_first(comments)
    kept = next((c for c in ordered if is_claimed(c, login)), None)
    if kept is None:
        return None, []
    return kept, [c for c in ordered if c.id != kept.id and is_own(c, login)]
