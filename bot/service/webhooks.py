"""GitHub webhooks: verify a delivery, turn its event into marked pull requests, refresh them.

The pure part (signature check, event -> marks) takes data and returns data; `Inbox` holds
the marks until the debounced refresh takes them; `webhook_route` is the thin HTTP edge
(`POST /webhook`); `refresh` re-reads the marked pull requests in one batched query and hands
them to the same Cycle code a polling cycle uses (plan, pacing, budget, publish); `Webhooks`
wires the receiver (mounted on the service's HTTP app) and the refresh job onto the service's
single worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.app import Cycle
from bot.core.merge_queue import queued_number
from bot.core.model import PullSnapshot
from bot.core.summary import Summary
from bot.github.errors import RateLimited
from bot.github.parse import PullFailure
from bot.service.replicas import Replicas
from bot.settings import RepoSettings, Settings
from bot.state.ports import MarkRow, StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)

MARKS_POLL_S = 0.25  # several replicas: how often each takes the marks of its repositories
MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
LARGE_BODY_BYTES = 1024 * 1024  # bodies over 1 MB (or of unknown length) ...
MAX_LARGE_BODIES = 2  # ... are read at most two at a time (the others get 503 at once)
# Webhook refreshes spend at most WEBHOOK_POINTS_PER_HOUR GitHub GraphQL points an hour (a
# fifth of a token's 5,000), in bursts of at most WEBHOOK_POINTS_BURST; past it, marks wait
# for the next cycle. Refreshes start at least MIN_REFRESH_GAP_S apart whatever the debounce.
WEBHOOK_POINTS_PER_HOUR = 1000.0
WEBHOOK_POINTS_BURST = 250.0
MIN_REFRESH_GAP_S = 2.0
# a repository's rules changed: what its base branches require is read again
RULE_EVENTS = frozenset({"branch_protection_rule", "repository_ruleset"})
EVENTS = frozenset(
    {"pull_request", "check_run", "check_suite", "status", "merge_group", *RULE_EVENTS}
)
# an App's installations changed (many installations: the repositories are found again)
INSTALLATION_EVENTS = frozenset({"installation", "installation_repositories"})
PULL_ACTIONS = frozenset(
    {
        "opened",
        "reopened",
        "synchronize",
        "ready_for_review",
        "converted_to_draft",
        "labeled",
        "unlabeled",
        "closed",
    }
)
_SHA_LENGTH = 40


# -- pure: signature and events ------------------------------------------------------------


def signature(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body` under `secret`."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify_signature(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` is the HMAC-SHA256 of `body` under one of `secrets` (constant time)."""
    if not header or not header.startswith("sha256="):
        return False
    given = header.encode("ascii", "replace")
    matched = False
    for secret in secrets:
        if secret:  # every secret is compared, so timing does not tell which one matched
            matched |= hmac.compare_digest(given, signature(body, secret).encode("ascii"))
    return matched


@dataclass(frozen=True, slots=True)
class Mark:
    """A pull request to refresh: by number, or by head sha (a status names only the sha)."""

    repo: str
    number: int | None = None
    sha: str | None = None
    closed: bool = False
    head_known: bool = False  # a pull_request event: `sha` is the pull request's head now


@dataclass(frozen=True, slots=True)
class Reading:
    """What one delivery means: an outcome word and the marks it makes."""

    outcome: str
    marks: tuple[Mark, ...] = ()
    rules_of: str | None = None  # the repository whose required checks are to be read again


def read_event(event: str, payload: Any, *, repos: Mapping[str, str]) -> Reading:
    """Turn one event payload into marks; `repos` maps lower-case names to configured ones."""
    if event not in EVENTS:
        return Reading("ignored-event")
    if not isinstance(payload, dict):
        return Reading("malformed")
    full_name = _get(payload, "repository", "full_name")
    if not isinstance(full_name, str):
        return Reading("malformed")
    repo = repos.get(full_name.lower())
    if repo is None:
        return Reading("unconfigured-repository")
    if event in RULE_EVENTS:
        return Reading("rules-changed", rules_of=repo)
    if event == "pull_request":
        return _pull_request(repo, payload)
    if event in ("check_run", "check_suite"):
        return _check(repo, payload.get(event))
    if event == "merge_group":
        return _merge_group(repo, payload.get("merge_group"))
    sha = payload.get("sha")
    if not _is_sha(sha):
        return Reading("malformed")
    branches = payload.get("branches")
    names = [_get(b, "name") for b in branches] if isinstance(branches, list) else []
    queued = sorted({n for name in names if (n := queued_number(name)) is not None})
    return Reading("marked", (Mark(repo, sha=sha), *(Mark(repo, n) for n in queued)))


def _merge_group(repo: str, group: Any) -> Reading:
    """A merge group (checks requested, destroyed): the pull request its branch is named after
    (`gh-readonly-queue/<base>/pr-<N>-<sha>`), whose merge-queue entry it is."""
    if not isinstance(group, dict) or not _is_sha(group.get("head_sha")):
        return Reading("malformed")
    number = queued_number(group.get("head_ref"))
    if number is None:
        return Reading("malformed")
    return Reading("marked", (Mark(repo, number),))


def _pull_request(repo: str, payload: dict[str, Any]) -> Reading:
    action = payload.get("action")
    base_changed = action == "edited" and isinstance(_get(payload, "changes", "base"), dict)
    if action not in PULL_ACTIONS and not base_changed:  # a new base: new required checks
        return Reading("ignored-action")
    number = payload.get("number", _get(payload, "pull_request", "number"))
    sha = _get(payload, "pull_request", "head", "sha")
    if not _is_number(number):
        return Reading("malformed")
    mark = Mark(
        repo,
        number,
        sha if _is_sha(sha) else None,
        closed=action == "closed" or _get(payload, "pull_request", "state") == "closed",
        head_known=_is_sha(sha),
    )
    return Reading("marked", (mark,))


def _check(repo: str, check: Any) -> Reading:
    """A check_run or check_suite: its pull requests, or its head sha (forks list none)."""
    if not isinstance(check, dict):
        return Reading("malformed")
    sha = check.get("head_sha")
    pulls = check.get("pull_requests") or _get(check, "check_suite", "pull_requests") or []
    if not isinstance(pulls, list) or not all(
        isinstance(p, dict) and _is_number(p.get("number")) for p in pulls
    ):
        return Reading("malformed")
    numbers = sorted({p["number"] for p in pulls if _same_repo(p, repo)})
    # a check of a merge-group commit lists no pull request: its branch names the queued one
    branch = check.get("head_branch") or _get(check, "check_suite", "head_branch")
    queued = queued_number(branch)
    if queued is not None and not numbers:
        numbers = [queued]
    if numbers:
        return Reading("marked", tuple(Mark(repo, n) for n in numbers))
    if not _is_sha(sha):
        return Reading("malformed")
    return Reading("marked", (Mark(repo, sha=sha),))


def _is_number(value: Any) -> bool:
    """A pull request number as GitHub sends it: a positive 32-bit integer (GraphQL's Int)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


def _same_repo(pull: dict[str, Any], repo: str) -> bool:
    """A listed pull request belongs to `repo` (its base) unless its URL says otherwise."""
    url = _get(pull, "base", "repo", "url") or pull.get("url")
    return not isinstance(url, str) or f"/repos/{repo.lower()}" in url.lower()


def _is_sha(value: Any) -> bool:
    return isinstance(value, str) and len(value) == _SHA_LENGTH


def _get(node: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


# -- the inbox of marks ----------------------------------------------------------------------


class MarkSink(Protocol):
    """Where the receiver puts a delivery's marks (the Inbox, or the shared state)."""

    def add(self, marks: Iterable[Mark], *, now: datetime) -> bool:
        """Add marks; True when a refresh is to be scheduled."""


class Inbox:
    """Marked pull requests waiting for the debounced refresh, and the open heads known."""

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._numbers: dict[tuple[str, int], datetime] = {}
        self._shas: dict[tuple[str, str], datetime] = {}
        self._heads: dict[str, dict[int, str]] = {}
        self._closed: dict[tuple[str, int], datetime] = {}  # closed by an event, and when

    def add(self, marks: Iterable[Mark], *, now: datetime) -> bool:
        """Add marks; True when the inbox was empty before (a refresh is to be scheduled)."""
        with self._lock:
            was_empty = not self._numbers and not self._shas
            for mark in marks:
                heads = self._heads.setdefault(mark.repo, {})
                if mark.number is not None and mark.closed:
                    heads.pop(mark.number, None)  # a closed PR's comment is left as it is
                    self._numbers.pop((mark.repo, mark.number), None)
                    self._closed[(mark.repo, mark.number)] = now
                    continue
                if mark.number is not None:
                    if mark.head_known and mark.sha is not None:  # opened, reopened, ...
                        heads[mark.number] = mark.sha
                        self._closed.pop((mark.repo, mark.number), None)
                    self._numbers.setdefault((mark.repo, mark.number), now)
                elif mark.sha is not None:
                    self._shas.setdefault((mark.repo, mark.sha), now)
            return was_empty and bool(self._numbers or self._shas)

    def take(self) -> dict[str, list[int]]:
        """Every marked pull request by repository (shas resolved to open heads), emptied."""
        with self._lock:
            found: dict[str, set[int]] = {}
            for repo, number in self._numbers:
                found.setdefault(repo, set()).add(number)
            for repo, sha in self._shas:
                heads = self._heads.get(repo, {})
                found.setdefault(repo, set()).update(n for n, h in heads.items() if h == sha)
            self._numbers.clear()
            self._shas.clear()
            return {repo: sorted(numbers) for repo, numbers in found.items() if numbers}

    def pending(self) -> int:
        """How many marks wait."""
        with self._lock:
            return len(self._numbers) + len(self._shas)

    def learn_heads(
        self,
        heads: Mapping[str, str],
        *,
        complete: Iterable[str] = (),
        read_at: datetime | None = None,
    ) -> None:
        """Record open heads ("owner/name#N" -> sha); `complete` repos are replaced whole.

        A pull request closed by an event stays closed unless this read began after the
        close (`read_at`): a read that started earlier does not reopen it.
        """
        by_repo: dict[str, dict[int, str]] = {}
        with self._lock:
            for label, sha in heads.items():
                repo, _, text = label.rpartition("#")
                number = int(text)
                closed_at = self._closed.get((repo, number))
                if closed_at is not None:
                    if read_at is None or read_at <= closed_at:
                        continue
                    del self._closed[(repo, number)]
                by_repo.setdefault(repo, {})[number] = sha
            for repo in complete:
                self._heads[repo] = {}
            for repo, found in by_repo.items():
                self._heads.setdefault(repo, {}).update(found)

    def forget_head(self, repo: str, number: int) -> None:
        """The pull request is no longer open."""
        with self._lock:
            self._heads.get(repo, {}).pop(number, None)


# -- the HTTP edge ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """The HTTP answer to one delivery."""

    status: int
    outcome: str


class Receiver:
    """Handles one delivery: verify, de-duplicate, mark; never talks to GitHub."""

    def __init__(
        self,
        *,
        secrets: Sequence[str],
        repos: Iterable[str],
        inbox: MarkSink,
        note_delivery: Callable[[str, str, datetime], bool],
        on_first_mark: Callable[[], None],
        clock: Callable[[], datetime],
        on_rules_changed: Callable[[str], object] = lambda repo: None,
        on_installation: Callable[[str, Any], str] | None = None,
    ) -> None:
        """`note_delivery(id, event, now)` is False for a repeat; `on_first_mark` schedules;
        `on_rules_changed(repo)` drops what is known to be required there;
        `on_installation(event, payload)` (many installations) takes an installation event
        and says the outcome."""
        self.on_installation = on_installation
        self.secrets = tuple(secrets)
        self.repos = {name.lower(): name for name in repos}
        self.inbox = inbox
        self.note_delivery = note_delivery
        self.on_first_mark = on_first_mark
        self.on_rules_changed = on_rules_changed
        self.clock = clock
        self.counts: Counter[tuple[str, str]] = Counter()
        self.observers: list[Callable[[str, str], None]] = []  # e.g. the Prometheus counter
        self._lock = threading.Lock()

    def count(self, event: str, outcome: str) -> None:
        """Count one delivery by event and outcome (for metrics and logs).

        The event name comes from an unverified header: only known names are kept as such,
        so a sender cannot grow the metric's label set.
        """
        known = event in EVENTS or event in INSTALLATION_EVENTS or event == "ping"
        name = event if known else "other"
        with self._lock:
            self.counts[(name, outcome)] += 1
        for observe in self.observers:
            observe(name, outcome)

    def handle(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """Verify and interpret one delivery (headers with lower-case names)."""
        event = headers.get("x-github-event", "")
        if len(body) > MAX_BODY_BYTES:
            return self._answer(event, Answer(413, "too-large"))
        if not verify_signature(body, headers.get("x-hub-signature-256"), self.secrets):
            return self._answer(event, Answer(401, "bad-signature"))
        if event == "ping":
            return self._answer(event, Answer(200, "pong"))
        installation = event in INSTALLATION_EVENTS and self.on_installation is not None
        if event not in EVENTS and not installation:
            return self._answer(event, Answer(202, "ignored-event"))
        delivery = headers.get("x-github-delivery", "")
        if not delivery:
            return self._answer(event, Answer(400, "no-delivery-id"))
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            return self._answer(event, Answer(400, "malformed"))
        now = self.clock()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()  # a replay under a new id
        try:
            repeated = not self.note_delivery(delivery, event, now)
            repeated = not self.note_delivery(digest, event, now) or repeated
        except StoreError as exc:
            log.warning("webhook %s refused: the state cannot be used: %s", event, exc)
            return self._answer(event, Answer(503, "state-unusable"))
        if repeated:
            return self._answer(event, Answer(202, "repeated"))
        if installation and self.on_installation is not None:
            return self._answer(event, Answer(202, self.on_installation(event, payload)))
        try:
            reading = read_event(event, payload, repos=self.repos)
        except Exception as exc:  # a shape no rule foresaw is the sender's problem: 400
            log.warning("webhook %s: a body of an unexpected shape (%s)", event, type(exc).__name__)
            reading = Reading("malformed")
        if reading.outcome == "malformed":
            return self._answer(event, Answer(400, "malformed"))
        if reading.rules_of is not None:
            self.on_rules_changed(reading.rules_of)
        if reading.marks and self.inbox.add(reading.marks, now=now):
            self.on_first_mark()
        return self._answer(event, Answer(202, reading.outcome))

    def _answer(self, event: str, answer: Answer) -> Answer:
        self.count(event, answer.outcome)
        log.debug("webhook %s: %d %s", event or "(no event)", answer.status, answer.outcome)
        return answer


def webhook_route(receiver: Receiver, path: str = "/webhook") -> Route:
    """The Starlette route of `POST /webhook`: body capped at 25 MB, answered before any read."""
    large = asyncio.Semaphore(MAX_LARGE_BODIES)

    async def endpoint(request: Request) -> Response:
        event = request.headers.get("x-github-event", "")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return _refused(receiver, event, 413, "too-large")
        if not declared.isdigit() or int(declared) > LARGE_BODY_BYTES:
            if large.locked():  # enough large bodies are being read at once
                return _refused(receiver, event, 503, "busy")
            async with large:
                body = await _read_capped(request)
        else:
            body = await _read_capped(request)
        if body is None:
            return _refused(receiver, event, 413, "too-large")
        headers = {k.lower(): v for k, v in request.headers.items()}
        answer = await run_in_threadpool(receiver.handle, headers, body)
        return JSONResponse({"outcome": answer.outcome}, status_code=answer.status)

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ClientDisconnect:  # dropped by the server's deadline, or gone
            return Response(status_code=400)
        except Exception:
            log.exception("webhook: unexpected error (answered 500, no detail)")
            return JSONResponse({"outcome": "error"}, status_code=500)

    return Route(path, guarded, methods=["POST"])


def _refused(receiver: Receiver, event: str, status: int, outcome: str) -> Response:
    receiver.count(event, outcome)
    return JSONResponse({"outcome": outcome}, status_code=status)


async def _read_capped(request: Request) -> bytes | None:
    """The body, or None as soon as it passes MAX_BODY_BYTES (the rest is never read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


# -- the debounced refresh ---------------------------------------------------------------------


def refresh(
    cycle: Cycle,
    batch: Mapping[str, Sequence[int]],
    repos: Mapping[str, RepoSettings],
    *,
    inbox: Inbox,
) -> Summary:
    """Re-read the marked pull requests (one query per 50), then plan and publish as a cycle."""
    usage = cycle.github.usage
    requests_before, points_before = usage.total, usage.graphql_points
    read_at = cycle.clock()
    pulls: list[tuple[PullSnapshot | PullFailure, RepoSettings]] = []
    for name, numbers in batch.items():
        repo = repos.get(name)
        if repo is None:
            continue
        found = cycle.github.pulls_by_number(name, numbers, now=cycle.clock(), required=cycle.store)
        for number in numbers:
            snapshot = found.get(number)
            if snapshot is None:  # closed or gone: its comment is left as it is
                inbox.forget_head(name, number)
            else:
                pulls.append((snapshot, repo))
    summary = cycle.run_pulls(pulls)
    summary.github_requests = usage.total - requests_before  # the batched read included
    summary.graphql_points = usage.graphql_points - points_before
    inbox.learn_heads(summary.heads, read_at=read_at)
    return summary


# -- the service wiring: receiver, server and refresh job on the cycles' single worker ------


class PointsBucket:
    """A token bucket of GitHub GraphQL points for webhook refreshes (monotonic clock)."""

    def __init__(
        self,
        *,
        per_hour: float = WEBHOOK_POINTS_PER_HOUR,
        burst: float = WEBHOOK_POINTS_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start full."""
        self.per_hour, self.burst, self.clock = per_hour, burst, clock
        self._points = burst
        self._at = clock()

    def available(self) -> float:
        """Points left now (negative after an overdraft: it is paid back first)."""
        now = self.clock()
        self._points = min(self.burst, self._points + (now - self._at) * self.per_hour / 3600)
        self._at = now
        return self._points

    def spend(self, points: float) -> None:
        """Take what a refresh spent."""
        self.available()
        self._points -= points


class SharedMarks:
    """Several replicas: a delivery's marks left in the state for the repository's holder."""

    def __init__(self, state: Callable[[], Store]) -> None:
        """Write through `state`."""
        self.state = state

    def add(self, marks: Iterable[Mark], *, now: datetime) -> bool:
        """Leave the marks; False: the holder's own poll schedules its refresh."""
        rows = [MarkRow(m.repo, m.number, m.sha, m.closed, m.head_known, now) for m in marks]
        self.state().add_marks(rows)
        return False


class Webhooks:
    """The webhook receiver and its debounced refresh job, on the cycles' single worker."""

    def __init__(
        self,
        settings: Settings,
        repos: Sequence[RepoSettings],
        *,
        scheduler: BackgroundScheduler,
        clients: Any,
        make_cycle: Callable[..., Any],
        stop: threading.Event,
        run: Callable[[Callable[[], None]], None] = lambda body: body(),
        state: Callable[[], Store],
        sharing: Replicas | None = None,
    ) -> None:
        """Build the receiver (not yet serving) on the service's state (opened when needed).

        `run(body)` runs a refresh on the service's worker (so a stop never waits for it).
        With several replicas (`sharing`) a delivery's marks go into the state, and each
        replica takes those of the repositories it holds the lease of.
        """
        self.settings, self.repos, self.scheduler = settings, list(repos), scheduler
        self.clients, self.make_cycle, self.stop, self.run = clients, make_cycle, stop, run
        self.debounce_s = settings.webhooks.debounce_seconds
        # told what each refresh wrote and asked, and its store (the service counts it in
        # /metrics and reloads the page's rows)
        self.observers: list[Callable[[Summary, Store], None]] = []
        self.inbox = Inbox()
        self.bucket = PointsBucket()
        self.store = state  # the open state; StoreError while it is unusable
        self.sharing = sharing
        self._last_refresh: float | None = None  # monotonic
        self.receiver = Receiver(
            secrets=[s.get_secret_value() for s in settings.webhooks.secrets],
            repos=[r.name for r in repos],
            inbox=self.inbox if sharing is None else SharedMarks(state),
            note_delivery=lambda delivery, event, now: self.store().note_delivery(
                delivery, event, now=now
            ),
            on_first_mark=lambda: self.schedule(self.debounce_s),
            clock=lambda: datetime.now(UTC),
            on_rules_changed=lambda repo: self.store().forget_required(repo),
        )

    def routes(self) -> list[Route]:
        """The routes to mount on the service's HTTP app (`POST /webhook`)."""
        return [webhook_route(self.receiver)]

    def start(self) -> Webhooks:
        """Log the fast path (the service prunes old delivery ids with the rest of the state)."""
        cfg = self.settings.server
        log.info(
            "webhooks: POST /webhook on %s:%d, refresh %g s after the first mark",
            cfg.host,
            cfg.port,
            self.debounce_s,
        )
        if self.sharing is not None:
            threading.Thread(target=self._take_marks, name="marks", daemon=True).start()
        return self

    def schedule(self, delay_s: float) -> None:
        """Run one refresh on the cycles' worker `delay_s` from now (refreshes kept apart)."""
        if self.stop.is_set():
            return
        if self._last_refresh is not None:
            gap = MIN_REFRESH_GAP_S - (time.monotonic() - self._last_refresh)
            delay_s = max(delay_s, gap)
        when = datetime.now(UTC) + timedelta(seconds=delay_s)
        self.scheduler.add_job(lambda: self.run(self._refresh), "date", run_date=when)

    def after_cycle(self, summary: Summary, repos: Sequence[RepoSettings]) -> None:
        """A full cycle read every open pull request: its heads resolve status events."""
        complete = [r.name for r in repos if r.name not in summary.failed]
        self.inbox.learn_heads(summary.heads, complete=complete)

    def _take_marks(self) -> None:
        """Several replicas: move the marks of the repositories held into the inbox."""
        while not self.stop.wait(MARKS_POLL_S):
            held = self.sharing.held() if self.sharing is not None else []
            try:
                rows = self.store().take_marks(held)
            except StoreError as exc:
                log.debug("could not take the webhook marks: %s", exc)
                continue
            for row in rows:
                mark = Mark(row.repo, row.number, row.sha, row.closed, row.head_known)
                if self.inbox.add([mark], now=row.marked_at):
                    waited = (datetime.now(UTC) - row.marked_at).total_seconds()
                    self.schedule(max(0.0, self.debounce_s - waited))

    def _refresh(self) -> None:
        if self.stop.is_set():
            return
        batch = self.inbox.take()
        if not batch:
            return
        self._last_refresh = time.monotonic()
        if self.bucket.available() <= 0:
            waiting = sum(len(numbers) for numbers in batch.values())
            log.warning(
                "webhook refresh skipped: its share of GitHub's budget (%d GraphQL points an "
                "hour) is spent; %d marked pull requests wait for the next cycle",
                WEBHOOK_POINTS_PER_HOUR, waiting,
            )  # fmt: skip
            return
        try:
            self._refresh_batch(batch)
        except Exception:
            if self.stop.is_set():  # a store closed under a refresh that outlived the stop
                return
            log.exception("the webhook refresh failed; the next cycle covers it")

    def _refresh_batch(self, batch: Mapping[str, Sequence[int]]) -> None:
        store = self.store()
        by_name = {r.name: r for r in self.repos}
        leases = None if self.sharing is None else self.sharing.leases
        cycle = self.make_cycle(self.settings, self.clients, store, dry_run=False, leases=leases)
        cycle.should_stop = self.stop.is_set
        remark = [Mark(repo, n) for repo, numbers in batch.items() for n in numbers]
        try:
            summary = refresh(cycle, batch, by_name, inbox=self.inbox)
        except RateLimited as exc:
            self._hold(remark, exc.wait_s, f"GitHub answered with a rate limit: {exc}")
            return
        self.bucket.spend(summary.graphql_points)
        if self.stop.is_set():
            return
        for observe in self.observers:
            observe(summary, store)
        log.info(
            "webhook refresh: %s",
            summary.line().removeprefix("cycle: "),
            extra={"event": "refresh"},
        )
        if summary.rate_limited_s or summary.deferred:
            wait = summary.rate_limited_s or 60.0
            self._hold(remark, wait, "writes deferred (rate limit or write budget)")

    def _hold(self, marks: Sequence[Any], wait_s: float, why: str) -> None:
        """Put the marks back and refresh them once GitHub's limit allows."""
        self.inbox.add(marks, now=datetime.now(UTC))
        log.warning("webhook refresh held %.0f s: %s", wait_s, why)
        self.schedule(wait_s)

    def stop_receiving(self) -> None:
        """Log what is left (pending marks are left to the next start's first cycle)."""
        pending = self.inbox.pending()
        if pending:
            log.info("stopping with %d webhook marks pending; the next cycle covers them", pending)
        counts = ", ".join(f"{e} {o}: {n}" for (e, o), n in sorted(self.receiver.counts.items()))
        log.info("webhook deliveries by event and outcome: %s", counts or "none")


def attach_webhooks(
    settings: Settings,
    repos: Sequence[RepoSettings],
    *,
    scheduler: BackgroundScheduler,
    clients: Any,
    make_cycle: Callable[..., Any],
    stop: threading.Event,
    run: Callable[[Callable[[], None]], None] = lambda body: body(),
    state: Callable[[], Store],
    sharing: Replicas | None = None,
) -> Webhooks | None:
    """Start the webhook fast path when secrets are configured and the server is on."""
    if not settings.webhooks.enabled:
        return None
    if settings.server.port == 0:
        log.warning("webhooks.secrets is set but server.port is 0: webhooks are off")
        return None
    return Webhooks(
        settings, repos, scheduler=scheduler, clients=clients, make_cycle=make_cycle, stop=stop,
        run=run, state=state, sharing=sharing,
    ).start()  # fmt: skip
