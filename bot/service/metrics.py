"""The service's Prometheus metrics, in a registry of their own (prometheus-client)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.core.summary import Summary, Usage

PREFIX: Final = "ci_status_bot_"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
CYCLE_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
LAG_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True, slots=True)
class Spec:
    """One metric: the attribute it is kept in, its kind, name (after PREFIX), help, labels."""

    attr: str
    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    doc: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def make(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
        """The metric, registered in `registry`."""
        if self.kind is Histogram:
            return Histogram(
                PREFIX + self.name, self.doc, self.labels, buckets=self.buckets, registry=registry
            )
        return self.kind(PREFIX + self.name, self.doc, self.labels, registry=registry)


# Every metric of the service, in the order /metrics lists them.
SPECS: Final = (
    Spec("cycles", Counter, "cycles_total", "Cycles run, by outcome.", ("outcome",)),
    Spec(
        "cycle_duration", Histogram, "cycle_duration_seconds",
        "Wall time of one cycle, reads and paced writes included.", buckets=CYCLE_BUCKETS,
    ),
    Spec(
        "loop_lag", Histogram, "event_loop_lag_seconds",
        "How late the HTTP server's event loop woke from a 50 ms sleep (what a request "
        "arriving then waited before the loop could read it).", buckets=LAG_BUCKETS,
    ),
    Spec(
        "loop_lag_max", Gauge, "event_loop_lag_max_seconds",
        "The worst event-loop lag of the last minute.",
    ),
    Spec(
        "page_renders", Counter, "page_renders_total",
        "Triage pages and JSON documents rendered, by kind (page, json): one per change of the "
        "rows whatever the requests (the others are answered from the bytes kept).", ("kind",),
    ),
    Spec(
        "last_success", Gauge, "last_successful_cycle_timestamp_seconds",
        "When the last cycle finished (Unix time).",
    ),
    Spec(
        "pulls", Gauge, "pull_requests",
        "Open pull requests in the triage view, by repository and verdict.", ("repo", "verdict"),
    ),
    Spec(
        "comment_writes", Counter, "comment_writes_total",
        "Status comments written to GitHub, by action.", ("action",),
    ),
    Spec("github_requests", Counter, "github_requests_total", "Requests sent to GitHub."),
    Spec(
        "graphql_points", Counter, "github_graphql_points_total",
        "GitHub GraphQL rate-limit points spent.",
    ),
    Spec(
        "rtd_requests", Counter, "readthedocs_requests_total", "Requests sent to Read the Docs."
    ),
    Spec(
        "source_requests", Counter, "source_requests_total",
        "Requests sent to each second source, by source.", ("source",),
    ),
    Spec(
        "rate_limit_remaining", Gauge, "github_rate_limit_remaining",
        "GitHub's rate-limit budget left (requests, or points for graphql), by resource.",
        ("resource",),
    ),
    Spec(
        "rate_limit_reset", Gauge, "github_rate_limit_reset_timestamp_seconds",
        "When GitHub resets the budget (Unix time), by resource.", ("resource",),
    ),
    Spec(
        "webhook_deliveries", Counter, "webhook_deliveries_total",
        "GitHub webhook deliveries received, by event and outcome.", ("event", "outcome"),
    ),
    Spec(
        "dropped_connections", Counter, "http_connections_dropped_total",
        "HTTP connections the server closed: slow-request (not whole within the deadline) "
        "or connection-bound (closed to make room at the bound).", ("reason",),
    ),
    Spec(
        "problems", Gauge, "problem",
        "1 while a problem of the service is open, by what it concerns.", ("about",),
    ),
    # several replicas on a PostgreSQL state (0 with one process)
    Spec("leases_held", Gauge, "leases_held", "Repository leases this replica holds."),
    Spec(
        "lease_takeovers", Gauge, "lease_takeovers",
        "Leases this replica took over from one that did not renew them.",
    ),
)  # fmt: skip


class Metrics:
    """Every metric of one service (SPECS); other modules update them through these attributes."""

    cycles: Counter
    cycle_duration: Histogram
    loop_lag: Histogram
    loop_lag_max: Gauge
    page_renders: Counter
    last_success: Gauge
    pulls: Gauge
    comment_writes: Counter
    github_requests: Counter
    graphql_points: Counter
    rtd_requests: Counter
    source_requests: Counter
    rate_limit_remaining: Gauge
    rate_limit_reset: Gauge
    webhook_deliveries: Counter
    dropped_connections: Counter
    problems: Gauge
    leases_held: Gauge
    lease_takeovers: Gauge

    def __init__(self) -> None:
        """Create the metrics of SPECS in a new CollectorRegistry (never the global one)."""
        self.registry = CollectorRegistry(auto_describe=True)
        for spec in SPECS:
            setattr(self, spec.attr, spec.make(self.registry))

    def set_problems(self, about: Iterable[str], *, known: Iterable[str] = ()) -> None:
        """1 for each open problem, 0 for each `known` key without one (labels stay bounded)."""
        open_now = set(about)
        self.problems.clear()
        for key in sorted(set(known) | open_now):
            self.problems.labels(key).set(1 if key in open_now else 0)

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
        for source, count in summary.source_requests.items():
            self.source_requests.labels(source).inc(count)
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
