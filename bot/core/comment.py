"""An issue comment as the bot sees it: plain data, made at the boundary (bot.github.parse)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.model import MARKER


@dataclass(frozen=True, slots=True)
class Comment:
    """An issue comment: the parts the bot needs (the author in REST's login form)."""

    id: int
    author: str | None
    body: str
    node_id: str = ""
    editor: str | None = None  # who made the last edit (GraphQL only; None: never edited)
    # whether `editor` was read (GraphQL); a REST answer does not say who edited a comment
    editor_read: bool = False
    created_at: str = ""  # ISO UTC as GitHub gave it ("" where not given)


def marked(body: str) -> bool:
    """Whether the body's first line is the marker, as the bot writes it: its hidden lines (the
    stamp, the carried line) are read right after it, never anywhere else in a body."""
    return body.partition("\n")[0].rstrip("\r") == MARKER
