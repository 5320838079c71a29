"""`Webhooks`: the receiver (mounted on the service's HTTP app) and the debounced refresh job
on the service's single worker, wired as `run` wires them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from starlette.routing import Route

from bot.core.summary import Summary
from bot.service.webhooks.inbox import Inbox
from bot.service.webhooks.job import Refresher
from bot.service.webhooks.receiver import Receiver
from bot.service.webhooks.route import webhook_route
from bot.service.webhooks.shared import SharedMarks, take_marks
from bot.service.webhooks.wiring import Wiring
from bot.settings import RepoSettings, Settings
from bot.state.store import Store

log = logging.getLogger(__name__)


class Webhooks:
    """The webhook receiver and its debounced refresh job, on the cycles' single worker."""

    def __init__(self, settings: Settings, repos: Sequence[RepoSettings], wiring: Wiring) -> None:
        """Build the receiver (not yet serving) on the service's state (opened when needed)."""
        self.settings, self.wiring = settings, wiring
        self.inbox = Inbox()
        self.refresher = Refresher(settings, repos, wiring, inbox=self.inbox)
        self.receiver = self._receiver([r.name for r in repos])

    def _receiver(self, names: Sequence[str]) -> Receiver:
        """The receiver: marks into the inbox (several replicas: into the state)."""
        state = self.wiring.state
        return Receiver(
            secrets=[s.get_secret_value() for s in self.settings.webhooks.secrets],
            repos=names,
            inbox=self.inbox if self.wiring.sharing is None else SharedMarks(state),
            note_delivery=lambda delivery, event, now: state().note_delivery(
                delivery, event, now=now
            ),
            on_first_mark=self.refresher.first_mark,
            clock=lambda: datetime.now(UTC),
            on_rules_changed=lambda repo: state().forget_required(repo),
        )

    @property
    def observers(self) -> list[Callable[[Summary, Store], None]]:
        """Told what each refresh wrote and asked, and its store."""
        return self.refresher.observers

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
            self.refresher.debounce_s,
        )
        sharing = self.wiring.sharing
        if sharing is not None:
            marks = threading.Thread(
                target=take_marks, args=(sharing, self.refresher), name="marks", daemon=True
            )
            marks.start()
        return self

    def follow(self, repos: Sequence[RepoSettings]) -> None:
        """The installations were read again: deliveries and refreshes follow `repos`."""
        self.refresher.repos = {r.name: r for r in repos}
        self.receiver.repos = {r.name.lower(): r.name for r in repos}

    def after_cycle(self, summary: Summary, repos: Sequence[RepoSettings]) -> None:
        """A full cycle read every open pull request: its heads resolve status events."""
        complete = [r.name for r in repos if r.name not in summary.failed]
        self.inbox.learn_heads(summary.heads, complete=complete)

    def stop_receiving(self) -> None:
        """Log what is left (pending marks are left to the next start's first cycle)."""
        pending = self.inbox.pending()
        if pending:
            log.info("stopping with %d webhook marks pending; the next cycle covers them", pending)
        counts = ", ".join(f"{e} {o}: {n}" for (e, o), n in sorted(self.receiver.counts.items()))
        log.info("webhook deliveries by event and outcome: %s", counts or "none")


def attach_webhooks(
    settings: Settings, repos: Sequence[RepoSettings], wiring: Wiring
) -> Webhooks | None:
    """Start the webhook fast path when secrets are configured and the server is on."""
    if not settings.webhooks.enabled:
        return None
    if settings.server.port == 0:
        log.warning("webhooks.secrets is set but server.port is 0: webhooks are off")
        return None
    return Webhooks(settings, repos, wiring).start()
