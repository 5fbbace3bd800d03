"""A shared, ordered record of the protocol calls the fakes receive."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Journal"]


class Journal:
    """A thread-safe ordered list of entries such as ``("flush", session_id)``.

    Every fake of :mod:`host_bridge.testing` that is given the same journal
    records into it, so a test can assert the global order of calls, e.g.
    ``flush → flush-resolved → reserve → followup → append → release → flush``.
    Each entry is a tuple whose first element is its *kind*.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[Any, ...]] = []

    def record(self, kind: str, *fields: Any) -> None:
        """Append the entry ``(kind, *fields)``."""
        with self._lock:
            self._entries.append((kind, *fields))

    def entries(self) -> list[tuple[Any, ...]]:
        """A copy of every entry, oldest first."""
        with self._lock:
            return list(self._entries)

    def kinds(self) -> list[str]:
        """The kind (first element) of every entry, oldest first."""
        with self._lock:
            return [entry[0] for entry in self._entries]

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        """Every entry of ``kind``, oldest first."""
        with self._lock:
            return [entry for entry in self._entries if entry[0] == kind]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"Journal({self.entries()!r})"
