"""An issue comment as the bot sees it: plain data, made at the boundary (bot.github.parse)."""

from __future__ import annotations

from dataclasses import dataclass


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
