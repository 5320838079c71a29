"""A failure's `elsewhere` (bot.core.history.FailingIndex.elsewhere), summed up once per check
per index, is what counting every other head each time gives: on every head of tables of
indexes (ties, undated failures, a head failing alone, heads added after a first answer)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from support import run, snapshot

from bot.core.history import FailingIndex, check_key
from bot.core.model import Elsewhere, PullSnapshot, Signal

T0 = datetime(2026, 12, 1, tzinfo=UTC)
NAMES = ("tests", "lint", "docs")


def _scratch(index: FailingIndex, number: int, signal: Signal) -> Elsewhere | None:
    """FailingIndex.elsewhere as it was written before its sums were kept."""
    seen = index.failing.get(check_key(signal), {})
    others = {n: t for n, t in seen.items() if n != number}
    if not others:
        return None
    times = [t for t in others.values() if t is not None]
    of = len(index.pulls) - (number in index.pulls)
    return Elsewhere(len(others), of, min(times) if times else None)


def _pull(number: int, failing: dict[str, datetime | None]) -> PullSnapshot:
    signals = tuple(
        run(name, "failure", completed_at=at, started_at=at, database_id=number * 10 + i)
        for i, (name, at) in enumerate(failing.items())
    )
    return replace(snapshot(*signals), number=number, head_sha=f"{number:040x}")


def _random_pulls(seed: int, count: int) -> list[PullSnapshot]:
    rng = random.Random(seed)
    pulls = []
    for number in range(1, count + 1):
        failing: dict[str, datetime | None] = {}
        for name in NAMES:
            if rng.random() < 0.5:
                dated = rng.random() < 0.8
                failing[name] = T0 + timedelta(minutes=rng.randrange(5)) if dated else None
        pulls.append(_pull(number, failing))
    return pulls


TABLE: dict[str, list[PullSnapshot]] = {
    "empty": [],
    "one head": [_pull(1, {"tests": T0})],
    "two heads, one check": [_pull(1, {"tests": T0}), _pull(2, {"tests": T0 + timedelta(1)})],
    "a tie on the earliest": [_pull(n, {"tests": T0}) for n in (1, 2, 3)],
    "undated failures": [_pull(1, {"tests": None}), _pull(2, {"tests": None})],
    "the earliest undated elsewhere": [_pull(1, {"tests": T0}), _pull(2, {"tests": None})],
    "nothing failing on some": [_pull(1, {}), _pull(2, {"lint": T0}), _pull(3, {})],
    **{f"random {seed}": _random_pulls(seed, 40) for seed in range(6)},
}


def _probes(pulls: list[PullSnapshot]) -> list[tuple[int, Signal]]:
    asked = [run(name, "failure") for name in NAMES]
    numbers = [p.number for p in pulls] + [999]  # and a head the index never counted
    return [(n, s) for n in numbers for s in asked]


def test_the_tables_are_not_vacuous() -> None:
    index = FailingIndex()
    for pull in TABLE["random 0"]:
        index.add(pull)
    counts = [e.heads for n, s in _probes(TABLE["random 0"]) if (e := index.elsewhere(n, s))]
    assert len(index.failing) == len(NAMES) and max(counts) > 10


@pytest.mark.parametrize("name", sorted(TABLE))
def test_summed_is_what_counting_every_other_head_gives(name: str) -> None:
    index = FailingIndex()
    for pull in TABLE[name]:
        index.add(pull)
    for number, signal in _probes(TABLE[name]):
        assert index.elsewhere(number, signal) == _scratch(index, number, signal)


def test_a_head_added_after_an_answer_is_counted() -> None:
    index = FailingIndex()
    index.add(_pull(1, {"tests": T0 + timedelta(hours=1)}))
    index.add(_pull(2, {"tests": T0 + timedelta(hours=2)}))
    asked = run("tests", "failure")
    assert index.elsewhere(1, asked) == Elsewhere(1, 1, T0 + timedelta(hours=2))
    index.add(_pull(3, {"tests": T0}))  # an earlier failure on a third head
    assert index.elsewhere(1, asked) == Elsewhere(2, 2, T0) == _scratch(index, 1, asked)
