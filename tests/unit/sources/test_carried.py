"""Final second-source records noted for the head being read, and given back to a state
(issue 31): a run with no state then asks for them once per head, ever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core.model import KeptRead
from bot.sources.azure_pipelines import provider as azure
from bot.sources.carried import RTD, CarriedReads, rtd_key
from bot.sources.codecov import provider as codecov
from bot.sources.readthedocs.evidence import CommitRead, _dump, final_payload
from bot.sources.readthedocs.rules import RtdBuild
from bot.state.store import Store

AT = datetime(2026, 10, 5, 14, 3, 7, 123456, tzinfo=UTC)
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
OTHER = "a" * 40
FINALS = {RTD: final_payload, codecov.NAME: codecov.final, azure.NAME: azure.final}


def _rtd(state: str, success: bool | None, *, notes: bool = True, commit: str = SHA) -> str:
    build = RtdBuild(7, "proj", commit, state, success, "12", AT, AT, 30, "https://x/7")
    read = CommitRead("org", "proj", commit, AT, (build,), {7: ("ended",)} if notes else {})
    return _dump(read)


def test_a_final_read_of_the_head_is_noted_and_a_pending_or_failing_one_is_not() -> None:
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, FINALS)
        reads.begin(SHA)
        reads.put_rtd_read("org", "proj", SHA, payload=_rtd("finished", True), now=AT)
        reads.put_rtd_read("org", "other", SHA, payload=_rtd("building", None), now=AT)
        reads.put_rtd_read("org", "why", SHA, payload=_rtd("cancelled", None, notes=False), now=AT)
        assert [r.key for r in reads.taken()] == [rtd_key("org", "proj", SHA)]
        assert reads.taken()[0] == KeptRead(
            RTD, rtd_key("org", "proj", SHA), _rtd("finished", True), AT
        )
        reads.begin("f" * 40)  # the next head: nothing noted for it yet
        assert reads.taken() == ()
        assert reads.get_rtd_read("org", "proj", SHA) is not None  # read from the state: noted
        assert len(reads.taken()) == 1
        reads.rtd_read_failed("org", "proj", SHA, now=AT, failure="HTTP 503")
        assert reads.taken() == ()  # a failing read is never carried
        assert store.get_rtd_read("org", "proj", SHA).failing_since == AT  # passed through


def test_carried_records_are_given_to_a_state_that_holds_none_of_them() -> None:
    later = AT + timedelta(hours=1)
    carried = [
        KeptRead(RTD, rtd_key("org", "proj", SHA), _rtd("finished", True), AT),
        KeptRead(
            RTD, rtd_key("org", "else", "a" * 40), _rtd("finished", True, commit="a" * 40), AT
        ),
        KeptRead(RTD, rtd_key("org", "pending", SHA), _rtd("building", None), AT),
        KeptRead(RTD, "not json", _rtd("finished", True), AT),
        KeptRead("unknown-source", "k", "{}", AT),
        KeptRead(RTD, rtd_key("org", "kept", SHA), _rtd("finished", False), AT),
    ]
    with Store.open(":memory:") as store:
        store.put_rtd_read("org", "kept", SHA, payload=_rtd("finished", True), now=later)
        reads = CarriedReads(store, FINALS)
        assert reads.seed(SHA, carried) == 1  # only the head's own final record the state lacks
        given = store.get_rtd_read("org", "proj", SHA)
        assert given is not None and given.read_at == AT  # read when it was read, not now
        assert store.get_rtd_read("org", "else", "a" * 40) is None  # another commit's
        assert store.get_rtd_read("org", "pending", SHA) is None  # not final: read again
        kept = store.get_rtd_read("org", "kept", SHA)
        assert kept is not None and kept.read_at == later  # the state's own read stands


def test_codecov_and_azure_records_are_final_by_their_own_rules() -> None:
    assert not codecov.final("not json") and not azure.final("{}")
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, FINALS)
        reads.begin(SHA)
        reads.put_source_read(codecov.NAME, "k", payload="garbled", now=AT)
        assert reads.taken() == ()
        assert reads.seed(SHA, [KeptRead(codecov.NAME, "k2", "garbled", AT)]) == 0
