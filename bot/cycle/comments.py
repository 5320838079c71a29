"""Looking at a pull request's comments for the bot's own, as `gather` does before planning and
`publish` does before creating: the one it keeps, its own later ones (deleted once the kept one
is written: never two), and marked comments other logins wrote (a changed token's, never
edited); and whether the kept one's stamp is trusted (bot.github.ownership)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot.core.comment import Comment
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError, RateLimited
from bot.github.ownership import foreign_marked, kept_and_later, last_edit_is_the_bots, unsure
from bot.render.stamp import Stamp, parse_stamp

log = logging.getLogger(__name__)

UNKNOWN_EDITOR = "(an editor GitHub did not name)"  # never a login: a stamp is then not trusted


@dataclass
class Sightings:
    """What a pass's looks at comments found beside the comments it keeps."""

    # the bot's own comments found beside the one it keeps (two runs at once, a lost create
    # answer), by PR: deleted once the kept one is written
    later: dict[tuple[str, int], list[Comment]] = field(default_factory=dict)
    # marked comments other logins wrote, by login: their ids
    foreign: dict[str, set[int]] = field(default_factory=dict)

    def keep(
        self, repo: str, number: int, comments: Sequence[Comment], login: str
    ) -> Comment | None:
        """The bot's comment to keep among a pull request's comments; its own later ones are
        noted, to be deleted once the kept one is written."""
        kept, later = kept_and_later(comments, login)
        for comment in comments:
            if foreign_marked([comment], login):
                self.foreign.setdefault(comment.author or "", set()).add(comment.id)
        if later:
            self.later[(repo, number)] = later
        else:
            self.later.pop((repo, number), None)
        return kept


def find_own(
    github: GitHubApi,
    sightings: Sightings,
    repo: str,
    number: int,
    *,
    login: str,
    editor: bool = False,
) -> Comment | None:
    """The bot's oldest own comment on the pull request, if any. With `editor`, also its
    last editor: REST does not say who edited a comment, so it is asked of GraphQL before a
    stamp is trusted (where it cannot be asked, the editor is unknown and the stamp is not
    trusted); a write, which trusts no stamp, does not ask it. A comment of the login without
    the marker first but with a hidden line is the bot's only where someone else edited it
    last: GraphQL is asked that too (rarely: a person's edit removed the marker)."""
    listed = github.list_comments(repo, number)
    found = sightings.keep(repo, number, _editors_read(github, listed, login), login)
    if found is None or not editor or found.editor_read:
        return found
    try:
        read = github.read_comments([found.node_id]).get(found.node_id) if found.node_id else None
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("could not read who last edited comment %d: %s", found.id, exc)
        read = None
    if read is None or read.author != login:
        return replace(found, editor=UNKNOWN_EDITOR, editor_read=True)
    return read


def _editors_read(github: GitHubApi, listed: list[Comment], login: str) -> list[Comment]:
    """The comments with those whose last editor tells whether they are the bot's re-read
    over GraphQL (where that fails they stay as REST gave them: not the bot's)."""
    ids = [c.node_id for c in listed if unsure(c, login) and c.node_id]
    if not ids:
        return listed
    try:
        read = github.read_comments(ids)
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("could not read who last edited %d comments: %s", len(ids), exc)
        return listed
    return [read.get(c.node_id) or c if c.node_id in ids else c for c in listed]


def trusted_stamp(own: Comment | None, login: str) -> Stamp | None:
    """The stamp of the bot's own comment, unless someone else edited the comment last (a
    stamp is not signed: anyone who may edit the comment could have written it)."""
    if own is None:
        return None
    if not last_edit_is_the_bots(own, login):
        log.info("comment %d was last edited by %s: its stamp is not trusted", own.id, own.editor)
        return None
    return parse_stamp(own.body)
