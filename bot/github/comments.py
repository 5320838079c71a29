"""The pull requests' conversations: the bot's comment read, listed, created, edited, and a
later duplicate of its own deleted; over REST, and over GraphQL many pull requests at once."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from bot.github.answer import alias_of, error_path, field, in_alias
from bot.github.errors import ForeignLink, MalformedAnswer, NotFound, PaginationLoop
from bot.github.ownership import is_own
from bot.github.parse import Comment, Unreadable, parse_graphql_comment, parse_rest_comment
from bot.github.query import COMMENTS_QUERY, PAGE, PULL_BATCH, pull_comments_query
from bot.github.transport import Transport
from bot.guard import Page, Pages, RefusedRequest, admit_delete, last_page, link_url

log = logging.getLogger(__name__)

Until = Callable[[Comment], bool]  # the comment a pull request's listing may stop at
Kept = tuple[list[Comment], str | None, Any]  # first comments, the cursor after, totalCount


def rest_comment(data: Any) -> Comment:
    """A REST comment answer as a Comment (MalformedAnswer when it cannot be read)."""
    try:
        return parse_rest_comment(data)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc


def graphql_comments(connection: Any) -> list[Comment]:
    """The IssueComment nodes of a comments connection."""
    nodes = field(connection, "nodes")
    if not isinstance(nodes, list):
        raise MalformedAnswer("a comments connection has no nodes")
    return [_graphql_comment(node, str(field(node, "id") or "")) for node in nodes]


def _graphql_comment(node: Any, node_id: str) -> Comment:
    try:
        return parse_graphql_comment(node, node_id)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc


def _is_not_found(error: dict[str, Any]) -> bool:
    return error.get("type") == "NOT_FOUND"


def _next_page(connection: Any, into: list[Comment], pages: Pages, until: Until | None) -> Any:
    """Add one page of a pull request's comments to `into`: the cursor of its next page, or
    None when it was read to its end or to the comment `until` accepts."""
    pages.expect(field(connection, "totalCount"), PAGE)
    page = graphql_comments(connection)
    into.extend(page)
    done = until is not None and any(until(c) for c in page)
    more = not done and field(connection, "pageInfo", "hasNextPage")
    cursor = field(connection, "pageInfo", "endCursor") if more else None
    return pages.follow(cursor)


class FirstComments:
    """Each pull request's first comments as its page of open pull requests gave them (and the
    cursor after them where more follow), by (repo, number), until `pulls_comments` takes them."""

    def __init__(self) -> None:
        """Nothing kept."""
        self._kept: dict[tuple[str, int], Kept] = {}

    def forget(self, repo: str) -> None:
        """Drop what was kept of `repo` (a new pass of its pages begins)."""
        for key in [k for k in self._kept if k[0] == repo]:
            del self._kept[key]

    def keep(self, repo: str, connection: Any, number: Any) -> None:
        """Keep a pull request's first comments as its page gave them (one that cannot be read
        is not kept: `pulls_comments` then lists that pull request from its start)."""
        if not isinstance(number, int) or not isinstance(connection, dict):
            return
        try:
            page = graphql_comments(connection)
        except MalformedAnswer:
            return
        more = field(connection, "pageInfo", "hasNextPage") is True
        cursor = field(connection, "pageInfo", "endCursor") if more else None
        if more and not isinstance(cursor, str):
            return
        self._kept[(repo, number)] = (page, cursor, field(connection, "totalCount"))

    def take(self, repo: str, number: int) -> Kept | None:
        """What was kept of one pull request (None: nothing), no longer kept."""
        return self._kept.pop((repo, number), None)


class Comments:
    """The comment calls, over `transport`."""

    def __init__(self, transport: Transport, first: FirstComments) -> None:
        """Over `transport`; `first`: the comments pages of open pull requests brought."""
        self._transport = transport
        self._first = first

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment of the pull request's conversation, oldest first."""
        pages = Pages(
            f"the comments of {repo}#{number}",
            origin=self._transport.requester.base_url,
            error=PaginationLoop,
            refused=ForeignLink,
        )
        url = f"/repos/{repo}/issues/{number}/comments"
        return pages.read_all(url, {"per_page": 100}, self._comment_page)

    def _comment_page(self, url: str, params: dict[str, Any] | None) -> Page[Comment]:
        headers, data = self._transport.send("GET", url, kind="rest_get", parameters=params)
        if not isinstance(data, list):
            raise MalformedAnswer("the comment list is not a list")
        link = headers.get("link", "")
        return Page([rest_comment(c) for c in data], link_url(link, "next"), last_page(link))

    def pulls_comments(
        self, repo: str, numbers: Sequence[int], *, until: Until | None = None
    ) -> dict[int, list[Comment]]:
        """The comments of these pull requests, oldest first, over GraphQL (PULL_BATCH
        pull requests and 100 comments a query, one point), each up to the first that `until`
        accepts (all of them without `until`). A pull request whose comments could not be
        read is left out: the caller lists it over REST. A pull request whose first comments
        came with its page of open pull requests (`comments_in_page`) starts from those: none
        is asked again, and it is asked for only where its own comment was not among them."""
        found: dict[int, list[Comment]] = {n: [] for n in dict.fromkeys(numbers)}
        pages = {n: Pages(f"the comments of {repo}#{n}", error=PaginationLoop) for n in found}
        cursors = self._start_from_page(repo, found, pages, until)
        while cursors:
            asking = list(cursors.items())
            for start in range(0, len(asking), PULL_BATCH):
                chunk = asking[start : start + PULL_BATCH]
                self._read_chunk(repo, chunk, found, cursors, pages=pages, until=until)
            cursors = {n: c for n, c in cursors.items() if c is not None}
        return found

    def _start_from_page(
        self,
        repo: str,
        found: dict[int, list[Comment]],
        pages: dict[int, Pages],
        until: Until | None,
    ) -> dict[int, str | None]:
        """Each pull request's cursor to read on from (None: from its start), after the first
        comments its page gave; one read whole there, or to its own comment, is not asked."""
        cursors: dict[int, str | None] = dict.fromkeys(found)
        for number in list(cursors):
            kept = self._first.take(repo, number)
            if kept is None:
                continue
            first, cursor, total = kept
            found[number].extend(first)
            pages[number].expect(total, PAGE)
            if cursor is None or (until is not None and any(until(c) for c in first)):
                del cursors[number]  # read whole, or its own comment is among the first
            else:
                cursors[number] = pages[number].follow(cursor)
        return cursors

    def _read_chunk(
        self,
        repo: str,
        chunk: list[tuple[int, str | None]],
        found: dict[int, list[Comment]],
        cursors: dict[int, str | None],
        *,
        pages: dict[int, Pages],
        until: Until | None,
    ) -> None:
        """One GraphQL query's page of comments of each pull request of `chunk` into `found`,
        its next cursor into `cursors` (None: done, or left out of `found` for REST)."""
        owner, name = repo.split("/", 1)
        variables: dict[str, Any] = {"owner": owner, "name": name}
        for i, (number, cursor) in enumerate(chunk):
            variables[f"n{i}"], variables[f"c{i}"] = number, cursor
        query = pull_comments_query(len(chunk))
        data, errors = self._transport.query(query, variables, tolerate=in_alias)
        broken = {alias_of(e) for e in errors}
        for i, (number, _) in enumerate(chunk):
            conn = field(data, "repository", f"p{i}", "comments")
            try:
                if f"p{i}" in broken or not isinstance(conn, dict):
                    raise MalformedAnswer("the comments came back missing")
                cursors[number] = _next_page(conn, found[number], pages[number], until)
            except MalformedAnswer as exc:  # that pull request only: listed over REST
                log.info("%s#%d: comments not read over GraphQL: %s", repo, number, exc)
                found.pop(number, None)
                cursors[number] = None

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Re-read comments, 100 per GraphQL query (one point each); None for one that no
        longer exists."""
        found: dict[str, Comment | None] = {}
        answers = self._transport.by_ids(COMMENTS_QUERY, node_ids, tolerate=_is_not_found)
        for chunk, nodes, errors in answers:
            missing = {tuple(error_path(e)) for e in errors}
            for index, (node_id, node) in enumerate(zip(chunk, nodes, strict=True)):
                if node is None and ("nodes", index) not in missing:
                    raise MalformedAnswer(f"comment {node_id} came back empty without an error")
                found[node_id] = None if node is None else _graphql_comment(node, node_id)
        return found

    def get_comment(self, repo: str, comment_id: int) -> Comment | None:
        """Re-read one comment; None when it no longer exists."""
        try:
            _, data = self._transport.send(
                "GET", f"/repos/{repo}/issues/comments/{comment_id}", kind="rest_get"
            )
        except NotFound:
            return None
        return rest_comment(data)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Create the comment. Never retried here: a lost answer may still have created it."""
        _, data = self._transport.send(
            "POST",
            f"/repos/{repo}/issues/{number}/comments",
            kind="rest_write",
            body={"body": body},
            retry=False,
        )
        return rest_comment(data)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        """Edit the comment in place (an edit notifies nobody new)."""
        _, data = self._transport.send(
            "PATCH",
            f"/repos/{repo}/issues/comments/{comment_id}",
            kind="rest_write",
            body={"body": body},
        )
        return rest_comment(data)

    def delete_own_comment(self, repo: str, comment: Comment, *, login: str) -> None:
        """Delete one of the bot's own later comments (never two on a pull request): only a
        comment `login` wrote that carries the marker, and the allowlist admits this one DELETE
        for its id alone. A comment already gone is no failure."""
        if not is_own(comment, login):
            raise RefusedRequest(f"refused: comment {comment.id} is not the bot's own")
        path = f"/repos/{repo}/issues/comments/{comment.id}"
        admit_delete(path)
        with contextlib.suppress(NotFound):
            self._transport.send("DELETE", path, kind="rest_write", retry=False)
