"""What an event payload means: the pull requests it marks for a refresh (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.merge_queue import queued_number

# a repository's rules changed: what its base branches require is read again
RULE_EVENTS = frozenset({"branch_protection_rule", "repository_ruleset"})
EVENTS = frozenset(
    {"pull_request", "check_run", "check_suite", "status", "merge_group", *RULE_EVENTS}
)
# an App's installations changed (many installations: the repositories are found again)
INSTALLATION_EVENTS = frozenset({"installation", "installation_repositories"})
PULL_ACTIONS = frozenset(
    {
        "opened",
        "reopened",
        "synchronize",
        "ready_for_review",
        "converted_to_draft",
        "labeled",
        "unlabeled",
        "closed",
    }
)
_SHA_LENGTH = 40


@dataclass(frozen=True, slots=True)
class Mark:
    """A pull request to refresh: by number, or by head sha (a status names only the sha)."""

    repo: str
    number: int | None = None
    sha: str | None = None
    closed: bool = False
    head_known: bool = False  # a pull_request event: `sha` is the pull request's head now


@dataclass(frozen=True, slots=True)
class Reading:
    """What one delivery means: an outcome word and the marks it makes."""

    outcome: str
    marks: tuple[Mark, ...] = ()
    rules_of: str | None = None  # the repository whose required checks are to be read again


def read_event(event: str, payload: Any, *, repos: Mapping[str, str]) -> Reading:
    """Turn one event payload into marks; `repos` maps lower-case names to configured ones."""
    if event not in EVENTS:
        return Reading("ignored-event")
    if not isinstance(payload, dict):
        return Reading("malformed")
    full_name = _get(payload, "repository", "full_name")
    if not isinstance(full_name, str):
        return Reading("malformed")
    repo = repos.get(full_name.lower())
    if repo is None:
        return Reading("unconfigured-repository")
    if event in RULE_EVENTS:
        return Reading("rules-changed", rules_of=repo)
    if event == "pull_request":
        return _pull_request(repo, payload)
    if event in ("check_run", "check_suite"):
        return _check(repo, payload.get(event))
    if event == "merge_group":
        return _merge_group(repo, payload.get("merge_group"))
    sha = payload.get("sha")
    if not _is_sha(sha):
        return Reading("malformed")
    branches = payload.get("branches")
    names = [_get(b, "name") for b in branches] if isinstance(branches, list) else []
    queued = sorted({n for name in names if (n := queued_number(name)) is not None})
    return Reading("marked", (Mark(repo, sha=sha), *(Mark(repo, n) for n in queued)))


def _merge_group(repo: str, group: Any) -> Reading:
    """A merge group (checks requested, destroyed): the pull request its branch is named after
    (`gh-readonly-queue/<base>/pr-<N>-<sha>`), whose merge-queue entry it is."""
    if not isinstance(group, dict) or not _is_sha(group.get("head_sha")):
        return Reading("malformed")
    number = queued_number(group.get("head_ref"))
    if number is None:
        return Reading("malformed")
    return Reading("marked", (Mark(repo, number),))


def _pull_request(repo: str, payload: dict[str, Any]) -> Reading:
    action = payload.get("action")
    base_changed = action == "edited" and isinstance(_get(payload, "changes", "base"), dict)
    if action not in PULL_ACTIONS and not base_changed:  # a new base: new required checks
        return Reading("ignored-action")
    number = payload.get("number", _get(payload, "pull_request", "number"))
    sha = _get(payload, "pull_request", "head", "sha")
    if not _is_number(number):
        return Reading("malformed")
    mark = Mark(
        repo,
        number,
        sha if _is_sha(sha) else None,
        closed=action == "closed" or _get(payload, "pull_request", "state") == "closed",
        head_known=_is_sha(sha),
    )
    return Reading("marked", (mark,))


def _check(repo: str, check: Any) -> Reading:
    """A check_run or check_suite: its pull requests, or its head sha (forks list none)."""
    if not isinstance(check, dict):
        return Reading("malformed")
    sha = check.get("head_sha")
    pulls = check.get("pull_requests") or _get(check, "check_suite", "pull_requests") or []
    if not isinstance(pulls, list) or not all(
        isinstance(p, dict) and _is_number(p.get("number")) for p in pulls
    ):
        return Reading("malformed")
    numbers = sorted({p["number"] for p in pulls if _same_repo(p, repo)})
    # a check of a merge-group commit lists no pull request: its branch names the queued one
    branch = check.get("head_branch") or _get(check, "check_suite", "head_branch")
    queued = queued_number(branch)
    if queued is not None and not numbers:
        numbers = [queued]
    if numbers:
        return Reading("marked", tuple(Mark(repo, n) for n in numbers))
    if not _is_sha(sha):
        return Reading("malformed")
    return Reading("marked", (Mark(repo, sha=sha),))


def _is_number(value: Any) -> bool:
    """A pull request number as GitHub sends it: a positive 32-bit integer (GraphQL's Int)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


def _same_repo(pull: dict[str, Any], repo: str) -> bool:
    """A listed pull request belongs to `repo` (its base) unless its URL says otherwise."""
    url = _get(pull, "base", "repo", "url") or pull.get("url")
    return not isinstance(url, str) or f"/repos/{repo.lower()}" in url.lower()


def _is_sha(value: Any) -> bool:
    return isinstance(value, str) and len(value) == _SHA_LENGTH


def _get(node: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node
