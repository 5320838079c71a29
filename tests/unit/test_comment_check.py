"""Which of the bot's comments a pass re-reads: each at least every second pass, 100 a point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.cycle.plan import CHECK_BATCH, due_for_check

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@given(st.integers(min_value=0, max_value=2500), st.integers(min_value=1, max_value=4))
def test_every_comment_is_checked_at_least_every_second_pass(count: int, passes: int) -> None:
    last = {("o/r", n): T0 + timedelta(seconds=n % 7) for n in range(count)}
    unchecked_for: dict[tuple[str, int], int] = dict.fromkeys(last, 0)
    for index in range(passes):
        due = due_for_check(last)
        queries = -(-len(due) // CHECK_BATCH)
        assert queries <= max(1, -(-count // (2 * CHECK_BATCH)))  # at most half the points
        assert len(set(due)) == len(due) and set(due) <= set(last)
        now = T0 + timedelta(hours=index + 1)
        for key in last:
            unchecked_for[key] = 0 if key in due else unchecked_for[key] + 1
            assert unchecked_for[key] <= 1  # never two passes in a row without a check
        last.update(dict.fromkeys(due, now))


def test_a_hundred_or_fewer_are_all_checked_in_one_query() -> None:
    last = {("o/r", n): T0 for n in range(100)}
    assert sorted(due_for_check(last)) == sorted(last)
    assert due_for_check({}) == []


def test_two_thousand_cost_ten_queries_a_pass() -> None:
    last = {("o/r", n): T0 + timedelta(seconds=n) for n in range(2000)}
    due = due_for_check(last)
    assert len(due) == 1000 and due == [("o/r", n) for n in range(1000)]  # the oldest half
