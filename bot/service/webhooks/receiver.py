"""One delivery, handled: verify, de-duplicate, mark; never talks to GitHub."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.service.webhooks.deliveries import NoteDelivery, is_repeat
from bot.service.webhooks.events import EVENTS, INSTALLATION_EVENTS, Reading, read_event
from bot.service.webhooks.inbox import MarkSink
from bot.service.webhooks.signature import verify_signature
from bot.state.ports import StoreError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB

# on_installation(event, payload): many installations take an installation event; the outcome
OnInstallation = Callable[[str, Any], str]


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
        note_delivery: NoteDelivery,
        on_first_mark: Callable[[], None],
        clock: Callable[[], datetime],
        on_rules_changed: Callable[[str], object] = lambda repo: None,
        on_installation: OnInstallation | None = None,
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
        answer = self._handle(event, headers, body)
        self.count(event, answer.outcome)
        log.debug("webhook %s: %d %s", event or "(no event)", answer.status, answer.outcome)
        return answer

    def _handle(self, event: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """Screen, parse, de-duplicate, then take the event: the answer of each step."""
        early = self._screen(event, headers, body)
        if early is not None:
            return early
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            return Answer(400, "malformed")
        now = self.clock()
        delivery = headers["x-github-delivery"]
        try:
            repeated = is_repeat(self.note_delivery, delivery, body, event=event, now=now)
        except StoreError as exc:
            log.warning("webhook %s refused: the state cannot be used: %s", event, exc)
            return Answer(503, "state-unusable")
        if repeated:
            return Answer(202, "repeated")
        if event in INSTALLATION_EVENTS and self.on_installation is not None:
            return Answer(202, self.on_installation(event, payload))
        return self._mark(event, payload, now=now)

    def _screen(self, event: str, headers: Mapping[str, str], body: bytes) -> Answer | None:
        """The answer given before the body is parsed (None: go on): too large, unsigned,
        a ping, an event not taken, no delivery id."""
        if len(body) > MAX_BODY_BYTES:
            return Answer(413, "too-large")
        if not verify_signature(body, headers.get("x-hub-signature-256"), self.secrets):
            return Answer(401, "bad-signature")
        if event == "ping":
            return Answer(200, "pong")
        installation = event in INSTALLATION_EVENTS and self.on_installation is not None
        if event not in EVENTS and not installation:
            return Answer(202, "ignored-event")
        if not headers.get("x-github-delivery", ""):
            return Answer(400, "no-delivery-id")
        return None

    def _mark(self, event: str, payload: Any, *, now: datetime) -> Answer:
        """Read the event's marks into the inbox (the first schedules a refresh)."""
        try:
            reading = read_event(event, payload, repos=self.repos)
        except Exception as exc:  # a shape no rule foresaw is the sender's problem: 400
            log.warning("webhook %s: a body of an unexpected shape (%s)", event, type(exc).__name__)
            reading = Reading("malformed")
        if reading.outcome == "malformed":
            return Answer(400, "malformed")
        if reading.rules_of is not None:
            self.on_rules_changed(reading.rules_of)
        if reading.marks and self.inbox.add(reading.marks, now=now):
            self.on_first_mark()
        return Answer(202, reading.outcome)
