"""Commits other than the heads: the merge base of a pull request, the base branches' newest
commits, the contexts on any commit, the states posted on one, a branch's last commits, and
the branches' merge queues."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from bot.core.base import MergeBase
from bot.core.merge_queue import QueueConfig
from bot.core.model import Signal
from bot.github.answer import alias_of, field, in_commit_or_queue, in_ref, in_tip
from bot.github.errors import GitHubError, MalformedAnswer, NotFound, stable_message
from bot.github.parse import Unreadable, get, parse_context, parse_contexts
from bot.github.query import (
    ALIAS_BATCH,
    PAGE,
    branch_history_query,
    branch_tips_query,
    commits_query,
)
from bot.github.transport import Transport
from bot.guard import link_url

# How a commits query's errors name its commits: (in an error, not found).
MERGE_BASE: Final = ("the merge base", "the merge-base commit")
MERGE_GROUP: Final = ("the merge-group commit", "the merge-group commit")
COMMITS_PER_QUERY = 50  # merge-base commits per aliased query (their first contexts page)

Histories = dict[str, tuple[MergeBase, ...] | str]  # each branch's last commits, or why not
Tips = dict[str, str | None]  # each branch's newest commit (None: GitHub gave none)
_OID: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def tips_of(node: Any, asked: Sequence[str], broken: Collection[str]) -> Tips:
    """The newest commit of each branch a `tips` selection (bot.github.query) answered: the
    default branch (by its name) and `asked` (aliases t<i>); None for one GitHub answered no
    commit for (an error there, in `broken` by alias; no such branch)."""
    found: Tips = {}
    default = field(node, "defaultBranchRef")
    if isinstance(default, dict) and isinstance(default.get("name"), str):
        found[default["name"]] = None if "defaultBranchRef" in broken else _oid(default)
    for index, branch in enumerate(asked):
        found[branch] = None if f"t{index}" in broken else _oid(field(node, f"t{index}"))
    return found


def default_of(node: Any) -> str | None:
    """The name of the default branch a `tips` selection answered (None: none)."""
    name = field(node, "defaultBranchRef", "name") if isinstance(node, dict) else None
    return name if isinstance(name, str) else None


def _oid(ref: Any) -> str | None:
    """A Ref's newest commit (None: no such branch, no commit, or not a commit id)."""
    target = ref.get("target") if isinstance(ref, dict) else None
    oid = target.get("oid") if isinstance(target, dict) else None
    return oid if isinstance(oid, str) and _OID.fullmatch(oid) else None


class BranchTips:
    """The base branches' newest commits as GitHub answered them since each repository was
    last listed (a listing, a refresh's read, a BranchTips query), by repository."""

    def __init__(self) -> None:
        self._known: dict[str, Tips] = {}
        self._default: dict[str, str] = {}  # each repository's default branch, as last read

    def forget(self, repo: str) -> None:
        """`repo` is being listed again: what was known of it is not current."""
        self._known.pop(repo, None)

    def note(
        self, repo: str, tips: Mapping[str, str | None], *, default: str | None = None
    ) -> None:
        """Branches' newest commits as GitHub just answered them (`default`: the name of the
        repository's default branch, where the answer gave it)."""
        self._known.setdefault(repo, {}).update(tips)
        if default is not None:
            self._default[repo] = default

    def default(self, repo: str) -> str | None:
        """The name of `repo`'s default branch, as last read (None: not read yet)."""
        return self._default.get(repo)

    def known(self, repo: str) -> Mapping[str, str | None]:
        """What is known of `repo`'s branches now, by branch."""
        return self._known.get(repo, {})


def merge_base_of(compare: Any) -> str:
    """The merge-base commit of a REST compare answer (MalformedAnswer when it has none)."""
    sha = field(compare, "merge_base_commit", "sha")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise MalformedAnswer(f"GitHub's compare gave no merge-base commit ({sha!r})")
    return sha


def _commit_item(
    sha: str, node: Any, error: str | None, *, what: tuple[str, str] = MERGE_BASE
) -> MergeBase:
    """One aliased commit of a commits query: its signals, or why they cannot be read."""
    if error is not None:
        return MergeBase(sha, error=f"GitHub GraphQL error on {what[0]}: {error}")
    if node is None:
        return MergeBase(sha, error=f"GitHub did not find {what[1]}")
    try:
        signals, cursor = parse_contexts(get(node, "statusCheckRollup", "contexts"))
    except Unreadable as exc:
        return MergeBase(sha, error=f"GitHub's answer for {what[0]} is unreadable: {exc}")
    return MergeBase(sha, tuple(signals), truncated=cursor is not None)


def _repository(data: Any, repo: str) -> Any:
    """The answer's repository (NotFound where GitHub answered none)."""
    repository = field(data, "repository")
    if repository is None:
        raise NotFound(f"repository {repo} not found or not visible", status=404)
    return repository


def _status_node(item: Any) -> dict[str, Any]:
    """A REST status as the rollup's StatusContext node (one parser for both)."""
    if not isinstance(item, dict):
        raise Unreadable("a status is not an object")
    return {
        "__typename": "StatusContext",
        "context": item.get("context"),
        "state": item.get("state"),
        "description": item.get("description"),
        "targetUrl": item.get("target_url"),
        "createdAt": item.get("created_at"),
    }


def _branch_commits(branch: str, node: Any) -> tuple[MergeBase, ...] | str:
    """A branch's last commits with their contexts, or why they cannot be read."""
    if node is None:
        return f"GitHub did not find the branch {branch}"
    if isinstance(node, dict) and node.get("target") is None:
        return ()  # a branch with no commit: no history (kept like any answer)
    try:
        commits = get(node, "target", "history", "nodes")
    except Unreadable:
        commits = None
    if not isinstance(commits, list):
        return f"GitHub's history of {branch} is unreadable"
    found: list[MergeBase] = []
    for commit in commits:
        sha = commit.get("oid") if isinstance(commit, dict) else None
        if not isinstance(sha, str):
            return f"GitHub's history of {branch} names a commit without an id"
        rollup = commit.get("statusCheckRollup")  # null: nothing reported on that commit
        found.append(_commit_item(sha, commit, None) if rollup else MergeBase(sha))
    return tuple(found)


def _queue_config(branch: str, node: Any, error: str | None) -> QueueConfig:
    """One aliased merge queue: its checkResponseTimeout, or why it is not known."""
    if error is not None:
        return QueueConfig(None, f"GitHub answered on the merge queue of {branch}: {error}")
    if not isinstance(node, dict):
        return QueueConfig(None, f"GitHub gave no merge queue for {branch}")
    minutes = get(node, "configuration", "checkResponseTimeout")
    if isinstance(minutes, int) and not isinstance(minutes, bool) and minutes >= 0:
        return QueueConfig(minutes)
    return QueueConfig(None, f"GitHub gave no check response timeout for the queue of {branch}")


class Commits:
    """The commit reads, over `transport`."""

    def __init__(self, transport: Transport, tips: BranchTips) -> None:
        """Over `transport`; `tips`: the base branches' newest commits the listing read."""
        self._transport = transport
        self._tips = tips

    def branch_tips(self, repo: str, branches: Sequence[str]) -> Tips:
        """The newest commit of each branch (None: GitHub gave none): as the pass's listing read
        it, else asked once (ALIAS_BATCH branches a BranchTips query, about one point)."""
        known = self._tips.known(repo)
        missing = [b for b in dict.fromkeys(branches) if b not in known]
        owner, name = repo.split("/", 1)
        for start in range(0, len(missing), ALIAS_BATCH):
            chunk = missing[start : start + ALIAS_BATCH]
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"t{i}": f"refs/heads/{b}" for i, b in enumerate(chunk)}
            try:
                data, errors = self._transport.query(
                    branch_tips_query(len(chunk)), variables, tolerate=in_tip
                )
            except GitHubError:  # not known this pass: not asked again in it
                self._tips.note(repo, dict.fromkeys(chunk))
                raise
            broken = {alias_of(e) for e in errors}
            self._tips.note(repo, tips_of(_repository(data, repo), chunk, broken))
        known = self._tips.known(repo)
        return {b: known.get(b) for b in branches}

    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The merge-base commit of `base` (a branch's commit, or the branch by name) and
        commit `head` (REST compare, one GET)."""
        basehead = f"{quote(base, safe='/')}...{head}"
        _, data = self._transport.send(
            "GET", f"/repos/{repo}/compare/{basehead}", kind="rest_get", parameters={"per_page": 1}
        )
        return merge_base_of(data)

    def commits_signals(self, repo: str, shas: Sequence[str]) -> dict[str, MergeBase]:
        """The contexts GitHub reports on each commit (its first 100), COMMITS_PER_QUERY commits
        per GraphQL query; a commit that cannot be read says why, the others are read."""
        return self.commits_and_queues(repo, shas)[0]

    def commits_and_queues(
        self,
        repo: str,
        shas: Sequence[str],
        branches: Sequence[str] = (),
        *,
        what: tuple[str, str] = MERGE_BASE,
    ) -> tuple[dict[str, MergeBase], dict[str, QueueConfig]]:
        """commits_signals' answer (`what` names the commits in its errors), and the merge queue
        of each of `branches` (its checkResponseTimeout, or why it is unknown), asked in the first
        query: no query of its own."""
        found: dict[str, MergeBase] = {}
        queues: dict[str, QueueConfig] = {}
        wanted = sorted(set(shas))
        asked = list(dict.fromkeys(branches))
        for start in range(0, max(len(wanted), 1 if asked else 0), COMMITS_PER_QUERY):
            chunk = wanted[start : start + COMMITS_PER_QUERY]
            ask = asked if start == 0 else []
            repository, broken = self._commits_query(repo, chunk, ask)
            for index, sha in enumerate(chunk):
                alias = f"c{index}"
                found[sha] = _commit_item(
                    sha, field(repository, alias), broken.get(alias), what=what
                )
            for index, branch in enumerate(ask):
                alias = f"q{index}"
                queues[branch] = _queue_config(branch, field(repository, alias), broken.get(alias))
        return found, queues

    def _commits_query(
        self, repo: str, shas: list[str], branches: list[str]
    ) -> tuple[Any, dict[str, str]]:
        """One commits query: the answer's repository, and its errors by alias (stable words)."""
        owner, name = repo.split("/", 1)
        variables: dict[str, Any] = {"owner": owner, "name": name}
        variables |= {f"q{i}": branch for i, branch in enumerate(branches)}
        data, errors = self._transport.query(
            commits_query(shas, queues=len(branches)), variables, tolerate=in_commit_or_queue
        )
        return _repository(data, repo), {alias_of(e): stable_message(e) for e in errors}

    def commit_statuses(self, repo: str, sha: str) -> list[Signal] | None:
        """Every state posted on the commit (REST, newest first, one page of 100); None where
        GitHub holds more than one page (the earliest states would be missing)."""
        headers, data = self._transport.send(
            "GET",
            f"/repos/{repo}/commits/{sha}/statuses",
            kind="rest_get",
            parameters={"per_page": PAGE},
        )
        if not isinstance(data, list):
            raise MalformedAnswer("the statuses of a commit are not a list")
        if link_url(headers.get("link", ""), "next"):
            return None
        try:
            return [parse_context(_status_node(item)) for item in data]
        except Unreadable as exc:
            raise MalformedAnswer(f"a status of {sha} is unreadable: {exc}") from exc

    def branch_histories(self, repo: str, branches: Sequence[str]) -> Histories:
        """Each branch's last commits, newest first, with their contexts' first page (or why
        they could not be read), ALIAS_BATCH branches per GraphQL query."""
        owner, name = repo.split("/", 1)
        found: Histories = {}
        for start in range(0, len(branches), ALIAS_BATCH):
            chunk = list(branches[start : start + ALIAS_BATCH])
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"b{i}": f"refs/heads/{b}" for i, b in enumerate(chunk)}
            data, errors = self._transport.query(
                branch_history_query(len(chunk)), variables, tolerate=in_ref
            )
            broken = {alias_of(e): stable_message(e) for e in errors}
            for i, branch in enumerate(chunk):
                if f"b{i}" in broken:
                    found[branch] = f"GitHub answered an error on {branch}: {broken[f'b{i}']}"
                    continue
                found[branch] = _branch_commits(branch, field(data, "repository", f"b{i}"))
        return found
