"""Reading a GraphQL answer: a field of it (or MalformedAnswer), and where an error entry sits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.github.errors import MalformedAnswer
from bot.github.parse import Unreadable, get

Tolerate = Callable[[dict[str, Any]], bool]  # which error entries a query reads past


def field(node: Any, *path: str) -> Any:
    """The value at `path` of an answer (None where a step is null); MalformedAnswer when a
    step is not an object."""
    try:
        return get(node, *path)
    except Unreadable as exc:
        raise MalformedAnswer(str(exc)) from exc


def error_path(error: dict[str, Any]) -> list[Any]:
    """Where a GraphQL error entry sits in the answer (its `path`; [] where it names none)."""
    path = error.get("path")
    return path if isinstance(path, list) else []


def alias_of(error: dict[str, Any]) -> str:
    """The alias below `repository` an error entry sits in (`p3` of repository.p3...)."""
    return str(error_path(error)[1])


def never(error: dict[str, Any]) -> bool:
    """No error entry is read past: any one raises."""
    return False


def _in_repository_alias(error: dict[str, Any], prefix: str) -> bool:
    path = error_path(error)
    return len(path) > 1 and path[0] == "repository" and str(path[1]).startswith(prefix)


def in_alias(error: dict[str, Any]) -> bool:
    """An error inside one aliased pull request: repository.p<i>...."""
    return _in_repository_alias(error, "p")


def in_ref(error: dict[str, Any]) -> bool:
    """An error inside one aliased base branch: repository.b<i>...."""
    return _in_repository_alias(error, "b")


def in_tip(error: dict[str, Any]) -> bool:
    """An error inside one aliased branch's newest commit: repository.t<i>...."""
    return _in_repository_alias(error, "t")


def in_commit(error: dict[str, Any]) -> bool:
    """An error inside one aliased commit: repository.c<i>...."""
    return _in_repository_alias(error, "c")


def in_commit_or_queue(error: dict[str, Any]) -> bool:
    """An error inside one aliased commit or merge queue: repository.c<i>... or .q<i>...."""
    return in_commit(error) or _in_repository_alias(error, "q")


def in_attempt(error: dict[str, Any]) -> bool:
    """An error inside one aliased check's attempts: repository.a<k>...."""
    return _in_repository_alias(error, "a")
