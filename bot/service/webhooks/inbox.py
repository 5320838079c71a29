"""The marked pull requests waiting for the debounced refresh, and the open heads known."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from bot.service.webhooks.events import Mark


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
