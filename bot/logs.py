"""Structured logging: one line per event, text or JSON, naming repository and pull request."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_EXTRA_KEYS = ("repo", "pr", "comment_id", "event")


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
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("apscheduler", "urllib3", "httpx", "github"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
