"""The errors GitHub's answers raise, and the stable words a comment may say about them."""

from __future__ import annotations

import re
from typing import Any, Final

from github.GithubException import GithubException


class GitHubError(Exception):
    """GitHub could not be read or written; the message says what it answered (for logs).

    `reason` says it in words that are the same for every such answer (the status and a
    category; never a request id or a body): the only text of an error a comment may carry.
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason or message


class NotFound(GitHubError):
    """The repository, pull request or comment does not exist or is not visible to the bot."""


class RateLimited(GitHubError):
    """GitHub refused for rate limiting; retry after `wait_s` seconds."""

    def __init__(self, message: str, *, wait_s: float, reason: str = "") -> None:
        super().__init__(message, status=403, reason=reason or "GitHub's rate limit was reached")
        self.wait_s = wait_s


class MalformedAnswer(GitHubError):
    """GitHub answered with a shape the bot does not understand."""


class PaginationLoop(MalformedAnswer):
    """GitHub's pages repeated a cursor or link, or ran past what the first page implied."""


class ForeignLink(GitHubError):
    """GitHub's answer linked to a host other than the configured API; it is not followed."""


def error_message(exc: GithubException) -> str:
    """A PyGithub error as the log says it: the status and GitHub's message (or its body)."""
    data = exc.data
    message = data.get("message") if isinstance(data, dict) else None
    return f"GitHub answered {exc.status}: {message or data!r}"


# What a GitHub error message is about, by a phrase it carries (lower case): the stable category
# a comment may say (GitHub's own messages carry request ids; error pages differ per request).
_CATEGORIES: Final = (
    ("secondary rate limit", "secondary rate limit"),
    ("abuse detection", "secondary rate limit"),  # its older wording (recorded 2018)
    ("rate limit", "rate limit"),
    ("resource not accessible", "not accessible to the bot's token"),
    ("bad credentials", "bad credentials"),
)


def error_reason(status: int | None, data: Any) -> str:
    """A GitHub error answer in words that do not change from one request to the next: the
    HTTP status and, where its message says one, a known category; never the body."""
    message = data.get("message") if isinstance(data, dict) else None
    text = message.lower() if isinstance(message, str) else ""
    category = next((name for phrase, name in _CATEGORIES if phrase in text), None)
    said = f"GitHub answered {status}"
    return f"{said} ({category})" if category else said


_ERROR_TYPE: Final = re.compile(r"[A-Z_]{1,40}")
_FIXED_MESSAGE: Final = re.compile(r"[A-Za-z][A-Za-z ,.'()_-]{0,99}")


def graphql_reason(kind: Any) -> str:
    """A GraphQL error entry in stable words: its type (the message may carry a request id)."""
    return "GitHub's GraphQL API answered an error" + (
        f" ({kind})" if isinstance(kind, str) and _ERROR_TYPE.fullmatch(kind) else ""
    )


def entry_message(error: dict[str, Any]) -> str:
    """A GraphQL error entry's message (or its type), as GitHub gave it (for logs and reasons
    that name one pull request's failure)."""
    return str(error.get("message") or error.get("type") or "an error")


def stable_message(error: dict[str, Any]) -> str:
    """A GraphQL error entry in words a comment may carry: its message only where it is one of
    GitHub's fixed sentences (short, no digit: "Resource not accessible by integration"), else
    its type (GitHub's other messages carry a request id that changes every time)."""
    message, kind = error.get("message"), error.get("type")
    if isinstance(message, str) and _FIXED_MESSAGE.fullmatch(message.strip()):
        return message.strip()
    if isinstance(kind, str) and _ERROR_TYPE.fullmatch(kind):
        return kind
    return "an error"
