"""Webhooks (issue 11): the real `run` fed by signed deliveries (in process: unit/service)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import (
    LOGIN,
    LOOPBACK,
    REPO,
    bot_comments,
    clean_env,
    cli,
    free_port,
    seed_case,
    write_config,
    writes,
)

from bot_sandbox import Sandbox, World
from bot_sandbox.webhook_sender import WebhookSender, sign

SECRET = "s3cret-current"
OLD_SECRET = "s3cret-previous"
DEBOUNCE_S = 2


# -- the real service ----------------------------------------------------------------------


@dataclass
class Service:
    world: World
    sandbox: Sandbox
    config: Path
    tmp: Path
    sha: str
    port: int
    proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhook"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(self.config)],
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # hang guards: a loaded machine takes many times what an idle one does
        wait_for(lambda: len(bot_comments(self.world, 7430)) == 1, 120, "the first comment")
        wait_for(self._live, 60, "the HTTP server")

    def metrics(self) -> str:
        return LOOPBACK.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text

    def _live(self) -> bool:
        try:
            return LOOPBACK.get(f"http://127.0.0.1:{self.port}/livez", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> str:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return err

    def post(self, event: str, payload: Any, *, secret: str = SECRET, **kw: Any) -> httpx.Response:
        body = kw.pop("body", None) or json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": kw.pop("delivery", str(uuid.uuid4())),
            "X-Hub-Signature-256": kw.pop("sig", None) or sign(body, secret),
            "Content-Type": "application/json",
        }
        return LOOPBACK.post(self.url, content=body, headers=headers, timeout=30)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def service_config(tmp: Path, sandbox: Sandbox, port: int, *, debounce: float) -> Path:
    path = write_config(tmp, sandbox)
    text = (
        path.read_text(encoding="utf-8")
        .replace("interval_seconds = 30", "interval_seconds = 900")
        .replace("[server]\nport = 0", f'[server]\nhost = "127.0.0.1"\nport = {port}')
    )
    assert f"port = {port}" in text
    hooks = f'[webhooks]\nsecrets = ["{SECRET}", "{OLD_SECRET}"]\ndebounce_seconds = {debounce}\n'
    head, _, repos = text.partition("[[repos]]")
    path.write_text(f"{head}{hooks}[[repos]]{repos}", encoding="utf-8")
    return path


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    world = World()
    sha = seed_case(world, now=datetime.now(UTC))
    with Sandbox(world) as sandbox:
        port = free_port()
        config = service_config(tmp_path, sandbox, port, debounce=DEBOUNCE_S)
        svc = Service(world, sandbox, config, tmp_path, sha, port)
        yield svc
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait(timeout=10)


def fail_check(world: World, sha: str, name: str = "unittests") -> None:
    now = datetime.now(UTC)
    world.add_check_run(
        REPO, sha, name=name, app_slug="github-actions", workflow="tests",
        conclusion="failure", started_at=now, completed_at=now,
    )  # fmt: skip


def body_of(world: World) -> str:
    return str(bot_comments(world, 7430)[0]["body"])


def test_a_signed_check_run_delivery_updates_the_comment_within_the_debounce(
    service: Service,
) -> None:
    service.start()
    before = body_of(service.world)
    assert "unittests" not in before
    sender = WebhookSender(service.url, OLD_SECRET).attach(service.world)  # a rotated secret
    try:
        service.sandbox.clear_requests()
        changed_at = time.time()  # the sandbox's clock (Recorded.at)
        fail_check(service.world, service.sha)
        took = wait_for(lambda: "unittests" in body_of(service.world), 30, "the edit")
        assert sender.wait_idle()
    finally:
        sender.close()
    assert [d.status for d in sender.sent] == [202]
    assert sender.sent[0].event == "check_run" and sender.sent[0].numbers == (7430,)
    print(f"the comment changed {took:.1f} s after the event")  # benchmarks/webhooks.py's figure
    comments = bot_comments(service.world, 7430)
    assert len(comments) == 1 and comments[0]["body"] != before
    reads = [r for r in service.sandbox.requests if r.graphql_operation == "query"]
    refreshes = [r for r in reads if b"PullsByNumber" in r.body]
    assert len(refreshes) == 1  # one batched read, not a cycle
    assert refreshes[0].at - changed_at >= DEBOUNCE_S  # made once the debounce had passed
    assert not [r for r in reads if b"PullPage" in r.body]
    assert [w.method for w in writes(service.sandbox)] == ["PATCH"]
    # the refresh's edit and the delivery are counted (no polling cycle edited anything); the
    # refresh reports its summary just after its last write, so allow it a moment
    edited = 'ci_status_bot_comment_writes_total{action="edited"} 1.0'
    wait_for(lambda: edited in service.metrics(), 30, "the refresh in /metrics")
    marked = 'ci_status_bot_webhook_deliveries_total{event="check_run",outcome="marked"} 1.0'
    assert marked in service.metrics()
    err = service.stop()
    assert service.proc is not None and service.proc.returncode == 0, err
    assert "webhook refresh:" in err


def test_forged_replayed_oversized_and_foreign_deliveries_change_nothing(
    service: Service,
) -> None:
    service.start()
    before = body_of(service.world)
    fail_check(service.world, service.sha)  # the world changed; no webhook told the bot
    payload = {
        "action": "completed",
        "check_run": {"head_sha": service.sha, "pull_requests": [{"number": 7430}]},
        "repository": {"full_name": REPO},
    }
    service.sandbox.clear_requests()
    forged = service.post("check_run", payload, secret="guessed")
    unsigned = service.post("check_run", payload, sig="sha256=" + "0" * 64)
    oversized = service.post("check_run", None, body=b" " * (25 * 1024 * 1024 + 1))
    foreign = service.post("check_run", {**payload, "repository": {"full_name": "octo/other"}})
    unknown = service.post("issue_comment", payload)
    assert [forged.status_code, unsigned.status_code, oversized.status_code] == [401, 401, 413]
    assert (foreign.status_code, foreign.json()["outcome"]) == (202, "unconfigured-repository")
    assert (unknown.status_code, unknown.json()["outcome"]) == (202, "ignored-event")
    time.sleep(DEBOUNCE_S + 2)
    assert service.sandbox.requests == []  # not one GitHub request
    assert body_of(service.world) == before

    delivery = str(uuid.uuid4())
    first = service.post("check_run", payload, delivery=delivery)
    assert (first.status_code, first.json()["outcome"]) == (202, "marked")
    wait_for(lambda: body_of(service.world) != before, DEBOUNCE_S + 10, "the genuine delivery")
    edited = body_of(service.world)
    fail_check(service.world, service.sha, name="linting")
    service.sandbox.clear_requests()
    replay = service.post("check_run", payload, delivery=delivery)
    assert (replay.status_code, replay.json()["outcome"]) == (202, "repeated")
    time.sleep(DEBOUNCE_S + 2)
    assert service.sandbox.requests == [] and body_of(service.world) == edited
    err = service.stop()
    assert SECRET not in err and OLD_SECRET not in err


def test_a_refresh_whose_edit_lands_after_sigterm_still_logs_what_it_wrote(
    service: Service,
) -> None:
    service.start()
    sender = WebhookSender(service.url, SECRET).attach(service.world)
    try:
        # the refresh's edit is answered 3 s late: SIGTERM arrives while it is in flight
        service.sandbox.fail("PATCH", r"/repos/.+/issues/comments/\d+", delay_s=3.0,
                             transform=lambda payload: payload)  # fmt: skip
        fail_check(service.world, service.sha)
        wait_for(lambda: any(r.method == "PATCH" for r in service.sandbox.requests), 30, "the edit")
        err = service.stop()
    finally:
        sender.close()
    assert "unittests" in body_of(service.world)  # the edit was made...
    assert "webhook refresh: 1 pull requests seen" in err  # ...and the log says so


def test_a_delivery_arriving_mid_cycle_is_published_after_the_cycle_by_the_same_writer(
    tmp_path: Path,
) -> None:
    world = World()
    sha = seed_case(world, now=datetime.now(UTC))
    for number in (7431, 7432, 7433, 7434):  # four more comments: a cycle of >= 4 s of writes
        world.add_pull(REPO, number, title=f"PR {number}", author="bob", head_sha=f"{number:040x}")
    with Sandbox(world) as sandbox:
        port = free_port()
        svc = Service(world, sandbox, service_config(tmp_path, sandbox, port, debounce=0.5),
                      tmp_path, sha, port)  # fmt: skip
        sender = WebhookSender(svc.url, SECRET)
        svc.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(svc.config)],
            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: any(bot_comments(world, n) for n in (7430, 7431)), 60, "a write")
            sender.attach(world)
            fail_check(world, sha)  # the cycle is still writing its other comments
            assert sender.wait_idle()
            wait_for(lambda: "unittests" in body_of(world), 30, "the refresh")
            err = svc.stop()
        finally:
            sender.close()
            if svc.proc.poll() is None:
                svc.proc.kill()
    assert sender.sent[0].status == 202
    assert all(len(bot_comments(world, n)) == 1 for n in (7430, 7431, 7432, 7433, 7434))
    assert err.index("cycle: 5 pull requests seen") < err.index("webhook refresh:")
    times = sorted(w.at for w in writes(sandbox))
    assert len(times) == 6  # five creates, one edit
    assert min(b - a for a, b in pairwise(times)) >= 0.95  # one paced writer


def test_a_burst_during_a_rate_limit_is_held_then_done(service: Service) -> None:
    service.start()
    before = body_of(service.world)
    reset_in = 6.0
    service.sandbox.set_rate_limit("graphql", remaining=0, reset_in_s=reset_in)
    limited_at = time.monotonic()
    sender = WebhookSender(service.url, SECRET).attach(service.world)
    try:
        for index in range(20):
            fail_check(service.world, service.sha, name=f"shard{index}")
        assert sender.wait_idle()
        time.sleep(DEBOUNCE_S + 1)
        assert body_of(service.world) == before  # held: GitHub said no
        wait_for(lambda: "shard19" in body_of(service.world), 120, "done")  # a hang guard
    finally:
        sender.close()
    assert time.monotonic() - limited_at >= reset_in - 1
    assert {d.status for d in sender.sent} == {202} and len(sender.sent) == 20
    assert len(bot_comments(service.world, 7430)) == 1
    assert [w.method for w in writes(service.sandbox)].count("PATCH") == 1  # one edit, batched
    assert service.stop()


def test_sigterm_with_marks_pending_exits_promptly_and_the_next_start_covers_them(
    tmp_path: Path,
) -> None:
    world = World()
    sha = seed_case(world, now=datetime.now(UTC))
    with Sandbox(world) as sandbox:
        port = free_port()
        svc = Service(world, sandbox, service_config(tmp_path, sandbox, port, debounce=60),
                      tmp_path, sha, port)  # fmt: skip
        svc.start()
        before = body_of(world)
        sender = WebhookSender(svc.url, SECRET).attach(world)
        fail_check(world, sha)
        assert sender.wait_idle() and sender.sent[0].status == 202
        sender.close()
        assert svc.proc is not None
        err = svc.stop()
        assert svc.proc.returncode == 0, err
        assert "1 webhook marks pending" in err  # the stop did not wait for the 60 s debounce:
        assert body_of(world) == before  # the refresh never ran
        result = cli("once", "--config", str(svc.config))  # the backstop on the next start
        assert result.returncode == 0, result.stderr
        assert "unittests" in body_of(world)
        assert len(bot_comments(world, 7430)) == 1
        assert bot_comments(world, 7430, login=LOGIN)


def test_status_events_resolve_through_heads_and_a_closed_pull_request_is_left_alone(
    service: Service,
) -> None:
    service.start()
    world = service.world
    sender = WebhookSender(service.url, SECRET).attach(world)
    try:
        world.add_status(REPO, service.sha, context="jenkins", state="failure")  # a sha only
        wait_for(lambda: "jenkins" in body_of(world), DEBOUNCE_S + 10, "the status refresh")
        new_head = "ab" * 20
        world.set_head(REPO, 7430, new_head)  # pull_request synchronize: the new head is known
        wait_for(lambda: new_head[:7] in body_of(world), DEBOUNCE_S + 10, "the new head")
        world.add_status(REPO, new_head, context="buildbot", state="failure")
        wait_for(lambda: "buildbot" in body_of(world), DEBOUNCE_S + 10, "the new head's status")
        world.add_status(REPO, service.sha, context="stale", state="failure")  # the old head
        world.close_pull(REPO, 7430)
        world.add_status(REPO, new_head, context="late", state="failure")  # closed: no refresh
        assert sender.wait_idle()
        service.sandbox.clear_requests()
        closed_body = body_of(world)
        time.sleep(DEBOUNCE_S + 2)
    finally:
        sender.close()
    assert [d.status for d in sender.sent] == [202] * 6
    assert [d.event for d in sender.sent].count("pull_request") == 2
    assert service.sandbox.requests == []  # nothing to refresh: old head, closed pull request
    assert body_of(world) == closed_body and "late" not in closed_body
    assert len(bot_comments(world, 7430)) == 1
    service.stop()
