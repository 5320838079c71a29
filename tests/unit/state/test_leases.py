"""Leases per repository on a shared state: fair shares, expiry and takeover, the fence."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.state.leases import Leases, all_leases
from bot.state.ports import MarkRow
from bot.state.store import Store

T0 = datetime(2026, 10, 5, 14, 3, tzinfo=UTC)
REPOS = ["o/a", "o/b", "o/c", "o/d"]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Store]:
    """The same lease code on SQLite and on a fresh PostgreSQL database."""
    where = ":memory:" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with Store.open(where) as opened:
        yield opened


def replica(store: Store, name: str, clock: Clock) -> Leases:
    return Leases(store, lease_seconds=10, holder=name, clock=clock)


def test_replicas_share_the_repositories_fairly_as_they_join(store: Store) -> None:
    clock = Clock()
    a, b = replica(store, "a", clock), replica(store, "b", clock)
    assert sorted(a.claim(REPOS)) == REPOS  # alone: all of them, generation 1
    assert set(a.held.values()) == {1}
    assert b.claim(REPOS) == {}  # b is live now; a has not made room yet
    clock.now += timedelta(seconds=1)
    assert len(a.claim(REPOS)) == 2  # a gives up what is beyond ceil(4 / 2)
    taken = b.claim(REPOS)
    assert len(taken) == 2 and set(taken).isdisjoint(a.held)
    assert set(taken.values()) == {2}  # a new generation for each repository taken
    assert a.takeovers == b.takeovers == 0  # given up, not expired
    c = replica(store, "c", clock)
    for _ in range(3):
        clock.now += timedelta(seconds=1)
        for r in (a, b, c):
            r.claim(REPOS)
    shares = sorted(len(r.held) for r in (a, b, c))
    assert sum(shares) == 4 and shares[-1] <= 2  # ceil(4 / 3)
    assert {lease.repo for lease in all_leases(store) if lease.holder} == set(REPOS)


def test_an_expired_lease_is_taken_over_with_a_newer_generation_and_fences_the_old_holder(
    store: Store,
) -> None:
    clock = Clock()
    a, b = replica(store, "a", clock), replica(store, "b", clock)
    assert a.claim(["o/a"]) == {"o/a": 1}
    assert a.valid("o/a") == 1
    clock.now += timedelta(seconds=9)  # 1 s left: less than the margin, no write
    assert a.valid("o/a") is None
    assert a.claim(["o/a"]) == {"o/a": 1}  # renewed again (still unexpired)
    clock.now += timedelta(seconds=11)  # a paused past its lease: not renewed
    assert b.claim(["o/a"]) == {"o/a": 2}
    assert b.takeovers == 1
    assert a.valid("o/a") is None  # a never writes under generation 1 again
    assert a.renew() == {} and a.held == {}
    assert b.valid("o/a") == 2


def test_renewal_keeps_the_generation_and_a_clean_stop_frees_at_once(store: Store) -> None:
    clock = Clock()
    a, b = replica(store, "a", clock), replica(store, "b", clock)
    a.claim(REPOS)
    for _ in range(5):
        clock.now += timedelta(seconds=4)
        assert a.renew() == dict.fromkeys(REPOS, 1)
    a.release_all()
    assert sorted(b.claim(REPOS)) == REPOS  # a left the live replicas: b takes all now
    assert b.takeovers == 0


def test_marks_wait_in_the_state_for_the_holder_of_their_repository(store: Store) -> None:
    marks = [
        MarkRow("o/a", 7, None, False, False, T0),
        MarkRow("o/b", None, "a" * 40, False, False, T0 + timedelta(seconds=1)),
        MarkRow("o/a", 8, "b" * 40, True, True, T0 + timedelta(seconds=2)),
    ]
    store.add_marks(marks)
    assert store.take_marks(["o/a"]) == [marks[0], marks[2]]
    assert store.take_marks(["o/a"]) == []
    assert store.take_marks(["o/b", "o/c"]) == [marks[1]]
