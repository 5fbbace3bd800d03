"""What the write-behind component needs from a backend and from a projection.

A :class:`Recorder` is one backend's transactions (a round's rows and ownership check
in one), reads, locks or leases; a :class:`Projection` a same-transaction view (the
due index), asked inside the transaction and told after ``COMMIT``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from host_bridge.embedded.stores._due import DueEntry, ReadSession, SessionProjection
from host_bridge.embedded.stores._reads import ReadQueries
from host_bridge.embedded.stores._rows import CommitResult, Loss, Op

__all__ = [
    "Epochs",
    "LoseHeld",
    "Plan",
    "Projection",
    "Recorder",
    "SideWrite",
    "Stage",
    "TakeMany",
]

_T = TypeVar("_T")
_P = TypeVar("_P", bound="Plan")

SideWrite = tuple[str, tuple[object, ...]]
"""A statement a backend writes beside session rows (SQLite's holder rows), soon, unflushed."""


class Plan(Protocol):
    """What one write transaction changes in a projection (``None``: delete the row)."""

    @property
    def changes(self) -> Mapping[str, DueEntry | None]:
        """The index rows to write, by session."""

    @property
    def checkpoints(self) -> Mapping[str, SessionProjection | None]:
        """The schedule checkpoints to write, by session."""


Epochs = Callable[[Iterable[str]], Mapping[str, int]]
"""The fencing epochs of those of the given sessions this store holds (the writer's answer)."""

LoseHeld = Callable[[Callable[[str], Loss]], None]
"""Loses every session held here and not lost yet, for the reason ``loss_of(session_id)`` gives."""

TakeMany = Callable[[Sequence[str]], list[str]]
"""The store's side of a batch claim: take those of the given sessions nobody holds (never
waiting), in their order; returns the ones it took, held by the store from then on."""

Stage = Callable[[Sequence[Op], ReadSession], Plan]
"""Called by a recorder inside its write transaction, after the rows are inserted and
before ``COMMIT``, with the rows it wrote; returns the index rows and checkpoints to
write with them."""


class Projection(Protocol[_P]):
    """A view kept in the same transaction as the rows that move it (the due index)."""

    def plan(self, rows: Sequence[Op], read: ReadSession) -> _P:
        """The changes of ``rows`` (writer thread, in the transaction; ``read``: on a miss)."""

    def committed(self, plan: _P) -> None:
        """After ``COMMIT``: keep the state of ``plan`` and tell listeners; never raises."""


class Recorder(Protocol):
    """One backend's transactions, reads and session ownership; used by one store.

    ``write`` runs on the writer thread, ``lock``/``unlock`` under the store's ownership
    lock, reads on any thread; driver errors are translated at these calls only.
    """

    @property
    def label(self) -> str:
        """How messages name the store (a path, or a URL without password)."""

    @property
    def confirms_on_flush(self) -> bool:
        """Whether a flush of a held session must confirm ownership in a round (a lease)."""

    @property
    def takes_free_sessions(self) -> bool:
        """Whether a write to a session nobody holds takes it on the way (a local lock)."""

    @property
    def queries(self) -> ReadQueries[Any]:
        """The read queries, run by :meth:`read`."""

    def read(self, query: Callable[[Any], _T]) -> _T:
        """Run ``query`` on a read connection; driver errors become ``StoreError``."""

    def write(
        self, rows: list[Op], side: list[SideWrite], check: set[str], stage: Stage, epochs: Epochs
    ) -> CommitResult:
        """Write ``rows`` and ``side``, confirm ownership of ``check`` (``epochs``: those held
        here), in one transaction; ``stage`` runs before ``COMMIT``. Returns the failure
        (rolled back) and the sessions found lost, whose rows are not written."""

    def is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means some rows can never be written (not a whole-store failure)."""

    def category(self, error: BaseException) -> str:
        """The backend's short name of ``error`` for messages: never the driver's text."""

    def lock(self, session_id: str, lose_held: LoseHeld) -> int:
        """Take the session's lock or lease; returns its fencing epoch (``SessionLeaseError``
        when held elsewhere; ``lose_held(loss_of)``: every held session is lost)."""

    def took(self, session_id: str) -> list[SideWrite]:
        """What to write beside the rows once ``session_id`` was taken."""

    def unlock(self, session_id: str, lost: bool) -> list[SideWrite]:
        """Give the session's lock or lease back; returns what to write beside the rows."""

    def closing(self, holding: bool) -> list[SideWrite]:
        """At the first close: what the final round must also write."""

    def want(self, session_id: str) -> bool:
        """Signal that this store wants ``session_id``, never waiting; False when it cannot."""

    def unwant(self, session_id: str) -> None:
        """Withdraw :meth:`want` (nothing happens when it is not signalled)."""

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` another store wants now; a failed look finds none."""

    def due_sessions(
        self, until_ms: int | None, limit: int, held_here: Callable[[str], bool]
    ) -> list[tuple[str, int]]:
        """Up to ``limit`` due sessions, earliest first, held neither here nor elsewhere."""

    def claim(self, session_id: str, now_ms: int, acquire: Callable[[str], int]) -> bool:
        """Take the session with ``acquire`` if its index row is due at ``now_ms``; False when
        not due or held elsewhere (the caller gives back what was taken then)."""

    def claim_due(
        self, now_ms: int, limit: int, wanted: Callable[[str], bool], take: TakeMany
    ) -> list[str]:
        """Up to ``limit`` sessions due at ``now_ms`` (or with an unsound row), earliest first,
        that ``wanted`` and ``take`` took and whose row was still due once taken; the caller
        gives back what ``take`` took and this did not return."""

    def lock_many(self, session_ids: Sequence[str], lose_held: LoseHeld) -> dict[str, int]:
        """Take the locks or leases of those of ``session_ids`` nobody holds, never waiting;
        their fencing epochs. On an exception none of them is kept."""

    def unlock_many(self, session_ids: Sequence[str], lost: Collection[str]) -> list[SideWrite]:
        """Like :meth:`unlock` for each session (``lost``: those whose lease went with it)."""

    def rebuild_index(self) -> int:
        """Rebuild the whole due index from the logs in one transaction; the rows written."""

    def rebuild_session_index(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's index row from its log in one transaction."""

    def writer_stopped(self) -> None:
        """On the writer thread, once it stopped: close its connection, drop the locks."""

    def close(self, writer_stopped: bool) -> None:
        """Close every connection (the writer's only once it stopped)."""
