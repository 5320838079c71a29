"""The sandbox's webhooks: real, signed deliveries to a URL when the World changes, as GitHub.

Payloads follow GitHub's shapes (octokit/webhooks payload examples): `check_run` (created,
completed), `status`, `pull_request` (opened, synchronize, closed, ready_for_review,
converted_to_draft), `merge_group` (checks_requested, destroyed). Headers: X-GitHub-Event,
X-GitHub-Delivery (a fresh UUID), X-Hub-Signature-256 (HMAC-SHA256 of the body), User-Agent
GitHub-Hookshot/...

Deliveries leave from one background thread, in order, so a change never waits on the
receiver (GitHub also delivers asynchronously). Every delivery is recorded in `sent`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from bot_sandbox.world import (
    API,
    CheckRunRec,
    PullRec,
    QueueEntryRec,
    StatusRec,
    World,
    check_run_json,
    commit_json,
    integration_json,
    iso,
    pull_json,
    repo_json,
    status_json,
    user_json,
)

log = logging.getLogger(__name__)

JSON = dict[str, Any]
SENDER_LOGIN = "octocat"


@dataclass(frozen=True)
class Delivery:
    """One delivery: what was sent, when (time.time()), and what the receiver answered."""

    delivery_id: str
    event: str
    action: str
    repo: str
    numbers: tuple[int, ...]
    sha: str | None
    queued_at: float
    sent_at: float
    status: int | None
    body_size: int


def sign(body: bytes, secret: str) -> str:
    """The X-Hub-Signature-256 header value for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_run_payload(world: World, action: str, run: CheckRunRec) -> JSON:
    """A `check_run` event payload."""
    rec = world.repo(run.repo)
    data = check_run_json(world, run)
    suite = rec.suites.get(run.suite_id)
    data["check_suite"] = {
        "id": run.suite_id,
        "head_branch": None,
        "head_sha": run.head_sha,
        "status": run.status,
        "conclusion": run.conclusion,
        "url": f"{API}/repos/{run.repo}/check-suites/{run.suite_id}",
        "before": None,
        "after": run.head_sha,
        "pull_requests": data["pull_requests"],
        "app": integration_json(run.app_slug),
        "created_at": iso(suite.created_at) if suite else None,
        "updated_at": iso(world.now()),
    }
    return {
        "action": action,
        "check_run": data,
        "repository": repo_json(rec, world=world),
        "sender": user_json(world.user(SENDER_LOGIN)),
    }


def status_payload(world: World, repo: str, status: StatusRec) -> JSON:
    """A `status` event payload (it names the commit, never a pull request)."""
    rec = world.repo(repo)
    data = status_json(world, rec, status, with_creator=False)
    commit = rec.commits.get(status.sha)
    return {
        "id": status.id,
        "sha": status.sha,
        "name": repo,
        "target_url": status.target_url,
        "avatar_url": data["avatar_url"],
        "context": status.context,
        "description": status.description,
        "state": status.state,
        "commit": commit_json(rec, commit) if commit else {"sha": status.sha},
        "branches": [],
        "created_at": data["created_at"],
        "updated_at": data["updated_at"],
        "repository": repo_json(rec, world=world),
        "sender": user_json(world.user(status.creator)),
    }


def pull_request_payload(world: World, action: str, repo: str, pull: PullRec) -> JSON:
    """A `pull_request` event payload."""
    rec = world.repo(repo)
    data: JSON = {
        "action": action,
        "number": pull.number,
        "pull_request": pull_json(world, rec, pull, full=True),
        "repository": repo_json(rec, world=world),
        "sender": user_json(world.user(pull.author)),
    }
    if action == "synchronize":
        data["before"], data["after"] = "0" * 40, pull.head_sha
    if action == "edited" and pull.base_changed_from is not None:
        data["changes"] = {"base": {"ref": {"from": pull.base_changed_from}, "sha": {"from": ""}}}
    return data


def merge_group_payload(
    world: World, action: str, repo: str, entry: QueueEntryRec, reason: str | None = None
) -> JSON:
    """A `merge_group` event payload (octokit/webhooks' checks_requested example and its
    destroyed schema: `head_sha`, `head_ref`, `base_sha`, `base_ref`, `head_commit`)."""
    rec = world.repo(repo)
    commit = rec.commits.get(entry.head_sha or "")
    person = {"name": commit.author_name, "email": commit.author_email} if commit else {}
    data: JSON = {
        "action": action,
        "merge_group": {
            "head_sha": entry.head_sha,
            "head_ref": entry.head_ref,
            "base_sha": entry.base_sha,
            "base_ref": f"refs/heads/{entry.branch}",
            "head_commit": {
                "id": entry.head_sha,
                "tree_id": hashlib.sha1(f"tree:{entry.head_sha}".encode()).hexdigest(),
                "message": commit.message if commit else "",
                "timestamp": iso(commit.date) if commit else None,
                "author": person,
                "committer": person,
            },
        },
        "repository": repo_json(rec, world=world),
        "sender": user_json(world.user(SENDER_LOGIN)),
    }
    if reason is not None:
        data["reason"] = reason
    return data


def rules_payload(world: World, event: str, action: str, repo: str, record: Any) -> JSON:
    """A `branch_protection_rule` or `repository_ruleset` event payload (the parts read)."""
    rec = world.repo(repo)
    key = "rule" if event == "branch_protection_rule" else "repository_ruleset"
    name = getattr(record, "name", rec.default_branch)
    return {
        "action": action,
        key: {"id": getattr(record, "id", rec.id), "name": name},
        "repository": repo_json(rec, world=world),
        "sender": user_json(world.user(rec.owner)),
    }


def installation_payload(
    world: World,
    event: str,
    action: str,
    installation_id: int,
    *,
    added: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
) -> JSON:
    """An `installation` (created, deleted, suspend, unsuspend) or `installation_repositories`
    (added, removed) event payload, as GitHub sends an App."""
    app = world.app_by_installation(installation_id)
    account = (app.account or app.repos[0].split("/")[0]) if app and app.repos else "gone"
    data: JSON = {
        "action": action,
        "installation": {
            "id": installation_id,
            "account": {"login": account, "id": 1, "type": "Organization"},
            "app_id": app.app_id if app else 0,
            "suspended_at": iso(app.suspended_at) if app else None,
        },
        "sender": user_json(world.user(SENDER_LOGIN)),
    }

    def listed(names: tuple[str, ...]) -> list[JSON]:
        return [{"full_name": n, "name": n.split("/")[1], "private": False} for n in names]

    if event == "installation_repositories":
        data["repository_selection"] = "selected"
        data["repositories_added"], data["repositories_removed"] = listed(added), listed(removed)
    else:
        data["repositories"] = listed(app.repos if app else ())
    return data


class WebhookSender:
    """Listens to a World and delivers signed webhooks to `url` from a background thread."""

    def __init__(self, url: str, secret: str, *, timeout_s: float = 10.0) -> None:
        """Deliver to `url`, signing with `secret`; call `attach(world)` to start."""
        self.url = url
        self.secret = secret
        self.sent: list[Delivery] = []
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._client = httpx.Client(timeout=timeout_s, trust_env=False)
        self._thread = threading.Thread(target=self._deliver_all, name="webhooks", daemon=True)
        self._world: World | None = None
        self._lock = threading.Lock()

    def attach(self, world: World) -> WebhookSender:
        """Start delivering the world's changes."""
        with world.lock:
            world.listeners.append(self)
        self._world = world
        self._thread.start()
        return self

    def __call__(self, world: World, event: str, action: str, repo: str, record: Any) -> None:
        """A World listener: build the payload now (under the world's lock), send it later."""
        if event == "check_run":
            payload = check_run_payload(world, action, record)
            numbers = tuple(p["number"] for p in payload["check_run"]["pull_requests"])
            sha = record.head_sha
        elif event == "status":
            payload, numbers, sha = status_payload(world, repo, record), (), record.sha
        elif event == "pull_request":
            payload = pull_request_payload(world, action, repo, record)
            numbers, sha = (record.number,), record.head_sha
        elif event == "merge_group":
            entry, reason = record if isinstance(record, tuple) else (record, None)
            payload = merge_group_payload(world, action, repo, entry, reason)
            numbers, sha = (entry.number,), entry.head_sha or ""
        elif event in ("branch_protection_rule", "repository_ruleset"):
            payload, numbers, sha = rules_payload(world, event, action, repo, record), (), ""
        else:
            return
        body = json.dumps(payload).encode()
        self._queue.put((event, action, repo, numbers, sha, body, time.time()))

    def _deliver_all(self) -> None:
        while (item := self._queue.get()) is not None:
            event, action, repo, numbers, sha, body, queued = item
            delivery_id = str(uuid.uuid4())
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "GitHub-Hookshot/sandbox",
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": delivery_id,
                "X-GitHub-Hook-ID": "1",
                "X-Hub-Signature-256": sign(body, self.secret),
            }
            sent = time.time()
            status: int | None
            try:
                status = self._client.post(self.url, content=body, headers=headers).status_code
            except httpx.HTTPError as exc:
                log.debug("webhook delivery %s to %s failed: %s", delivery_id, self.url, exc)
                status = None  # GitHub does not redeliver a failed delivery either
            with self._lock:
                self.sent.append(
                    Delivery(
                        delivery_id, event, action, repo, numbers, sha, queued, sent, status,
                        len(body),
                    )
                )  # fmt: skip
            self._queue.task_done()
        self._queue.task_done()

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued delivery was sent; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        """Stop listening, send what is queued, stop the thread."""
        if self._world is not None:
            with self._world.lock:
                if self in self._world.listeners:
                    self._world.listeners.remove(self)
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)
        self._client.close()
