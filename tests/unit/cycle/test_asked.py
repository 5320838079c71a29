"""Which signals each second source is asked about (bot.cycle.model.FromSignals.asked_by), kept
across passes while a listing gives the very same signals, is what asking from scratch gives:
through a new head, new signals, a changed required set, a new provider record and the stale
limit crossed, pass after pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from support import DOCS, SHA, run, snapshot, status

from bot.core.model import PullSnapshot, Signal
from bot.cycle.model import FromSignals, Reports
from bot.sources.azure_pipelines.rules import asked_about as azure_asks
from bot.sources.codecov.rules import asked_about as codecov_asks
from bot.sources.readthedocs.rules import is_rtd_status

ASKS: dict[str, Callable[[Signal], bool]] = {
    "codecov": codecov_asks,
    "azure-pipelines": azure_asks,
    "readthedocs": is_rtd_status,
}
AZURE = "https://dev.azure.com/octo/omni/_build/results?buildId=41"
OTHER_SHA = "f" * 40

PENDING = (
    run("lint", "success"),
    status("codecov/patch", "pending"),
    run("azure", "in_progress", app="azure-pipelines", url=AZURE),
    status(DOCS, "pending"),
)
ENDED = (
    run("lint", "success"),
    status("codecov/patch", "success"),
    run("azure", "completed", app="azure-pipelines", url=AZURE),
    status(DOCS, "success"),
)


def _required(signals: tuple[Signal, ...], flag: bool | None) -> tuple[Signal, ...]:
    """The signals as a listing with another required set gives them (new objects)."""
    return tuple(s._replace(required=flag) for s in signals)


# Each case: the listings of one pull request, pass after pass. `same` repeats the last
# pass's very snapshot (an unchanged node: its signals tuple is the last one).
CASES: dict[str, list[PullSnapshot | str]] = {
    "unchanged": [snapshot(*PENDING), "same", "same"],
    "the signals end": [snapshot(*PENDING), "same", snapshot(*ENDED), "same"],
    "the signals start": [snapshot(*ENDED), snapshot(*PENDING)],
    "a new head": [
        snapshot(*ENDED),
        replace(snapshot(*PENDING), head_sha=OTHER_SHA),
        replace(snapshot(*ENDED), head_sha=OTHER_SHA),
    ],
    "the required set changes": [
        snapshot(*PENDING),
        snapshot(*_required(PENDING, True)),
        snapshot(*_required(ENDED, True)),
    ],
    # a provider's new record and the stale limit are judged from the evidence, not from
    # which signals are asked: the same signals are asked about on either side of them
    "a new record, the stale limit crossed": [snapshot(*PENDING), "same", "same"],
    "an RTD status added and gone": [
        snapshot(*ENDED[:3]),
        snapshot(*ENDED),
        snapshot(*ENDED[:3]),
    ],
    "closed and reopened": [snapshot(*PENDING), "closed", snapshot(*ENDED)],
}


def _scratch(signals: tuple[Signal, ...], asks: Callable[[Signal], bool]) -> tuple[Signal, ...]:
    """What the sources asked before it was kept: every signal of the head, each time."""
    return tuple(s for s in signals if asks(s))


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_is_kept_is_what_asking_from_scratch_gives(name: str) -> None:
    reports = Reports()
    last: PullSnapshot | None = None
    for step in CASES[name]:
        if step == "closed":
            reports.keep_only("example/omni", [])
            continue
        pull = last if step == "same" else step
        assert isinstance(pull, PullSnapshot)
        kept = reports.from_signals(pull)
        for source, asks in ASKS.items():
            assert kept.asked_by(source, asks) == _scratch(pull.signals, asks), (source, step)
        last = pull


def test_kept_while_the_signals_are_the_very_same() -> None:
    reports, pull = Reports(), snapshot(*PENDING)
    asked = reports.from_signals(pull).asked_by("codecov", codecov_asks)
    assert [s.name for s in asked] == ["codecov/patch"]  # not vacuous
    calls: list[Signal] = []

    def counted(signal: Signal) -> bool:
        calls.append(signal)
        return codecov_asks(signal)

    again = reports.from_signals(replace(pull, title="renamed"))  # the same tuple
    assert again.asked_by("codecov", counted) is asked
    assert calls == []  # not asked again
    copied = replace(pull, signals=tuple(list(pull.signals)))  # equal, another tuple
    assert reports.from_signals(copied).asked_by("codecov", counted) == asked
    assert len(calls) == len(PENDING)  # asked again: only the very same tuple is kept
    assert FromSignals.of(()).asked_by("codecov", codecov_asks) == ()


def test_each_source_asks_about_a_pending_signal_and_none_once_they_ended() -> None:
    for source, asks in ASKS.items():
        assert len(_scratch(PENDING, asks)) == 1, source
        assert len(_scratch(ENDED, asks)) == (source == "readthedocs"), source
    assert SHA != OTHER_SHA
