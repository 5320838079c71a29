"""`ci-status-bot worker`: works the queue's jobs, one pull request (or repository) each.

A job is checked before any GitHub request: an installation the App no longer has (or that
is suspended), or a repository removed from its installation, ends it with that reason; an
installation marked "limited until" is put back for its reset (no other waits for it). The
job then takes its repository's lease in the shared state (so a worker thought dead, that
wakes up, writes nothing: its writes are fenced by the lease's generation), reads and writes
through its installation's own client, and records what GitHub said of the installation's
budget, and the job's latency from the webhook to the comment.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import FrameType

from bot import app as wiring
from bot.core.summary import Summary
from bot.github.errors import GitHubError, RateLimited
from bot.github.installations import BotGitHub
from bot.retry import Stopped
from bot.service.queue import RESTART_WAIT_S, Job, JobQueue, QueueUnavailable, work
from bot.settings import RepoSettings, Settings, require_queue
from bot.state.leases import Leases, new_holder
from bot.state.ports import StoreError
from bot.state.store import Store

log = logging.getLogger(__name__)

BUDGET_RESERVE = 50  # an installation with this little left waits for its reset
DEFERRED_WAIT_S = 15.0  # writes held by the shared write budget: the job runs again this soon
LEASE_BUSY_WAIT_S = 5.0  # the repository's lease is held by another worker: tried again


def utc_now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one job ended, in words for the log."""

    word: str  # done, dropped, held, failed
    why: str = ""


class JobRunner:
    """Works one job at a time per thread; the worker's threads share its clients."""

    def __init__(
        self,
        settings: Settings,
        clients: wiring.Clients,
        queue: JobQueue,
        state: Callable[[], Store],
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """Nothing is read yet."""
        self.settings, self.clients, self.queue, self.state = settings, clients, queue, state
        self.clock = clock
        self.holder = new_holder()
        self._github: dict[int, BotGitHub] = {}
        self._lock = threading.Lock()

    def github(self, installation: int) -> BotGitHub:
        """The installation's own client (kept: its token is renewed before it expires)."""
        with self._lock:
            found = self._github.get(installation)
            if found is None:
                found = wiring.installation_github(self.settings, self.clients, installation)
                self._github[installation] = found
            return found

    def __call__(self, job: Job, job_id: int) -> Outcome:
        """Work one job; every ending is logged with its reason (a job is never lost: one
        that cannot be worked now is queued again for when it can)."""
        try:
            outcome = self._work(job, job_id)
        except (QueueUnavailable, StoreError) as exc:
            outcome = self._again(job, self.clock() + timedelta(seconds=LEASE_BUSY_WAIT_S),
                                  f"the queue or the state cannot be used: {exc}")  # fmt: skip
        except Stopped:
            outcome = self._again(job, self.clock(), "the worker is stopping")
        level = logging.WARNING if outcome.word == "failed" else logging.INFO
        log.log(level, "job %d %s (%s, installation %d): %s%s", job_id, outcome.word, job.label,
                job.installation, job.reason, f": {outcome.why}" if outcome.why else "",
                extra={"repo": job.repo, "pr": job.number})  # fmt: skip
        return outcome

    def _again(self, job: Job, at: datetime, why: str) -> Outcome:
        """Queue the job again for `at` (one waiting already covers it)."""
        try:
            queued = self.queue.enqueue(job, at=at)
        except QueueUnavailable as exc:
            return Outcome("failed", f"{why}; not queued again ({exc}): the schedule covers it")
        more = "queued again" if queued else "a waiting job covers it"
        return Outcome("held", f"{why}; {more} for {at:%H:%M:%S} UTC")

    def _work(self, job: Job, job_id: int) -> Outcome:
        now = self.clock()
        if job.installation:
            why = self.queue.directory().why_not(job.installation, job.repo)
            if why is not None:
                return Outcome("dropped", f"{why}: nothing read or written")
            limited = self.queue.limited_until(job.installation, now=now)
            if limited is not None:
                return self._again(job, limited[0], f"installation limited: {limited[1]}")
        store = self.state()
        leases = Leases(store, lease_seconds=self.settings.state.lease_seconds,
                        holder=f"{self.holder}:{job_id}")  # fmt: skip
        if job.repo not in leases.take_free([job.repo]):
            return self._again(job, now + timedelta(seconds=LEASE_BUSY_WAIT_S),
                               f"the lease of {job.repo} is held by another worker")  # fmt: skip
        done = threading.Event()
        keeper = threading.Thread(target=_renew, args=(leases, done), daemon=True)
        keeper.start()
        try:
            return self._reconcile(job, store, leases)
        finally:
            done.set()
            keeper.join()
            leases.release_all()

    def _reconcile(self, job: Job, store: Store, leases: Leases) -> Outcome:
        github = self.github(job.installation)
        clients = replace(self.clients, github=github)
        cycle = wiring.make_cycle(
            self.settings, clients, store, dry_run=False, out=None, leases=leases
        )
        repo = self.settings.configured_repo(job.repo) or RepoSettings(name=job.repo)
        before = (github.usage.total, github.usage.graphql_points)
        try:
            if job.number is None:
                summary = cycle.run([repo])
            else:
                found = github.pulls_by_number(
                    job.repo, [job.number], now=self.clock(), required=store
                )
                snapshot = found.get(job.number)
                if snapshot is None:
                    return Outcome("done", "closed or gone: its comment is left as it is")
                summary = cycle.run_pulls([(snapshot, repo)])
        except RateLimited as exc:
            return self._limited(job, exc.wait_s, f"GitHub rate-limited it: {exc}")
        except GitHubError as exc:
            return Outcome("failed", f"GitHub refused a read: {exc}; nothing written")
        summary.github_requests = github.usage.total - before[0]  # the job's read included
        summary.graphql_points = github.usage.graphql_points - before[1]
        return self._after(job, github, summary)

    def _after(self, job: Job, github: BotGitHub, summary: Summary) -> Outcome:
        now = self.clock()
        usage = github.usage
        if job.installation:
            self.queue.note_budget(job.installation, usage.remaining, usage.reset_at, now=now)
        wrote = summary.created + summary.edited
        if job.received_at is not None and wrote:
            seconds = max(0.0, (now - job.received_at).total_seconds())
            self.queue.note_latency(job.installation, seconds, now=now)
        text = summary.line().removeprefix("cycle: ")
        if summary.rate_limited_s:
            return self._limited(job, summary.rate_limited_s, "GitHub rate-limited it")
        spent = _spent(usage.remaining, usage.reset_at, now=now)
        if spent is not None and job.installation:
            self.queue.limit(job.installation, until=spent[0], reason=spent[1])
        if summary.deferred:
            at = now + timedelta(seconds=DEFERRED_WAIT_S)
            return self._again(job, at, f"writes deferred (the App's shared write budget): {text}")
        failed = "; ".join(f"{k}: {v}" for k, v in summary.failed.items())
        if failed:
            return Outcome("failed", f"{text}; {failed}")
        return Outcome("done", text)

    def _limited(self, job: Job, wait_s: float, why: str) -> Outcome:
        until = self.clock() + timedelta(seconds=max(1.0, wait_s))
        if job.installation:
            self.queue.limit(job.installation, until=until, reason=why)
        return self._again(job, until, f"installation {job.installation} waits: {why}")


def _spent(
    remaining: dict[str, int], reset_at: dict[str, datetime], *, now: datetime
) -> tuple[datetime, str] | None:
    """When an installation's nearly spent budget resets, and why it waits (None: it has
    enough left)."""
    for resource, left in sorted(remaining.items()):
        reset = reset_at.get(resource)
        if left <= BUDGET_RESERVE and reset is not None and reset > now:
            return reset, f"GitHub {resource} budget: {left} left until {reset:%H:%M:%S} UTC"
    return None


def _renew(leases: Leases, done: threading.Event) -> None:
    """Renew a job's lease every third of its length until the job ends."""
    while not done.wait(leases.lease.total_seconds() / 3):
        leases.renew()


def run_worker(settings: Settings, *, stop: threading.Event | None = None) -> int:
    """Work the queue's jobs until SIGTERM (the jobs running end at their next write)."""
    require_queue(settings)
    stop = stop or threading.Event()
    _install_signal_handlers(stop)
    clients = wiring.build_clients(settings, settings.repos, stop=stop)
    url = settings.queue.url.get_secret_value()
    queue = JobQueue(url, max_size=settings.queue.jobs_per_worker + 2)
    state = wiring.ServiceState(settings)
    try:
        _wait_for_queue(queue, stop)
        state()  # an unreachable state at start: exit 1 naming it
        runner = JobRunner(settings, clients, queue, state)
        cfg = settings.queue
        log.info("worker started: %d jobs at a time", cfg.jobs_per_worker)
        work(url, runner, queue=queue, concurrency=cfg.jobs_per_worker,
             stalled_s=cfg.stalled_seconds, stop=stop)  # fmt: skip
    finally:
        state.close()
        queue.close()
        clients.close()
    log.info("worker stopped")
    return 0


def _wait_for_queue(queue: JobQueue, stop: threading.Event) -> None:
    """Create the queue's tables, waiting (and saying so once) while its database is away."""
    waiting = False
    while not stop.is_set():
        try:
            queue.ensure_schema()
        except QueueUnavailable as exc:
            if not waiting:
                log.warning("problem started: queue: %s (the worker waits for it)", exc)
            waiting = True
            stop.wait(RESTART_WAIT_S)
            continue
        if waiting:
            log.info("problem resolved: queue (it answers again)")
        return


def _install_signal_handlers(stop: threading.Event) -> None:
    def handler(signum: int, _: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, handler)
