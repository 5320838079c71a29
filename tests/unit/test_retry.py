"""The one retry policy, its waits (interruptible, jittered, bounded) and the pagination guard."""

from __future__ import annotations

import logging
import re
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from bot.github.transport import rate_limit_wait
from bot.guard import ForeignHost, Page, Pages, PaginationLoop, last_page, link_url
from bot.retry import Retryable, RetryPolicy, Stopped, pause, retry_after_s, run_with_retries

NOW = datetime(2026, 11, 30, 20, 0, 0, tzinfo=UTC)
STOPPED_INTO = re.compile(r"stopped (\d+\.\d) s into a (\d+\.\d) s wait")  # retry.pause's line
FAST = RetryPolicy(attempts=3, backoff_s=0.01, jitter_s=0.01)


def test_retry_after_is_read_in_seconds_and_as_an_http_date() -> None:
    assert retry_after_s("12", now=NOW) == 12.0
    assert retry_after_s(format_datetime(NOW + timedelta(seconds=90), usegmt=True), now=NOW) == 90
    assert retry_after_s(format_datetime(NOW - timedelta(seconds=5), usegmt=True), now=NOW) == 0
    assert retry_after_s("soon", now=NOW) is None
    assert retry_after_s(None, now=NOW) is None


def test_github_honours_retry_after_as_an_http_date() -> None:
    date = format_datetime(NOW + timedelta(seconds=42), usegmt=True)
    assert rate_limit_wait({"retry-after": date}, now=NOW.timestamp()) == 42.0
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW.timestamp()) + 30)}
    assert rate_limit_wait(reset, now=NOW.timestamp()) == 31.0
    assert rate_limit_wait({"x-ratelimit-remaining": "12"}, now=NOW.timestamp()) is None


def test_only_retryable_failures_are_tried_again_and_attempts_are_bounded() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        raise Retryable(ValueError(f"try {len(calls)}"))

    with pytest.raises(ValueError, match="try 3"):
        run_with_retries(flaky, policy=FAST)
    assert len(calls) == 3

    def broken() -> str:
        calls.append(1)
        raise KeyError("not transient")

    calls.clear()
    with pytest.raises(KeyError):
        run_with_retries(broken, policy=FAST)
    assert len(calls) == 1


def test_backoff_is_exponential_with_jitter_and_a_server_wait_is_honoured() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=4, backoff_s=1.0, jitter_s=1.0)
    asked = iter([None, None, 7.0, None])

    def attempt() -> None:
        raise Retryable(RuntimeError("503"), wait_s=next(asked))

    with pytest.raises(RuntimeError):
        run_with_retries(attempt, policy=policy, sleep=waits.append)
    assert 1.0 <= waits[0] <= 2.0 and 2.0 <= waits[1] <= 3.0
    assert 7.0 <= waits[2] <= 7.7
    many = []
    for _ in range(20):
        recorded: list[float] = []
        with pytest.raises(RuntimeError):
            run_with_retries(
                lambda: (_ for _ in ()).throw(Retryable(RuntimeError("x"))),
                policy=RetryPolicy(attempts=2),
                sleep=recorded.append,
            )
        many.append(recorded[0])
    assert len(set(many)) > 1, "no jitter"


def test_a_stop_ends_a_wait_and_the_log_says_how_far_into_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = threading.Event()

    def throttled() -> None:
        raise Retryable(RuntimeError("429"), wait_s=30.0)

    threading.Timer(0.3, stop.set).start()
    with caplog.at_level(logging.DEBUG, logger="bot.retry"), pytest.raises(Stopped):
        run_with_retries(throttled, policy=RetryPolicy(attempts=3), stop=stop)
    begun = [m for m in caplog.messages if m.startswith("waiting ")]
    ended = [STOPPED_INTO.fullmatch(m) for m in caplog.messages]
    cut = [(float(m[1]), float(m[2])) for m in ended if m]
    assert len(begun) == 1 and len(cut) == 1  # one wait, and the stop ended it (no retry after)
    waited, asked = cut[0]
    assert asked >= 30.0 and waited < asked  # the bot's own clock: cut short, not waited out


def test_a_stop_already_requested_ends_a_wait_before_it_begins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = threading.Event()
    stop.set()
    with caplog.at_level(logging.INFO, logger="bot.retry"), pytest.raises(Stopped):
        pause(30.0, stop)
    assert caplog.messages == ["stopped 0.0 s into a 30.0 s wait"]


def test_pages_refuse_a_repeated_cursor_and_more_pages_than_the_total_implies() -> None:
    pages = Pages("the list")
    assert pages.follow("a") == "a"
    assert pages.follow(None) is None
    with pytest.raises(PaginationLoop, match="repeated"):
        pages.follow("a")
    bounded = Pages("the builds")
    bounded.expect(150, 100)  # two pages, and one to spare for builds added meanwhile
    bounded.follow("page-2")
    bounded.expect(10_000, 100)  # only the first page's total counts
    bounded.follow("page-3")
    with pytest.raises(PaginationLoop, match="3 pages"):
        bounded.follow("page-4")


def test_pages_refuse_a_link_to_another_origin() -> None:
    pages = Pages("the builds", origin="https://app.readthedocs.org/api/v3/projects/p/builds/")
    pages.follow("https://app.readthedocs.org:443/api/v3/projects/p/builds/?offset=100")
    with pytest.raises(ForeignHost, match=r"evil\.example"):
        pages.follow("https://evil.example/api/v3/projects/p/builds/?offset=200")


def test_last_page_of_a_link_header() -> None:
    link = (
        '<https://api.github.com/repositories/1/issues/7/comments?page=2>; rel="next", '
        '<https://api.github.com/repositories/1/issues/7/comments?page=5>; rel="last"'
    )
    assert last_page(link) == 5
    assert last_page("") is None


def test_link_url_names_each_relation_as_given() -> None:
    link = (
        '<https://api.github.com/repositories/1/issues/2/comments?page=2>; rel="next", '
        '<https://api.github.com/repositories/1/issues/2/comments?page=5>; rel="last"'
    )
    assert (
        link_url(link, "next") == "https://api.github.com/repositories/1/issues/2/comments?page=2"
    )
    assert link_url(
        link,
        "last",
    ).endswith("page=5")
    assert link_url(link, "prev") is None
    assert link_url("", "next") is None


def test_read_all_follows_pages_until_none_and_refuses_a_repeated_one() -> None:
    answers = {"/a": Page([1, 2], "/b"), "/b": Page([3], None)}
    assert Pages("a list").read_all("/a", {"per_page": 2}, lambda url, _: answers[url]) == [1, 2, 3]
    looping = {"/a": Page([1], "/b"), "/b": Page([2], "/b")}
    with pytest.raises(PaginationLoop):
        Pages("a list").read_all("/a", None, lambda url, _: looping[url])
