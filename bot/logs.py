"""Structured logging: one line per event, text or JSON, naming repository and pull request."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime

_AUTH_VALUE = re.compile(
    r"((?:authorization|x-hub-signature-256)['\"]?\s*[:=]\s*['\"]?(?:token|bearer|basic)?\s*)"
    r"[^\s'\",}]+",
    re.IGNORECASE,
)

_EXTRA_KEYS = ("repo", "pr", "comment_id", "event")
# Libraries that can log request headers (an Authorization header) at DEBUG: never below WARNING.
HEADER_LOGGERS = (
    "urllib3",
    "requests",
    "httpx",
    "httpcore",
    "github",
    "github.Requester",
    "hpack",
    "h11",
    "apscheduler",
)
_MASK = "****"
_secrets: set[str] = set()


def register_secrets(values: Iterable[str]) -> None:
    """Remember secret values: every log line and CLI message has them replaced by ****."""
    _secrets.update(v for v in values if len(v) >= 4)


def redact(text: str) -> str:
    """`text` with every registered secret (and any Authorization value) masked."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return _AUTH_VALUE.sub(lambda m: m.group(1) + _MASK, text)


class _Redacting(logging.Formatter):
    """Wrap a formatter so that nothing it prints carries a secret."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's line, secrets masked."""
        return redact(self._inner.format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as JSON with its extra fields."""
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in _EXTRA_KEYS:
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info and record.exc_info[1] is not None:
            entry["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """One readable line: time, level, message, then key=value extras."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as one line of text."""
        when = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        extras = " ".join(f"{k}={getattr(record, k)}" for k in _EXTRA_KEYS if hasattr(record, k))
        line = f"{when} {record.levelname.lower()} {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            line += f" ({record.exc_info[0].__name__}: {record.exc_info[1]})"
        return f"{line} {extras}".rstrip()


def setup_logging(fmt: str, level: str) -> None:
    """Send the bot's log records to stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Redacting(JsonFormatter() if fmt == "json" else TextFormatter()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in HEADER_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
