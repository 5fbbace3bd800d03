"""The errors of the session stores: every one a :class:`StoreError`, worded for operators,
never carrying a driver's text (at most a category such as ``SQLITE_FULL`` or an SQLSTATE).
"""

from __future__ import annotations

__all__ = [
    "SessionLeaseError",
    "SharedStoreError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreVersionError",
    "StoreWriteError",
]


class StoreError(Exception):
    """The session store cannot do what was asked; the message is meant for operators."""


class StoreMissingError(StoreError):
    """There is no session store where one was to be read: no file, an empty one, no tables.

    ``location`` names the place and ``reason`` what is there instead (``"no such file"``).
    """

    def __init__(self, message: str, *, location: str, reason: str) -> None:
        super().__init__(message)
        self.location = location
        self.reason = reason


class StoreCorruptError(StoreError):
    """The store, or a session's rows in it, are unreadable or inconsistent.

    ``session_id`` names the session when the damage is confined to its rows, else ``None``.
    """

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id


class StoreVersionError(StoreError):
    """The store was written by a newer schema version than this code understands."""


class SharedStoreError(StoreError):
    """The store's files or directory are open to other local users, or not this user's.

    ``problem`` says what is wrong and ``remedy`` what fixes it (``run chmod 600 …``).
    """

    def __init__(self, message: str, *, problem: str, remedy: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.remedy = remedy


class StoreClosedError(StoreError):
    """The store was closed (or its writer stopped); it accepts no more work."""


class StoreWriteError(StoreError):
    """A write transaction failed and was rolled back; its rows stay queued for the next attempt.

    ``category`` is a short backend error name such as ``"SQLITE_FULL"``.
    """

    def __init__(self, message: str, *, category: str) -> None:
        super().__init__(message)
        self.category = category


class SessionLeaseError(StoreError):
    """This store does not own the session: another one holds it, or this one lost it.

    ``holder`` names the owner that holds it (``host:pid:tag``) when known, else ``None``.
    """

    def __init__(
        self, message: str, *, session_id: str | None = None, holder: str | None = None
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder
