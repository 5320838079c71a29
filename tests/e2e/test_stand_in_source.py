"""Issue 32, the sources contract: a provider defined here, in the tests alone, plugs into the
bot through bot.sources.base and nothing else: the guard admits exactly what it declares,
check-config prints its probe, the cycle asks it and renders its row and record link,
`show`'s JSON names it, the summary and /metrics count its requests, /readyz's problems
carry its credential problem. No product file names it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from github.Requester import Requester
from support import LOGIN, REPO, bot_comments, repo_world, write_config

from bot.app import SOURCES, build_clients, make_cycle, request_guard
from bot.core.evidence import Evidence, Judge, Since, evidence_key
from bot.core.model import MARKER, KeptRead, PullSnapshot, Reconciliation, Row, Signal, State
from bot.core.model import Kind as SignalKind
from bot.guard import Allowance, Guard, RefusedRequest
from bot.preflight import check_services
from bot.render.report import report_dict
from bot.render.stamp import Carried, Stamp, carried_line, stamp_line
from bot.service.metrics import Metrics
from bot.service.scheduler import credential_problems
from bot.settings import RepoSettings, Settings, load_settings
from bot.sources.base import Connection, Kind, RecordOf, Said, Source, SourcesState, Wiring
from bot.state.store import Store
from bot_sandbox import Sandbox

NAME, LABEL = "stand-in", "Stand-in CI"
ROOT = "https://stand-in.example/api"
CONTEXT = "stand-in/ci"
SHA = "c0ffee" + "0" * 34


@dataclass(frozen=True)
class StandInEvidence:
    """What the stand-in says: its build finished, GitHub never heard."""

    build: int

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        rec = Reconciliation(
            provider=NAME, project="octo", build_id=self.build, build_state="done",
            success=True, builds_for_commit=1, divergent=True,
            finding=f"{LABEL}: build {self.build} is done; GitHub still shows pending.",
            build_url=f"https://stand-in.example/builds/{self.build}",
            link_label="Stand-in build",
        )  # fmt: skip
        return Row(signal, State.SUCCESS, since.at, since.source, rec, None)

    def note(self, *, number: int, judge: Judge) -> str:
        return ""


class StandIn:
    """The stand-in as a cycle asks it (and as its connection: one object does both)."""

    name, label, docs = NAME, LABEL, False

    def __init__(self) -> None:
        self.requests = 0

    def recognises(self, signal: Signal) -> bool:
        return signal.kind is SignalKind.STATUS and signal.name == CONTEXT

    def asks(self, signal: Signal) -> bool:
        return self.recognises(signal)

    def evidence(
        self,
        snapshot: PullSnapshot,
        repo: RepoSettings,
        *,
        now: datetime,
        asked: tuple[Signal, ...],
    ) -> Mapping[str, Evidence]:
        self.requests += len(asked)
        return {evidence_key(s): StandInEvidence(77) for s in asked}

    def problems(self) -> Mapping[str, str]:
        return {NAME: f"{LABEL} refused the bot's credential (HTTP 401)"}

    def problem_keys(self) -> tuple[str, ...]:
        return (NAME,)

    def source(self, store: SourcesState | None) -> Source:
        return self

    def close(self) -> None:
        return None


def _allowances(settings: Settings) -> tuple[Allowance, ...]:
    return (Allowance.of(NAME, LABEL, (ROOT,), (r"/builds/\d+",)),)


def _connect(settings: Settings, wiring: Wiring) -> Connection:
    return StandIn()


def _probe(settings: Settings, guard: Guard) -> Iterator[Said]:
    yield Said("note", "stand_in.token", "not set: the stand-in is read anonymously")


STAND_IN = Kind(NAME, LABEL, allowances=_allowances, connect=_connect, probe=_probe)
KINDS = (*SOURCES, STAND_IN)


@pytest.fixture
def sandbox(now: datetime) -> Iterator[Sandbox]:
    world = repo_world()
    world.add_pull(REPO, 5, title="Plug in", author="alice", head_sha=SHA)
    world.add_status(REPO, SHA, context=CONTEXT, state="pending", target_url=f"{ROOT}/p/5",
                     created_at=now - timedelta(minutes=5))  # fmt: skip
    with Sandbox(world) as sandbox:
        yield sandbox
    Requester.resetConnectionClasses()


def test_the_guard_admits_exactly_what_the_stand_in_declares(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    guard = request_guard(load_settings(write_config(tmp_path, sandbox)), KINDS)
    guard.check_source(NAME, "GET", f"{ROOT}/builds/12")
    for method, url in (
        ("POST", f"{ROOT}/builds/12"),
        ("GET", f"{ROOT}/builds/12/cancel"),
        ("GET", "https://elsewhere.example/api/builds/12"),
    ):
        with pytest.raises(RefusedRequest):
            guard.check_source(NAME, method, url)


def test_check_config_prints_the_stand_in_probe(sandbox: Sandbox, tmp_path: Path) -> None:
    report = check_services(load_settings(write_config(tmp_path, sandbox)), KINDS)
    lines = [f.line() for f in report.findings]
    assert "  note       stand_in.token: not set: the stand-in is read anonymously" in lines


def test_a_cycle_asks_renders_counts_and_reports_the_stand_in(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    settings = load_settings(write_config(tmp_path, sandbox))
    clients = build_clients(settings, settings.repos, kinds=KINDS)
    try:
        with Store.open(tmp_path / "state.sqlite3") as store:
            cycle = make_cycle(settings, clients, store, dry_run=False, out=None)
            cycle.sleep = lambda _s: None
            summary = cycle.run(settings.repos)
    finally:
        clients.close()
    assert summary.source_requests[NAME] == 1
    assert f"{LABEL} requests 1" in summary.line()
    body = bot_comments(sandbox.world, 5)[0]["body"]
    assert f"{LABEL}: build 77 is done." in body  # the note says "GitHub still shows pending"
    assert "[Stand-in build](https://stand-in.example/builds/77)" in body
    built = clients.reports.get(REPO, 5)
    assert built is not None
    row = next(s for s in report_dict(built.report)["signals"] if s["name"] == CONTEXT)
    assert row["reconciliation"]["provider"] == NAME and row["state"] == "success"
    metrics = Metrics()
    metrics.spent(summary, clients.github.usage)
    assert f'ci_status_bot_source_requests_total{{source="{NAME}"}} 1.0' in (
        metrics.exposition().decode()
    )
    assert credential_problems(clients.sources)[NAME].startswith(LABEL)


def _unreadable(key: str, payload: str) -> RecordOf:
    raise ValueError("the stand-in cannot read a record it kept")


def test_a_carried_record_its_provider_raises_on_fails_that_pull_request_alone(
    sandbox: Sandbox, tmp_path: Path, now: datetime
) -> None:
    """Defence in depth behind the carried line's parser: whatever taking one pull request's
    carried line raises (here a provider's own bug) is that pull request's failure, and every
    other pull request of the repository is judged and written as always."""
    broken = Kind(NAME, LABEL, allowances=_allowances, connect=_connect, probe=_probe,
                  final=lambda _payload: True, record_of=_unreadable)  # fmt: skip
    world = sandbox.world
    world.add_pull(REPO, 6, title="Another", author="bob", head_sha="b" * 40)
    record = KeptRead(NAME, f"octo@{SHA}", "{}", now - timedelta(hours=1))
    hidden = f"{stamp_line(Stamp('0' * 64, now, SHA))}\n{carried_line(Carried(SHA, {}, (record,)))}"
    world.add_comment(REPO, 5, author=LOGIN, body=f"{MARKER}\n{hidden}\n### earlier words")
    settings = load_settings(write_config(tmp_path, sandbox))
    clients = build_clients(settings, settings.repos, kinds=(*SOURCES, broken))
    try:
        with Store.open(tmp_path / "state.sqlite3") as store:
            cycle = make_cycle(settings, clients, store, dry_run=False, out=None)
            cycle.sleep = lambda _s: None
            summary = cycle.run(settings.repos)
    finally:
        clients.close()
    assert list(summary.failed) == [f"{REPO}#5"]  # that pull request alone, not the repository
    assert summary.failed[f"{REPO}#5"].startswith("ValueError: the stand-in cannot read")
    assert summary.pulls_seen == 2 and len(bot_comments(world, 6)) == 1  # the other: written
    assert bot_comments(world, 5)[0]["body"].endswith("### earlier words")  # nothing guessed
