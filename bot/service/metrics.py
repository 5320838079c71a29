"""The service's Prometheus metrics, in a registry of their own (prometheus-client)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.cycle import Summary
from bot.github.client import Usage

PREFIX: Final = "ci_status_bot_"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
CYCLE_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class Metrics:
    """Every metric of one service; other modules update them through these attributes."""

    def __init__(self) -> None:
        """Create the metrics in a new CollectorRegistry (never the global one)."""
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.cycles = Counter(
            PREFIX + "cycles_total", "Cycles run, by outcome.", ["outcome"], registry=r
        )
        self.cycle_duration = Histogram(
            PREFIX + "cycle_duration_seconds",
            "Wall time of one cycle, reads and paced writes included.",
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.last_success = Gauge(
            PREFIX + "last_successful_cycle_timestamp_seconds",
            "When the last cycle finished (Unix time).",
            registry=r,
        )
        self.pulls = Gauge(
            PREFIX + "pull_requests",
            "Open pull requests in the triage view, by repository and verdict.",
            ["repo", "verdict"],
            registry=r,
        )
        self.comment_writes = Counter(
            PREFIX + "comment_writes_total",
            "Status comments written to GitHub, by action (created, edited).",
            ["action"],
            registry=r,
        )
        self.github_requests = Counter(
            PREFIX + "github_requests_total", "Requests sent to GitHub.", registry=r
        )
        self.graphql_points = Counter(
            PREFIX + "github_graphql_points_total", "GitHub GraphQL rate-limit points spent.",
            registry=r,
        )  # fmt: skip
        self.rtd_requests = Counter(
            PREFIX + "readthedocs_requests_total", "Requests sent to Read the Docs.", registry=r
        )
        self.rate_limit_remaining = Gauge(
            PREFIX + "github_rate_limit_remaining",
            "GitHub's rate-limit budget left (requests, or points for graphql), by resource.",
            ["resource"],
            registry=r,
        )
        self.rate_limit_reset = Gauge(
            PREFIX + "github_rate_limit_reset_timestamp_seconds",
            "When GitHub resets the budget (Unix time), by resource.",
            ["resource"],
            registry=r,
        )
        self.webhook_deliveries = Counter(
            PREFIX + "webhook_deliveries_total",
            "GitHub webhook deliveries received, by event and outcome.",
            ["event", "outcome"],
            registry=r,
        )
        # several replicas on a PostgreSQL state (0 and none with one process)
        self.leases_held = Gauge(
            PREFIX + "leases_held", "Repository leases this replica holds.", registry=r
        )
        self.lease_takeovers = Gauge(
            PREFIX + "lease_takeovers",
            "Leases this replica took over from a replica that did not renew them.",
            registry=r,
        )

    def cycle_finished(
        self, summary: Summary, usage: Usage, *, seconds: float, finished_at: datetime
    ) -> None:
        """Count a finished cycle: its duration, writes, requests and GitHub's budget."""
        self.cycles.labels("finished").inc()
        self.cycle_duration.observe(seconds)
        self.last_success.set(finished_at.timestamp())
        self.spent(summary, usage)

    def spent(self, summary: Summary, usage: Usage) -> None:
        """Count what one pass (a cycle or a webhook refresh) wrote and asked, and the budget."""
        self.comment_writes.labels("created").inc(summary.created)
        self.comment_writes.labels("edited").inc(summary.edited)
        self.github_requests.inc(summary.github_requests)
        self.graphql_points.inc(summary.graphql_points)
        self.rtd_requests.inc(summary.rtd_requests)
        for resource, left in dict(usage.remaining).items():
            self.rate_limit_remaining.labels(resource).set(left)
        for resource, reset in dict(usage.reset_at).items():
            self.rate_limit_reset.labels(resource).set(reset.timestamp())

    def cycle_failed(self, *, seconds: float) -> None:
        """Count a cycle that raised before it finished."""
        self.cycles.labels("failed").inc()
        self.cycle_duration.observe(seconds)

    def set_pulls(self, verdicts: Iterable[tuple[str, str]], *, repos: Iterable[str] = ()) -> None:
        """Replace the pull-request gauge with counts of (repo, verdict) pairs."""
        tally: Mapping[tuple[str, str], int] = Tally(verdicts)
        self.pulls.clear()
        for repo in repos:
            for verdict in ("failing", "pending", "incomplete", "passing"):
                self.pulls.labels(repo, verdict).set(0)
        for (repo, verdict), count in tally.items():
            self.pulls.labels(repo, verdict).set(count)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
