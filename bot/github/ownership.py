"""Which comments are the bot's, and whether GitHub says the bot made their last edit (pure).

A comment is the bot's own when the bot's login wrote it and its first line is the marker. The
login may be shared (in the GitHub Action every workflow of the repository writes as
github-actions[bot]), so a comment of the login that does not start with the marker is never
taken for the bot's because it quotes the marker or a hidden line somewhere: another
workflow's comment may quote a pull request's description. One the bot wrote whose marker a
person removed is still the bot's where that can be told: the state knows its id, or (with no
state) GitHub says someone other than the login edited it last and it still holds one of the
bot's hidden lines (restored in place). The hidden stamp is the bot's claim, never an
authority: anyone who may edit the comment may have written it, so it is trusted only where
GitHub attributes the comment's last edit to the bot's login (or nobody edited it since it was
written), and read only right after the marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.core.comment import marked
from bot.github.parse import Comment

HIDDEN: Final = "<!-- ci-status-bot:"  # how every hidden line of the bot's begins


def is_own(comment: Comment, login: str) -> bool:
    """The bot's comment: its first line is the marker AND the bot's login wrote it."""
    return comment.author == login and marked(comment.body)


def is_claimed(comment: Comment, login: str) -> bool:
    """The bot's comment as a run that knows no comment id finds it: its own (`is_own`), or
    one of the login's that GitHub says someone else edited last and that still holds one of
    the bot's hidden lines (a person moved or removed its marker: restored in place). Never a
    comment of the login that nobody else edited and that does not start with the marker."""
    if is_own(comment, login):
        return True
    edited_by_another = last_edit_is_the_bots(comment, login) is False  # REST: None, not said
    return comment.author == login and edited_by_another and HIDDEN in comment.body


def unsure(comment: Comment, login: str) -> bool:
    """Whether only its last editor, which REST does not give, tells whether the comment is
    the bot's (the login's, without the marker first, holding a hidden line): re-read it."""
    return (
        comment.author == login
        and not comment.editor_read
        and not marked(comment.body)
        and HIDDEN in comment.body
    )


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
        if marked(comment.body) and comment.author not in (login, None):
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
