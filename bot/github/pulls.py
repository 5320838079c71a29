"""The pull requests' reads: every open one of a repository page by page, named ones (a
webhook refresh), one alone; each with every context on its head (following pages past the
first), its labels, its merge-queue entry and what its base branch requires; and, in the same
queries, the base branches' newest commits (bot.github.commits.BranchTips)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import msgspec
import orjson

from bot.core.model import PullSnapshot, QueueEntry, QueueState, RequiredChecks
from bot.github.answer import alias_of, error_path, field, in_alias
from bot.github.comments import FirstComments
from bot.github.commits import BranchTips, default_of, tips_of
from bot.github.errors import (
    MalformedAnswer,
    NotFound,
    PaginationLoop,
    entry_message,
    stable_message,
)
from bot.github.nodes import decode_pulls_page, node_digest
from bot.github.parse import (
    Partial,
    PullFailure,
    Unreadable,
    parse_contexts,
    parse_labels,
    parse_pull,
    reread,
)
from bot.github.query import (
    ALIAS_BATCH,
    MORE_LABELS_QUERY,
    PULL_BATCH,
    more_contexts_query,
    one_point_page,
    pull_query,
    pulls_by_number_query,
    pulls_page_query,
)
from bot.github.required import Required, required_of_ref
from bot.github.transport import Decode, Transport
from bot.guard import Pages
from bot.state.ports import RequiredCache

log = logging.getLogger(__name__)

Item = Partial | PullFailure  # one pull request of an answer, being read or failed


@dataclass(frozen=True, slots=True)
class _Page:
    """One page of open pull requests: its nodes (raw or decoded), the errors on each node
    (by its index: those that fail it, those on its merge-queue entry only), what follows."""

    nodes: list[Any]
    broken: dict[Any, str]
    unqueued: dict[Any, str]
    more: Any
    total: Any
    cursor: Any
    tips: Any = None  # the `tips` selection's answer (the first page's)
    tips_broken: frozenset[str] = frozenset()  # its aliases GitHub answered an error in


def _in_tips(error: dict[str, Any]) -> bool:
    """An error inside the base branches' newest commits: tips...."""
    return error_path(error)[:1] == ["tips"]


def _tips_broken(errors: list[dict[str, Any]]) -> frozenset[str]:
    """The aliases of `tips` GitHub answered an error in."""
    paths = [error_path(e) for e in errors if _in_tips(e)]
    return frozenset(str(path[1]) for path in paths if len(path) > 1)


def _in_pull_page(error: dict[str, Any]) -> bool:
    """An error inside one pull request of a page: repository.pullRequests.nodes.<i>...."""
    path = error_path(error)
    return (
        path[:3] == ["repository", "pullRequests", "nodes"]
        and len(path) > 3
        and (isinstance(path[3], int))
    )


def _in_base_ref(error: dict[str, Any]) -> bool:
    """An error inside the base branch of one pull request: ...pullRequest.baseRef...."""
    return "baseRef" in error_path(error)


def _in_queue_entry(error: dict[str, Any]) -> bool:
    """An error on a pull request's merge-queue entry only (the rest of it is read)."""
    path = error_path(error)
    return "mergeQueueEntry" in path or "isInMergeQueue" in path


def _by_pull(errors: list[dict[str, Any]]) -> tuple[dict[Any, str], dict[Any, str]]:
    """A page's errors by pull request (its index): those that fail it, and those on its
    merge-queue entry only (stable words: the rest of it is read)."""
    broken = {error_path(e)[3]: entry_message(e) for e in errors if not _in_queue_entry(e)}
    unqueued = {error_path(e)[3]: stable_message(e) for e in errors if _in_queue_entry(e)}
    return broken, unqueued


def _by_alias(
    errors: list[dict[str, Any]],
) -> tuple[dict[str, str], set[str], dict[str, str]]:
    """A query of named pull requests' errors by alias: on its merge-queue entry only (stable
    words), not found (closed long ago, or never), and those that fail it."""
    unqueued = {alias_of(e): stable_message(e) for e in errors if _in_queue_entry(e)}
    errors = [e for e in errors if not _in_queue_entry(e)]
    gone = {alias_of(e) for e in errors if e.get("type") == "NOT_FOUND"}
    broken = {alias_of(e): entry_message(e) for e in errors if e.get("type") != "NOT_FOUND"}
    return unqueued, gone, broken


def _pull_item(repo: str, node: Any, error: str | None, *, now: datetime) -> Item:
    """One node of a pull-request page: a partial read, or that pull request's failure."""
    number = node.get("number") if isinstance(node, dict) else None
    number = number if isinstance(number, int) else None
    if error is not None:
        return PullFailure(repo, number, f"GitHub GraphQL error on this pull request: {error}")
    if node is None:
        return PullFailure(repo, None, "GitHub answered null for a pull request")
    return parse_pull(repo, node, now=now)


def _queue_unread(item: Item, error: str | None) -> Item:
    """The pull request read, its merge-queue entry unknown where GitHub answered an error."""
    if error is None or not isinstance(item, Partial):
        return item
    why = f"GitHub answered an error on its merge-queue entry: {error}"
    entry = QueueEntry(QueueState.UNKNOWN, "", error=why)
    item.snapshot = replace(item.snapshot, queue=entry)
    return item


def _extend(partial: Partial, connection: Any, *, missing: bool) -> None:
    """Add a follow-up contexts page; a missing or unreadable page truncates the snapshot."""
    try:
        if missing or connection is None:
            raise Unreadable("a follow-up contexts page came back missing")
        signals, partial.cursor = parse_contexts(connection)
    except Unreadable as exc:
        log.warning("%s#%s: %s", partial.snapshot.repo, partial.snapshot.number, exc)
        partial.truncated, partial.cursor = True, None
        return
    partial.signals.extend(signals)


def _tip_variables(branches: list[str]) -> dict[str, str]:
    """The variables naming the branches a `tips` selection asks ($t<i>, qualified names)."""
    return {f"t{i}": f"refs/heads/{branch}" for i, branch in enumerate(branches)}


def _repository(data: dict[str, Any], repo: str) -> Any:
    """The answer's repository (NotFound where GitHub answered none)."""
    repository = field(data, "repository")
    if repository is None:
        raise NotFound(f"repository {repo} not found or not visible", status=404)
    return repository


class Pulls:
    """The pull-request reads, over `transport`, with what their base branches require."""

    def __init__(
        self,
        transport: Transport,
        required: Required,
        first: FirstComments,
        *,
        page_size: int = 100,
        with_labels: bool = False,
        comments_in_page: bool = False,
        tips: BranchTips | None = None,
    ) -> None:
        """`comments_in_page`: each page of open pull requests also reads their first comments
        into `first` (a run with no state: `pulls_comments` then starts from them). `tips`:
        where the base branches' newest commits read with the pull requests are noted."""
        self._transport = transport
        self._required = required
        self._first = first
        self._tips = tips or BranchTips()
        self._page_size = page_size
        self._with_labels = with_labels
        self._comments_in_page = comments_in_page
        # what was read from each open pull request's last raw node, by the node's digest, by repo
        self._nodes: dict[str, dict[bytes, PullSnapshot]] = {}

    def read_nodes(self, repo: str) -> Mapping[bytes, PullSnapshot]:
        """The pull requests of `repo` the last whole listing read, by their node's digest."""
        return self._nodes.get(repo, {})

    def keep_nodes(self, repo: str, nodes: Mapping[bytes, PullSnapshot]) -> None:
        """Take these pull requests as read from the nodes of these digests (by an earlier
        process), where this one has listed none of `repo` yet: an equal node is not parsed."""
        self._nodes.setdefault(repo, dict(nodes))

    # -- every open pull request, page by page ---------------------------------------------

    def open_pulls(
        self, repo: str, *, now: datetime, required: RequiredCache | None = None
    ) -> Iterator[PullSnapshot | PullFailure]:
        """Every open pull request of `repo` with every context on its head, page by page.

        A pull request that cannot be read is yielded as a PullFailure; the others are read.
        With `required`, each signal's `required` comes from that cache, and (base branch,
        name) pairs it does not know are learned from GitHub first and recorded in it.
        """
        asked = self._other_bases(repo)  # their newest commits are read with the first page
        query, per_page = self._page_query(tips=len(asked))
        self._first.forget(repo)
        self._tips.forget(repo)
        sets: dict[str, RequiredChecks] = {}  # read once per base branch in this pass
        after: str | None = None
        pages = Pages(f"the open pull requests of {repo}", error=PaginationLoop)
        read: dict[bytes, PullSnapshot] = {}  # this pass's nodes (kept when whole), by digest
        # With the cache, each node is kept raw until its digest is found new: only then parsed.
        decode = None if required is None else decode_pulls_page
        while True:
            page = self._read_page(repo, query, per_page, after, decode=decode, tips=asked)
            if after is None:
                found = tips_of(page.tips, asked, page.tips_broken)
                self._tips.note(repo, found, default=default_of(page.tips))
                query, _ = self._page_query()
            # Without the required cache `required` is GitHub's own: nothing is reused then.
            items, digests = self._page_items(repo, page, cached=required is not None, now=now)
            whole = [isinstance(p, Partial) and p.whole() for p in items]
            done = self._read_through(repo, items, required, now=now, known=sets)
            for item, digest, alone in zip(done, digests, whole, strict=True):
                if alone and digest is not None and isinstance(item, PullSnapshot):
                    read[digest] = item
            yield from done
            if not page.more:
                self._nodes[repo] = read
                return
            pages.expect(page.total, per_page)
            after = pages.follow(page.cursor or "")

    def _other_bases(self, repo: str) -> list[str]:
        """The base branches other than the default one of the pull requests `repo`'s last
        listing read (ALIAS_BATCH at most): the first page reads their newest commits too."""
        default = self._tips.default(repo)
        bases = {s.base for s in self._nodes.get(repo, {}).values() if s.base}
        return sorted(b for b in bases if b != default)[:ALIAS_BATCH]

    def _page_query(self, *, tips: int | None = None) -> tuple[str, int]:
        """The query of a page of open pull requests (with `tips`, the first page's: also the
        default branch's and `tips` other branches' newest commits), and how many a page holds."""
        comments = self._comments_in_page
        query = pulls_page_query(with_labels=self._with_labels, with_comments=comments, tips=tips)
        per_page = self._page_size
        if comments:  # each page one point still: fewer pull requests a page
            per_page = min(per_page, one_point_page(2 + self._with_labels))
        return query, per_page

    def _read_page(
        self,
        repo: str,
        query: str,
        per_page: int,
        after: str | None,
        *,
        decode: Decode | None,
        tips: list[str],
    ) -> _Page:
        """One page of open pull requests from `after` (the first: with the branches' tips)."""
        owner, name = repo.split("/", 1)
        variables: dict[str, Any] = {"owner": owner, "name": name, "first": per_page}
        variables |= {"after": after} | _tip_variables(tips if after is None else [])
        data, errors = self._transport.query(
            query, variables, tolerate=lambda e: _in_pull_page(e) or _in_tips(e), decode=decode
        )
        page = field(_repository(data, repo), "pullRequests")
        nodes = field(page, "nodes")
        if not isinstance(nodes, list):
            raise MalformedAnswer("pullRequests.nodes is not a list")
        broken, unqueued = _by_pull([e for e in errors if not _in_tips(e)])
        more = field(page, "pageInfo", "hasNextPage")
        total, cursor = field(page, "totalCount"), field(page, "pageInfo", "endCursor")
        tips_node = field(data, "tips")
        return _Page(nodes, broken, unqueued, more, total, cursor, tips_node, _tips_broken(errors))

    def _page_items(
        self, repo: str, page: _Page, *, cached: bool, now: datetime
    ) -> tuple[list[Item], list[bytes | None]]:
        """Each node of a page as a partial read or its failure, and its digest (None: not to
        be reused: no cache, or an error on its merge-queue entry)."""
        digests = [node_digest(n) if cached else None for n in page.nodes]
        digests = [None if i in page.unqueued else d for i, d in enumerate(digests)]
        items = [
            self._pull_item(repo, node, page.broken.get(index), digests[index], now=now)
            for index, node in enumerate(page.nodes)
        ]
        for index, why in page.unqueued.items():  # GitHub's index: only one of this page
            if isinstance(index, int) and 0 <= index < len(items):
                _queue_unread(items[index], why)
        return items, digests

    def _pull_item(
        self, repo: str, node: Any, error: str | None, digest: bytes | None, *, now: datetime
    ) -> Item:
        """One node of a pull-request page, not decoded or parsed again when it equals a node
        last read (and was whole: no page of contexts or labels followed); a raw node that is
        new is decoded here."""
        if error is None and digest is not None:
            last = self._nodes.get(repo, {}).get(digest)
            if last is not None:  # the same node: the same pull request, base branch and all
                return reread({"baseRefName": last.base}, last, now=now)
        if isinstance(node, msgspec.Raw):
            try:
                node = orjson.loads(bytes(node))
            except orjson.JSONDecodeError as exc:
                raise MalformedAnswer("a pull request node is not JSON") from exc
        if error is None and isinstance(node, dict) and "comments" in node:
            self._first.keep(repo, node.pop("comments"), node.get("number"))
        return _pull_item(repo, node, error, now=now)

    def _read_through(
        self,
        repo: str,
        items: list[Item],
        required: RequiredCache | None,
        *,
        now: datetime,
        known: dict[str, RequiredChecks] | None = None,
    ) -> list[PullSnapshot | PullFailure]:
        """The pull requests of one answer read to their end: every context and label, what
        is required (from the cache, learned where it is not known), then finished."""
        owner, name = repo.split("/", 1)
        partials = [p for p in items if isinstance(p, Partial)]
        self._complete(owner, name, partials)
        if required is not None:
            self._required.fill(repo, partials, required, now=now)
        self._required.attach(repo, partials, required, now=now, known=known)
        return [p.finish() if isinstance(p, Partial) else p for p in items]

    # -- one pull request ------------------------------------------------------------------

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request with every context on its head and what is required for it."""
        owner, name = repo.split("/", 1)
        data, errors = self._transport.query(
            pull_query(with_labels=self._with_labels),
            {"owner": owner, "name": name, "number": number},
            tolerate=lambda e: _in_base_ref(e) or _in_queue_entry(e),
        )
        node = field(_repository(data, repo), "pullRequest")
        if node is None:
            raise NotFound(f"pull request {repo}#{number} not found", status=404)
        unqueued = next((stable_message(e) for e in errors if _in_queue_entry(e)), None)
        no_tip = any("target" in error_path(e) for e in errors)
        errors = [e for e in errors if not _in_queue_entry(e) and "target" not in error_path(e)]
        partial = _queue_unread(parse_pull(repo, node, now=now), unqueued)
        if isinstance(partial, PullFailure):
            raise MalformedAnswer(f"{partial.label}: {partial.reason}")
        self._complete(owner, name, [partial], required=True)
        if partial.base is not None:
            tips = tips_of({"t0": node.get("baseRef")}, [partial.base], {"t0"} if no_tip else ())
            self._tips.note(repo, tips)
            found = required_of_ref(partial.base, node.get("baseRef"), errors)
            partial.required_checks = self._required.pinned(repo, found)
        snapshot = partial.finish()
        if isinstance(snapshot, PullFailure):
            raise MalformedAnswer(f"{snapshot.label}: {snapshot.reason}")
        return snapshot

    # -- a batched read of named pull requests (webhook refresh) ---------------------------

    def pulls_by_number(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        now: datetime,
        required: RequiredCache | None = None,
    ) -> dict[int, PullSnapshot | PullFailure]:
        """The open pull requests among `numbers`, by number (closed or unknown ones are left
        out); <= PULL_BATCH per GraphQL query, with the same per-PR isolation as
        `open_pulls`."""
        found: dict[int, PullSnapshot | PullFailure] = {}
        wanted = sorted(set(numbers))
        asked = self._other_bases(repo)
        self._tips.forget(repo)  # read again with the first query
        for start in range(0, len(wanted), PULL_BATCH):
            chunk = wanted[start : start + PULL_BATCH]
            items = self._numbered_items(repo, chunk, now=now, tips=None if start else asked)
            for done in self._read_through(repo, items, required, now=now):
                if done.number is not None:
                    found[done.number] = done
        return found

    def _numbered_items(
        self, repo: str, chunk: list[int], *, now: datetime, tips: list[str] | None
    ) -> list[Item]:
        """One query's named pull requests, each a partial read or its failure; one closed,
        merged or not found is left out (its comment is left as it is). With `tips`, also the
        base branches' newest commits (the default branch's and these), noted."""
        owner, name = repo.split("/", 1)
        count = None if tips is None else len(tips)
        query = pulls_by_number_query(chunk, with_labels=self._with_labels, tips=count)
        variables = {"owner": owner, "name": name} | _tip_variables(tips or [])
        data, errors = self._transport.query(
            query, variables, tolerate=lambda e: in_alias(e) or _in_tips(e)
        )
        repository = _repository(data, repo)
        if tips is not None:
            found = tips_of(field(data, "tips"), tips, _tips_broken(errors))
            self._tips.note(repo, found, default=default_of(field(data, "tips")))
        unqueued, gone, broken = _by_alias([e for e in errors if not _in_tips(e)])
        items: list[Item] = []
        for number in chunk:
            alias, node = f"p{number}", field(repository, f"p{number}")
            if alias in gone or (node is None and alias not in broken):
                continue
            if isinstance(node, dict) and node.get("state") not in (None, "OPEN"):
                continue  # closed or merged: its comment is left as it is
            item = _queue_unread(
                _pull_item(repo, node, broken.get(alias), now=now), unqueued.get(alias)
            )
            if isinstance(item, PullFailure) and item.number is None:
                item = PullFailure(repo, number, item.reason)
            items.append(item)
        return items

    # -- the pages that follow a pull request's first ---------------------------------------

    def _complete(
        self, owner: str, name: str, partials: list[Partial], *, required: bool = False
    ) -> None:
        """Follow context pages past the first 100 (many pull requests per query), then labels.

        A follow-up page that comes back missing marks that snapshot truncated (it is never
        called complete); labels that cannot all be read make that pull request a failure.
        """
        pages = {p.snapshot.number: Pages("the contexts", error=PaginationLoop) for p in partials}
        while pending := [p for p in partials if p.cursor and p.failure is None]:
            for start in range(0, len(pending), ALIAS_BATCH):
                chunk = pending[start : start + ALIAS_BATCH]
                self._more_contexts(owner, name, chunk, pages, required=required)
        for p in partials:
            self._more_labels(owner, name, p)

    def _more_contexts(
        self,
        owner: str,
        name: str,
        chunk: list[Partial],
        pages: dict[int, Pages],
        *,
        required: bool,
    ) -> None:
        """The next page of contexts of each pull request of `chunk`, in one aliased query."""
        variables: dict[str, Any] = {"owner": owner, "name": name}
        for i, p in enumerate(chunk):
            variables[f"o{i}"] = p.snapshot.head_sha  # by commit: one head per report
            variables[f"c{i}"] = p.cursor
            if required:
                variables[f"n{i}"] = p.snapshot.number
        query = more_contexts_query(len(chunk), required=required)
        data, errors = self._transport.query(query, variables, tolerate=in_alias)
        broken = {alias_of(e) for e in errors}
        for i, p in enumerate(chunk):
            _extend(p, field(data, "repository", f"p{i}", "statusCheckRollup", "contexts"),
                    missing=f"p{i}" in broken)  # fmt: skip
            p.cursor = pages[p.snapshot.number].follow(p.cursor)

    def _more_labels(self, owner: str, name: str, p: Partial) -> None:
        """The labels of a pull request past its first page (a failure where they cannot all
        be read)."""
        label_pages = Pages("the labels", error=PaginationLoop)
        while p.labels_cursor and p.failure is None:
            variables = {
                "owner": owner,
                "name": name,
                "number": p.snapshot.number,
                "after": p.labels_cursor,
            }
            data = self._transport.graphql(MORE_LABELS_QUERY, variables)
            try:
                connection = field(data, "repository", "pullRequest", "labels")
                if connection is None:
                    raise Unreadable("a page of its labels came back empty")
                labels, cursor = parse_labels(connection)
                p.labels_cursor = label_pages.follow(cursor)
            except Unreadable as exc:
                p.failure = f"its labels could not all be read: {exc}"
                continue
            p.extra_labels.extend(labels)
