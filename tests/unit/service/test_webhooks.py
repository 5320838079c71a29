"""Webhooks (issue 11), in process: the signature, events on real payloads -> marks, the inbox,
the deliveries table and the route.

The real `run` fed by signed deliveries: e2e/test_webhook_service.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import (
    REPO,
    TESTS,
)

from bot.service.webhooks.events import Mark, read_event
from bot.service.webhooks.inbox import Inbox
from bot.service.webhooks.signature import signature, verify_signature
from bot.settings import load_settings
from bot.state.store import Store
from bot_sandbox.webhook_sender import sign

SECRET = "s3cret-current"
OLD_SECRET = "s3cret-previous"


DATA = TESTS / "data" / "real" / "webhooks"


HELLO = "Codertocat/Hello-World"


def real(name: str) -> dict[str, Any]:
    """A real payload example (octokit/webhooks, see PROVENANCE.md)."""
    return json.loads((DATA / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_signature_is_hmac_sha256_of_the_raw_body_and_any_configured_secret_matches() -> None:
    body = (DATA / "check_run_completed.payload.json").read_bytes()
    header = signature(body, OLD_SECRET)
    assert header.startswith("sha256=") and len(header) == 7 + 64
    assert verify_signature(body, header, [SECRET, OLD_SECRET])  # rotation: the old one still
    assert verify_signature(body, signature(body, SECRET), [SECRET, OLD_SECRET])
    assert not verify_signature(body, header, [SECRET])
    assert not verify_signature(body + b" ", header, [SECRET, OLD_SECRET])  # raw body, exactly
    assert not verify_signature(body, None, [SECRET])
    assert not verify_signature(body, header.removeprefix("sha256="), [OLD_SECRET])
    assert not verify_signature(body, "sha1=" + header[7:], [OLD_SECRET])
    assert not verify_signature(body, signature(body, ""), [""])  # an empty secret never counts


REPOS = {HELLO.lower(): HELLO}


def test_check_run_marks_the_pull_requests_it_lists() -> None:
    reading = read_event("check_run", real("check_run_completed.payload.json"), repos=REPOS)
    assert reading.outcome == "marked"
    assert reading.marks == (Mark(HELLO, 2),)


def test_check_suite_without_pull_requests_falls_back_to_its_head_sha() -> None:
    payload = real("check_suite_completed.1.payload.json")
    assert payload["check_suite"]["pull_requests"] == []  # as for a fork's pull request
    reading = read_event("check_suite", payload, repos=REPOS)
    assert reading.marks == (Mark(HELLO, sha="ec26c3e57ca3a959ca5aad62de7213c562f8c821"),)


def test_status_names_only_a_sha() -> None:
    reading = read_event("status", real("status_payload.json"), repos=REPOS)
    assert reading.marks == (Mark(HELLO, sha="6113728f27ae82c7b1a177c8d03f9e96e0adf246"),)


def test_pull_request_events_mark_the_number_and_record_its_head() -> None:
    payload = real("pull_request_synchronize.payload.json")
    reading = read_event("pull_request", payload, repos=REPOS)
    sha = payload["pull_request"]["head"]["sha"]
    assert reading.marks == (Mark(HELLO, 2, sha, head_known=True),)
    opened = read_event(
        "pull_request", real("pull_request_opened.with-null-body.json"), repos=REPOS
    )
    assert opened.outcome == "marked" and opened.marks[0].number == 2


@pytest.mark.parametrize(
    ("event", "payload", "outcome"),
    [
        ("check_run", real("check_run_completed.payload.json"), "unconfigured-repository"),
        ("status", real("status_payload.json"), "unconfigured-repository"),
        ("issue_comment", {"repository": {"full_name": HELLO}}, "ignored-event"),
        ("pull_request", {**real("pull_request_opened.with-null-body.json"), "action": "assigned"},
         "ignored-action"),
        ("check_run", {"repository": {"full_name": HELLO}, "check_run": {"head_sha": "x"}},
         "malformed"),
    ],
)  # fmt: skip
def test_events_that_mark_nothing(event: str, payload: dict[str, Any], outcome: str) -> None:
    repos = {} if outcome == "unconfigured-repository" else REPOS
    reading = read_event(event, payload, repos=repos)
    assert (reading.outcome, reading.marks) == (outcome, ())


def test_inbox_resolves_a_status_sha_through_known_open_heads_and_drops_closed() -> None:
    inbox, now = Inbox(), datetime.now(UTC)
    inbox.learn_heads({"o/r#1": "a" * 40, "o/r#2": "b" * 40, "o/r#3": "a" * 40})
    assert inbox.add([Mark("o/r", sha="a" * 40)], now=now) is True  # first mark: schedule
    assert inbox.add([Mark("o/r", 2)], now=now + timedelta(seconds=1)) is False
    assert inbox.pending() == 2  # one sha, one number: resolved when taken
    assert inbox.take() == {"o/r": [1, 2, 3]}
    assert inbox.take() == {}
    inbox.add([Mark("o/r", 3, closed=True)], now=now)  # closed: left as it is, head forgotten
    inbox.add([Mark("o/r", sha="a" * 40)], now=now)
    assert inbox.take() == {"o/r": [1]}
    inbox.add([Mark("o/r", 4, "c" * 40, head_known=True), Mark("o/r", sha="c" * 40)], now=now)
    assert inbox.take() == {"o/r": [4]}
    inbox.add([Mark("o/r", sha="f" * 40)], now=now)  # no open pull request has it
    assert inbox.take() == {}


def test_a_read_that_began_before_a_close_does_not_reopen_the_pull_request() -> None:
    inbox, now = Inbox(), datetime.now(UTC)
    inbox.learn_heads({"o/r#5": "d" * 40})
    inbox.add([Mark("o/r", 5, "d" * 40, closed=True, head_known=True)], now=now)
    inbox.learn_heads({"o/r#5": "d" * 40}, read_at=now - timedelta(seconds=1))  # a late refresh
    inbox.learn_heads({"o/r#5": "d" * 40}, complete=["o/r"])  # a cycle that began before
    inbox.add([Mark("o/r", sha="d" * 40)], now=now)
    assert inbox.take() == {}  # closed: its status events refresh nothing
    inbox.learn_heads({"o/r#5": "d" * 40}, read_at=now + timedelta(seconds=1))  # read it open
    inbox.add([Mark("o/r", sha="d" * 40)], now=now)
    assert inbox.take() == {"o/r": [5]}
    inbox.add([Mark("o/r", 5, "d" * 40, closed=True, head_known=True)], now=now)
    inbox.add([Mark("o/r", 5, "e" * 40, head_known=True)], now=now)  # reopened
    inbox.take()
    inbox.add([Mark("o/r", sha="e" * 40)], now=now)
    assert inbox.take() == {"o/r": [5]}


def test_settings_read_secrets_from_the_environment_and_mask_them(tmp_path: Path) -> None:
    env = {"CI_STATUS_BOT_WEBHOOKS__SECRETS": json.dumps([SECRET, OLD_SECRET])}
    settings = load_settings(None, environ=env)
    assert [s.get_secret_value() for s in settings.webhooks.secrets] == [SECRET, OLD_SECRET]
    assert settings.webhooks.enabled and settings.webhooks.debounce_seconds == 10
    from bot.settings import describe

    text = describe(settings)
    assert SECRET not in text and "[webhooks]" in text and "**** (set)" in text


def test_the_deliveries_table_remembers_ids_for_a_day(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    with Store.open(tmp_path / "s.sqlite3") as store:
        assert store.note_delivery("d1", "check_run", now=now - timedelta(days=2))
        assert not store.note_delivery("d1", "check_run", now=now)
        assert store.note_delivery("d2", "status", now=now)
        assert store.forget_deliveries(now - timedelta(days=1)) == 1
        assert store.note_delivery("d1", "check_run", now=now)  # forgotten after a day


def test_the_route_refuses_a_chunked_body_over_25_mb_and_marks_a_genuine_one(
    tmp_path: Path,
) -> None:
    from starlette.testclient import TestClient

    from bot.service.http import Monitor, build_app
    from bot.service.webhooks.receiver import Receiver
    from bot.service.webhooks.route import webhook_route

    inbox, scheduled = Inbox(), []
    payload = {
        "action": "completed",
        "check_run": {"head_sha": "e" * 40, "pull_requests": [{"number": 7430}]},
        "repository": {"full_name": REPO},
    }
    with Store.open(tmp_path / "s.sqlite3") as store:
        receiver = Receiver(
            secrets=[SECRET], repos=[REPO], inbox=inbox,
            note_delivery=lambda d, e, now: store.note_delivery(d, e, now=now),
            on_first_mark=lambda: scheduled.append(1), clock=lambda: datetime.now(UTC),
        )  # fmt: skip
        monitor = Monitor(state_path=str(tmp_path / "s.sqlite3"), interval_s=300)
        client = TestClient(build_app(monitor, extra_routes=[webhook_route(receiver)]))

        def chunks() -> Iterator[bytes]:  # no Content-Length: the route counts as it reads
            for _ in range(26):
                yield b" " * (1024 * 1024)

        headers = {"X-GitHub-Event": "check_run", "X-GitHub-Delivery": "d-1"}
        big = client.post("/webhook", content=chunks(), headers=headers)
        body = json.dumps(payload).encode()
        signed = {**headers, "X-Hub-Signature-256": sign(body, SECRET)}
        ok = client.post("/webhook", content=body, headers=signed)
        again = client.post("/webhook", content=body, headers=signed)
    assert big.status_code == 413 and "content-length" not in big.request.headers
    assert (ok.status_code, ok.json()) == (202, {"outcome": "marked"})
    assert (again.status_code, again.json()) == (202, {"outcome": "repeated"})
    assert scheduled == [1] and inbox.take() == {REPO: [7430]}
    assert receiver.counts == {
        ("check_run", "too-large"): 1, ("check_run", "marked"): 1, ("check_run", "repeated"): 1
    }  # fmt: skip


@pytest.mark.parametrize("number", [-1, 0, 10**30, True, "7"])
def test_a_pull_request_number_github_never_sends_is_malformed(number: object) -> None:
    """Found by an adversarial review: a signed delivery naming PR -1 or 10**30 was marked, and
    its refresh then failed for every pull request of the same debounce batch."""
    check = real("check_run_completed.payload.json")
    check["check_run"]["pull_requests"] = [{"number": number}]
    assert read_event("check_run", check, repos=REPOS).outcome == "malformed"
    pull = {"action": "opened", "repository": {"full_name": HELLO}, "number": number}
    assert read_event("pull_request", pull, repos=REPOS).outcome == "malformed"


def test_deliveries_waiting_on_the_state_leave_the_page_its_thread(tmp_path: Path) -> None:
    """While a cycle holds the state's write lock, deliveries wait for it in their threads;
    in the server's shared pool (40 threads) 100 deliveries a second took them all, and the
    page's render waited behind them (benchmarks/server.py). They have a pool of their own."""
    import asyncio

    import httpx

    from bot.service.http import Monitor, build_app
    from bot.service.webhooks.receiver import Receiver
    from bot.service.webhooks.route import webhook_route

    payload = {
        "action": "completed",
        "check_run": {"head_sha": "e" * 40, "pull_requests": [{"number": 7430}]},
        "repository": {"full_name": REPO},
    }
    body = json.dumps(payload).encode()
    with Store.open(tmp_path / "s.sqlite3") as store:
        receiver = Receiver(
            secrets=[SECRET], repos=[REPO], inbox=Inbox(),
            note_delivery=lambda d, e, now: store.note_delivery(d, e, now=now),
            on_first_mark=lambda: None, clock=lambda: datetime.now(UTC),
        )  # fmt: skip
        monitor = Monitor(state_path=str(tmp_path / "s.sqlite3"), interval_s=300)
        app = build_app(monitor, extra_routes=[webhook_route(receiver)])

        def delivery(index: int) -> dict[str, str]:
            return {"X-GitHub-Event": "check_run", "X-GitHub-Delivery": f"d-{index}",
                    "X-Hub-Signature-256": sign(body, SECRET)}  # fmt: skip

        async def load() -> tuple[httpx.Response, list[httpx.Response]]:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
                with store._serial:  # a cycle's write: every delivery's write waits for it
                    posts = [
                        asyncio.create_task(client.post("/webhook", content=body,
                                                        headers=delivery(i)))
                        for i in range(50)
                    ]  # fmt: skip
                    for _ in range(20):  # every delivery reaches its thread (or the wait)
                        await asyncio.sleep(0.01)
                    page = await asyncio.wait_for(client.get("/"), timeout=60)
                return page, list(await asyncio.gather(*posts))

        page, answers = asyncio.run(load())
    assert page.status_code == 200 and "<html" in page.text
    assert [a.status_code for a in answers] == [202] * 50  # each written once the lock was free
