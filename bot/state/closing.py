"""One context-manager shape for the state's stores: `with Store.open(...) as state:` closes it."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """Use as a context manager that calls `close()` on leaving the block."""

    def close(self) -> None:
        """Close the connections (each store says how)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        """Use as a context manager that closes the state."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close on leaving the block."""
        self.close()
