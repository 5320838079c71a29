"""The queue's bookkeeping on a real PostgreSQL (issue 30): the job latency rows stay bounded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from bot.service import queue as queue_module
from bot.service.queue import LATENCY_WINDOW_S, JobQueue


@pytest.fixture
def queue(postgres_url: str) -> Iterator[JobQueue]:
    jobs = JobQueue(postgres_url)
    jobs.ensure_schema()
    try:
        yield jobs
    finally:
        jobs.close()


def rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT count(*) FROM cisb_job_latency").fetchone()
    return int(found[0]) if found else 0


def test_latency_rows_older_than_the_window_are_pruned(queue: JobQueue, postgres_url: str) -> None:
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    for n in range(30):
        queue.note_latency(11, 2.0, now=start + timedelta(seconds=n))
    later = start + timedelta(seconds=LATENCY_WINDOW_S + 60)
    queue.note_latency(12, 3.0, now=later)
    assert rows(postgres_url) == 1  # no figure reads the old ones: gone
    assert queue.latencies(since=start) == [(12, 3.0)]


def test_latency_rows_are_bounded_however_many_jobs_a_window_holds(
    queue: JobQueue, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "LATENCY_ROWS_MAX", 5)
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    for n in range(12):
        queue.note_latency(11, float(n), now=now)
    assert rows(postgres_url) == 5
    assert sorted(s for _, s in queue.latencies(since=now)) == [7.0, 8.0, 9.0, 10.0, 11.0]


def test_a_pull_requests_job_is_taken_before_the_schedules_older_ones(
    queue: JobQueue, postgres_url: str
) -> None:
    """A delivery's job (someone waits on it) jumps the schedule's backlog of repository jobs:
    Procrastinate's own fetch hands it out first."""
    from bot.service.queue import QUEUE, Job

    for n in range(3):
        queue.enqueue(Job(11, f"octo/r{n}"))
    queue.enqueue(Job(12, "acme/c", 7, reason="webhook"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        worker = conn.execute("SELECT * FROM procrastinate_register_worker_v1()").fetchone()
        assert worker is not None
        taken = [
            conn.execute(
                "SELECT args FROM procrastinate_fetch_job_v2(%s::varchar[], %s)",
                ([QUEUE], worker[0]),
            ).fetchone()
            for _ in range(2)
        ]
    assert [t[0]["repo"] if t else None for t in taken] == ["acme/c", "octo/r0"]
