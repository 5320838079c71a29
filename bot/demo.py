"""`ci-status-bot demo`: real cycles of the bot against the loopback sandbox, offline."""

from __future__ import annotations

import json
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from pydantic import SecretStr

from bot.app import Clients, build_clients, hold_state, make_cycle, now_utc
from bot.core.model import MARKER
from bot.core.summary import Summary
from bot.service.http import Monitor, serve
from bot.service.scheduler import run_service
from bot.service.webhooks.service import Webhooks
from bot.service.webhooks.wiring import Wiring
from bot.settings import Settings
from bot.state.ports import TriageRows
from bot.state.store import Store
from bot.triage.formats import table
from bot.triage.keeper import stored_entries
from bot.triage.rows import ordered
from bot_sandbox import Sandbox, World
from bot_sandbox.seeds import seed_demo
from bot_sandbox.webhook_sender import WebhookSender

DEMO_REPO = "octo/omni"
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
WEBHOOK_WAIT_S = 30.0  # the demo gives up on the webhook's edit after this long
COMMENT_PATH = re.compile(r"/repos/[^/]+/[^/]+/issues/(?:\d+/comments|comments/\d+)")


def demo_settings(sandbox: Sandbox, state_path: Path) -> Settings:
    """Settings that point every client at the sandbox; no file and no environment are read."""
    return Settings.model_validate(
        {
            "github": {"api_url": sandbox.github_url, "token": "sandbox-token"},
            "readthedocs": {"api_url": sandbox.rtd_url, "business_api_url": sandbox.rtd_url},
            "codecov": {"api_url": sandbox.codecov_url},
            "azure_pipelines": {"api_url": sandbox.azure_url},
            "state": {"path": str(state_path)},
            "repos": [{"name": DEMO_REPO}],
        }
    )


def _print_comments(
    world: World, out: Callable[[str], None], login: str, *, numbers: list[int]
) -> None:
    for number in numbers:
        for comment in world.comments(DEMO_REPO, number):
            if comment["user"]["login"] == login and comment["body"].startswith(MARKER):
                out(f"--- comment {comment['id']} on {DEMO_REPO}#{number} ---")
                out(comment["body"])


def _rerun_passes(world: World, seeded: dict[str, Any]) -> None:
    """In the sandbox: the failing `tests (3.12)` of #7431 is re-run and passes."""
    sha = seeded["pulls"][7431]["head_sha"]
    now = now_utc()
    world.add_check_run(
        DEMO_REPO, sha, name="tests (3.12)", app_slug="github-actions", workflow="tests",
        conclusion="success", started_at=now, completed_at=now, new_suite=True,
    )  # fmt: skip


def run_demo(*, out: Callable[[str], None] = print, serve: bool = False) -> int:
    """Seed the sandbox, run three real cycles of the bot, print what it posted; with
    `serve`, then keep the sandbox up and run the service (`run`, its page) until Ctrl-C."""
    world = World()
    seeded = seed_demo(world, now=now_utc() - timedelta(minutes=1))
    with Sandbox(world) as sandbox, tempfile.TemporaryDirectory() as tmp:
        settings = demo_settings(sandbox, Path(tmp) / "state.sqlite3")
        clients = build_clients(settings, list(settings.repos))
        out(f"sandbox GitHub at {sandbox.github_url}, Read the Docs at {sandbox.rtd_url}")
        first, second, third = _three_cycles(
            world, seeded, settings=settings, clients=clients, out=out
        )
        webhook_ok = run_webhook_step(world, settings, clients, third, out=out)
        with Store.open(settings.state.path) as store:  # the view after the webhook's refresh
            triage_view = _triage_view(store, settings)
        clients.close()
        out(_requests_line(sandbox))
        out(triage_view)
        failed = {**first.failed, **second.failed, **third.failed}
        if serve and not failed and webhook_ok:
            return serve_demo(sandbox, settings, out=out)
    return 1 if failed or not webhook_ok else 0


def _three_cycles(
    world: World,
    seeded: dict[str, Any],
    *,
    settings: Settings,
    clients: Clients,
    out: Callable[[str], None],
) -> tuple[Summary, Summary, Summary]:
    """Cycle 1 posts, cycle 2 finds nothing changed, cycle 3 follows a re-run that passed."""
    repos = list(settings.repos)
    with Store.open(settings.state.path) as store:
        cycle = make_cycle(settings, clients, store, dry_run=False)
        first = cycle.run(repos)
        out(f"[cycle 1] {first.line()}")
        _print_comments(world, out, clients.login, numbers=sorted(world.repo(DEMO_REPO).pulls))
        second = cycle.run(repos)
        out(f"[cycle 2, nothing changed] {second.line()}")
        _rerun_passes(world, seeded)
        out("[sandbox] the failing `tests (3.12)` of #7431 was re-run and passed")
        third = cycle.run(repos)
        out(f"[cycle 3] {third.line()}")
        _print_comments(world, out, clients.login, numbers=[7431])
        out("JSON verdicts: " + json.dumps(third.verdicts, sort_keys=True))
    return first, second, third


def _requests_line(sandbox: Sandbox) -> str:
    """How many requests reached the sandbox, and that the only writes were issue comments."""
    writes = [
        r for r in sandbox.requests if r.method in WRITE_METHODS and r.graphql_operation is None
    ]
    others = [r for r in writes if not COMMENT_PATH.fullmatch(r.path)]
    return (
        f"requests to the sandbox: {len(sandbox.requests)}; writes: {len(writes)}, "
        f"of which {len(others)} were not issue comments. "
        "This bot reads CI state and retriggers nothing."
    )


def serve_demo(sandbox: Sandbox, settings: Settings, *, out: Callable[[str], None]) -> int:
    """`ci-status-bot run` against the demo's sandbox and state until SIGINT/SIGTERM."""
    port = _free_port()
    served = settings.model_copy(
        update={
            "server": settings.server.model_copy(update={"host": "127.0.0.1", "port": port}),
            "schedule": settings.schedule.model_copy(
                update={"interval_seconds": 60, "jitter_seconds": 0}
            ),
        }
    )
    out(
        f"[serve] `ci-status-bot run` against the sandbox: the triage page is at "
        f"http://127.0.0.1:{port}/ (and /livez, /readyz, /metrics); a cycle every 60 s; "
        f"the sandbox's GitHub stays at {sandbox.github_url}. Press Ctrl-C to stop."
    )
    lock = hold_state(served)
    try:
        return run_service(served, list(served.repos))
    finally:
        if lock is not None:
            lock.release()


def _triage_view(store: TriageRows, settings: Settings) -> str:
    """The triage table of the demo's last cycle, and where `run` would serve it as a page."""
    view = ordered(stored_entries(store))
    where = f"http://{settings.server.host}:{settings.server.port}/"
    return (
        f"[triage] `ci-status-bot report`:\n{table(view, now=now_utc())}"
        f"`ci-status-bot run` serves this view as a page at {where} "
        "(with /livez, /readyz and /metrics) once it is configured; "
        "`ci-status-bot demo --serve` serves the demo's now."
    )


def run_webhook_step(
    world: World, settings: Settings, clients: Clients, last: Summary, *, out: Callable[[str], None]
) -> bool:
    """The webhook fast path: a CI change in the sandbox reaches the bot as a signed delivery."""
    port, secret, number = _free_port(), "demo-webhook-secret", 7430
    service = _WebhookService(settings, clients, last, port=port, secret=secret)
    sender = WebhookSender(f"http://127.0.0.1:{port}/webhook", secret).attach(world)
    before = _own_body(world, clients.login, number)
    try:
        started = time.monotonic()
        _linkcheck_fails(world, number)
        out(
            f"[sandbox] a new check run `linkcheck` failed on #{number}; the sandbox sends a "
            f"signed check_run delivery to http://127.0.0.1:{port}/webhook (debounce 2 s)"
        )
        took = _wait_for_edit(world, clients.login, number, before, started=started)
    finally:
        sender.close()
        service.close()
    if took is None:
        out(f"[webhook] the comment did not change within {WEBHOOK_WAIT_S:.0f} s")
        return False
    answered = ", ".join(f"{d.event} {d.status}" for d in sender.sent)
    out(f"[webhook] deliveries answered: {answered}; comment on #{number} edited {took:.1f} s "
        "after the event (no polling cycle ran):")  # fmt: skip
    out(_own_body(world, clients.login, number))
    return True


class _WebhookService:
    """The webhook receiver, the page server and the refresh worker, wired as `run` wires them."""

    def __init__(
        self, settings: Settings, clients: Clients, last: Summary, *, port: int, secret: str
    ) -> None:
        """Start receiving on `port`, signed with `secret`, after the demo's `last` cycle."""
        hooked = settings.model_copy(
            update={
                "server": settings.server.model_copy(update={"port": port}),
                "webhooks": settings.webhooks.model_copy(
                    update={"secrets": [SecretStr(secret)], "debounce_seconds": 2.0}
                ),
            }
        )
        repos = list(settings.repos)
        self.scheduler = BackgroundScheduler(
            timezone=UTC, executors={"default": ThreadPoolExecutor(1)}
        )
        self.stop = threading.Event()
        self.store = Store.open(settings.state.path)
        parts = Wiring(
            scheduler=self.scheduler, clients=clients, make_cycle=make_cycle, stop=self.stop,
            state=lambda: self.store,
        )  # fmt: skip
        self.hooks = Webhooks(hooked, repos, parts).start()
        monitor = Monitor(state_path=settings.state.path, interval_s=300, repos=[DEMO_REPO])
        self.http = serve(monitor, host="127.0.0.1", port=port, extra_routes=self.hooks.routes())
        self.hooks.after_cycle(last, repos)
        self.scheduler.start()

    def close(self) -> None:
        """Stop receiving, let a refresh in flight finish, release everything."""
        self.stop.set()
        if self.http is not None:
            self.http.stop()
        self.hooks.stop_receiving()
        self.scheduler.shutdown(wait=True)
        self.store.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _linkcheck_fails(world: World, number: int) -> None:
    """In the sandbox: a new check run `linkcheck` fails on the pull request's head."""
    now = now_utc()
    world.add_check_run(
        DEMO_REPO, world.pull(DEMO_REPO, number).head_sha, name="linkcheck",
        app_slug="github-actions", workflow="docs", conclusion="failure",
        started_at=now, completed_at=now,
    )  # fmt: skip


def _wait_for_edit(
    world: World, login: str, number: int, before: str, *, started: float
) -> float | None:
    """Seconds from `started` until the bot's comment changed, or None after WEBHOOK_WAIT_S."""
    while _own_body(world, login, number) == before:
        if time.monotonic() - started > WEBHOOK_WAIT_S:
            return None
        time.sleep(0.05)
    return time.monotonic() - started


def _own_body(world: World, login: str, number: int) -> str:
    for comment in world.comments(DEMO_REPO, number):
        if comment["user"]["login"] == login and comment["body"].startswith(MARKER):
            return str(comment["body"])
    return ""
