"""Rows a durable store queues (validated on the way in, so a queued row can always be
written) and reads back (:func:`decode_session`), for both backends; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Literal, TypeGuard

from actors._contract import SessionEvent, SessionHeader
from host_bridge.embedded.codec import MAX_PAYLOAD_BYTES, PayloadError, decode_payload
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    StoreCorruptError,
    StoreError,
    StoreWriteError,
)

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "UNTOLD",
    "CommitResult",
    "EventRow",
    "Loss",
    "Op",
    "Outcome",
    "SessionRow",
    "StoredSession",
    "Waiter",
    "WriteRound",
    "by_session",
    "check_id",
    "decode_event",
    "decode_header",
    "decode_session",
    "event_row",
    "is_storable_id",
    "is_whole",
    "settle_all",
    "show_id",
]

INT64_MIN = -(2**63)
"""The smallest integer a stored column holds."""

INT64_MAX = 2**63 - 1
"""The largest integer a stored column holds."""


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as durably stored: its header and its whole log (``events[i].seq == i``)."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A queued ``sessions`` row: a new session's header."""

    session_id: str
    seed_length: int | None
    parent_session: str | None
    created_at: int


class Untold(Enum):
    """The type of :data:`UNTOLD`."""

    UNTOLD = "untold"


UNTOLD: Final = Untold.UNTOLD
"""An append that does not tell the session's next schedule target."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """A queued ``events`` row: one committed event, its decoded data and encoded payload.

    ``schedule_due_ms``, when told, is the appender's earliest schedule target
    of the session after this row (``None``: nothing active).
    """

    session_id: str
    seq: int
    type: str
    time: int
    payload: bytes
    data: Any = None
    schedule_due_ms: int | Untold | None = UNTOLD


Op = SessionRow | EventRow
"""Any queued row."""


@dataclass(frozen=True, slots=True)
class Waiter:
    """A flush request waiting for the writer."""

    session_id: str | None  # None: every session
    future: Future[bool]


@dataclass(frozen=True, slots=True)
class Loss:
    """Why this store lost a session; every later write of the session is refused.

    ``"lease"``: no longer held here (flushes resolve ``False``); ``"conflict"``: its
    rows can never be written (flushes fail with a :class:`SessionLeaseError`).
    """

    session_id: str
    kind: Literal["lease", "conflict"]
    message: str

    def error(self) -> SessionLeaseError:
        """A fresh exception for one refused call."""
        return SessionLeaseError(self.message, session_id=self.session_id)

    def flush_outcome(self) -> bool | BaseException:
        """What a flush of the lost session resolves to."""
        return False if self.kind == "lease" else self.error()


@dataclass(slots=True)
class WriteRound:
    """What one write round of the writer thread did."""

    committed: list[Op] = field(default_factory=list)  # rows now durable
    commits: int = 0  # transactions committed
    retry: list[Op] = field(default_factory=list)  # rows back to the head of the queue
    error: StoreWriteError | None = None  # why ``retry`` failed (a whole-store failure)
    lost: dict[str, Loss] = field(default_factory=dict)  # sessions lost in this round
    unconfirmed: set[str] = field(default_factory=set)  # ownership checks that failed (``error``)
    conflict_category: str = ""  # the backend's name of the last row conflict


Outcome = tuple[Future[bool], bool | BaseException]
"""A flush future and what it resolves to (a value, or an exception to fail with)."""
CommitResult = tuple[BaseException | None, dict[str, Loss]]
"""What one write transaction returns: its failure (rolled back) and the sessions found lost."""


def decode_session(
    session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
) -> StoredSession | None:
    """A session from its header and event rows (one snapshot); None without a header.
    Raises :class:`StoreCorruptError` unless the rows are ``0 … n-1`` and decode."""
    if head is None:
        return None
    header = decode_header(session_id, tuple(head))
    events = tuple(decode_event(session_id, index, tuple(row)) for index, row in enumerate(rows))
    return StoredSession(header, events)


def is_storable_id(value: object) -> bool:
    """Whether ``value`` is a string both backends store faithfully (non-empty, no NUL)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_whole(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_id(value: object, what: str) -> None:
    """Raise :class:`StoreError` naming ``what`` unless ``value`` is a storable id."""
    if not isinstance(value, str):
        raise StoreError(f"{what} must be a string, not {type(value).__name__}")
    if not is_storable_id(value):
        raise StoreError(
            f"{what} {show_id(value)} cannot be stored: "
            "it must be non-empty, without NUL or lone surrogates"
        )


def event_row(session_id: str, event: SessionEvent, payload: bytes) -> EventRow:
    """Validate one event row before it is queued, so a queued row can always be written."""
    if not isinstance(event, SessionEvent):
        raise StoreError(f"expected a SessionEvent, not {type(event).__name__}")
    if not isinstance(event.type, str) or not is_storable_id(event.type):
        raise StoreError(
            f"event type of session {show_id(session_id)} must be a non-empty valid string"
        )
    for name, number in (("seq", event.seq), ("time", event.time)):
        if not (is_whole(number) and INT64_MIN <= number <= INT64_MAX):
            raise StoreError(
                f"event {name} of session {show_id(session_id)} must be a 64-bit integer"
            )
    if event.seq < 0:
        raise StoreError(f"event seq of session {show_id(session_id)} must not be negative")
    if not isinstance(payload, bytes | bytearray):
        raise StoreError(f"event payload must be bytes, not {type(payload).__name__}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise StoreError(
            f"event payload of {len(payload)} bytes is larger than {MAX_PAYLOAD_BYTES}"
        )
    return EventRow(session_id, event.seq, event.type, event.time, bytes(payload), event.data)


def decode_header(session_id: str, row: tuple[Any, ...]) -> SessionHeader:
    """A header from its ``(seed_length, parent_session)`` row; corrupt values raise."""
    seed_length, parent = row
    if seed_length is not None and (not isinstance(seed_length, int) or seed_length < 0):
        raise StoreCorruptError(
            f"session {show_id(session_id)} has an invalid seed_length", session_id=session_id
        )
    if parent is not None and not isinstance(parent, str):
        raise StoreCorruptError(
            f"session {show_id(session_id)} has an invalid parent_session", session_id=session_id
        )
    return SessionHeader(session_id, seed_length, parent)


def decode_event(session_id: str, index: int, row: tuple[Any, ...]) -> SessionEvent:
    """The event at ``index`` from its ``(seq, type, time, data)`` row; corrupt values raise."""
    seq, type_, time_ms, data = row
    if seq != index or not isinstance(seq, int):
        raise StoreCorruptError(
            f"session {show_id(session_id)} has no event with seq {index} (found {seq!r})",
            session_id=session_id,
        )
    if not isinstance(type_, str) or not isinstance(time_ms, int) or not isinstance(data, bytes):
        raise StoreCorruptError(
            f"session {show_id(session_id)} has a malformed event at seq {seq}",
            session_id=session_id,
        )
    try:
        value = decode_payload(data)
    except PayloadError as error:
        raise StoreCorruptError(
            f"session {show_id(session_id)} has an unreadable payload at seq {seq}: {error}",
            session_id=session_id,
        ) from None
    return SessionEvent(type_, seq, time_ms, value)


def by_session(batch: Sequence[Op]) -> list[list[Op]]:
    """The rows of ``batch`` grouped by session, each group in queue order."""
    groups: dict[str, list[Op]] = {}
    for op in batch:
        groups.setdefault(op.session_id, []).append(op)
    return list(groups.values())


def show_id(value: str, limit: int = 80) -> str:
    """A session id for messages: repr'd (control characters escaped) and shortened."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-2:]}"


def settle_all(outcomes: list[Outcome]) -> None:
    """Resolve or fail every future with its outcome; one settled already is left alone."""
    for future, outcome in outcomes:
        try:
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        except InvalidStateError:
            pass  # failed already by a close that stopped waiting for the writer
