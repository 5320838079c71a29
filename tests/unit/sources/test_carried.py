"""Final second-source records noted for the head being read, and given back to a state
(issue 31): a run with no state then asks for them once per head, ever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings

from bot.core.annotations import annotations_payload
from bot.core.history import attempts_payload
from bot.core.model import MARKER, KeptRead
from bot.core.remedies import READTHEDOCS as RTD
from bot.render.stamp import Carried, parse_carried
from bot.sources.azure_pipelines import provider as azure
from bot.sources.azure_pipelines import rules as azure_rules
from bot.sources.base import Kind
from bot.sources.carried import CarriedReads
from bot.sources.codecov import provider as codecov
from bot.sources.codecov import rules as codecov_rules
from bot.sources.readthedocs import provider as readthedocs
from bot.sources.readthedocs.evidence import CommitRead, _dump
from bot.sources.readthedocs.evidence import record_key as rtd_key
from bot.sources.readthedocs.rules import RtdBuild
from bot.state.store import Store
from tests.unit.render.test_stamp_fuzz import CARRIED, STAMP, bodies, carried_text, variants
from tests.unit.render.test_stamp_fuzz import stamp_text as stamp_of_text

AT = datetime(2026, 10, 5, 14, 3, 7, 123456, tzinfo=UTC)
NOW = AT + timedelta(days=1)  # when a run gives a state what a comment carried
SHA = "eb46d06c1f3a9b25e8d7c4f0a6b3e9d2c5f8a1b4"
OTHER = "a" * 40
KINDS = (readthedocs.KIND, codecov.KIND, azure.KIND)


def _rtd(state: str, success: bool | None, *, notes: bool = True, commit: str = SHA) -> str:
    build = RtdBuild(7, "proj", commit, state, success, "12", AT, AT, 30, "https://x/7")
    read = CommitRead("org", "proj", commit, AT, (build,), {7: ("ended",)} if notes else {})
    return _dump(read)


def test_a_final_read_of_the_head_is_noted_and_a_pending_or_failing_one_is_not() -> None:
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, KINDS)
        reads.begin(SHA)
        for project, payload in (
            ("proj", _rtd("finished", True)),
            ("other", _rtd("building", None)),
            ("why", _rtd("cancelled", None, notes=False)),
        ):
            reads.put_source_read(RTD, rtd_key("org", project, SHA), payload=payload, now=AT)
        assert [r.key for r in reads.taken()] == [rtd_key("org", "proj", SHA)]
        assert reads.taken()[0] == KeptRead(
            RTD, rtd_key("org", "proj", SHA), _rtd("finished", True), AT
        )
        reads.begin("f" * 40)  # the next head: nothing noted for it yet
        assert reads.taken() == ()
        assert reads.get_source_read(RTD, rtd_key("org", "proj", SHA)) is not None  # noted
        assert len(reads.taken()) == 1
        reads.source_read_failed(RTD, rtd_key("org", "proj", SHA), now=AT, failure="HTTP 503")
        assert reads.taken() == ()  # a failing read is never carried
        failing = store.get_source_read(RTD, rtd_key("org", "proj", SHA))
        assert failing is not None and failing.failing_since == AT  # passed through


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
        store.put_source_read(RTD, rtd_key("org", "kept", SHA), payload=_rtd("finished", True),
                              now=later)  # fmt: skip
        reads = CarriedReads(store, KINDS)
        assert (
            reads.seed(SHA, carried, now=NOW) == 1
        )  # only the head's own final record the state lacks
        given = store.get_source_read(RTD, rtd_key("org", "proj", SHA))
        assert given is not None and given.read_at == AT  # read when it was read, not now
        assert store.get_source_read(RTD, rtd_key("org", "else", "a" * 40)) is None  # another
        assert store.get_source_read(RTD, rtd_key("org", "pending", SHA)) is None  # not final
        assert store.get_source_read(RTD, "not json") is None  # not a read's key
        kept = store.get_source_read(RTD, rtd_key("org", "kept", SHA))
        assert kept is not None and kept.read_at == later  # the state's own read stands


def _codecov(commit: str) -> str:
    record = codecov.CommitRecord(commit, "complete", (), 0)
    return codecov_rules.dump(record)


def _azure(commit: str, pr_head: str | None = None, *, build_id: int = 5) -> str:
    build = azure_rules.Build(build_id, "completed", "succeeded", commit, pr_head, "1", AT, AT)
    return azure_rules.dump(build)


def test_a_carried_record_is_given_only_where_its_provider_says_it_is_of_the_head() -> None:
    """A carried record is given to the state only where its provider says it is a record of
    this pull request's head (Read the Docs: its key's commit and its payload's; Codecov: the
    record's commit; Azure: the build's sourceVersion or pull request head), read no later than
    now (a read time in the future would outlast every later status): anything else is asked
    again (adversarial finding 1: a forged record seeded a permanent false "Passing")."""
    future = NOW + timedelta(minutes=5)
    given = {
        "rtd": KeptRead(RTD, rtd_key("org", "proj", SHA), _rtd("finished", True), AT),
        "codecov": KeptRead(codecov.NAME, f"github/o/r@{SHA}", _codecov(SHA), AT),
        "azure": KeptRead(azure.NAME, "o/p#5", _azure(SHA), AT),
        "azure pr": KeptRead(azure.NAME, "o/p#6", _azure("c" * 40, pr_head=SHA, build_id=6), AT),
    }
    refused = {
        "rtd payload of another": KeptRead(
            RTD, rtd_key("org", "p2", SHA), _rtd("finished", True, commit=OTHER), AT
        ),
        "codecov of another": KeptRead(codecov.NAME, f"github/o/t@{SHA}", _codecov(OTHER), AT),
        "codecov key of another": KeptRead(codecov.NAME, f"github/o/r@{OTHER}", _codecov(SHA), AT),
        "azure of another": KeptRead(azure.NAME, "o/p#7", _azure(OTHER, build_id=7), AT),
        "azure key of another": KeptRead(azure.NAME, "o/p#8", _azure(SHA, build_id=9), AT),
        "read in the future": KeptRead(codecov.NAME, f"github/o/s@{SHA}", _codecov(SHA), future),
        "rtd read in the future": KeptRead(
            RTD,
            rtd_key("org", "p3", SHA),
            _rtd("finished", True).replace(AT.isoformat(), future.isoformat()),
            AT,
        ),
    }
    assert future.isoformat() in refused["rtd read in the future"].payload
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, KINDS)
        assert reads.seed(SHA, [*given.values(), *refused.values()], now=NOW) == len(given)
        for name, read in given.items():
            assert store.get_source_read(read.source, read.key) is not None, name
        for name, read in refused.items():
            assert store.get_source_read(read.source, read.key) is None, name


def test_a_provider_that_cannot_say_whose_a_record_is_is_given_none() -> None:
    mute = Kind("mute", "Mute", allowances=lambda _s: (), connect=lambda _s, _w: None,
                probe=lambda _s, _g: iter(()), final=lambda _p: True)  # fmt: skip
    with Store.open(":memory:") as store:
        carried = [KeptRead("mute", f"k@{SHA}", "{}", AT)]
        assert CarriedReads(store, (mute,)).seed(SHA, carried, now=NOW) == 0


def test_codecov_and_azure_records_are_final_by_their_own_rules() -> None:
    assert not codecov.final("not json") and not azure.final("{}")
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, KINDS)
        reads.begin(SHA)
        reads.put_source_read(codecov.NAME, "k", payload="garbled", now=AT)
        assert reads.taken() == ()
        assert reads.seed(SHA, [KeptRead(codecov.NAME, "k2", "garbled", AT)], now=NOW) == 0


def test_a_read_s_key_is_the_one_comments_already_carry() -> None:
    """Read the Docs' reads are kept in source_reads under the key the carried line of every
    comment written since issue 31 names them by: a change would orphan those."""
    assert rtd_key("org", "proj", SHA) == f'["org","proj","{SHA}"]'


# A payload or key a carried line held (or a state kept) that its provider cannot load is none:
# each of these once raised out of the cycle and failed the whole repository (RecursionError
# past json's nesting limit, OverflowError from int() of JSON's 1e400).
UNLOADABLE = (
    "[" * 5000 + "]" * 5000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    '{"id": 1e400, "builds": [{"id": 1e400}], "commit": "x", "count": 1e400}',
    "\ud800",
    "",
)


def test_a_payload_no_provider_can_load_is_not_final_and_never_raises() -> None:
    for kind in KINDS:
        for payload in UNLOADABLE:
            assert kind.final(payload) is False, (kind.name, payload[:20])
    rtd = _rtd("finished", True).replace('"id": 7', '"id": 1e400')
    assert '"id": 1e400' in rtd and readthedocs.KIND.final(rtd) is False
    with Store.open(":memory:") as store:
        reads = CarriedReads(store, KINDS)
        deep = [KeptRead(kind.name, "[" * 1000, p, AT) for kind in KINDS for p in UNLOADABLE]
        assert reads.seed(SHA, deep, now=NOW) == 0


def test_a_read_s_key_nested_past_json_s_limit_is_no_read_s_key() -> None:
    for key in ("[" * 1000, "[" * 600 + "]" * 600, '["org","proj",' * 400):
        assert readthedocs.KIND.record_of(key, _rtd("finished", True)) is None
    with Store.open(":memory:") as store:
        carried = [KeptRead(RTD, "[" * 1000, _rtd("finished", True), AT)]
        assert CarriedReads(store, KINDS).seed(SHA, carried, now=NOW) == 0


def _taken(carried: Carried, store: Store | None = None) -> None:
    """What a cycle does with a carried line it read: each provider asked whether a record is
    final and whose it is, the annotations and attempts as the state keeps them (UTF-8), and
    with `store`, all of it given to the state."""
    for read in carried.reads:
        for kind in KINDS:
            kind.final(read.payload)
            kind.record_of(read.key, read.payload)
    for found in carried.annotations.values():
        annotations_payload(found).encode("utf-8")
    for tried in carried.attempts.values():
        attempts_payload(tried).encode("utf-8")
    if store is not None:
        CarriedReads(store, KINDS).seed(carried.head_sha, carried.reads, now=NOW)
        runs = {run: (carried.head_sha, annotations_payload(found))
                for run, found in carried.annotations.items()}  # fmt: skip
        store.put_annotations("o/r", runs, now=AT)


def test_every_one_point_change_of_a_carried_line_is_taken_or_ignored_never_raises() -> None:
    stamp = stamp_of_text(STAMP)
    for changed in variants(CARRIED):
        carried = parse_carried(f"{MARKER}\n{stamp}\n{carried_text(changed)}\n")
        if carried is not None:
            _taken(carried)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_a_mutated_carried_line_is_taken_into_a_state_or_ignored_never_raises(body: str) -> None:
    carried = parse_carried(body)
    if carried is not None:
        with Store.open(":memory:") as store:
            _taken(carried, store)
