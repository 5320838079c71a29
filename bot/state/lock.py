"""The one-writer lock of a SQLite state: flock on `<state>.lock`, released by the OS at exit."""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self


class StateBusy(Exception):
    """Another process owns the state (its lock is held); the message names the holder."""


class StateLock:
    """The one-writer lock of a state: flock on `<state>.lock`, released by the OS at exit."""

    def __init__(self, path: Path, fd: int) -> None:
        """Wrap a held lock; use `StateLock.acquire`."""
        self.path = path
        self._fd: int | None = fd

    @staticmethod
    def lock_path(state_path: Path | str) -> Path:
        """The lock file next to the state."""
        state = Path(state_path)
        return state.with_name(state.name + ".lock")

    @classmethod
    def acquire(cls, state_path: Path | str, *, now: datetime | None = None) -> StateLock:
        """Take the lock at once or raise StateBusy naming the holder (pid, host, since)."""
        path = cls.lock_path(state_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise StateBusy(
                f"state {state_path} is in use by another process "
                f"({holder or 'holder not yet recorded'}); one process owns a state"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        since = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        holder = f"pid {os.getpid()} on {socket.gethostname()} since {since}\n"
        try:  # who holds it is information for the next process; the lock is the flock
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
        except OSError:
            pass
        return cls(path, fd)

    def release(self) -> None:
        """Release the lock (the OS also does when the process ends)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)

    def __enter__(self) -> Self:
        """Hold the lock for a block."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Release on leaving the block."""
        self.release()
