"""What of a GitHub error may reach a comment: words that are the same for every such answer."""

from __future__ import annotations

from typing import Any

import pytest

from bot.github.errors import error_reason, stable_message

SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID 0C2D:0001:5A1B"
)


@pytest.mark.parametrize(
    ("status", "data", "said"),
    [
        (403, {"message": SECONDARY}, "GitHub answered 403 (secondary rate limit)"),
        (403, {"message": "API rate limit exceeded for installation ID 7."},
         "GitHub answered 403 (rate limit)"),
        (403, {"message": "Resource not accessible by integration"},
         "GitHub answered 403 (not accessible to the bot's token)"),
        (502, {"data": "<html>ray 0a1b2c3d</html>"}, "GitHub answered 502"),
        (502, "Bad Gateway", "GitHub answered 502"),
        (500, None, "GitHub answered 500"),
        (401, {"message": "Bad credentials"}, "GitHub answered 401 (bad credentials)"),
    ],
)  # fmt: skip
def test_an_http_error_is_its_status_and_a_category_never_its_body(
    status: int, data: Any, said: str
) -> None:
    assert error_reason(status, data) == said


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"type": "FORBIDDEN", "message": "Resource not accessible by integration"},
         "Resource not accessible by integration"),
        ({"message": "Something went wrong while executing your query. Please include "
                     "`C4A8:7B1E:2F0A:3D11` when reporting this issue."}, "an error"),
        ({"type": "SERVICE_UNAVAILABLE", "message": "Request 0C2D:0001 timed out"},
         "SERVICE_UNAVAILABLE"),
        ({"type": "lower<b>", "message": 7}, "an error"),
    ],
)  # fmt: skip
def test_a_graphql_error_entry_is_a_fixed_sentence_or_its_type(
    entry: dict[str, Any], said: str
) -> None:
    assert stable_message(entry) == said
