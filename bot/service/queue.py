"""The job queue, behind one small seam: Procrastinate on PostgreSQL.

A job is one pull request (installation, repository, number) or one repository (the
schedule's reconcile). Procrastinate's `queueing_lock` keeps at most one job per key
waiting, its `lock` lets one job per repository run at a time, jobs are taken with `FOR
UPDATE SKIP LOCKED` and announced by `LISTEN/NOTIFY`, and a worker that stops beating its
heartbeat has its running jobs put back (`retry_stalled`). Beside the queue's own tables this
module keeps the fleet's bookkeeping: the App's installations as last discovered, each
installation's "limited until" mark and GitHub budget, and the latency of finished jobs.
Nothing else in the bot imports Procrastinate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg
import psycopg_pool
from procrastinate import App, JobContext, PsycopgConnector, SyncPsycopgConnector, sql
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException, UniqueViolation

from bot.github.installations import Directory, Installed

log = logging.getLogger(__name__)

TASK: Final = "ci_status_bot.reconcile"
QUEUE: Final = "ci-status-bot"
CONNECT_TIMEOUT_S: Final = 3
PROBE_WAIT_S: Final = 1.0  # /readyz and /metrics wait this long for a pooled connection
PROBE: Final = "SELECT 1 FROM procrastinate_jobs LIMIT 0"
LATENCY_WINDOW_S: Final = 900  # /metrics' job latency: the jobs finished in the last 15 min
PULL_PRIORITY: Final = 10  # Procrastinate takes the highest priority first, then the oldest
LATENCY_ROWS_MAX: Final = 20_000  # ... and never more rows than this kept (a burst's many jobs)

BOOK_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS cisb_installations (
    installation_id bigint PRIMARY KEY, account text NOT NULL, suspended boolean NOT NULL,
    repos jsonb NOT NULL, seen_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS cisb_limits (
    installation_id bigint PRIMARY KEY, limited_until timestamptz NOT NULL, reason text NOT NULL);
CREATE TABLE IF NOT EXISTS cisb_budget (
    installation_id bigint NOT NULL, resource text NOT NULL, remaining integer NOT NULL,
    reset_at timestamptz, updated_at timestamptz NOT NULL,
    PRIMARY KEY (installation_id, resource));
CREATE TABLE IF NOT EXISTS cisb_job_latency (
    id bigserial PRIMARY KEY, installation_id bigint NOT NULL, seconds double precision NOT NULL,
    done_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS cisb_job_latency_done ON cisb_job_latency (done_at);
"""


class QueueUnavailable(Exception):
    """The queue's database cannot be reached or refused the request; the message says why."""


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work: a pull request, or (number None) a whole repository."""

    installation: int  # 0: a token's own (no App)
    repo: str
    number: int | None = None
    received_at: datetime | None = None  # the webhook delivery's arrival (job latency)
    reason: str = "schedule"

    @property
    def key(self) -> str:
        """The queueing lock: one waiting job per pull request (or repository)."""
        where = f"{self.installation}:{self.repo.casefold()}"
        return f"pull:{where}#{self.number}" if self.number is not None else f"repo:{where}"

    @property
    def priority(self) -> int:
        """Taken first: a pull request's job (a delivery someone waits on) before a repository's
        (the schedule's backstop, which may back up when the workers are few)."""
        return PULL_PRIORITY if self.number is not None else 0

    @property
    def lock(self) -> str:
        """The running lock: one running job per repository (its comments' writer)."""
        return f"repo:{self.installation}:{self.repo.casefold()}"

    @property
    def label(self) -> str:
        """owner/name#N (or owner/name) for logs."""
        return self.repo if self.number is None else f"{self.repo}#{self.number}"

    def args(self) -> dict[str, Any]:
        """The job's JSON arguments."""
        received = None if self.received_at is None else self.received_at.isoformat()
        return {
            "installation": self.installation, "repo": self.repo, "number": self.number,
            "received_at": received, "reason": self.reason,
        }  # fmt: skip

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Job:
        """A job from its JSON arguments."""
        received = args.get("received_at")
        return cls(
            installation=int(args["installation"]),
            repo=str(args["repo"]),
            number=None if args.get("number") is None else int(args["number"]),
            received_at=None if received is None else datetime.fromisoformat(str(received)),
            reason=str(args.get("reason") or "schedule"),
        )


def open_pool(url: str, *, max_size: int = 4) -> psycopg_pool.ConnectionPool:
    """A connection pool that opens without waiting (a server down at start is a problem to
    report, not a crash) and checks each connection before handing it out."""
    pool = psycopg_pool.ConnectionPool(
        conninfo=url, min_size=1, max_size=max_size, timeout=CONNECT_TIMEOUT_S + 2,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S}, open=False,
        check=psycopg_pool.ConnectionPool.check_connection, reconnect_timeout=0,
    )  # fmt: skip
    pool.open(wait=False)
    return pool


class JobQueue:
    """The queue (Procrastinate) and the fleet's bookkeeping, over one sync connection pool."""

    def __init__(self, url: str, *, max_size: int = 4) -> None:
        """Open the pool (not waiting for the server); `ensure_schema` creates the tables."""
        self.url = url
        self.pool = open_pool(url, max_size=max_size)
        self.connector = SyncPsycopgConnector()
        self.app = App(connector=self.connector)
        self.app.open(self.pool)

    def close(self) -> None:
        """Close the pool."""
        self.app.close()
        self.pool.close()

    def _all(self, query: Any, **args: Any) -> list[dict[str, Any]]:
        try:
            return list(self.connector.execute_query_all(query, **args))
        except (ConnectorException, psycopg_pool.PoolTimeout) as exc:
            raise QueueUnavailable(self._reason(exc)) from exc

    def _run(self, query: Any, **args: Any) -> None:
        try:
            self.connector.execute_query(query, **args)
        except (ConnectorException, psycopg_pool.PoolTimeout) as exc:
            raise QueueUnavailable(self._reason(exc)) from exc

    def ensure_schema(self) -> None:
        """Create Procrastinate's tables (once) and the bookkeeping tables, in one transaction
        under a transaction-level lock (processes starting together create them once)."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(74201711)")
            found = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
            if found is not None and not found[0]:
                conn.execute(self.app.schema_manager.get_schema())
                log.info("queue: Procrastinate's schema created")
            conn.execute(BOOK_SCHEMA)

    def problem(self) -> str | None:
        """Why the queue cannot be used now (None: it answers). Quick, for /readyz and each
        /metrics scrape: a pooled connection is waited for PROBE_WAIT_S at most; none coming,
        one is opened directly, which a server that is down refuses at once, saying so."""
        reason: str | None = None
        try:
            with self.pool.connection(timeout=PROBE_WAIT_S) as conn:
                conn.execute(PROBE)
        except psycopg_pool.PoolTimeout:  # the server away, or every connection in use
            reason = self._probe_directly()
        except psycopg.Error as exc:
            reason = _why(exc)
        return None if reason is None else f"queue unreachable ({_safe_url(self.url)}): {reason}"

    def _probe_directly(self) -> str | None:
        """The server's own answer to a connection of its own (None: it answers)."""
        try:
            with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                conn.execute(PROBE)
        except psycopg.Error as exc:
            return _first_line(exc) or exc.__class__.__name__  # not the pool's timeout under it
        return None

    def _reason(self, exc: BaseException) -> str:
        """Why a request failed: for a pool that waited in vain for a connection, why the
        server gives none (refused, unknown host, ...), not how long the pool waited."""
        if isinstance(exc, psycopg_pool.PoolTimeout):
            found = self._probe_directly()
            if found is not None:
                return found
        return _why(exc)

    # -- jobs -------------------------------------------------------------------------------

    def enqueue(self, job: Job, *, at: datetime | None = None) -> bool:
        """Queue `job` (to run at `at`, or now); False when one is already waiting for it."""
        deferrer = self.app.configure_task(
            TASK, queue=QUEUE, lock=job.lock, queueing_lock=job.key, schedule_at=at,
            priority=job.priority,
        )  # fmt: skip
        try:
            deferrer.defer(**job.args())
        except AlreadyEnqueued:
            return False
        except (ConnectorException, psycopg_pool.PoolTimeout) as exc:
            raise QueueUnavailable(self._reason(exc)) from exc
        return True

    def depth(self) -> dict[str, int]:
        """Jobs waiting ("todo", also those scheduled later) and running ("doing")."""
        rows = self._all(
            "SELECT status::text AS status, count(*) AS n FROM procrastinate_jobs "
            "WHERE queue_name = %(queue)s AND status IN ('todo', 'doing') GROUP BY status",
            queue=QUEUE,
        )
        found = {"todo": 0, "doing": 0}
        found.update({str(r["status"]): int(r["n"]) for r in rows})
        return found

    def finished(self) -> dict[str, int]:
        """Jobs finished, by how they ended (succeeded, failed, cancelled)."""
        rows = self._all(
            "SELECT status::text AS status, count(*) AS n FROM procrastinate_jobs "
            "WHERE queue_name = %(queue)s AND status NOT IN ('todo', 'doing') GROUP BY status",
            queue=QUEUE,
        )
        return {str(r["status"]): int(r["n"]) for r in rows}

    def retry_stalled(self, *, seconds: float) -> list[int]:
        """Put back the running jobs of workers whose heartbeat is older than `seconds` (a
        worker killed mid-job); a job whose pull request has another job waiting is ended
        instead (that one covers it). The ids of the jobs put back."""
        rows = self._all(
            sql.queries["select_stalled_jobs_by_heartbeat"],
            queue=QUEUE, task_name=TASK, seconds_since_heartbeat=seconds,
        )  # fmt: skip
        retried: list[int] = []
        for row in rows:
            job_id = int(row["id"])
            try:
                self.app.job_manager.retry_job_by_id(job_id, datetime.now(UTC))
            except UniqueViolation:  # Procrastinate would not put it back beside its twin
                self._run("SELECT procrastinate_finish_job_v1(%(id)s, 'aborted', false)", id=job_id)
                log.warning("job %d (%s) ended: its worker stopped beating its heartbeat, and a "
                            "waiting job for the same pull request (or repository) covers it",
                            job_id, _repo_of(row))  # fmt: skip
                continue
            except ConnectorException as exc:  # another worker put it back first
                log.debug("stalled job %d not put back: %s", job_id, exc)
                continue
            log.warning(
                "job %d (%s) put back: its worker stopped beating its heartbeat (killed?)",
                job_id, _repo_of(row),
            )  # fmt: skip
            retried.append(job_id)
        return retried

    # -- the App's installations ----------------------------------------------------------------

    def save_directory(self, directory: Directory, *, now: datetime) -> None:
        """Replace the installations known with this discovery's."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM cisb_installations")
            for found in directory.installations.values():
                conn.execute(
                    "INSERT INTO cisb_installations VALUES (%s, %s, %s, %s::jsonb, %s)",
                    (found.id, found.account, found.suspended, _json(found.repos), now),
                )

    def directory(self) -> Directory:
        """The installations as last discovered by `run`."""
        rows = self._all(
            "SELECT installation_id, account, suspended, repos FROM cisb_installations"
        )
        return Directory(
            {
                int(r["installation_id"]): Installed(
                    int(r["installation_id"]), str(r["account"]), bool(r["suspended"]),
                    tuple(str(x) for x in r["repos"]),
                )
                for r in rows
            }
        )  # fmt: skip

    # -- budgets ------------------------------------------------------------------------------

    def limit(self, installation: int, *, until: datetime, reason: str) -> None:
        """Mark an installation limited until `until` (its jobs wait; no other's do)."""
        self._run(
            "INSERT INTO cisb_limits VALUES (%(i)s, %(u)s, %(r)s) ON CONFLICT (installation_id) "
            "DO UPDATE SET reason = EXCLUDED.reason, limited_until = "
            "GREATEST(cisb_limits.limited_until, EXCLUDED.limited_until)",
            i=installation, u=until, r=reason,
        )  # fmt: skip

    def limited_until(self, installation: int, *, now: datetime) -> tuple[datetime, str] | None:
        """Until when (and why) an installation waits for its reset (None: it does not)."""
        rows = self._all(
            "SELECT limited_until, reason FROM cisb_limits WHERE installation_id = %(i)s "
            "AND limited_until > %(now)s",
            i=installation, now=now,
        )  # fmt: skip
        return (rows[0]["limited_until"], str(rows[0]["reason"])) if rows else None

    def limits(self, *, now: datetime) -> dict[int, datetime]:
        """Every installation limited now, and until when."""
        rows = self._all(
            "SELECT installation_id, limited_until FROM cisb_limits WHERE limited_until > %(now)s",
            now=now,
        )
        return {int(r["installation_id"]): r["limited_until"] for r in rows}

    def note_budget(
        self,
        installation: int,
        remaining: Mapping[str, int],
        reset_at: Mapping[str, datetime],
        *,
        now: datetime,
    ) -> None:
        """Record what GitHub last said an installation has left, by resource."""
        for resource, left in remaining.items():
            self._run(
                "INSERT INTO cisb_budget VALUES (%(i)s, %(r)s, %(left)s, %(reset)s, %(now)s) "
                "ON CONFLICT (installation_id, resource) DO UPDATE SET remaining = %(left)s, "
                "reset_at = %(reset)s, updated_at = %(now)s",
                i=installation, r=resource, left=left, reset=reset_at.get(resource), now=now,
            )  # fmt: skip

    def budgets(self) -> list[tuple[int, str, int]]:
        """(installation, resource, remaining) as last recorded."""
        rows = self._all("SELECT installation_id, resource, remaining FROM cisb_budget")
        return [(int(r["installation_id"]), str(r["resource"]), int(r["remaining"])) for r in rows]

    # -- latency ------------------------------------------------------------------------------

    def note_latency(self, installation: int, seconds: float, *, now: datetime) -> None:
        """A webhook's job wrote its comment `seconds` after the delivery arrived. The rows no
        figure reads any more go in the same statement: those older than the window, and all
        but the newest LATENCY_ROWS_MAX (the table stays bounded, whatever the traffic)."""
        self._run(
            "WITH added AS (INSERT INTO cisb_job_latency (installation_id, seconds, done_at) "
            "VALUES (%(i)s, %(s)s, %(now)s) RETURNING id) "
            "DELETE FROM cisb_job_latency WHERE done_at < %(cut)s "
            "OR id <= (SELECT id FROM added) - %(keep)s",
            i=installation, s=seconds, now=now, cut=now - timedelta(seconds=LATENCY_WINDOW_S),
            keep=LATENCY_ROWS_MAX,
        )  # fmt: skip

    def latencies(self, *, since: datetime) -> list[tuple[int, float]]:
        """(installation, seconds) of the webhook jobs finished since `since`."""
        rows = self._all(
            "SELECT installation_id, seconds FROM cisb_job_latency WHERE done_at >= %(since)s",
            since=since,
        )
        return [(int(r["installation_id"]), float(r["seconds"])) for r in rows]

    def _transaction(self) -> _Transaction:
        return _Transaction(self)


class _Transaction:
    """A pool connection in one transaction; a database error becomes QueueUnavailable."""

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue
        self._ctx: Any = None

    def __enter__(self) -> Any:
        try:
            self._ctx = self.queue.pool.connection()
            return self._ctx.__enter__()
        except Exception as exc:
            raise QueueUnavailable(self.queue._reason(exc)) from exc

    def __exit__(self, *exc: Any) -> None:
        try:
            self._ctx.__exit__(*exc)
        except Exception as error:
            raise QueueUnavailable(self.queue._reason(error)) from error


def _repo_of(row: Mapping[str, Any]) -> str:
    args = row.get("args")
    return str(args.get("repo")) if isinstance(args, dict) else "?"


def _json(values: Sequence[str]) -> str:
    import json

    return json.dumps(list(values))


def _why(exc: BaseException) -> str:
    """A short reason: the database's own message, the innermost one (never a password)."""
    found: BaseException | None = exc
    text = ""
    while found is not None:
        first = _first_line(found)
        if first and first != "Database error.":
            text = first
        found = found.__cause__ or found.__context__
    return text or exc.__class__.__name__


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _safe_url(url: str) -> str:
    """The URL without its password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = f"{parts.hostname or ''}:{parts.port}" if parts.port else (parts.hostname or "")
    return f"{parts.scheme}://{host}{parts.path}"


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile of `values` (nearest rank; 0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


RESTART_WAIT_S: Final = 2.0  # a worker that lost the queue's database starts again this soon


def work(
    url: str,
    handler: Callable[[Job, int], object],
    *,
    queue: JobQueue,
    concurrency: int,
    stalled_s: float,
    stop: threading.Event,
) -> None:
    """Run a Procrastinate worker on the bot's queue until `stop` is set: `handler(job, id)`
    works each job in a thread, `concurrency` at a time; the heartbeat is beaten every third
    of `stalled_s`, and the jobs of workers silent for `stalled_s` are put back. A lost
    connection to the queue's database is logged and the worker starts again."""
    keeper = threading.Thread(
        target=_retry_stalled, args=(queue, stalled_s, stop), name="stalled", daemon=True
    )
    keeper.start()
    while not stop.is_set():
        try:
            asyncio.run(_work_once(url, handler, concurrency=concurrency,
                                   stalled_s=stalled_s, stop=stop))  # fmt: skip
        except Exception as exc:  # the database went away: jobs wait in it, nothing is lost
            if stop.is_set():
                break
            log.warning("problem started: queue: %s; the worker starts again in %.0f s",
                        _why(exc), RESTART_WAIT_S)  # fmt: skip
            stop.wait(RESTART_WAIT_S)
    keeper.join(timeout=1)


async def _work_once(
    url: str,
    handler: Callable[[Job, int], object],
    *,
    concurrency: int,
    stalled_s: float,
    stop: threading.Event,
) -> None:
    connector = PsycopgConnector(
        conninfo=url, kwargs={"connect_timeout": CONNECT_TIMEOUT_S}, max_size=concurrency + 2
    )
    app = App(connector=connector)

    @app.task(name=TASK, queue=QUEUE, pass_context=True)
    def reconcile(context: JobContext, /, **args: Any) -> None:
        job = context.job
        handler(Job.from_args(args), int(job.id or 0))

    async with app.open_async():
        running = asyncio.create_task(
            app.run_worker_async(
                queues=[QUEUE], concurrency=concurrency, install_signal_handlers=False,
                update_heartbeat_interval=stalled_s / 3, stalled_worker_timeout=stalled_s,
                fetch_job_polling_interval=1.0, delete_jobs="successful",
            )
        )  # fmt: skip
        while not stop.is_set() and not running.done():
            await asyncio.sleep(0.1)
        if not running.done():
            running.cancel()  # Procrastinate's graceful stop: the running jobs finish
        with contextlib.suppress(asyncio.CancelledError):
            await running


def _retry_stalled(queue: JobQueue, stalled_s: float, stop: threading.Event) -> None:
    """Every third of `stalled_s`: put back the jobs of workers that stopped beating."""
    while not stop.wait(stalled_s / 3):
        try:
            queue.retry_stalled(seconds=stalled_s)
        except QueueUnavailable as exc:
            log.warning("stalled jobs not checked: %s", exc)


Clock = Callable[[], datetime]
