"""Per-session locks for the SQLite store: one byte of a lock file per session.

:class:`SessionLockFile` locks one byte of ``<store>.locks`` per session with
Linux open file description locks (``F_OFD_SETLK``; dropped by the kernel with
the descriptor, so a dead process leaves nothing behind), falling back to one
``flock()`` on the whole file. Why OFD locks, and the fallback: docs/storage.md.

The same class, ``shared`` and keyed by :func:`want_offset`, keeps
``<store>.wants``: a process waiting to open a session that another holds
read-locks the session's byte there, and the holder sees it
(:meth:`SessionLockFile.held_elsewhere`) and hands the session over.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from host_bridge.embedded.private_files import PRIVATE_FILE_MODE, files_exposure, open_private_file
from host_bridge.embedded.stores._errors import StoreError

__all__ = [
    "LockMechanism",
    "SessionLockFile",
    "lock_offset",
    "ofd_locks_available",
    "want_offset",
]

LockMechanism = Literal["ofd", "flock"]
"""``"ofd"``: one byte-range OFD lock per session; ``"flock"``: one lock on the whole file."""

_OFFSETS = 2**63 - 2  # byte 0 is the probe byte; sessions use 1 … 2**63 - 2
# (2**63 - 1 is the largest offset: a lock ending there reads back as "to the end of file")
_PROBE_OFFSET = 0
_BUSY = (errno.EAGAIN, errno.EACCES)


class _Flock(ctypes.Structure):
    """``struct flock`` as ``F_OFD_*`` reads it (C ABI layout, 64-bit offsets on Linux)."""

    _fields_ = (
        ("l_type", ctypes.c_short),
        ("l_whence", ctypes.c_short),
        ("l_start", ctypes.c_int64),
        ("l_len", ctypes.c_int64),
        ("l_pid", ctypes.c_int32),
    )


def _pack(lock_type: int, offset: int) -> bytes:
    return bytes(_Flock(lock_type, os.SEEK_SET, offset, 1, 0))


def _unpack(raw: bytes) -> _Flock:
    return _Flock.from_buffer_copy(raw)


def lock_offset(session_id: str) -> int:
    """The byte that stands for ``session_id`` in the lock file: stable, in 1 … 2**63 - 2.

    BLAKE2b of the UTF-8 id, so it is the same in every process and version.
    """
    return _offset(session_id, b"dsh-lock")


def want_offset(session_id: str) -> int:
    """The byte that stands for ``session_id`` in the wants file (as :func:`lock_offset`).

    Two sessions on one byte only make a holder think the other one is wanted
    too: it lets that one go early, as if its quiet period had ended.
    """
    return _offset(session_id, b"dsh-want")


def _offset(session_id: str, person: bytes) -> int:
    digest = hashlib.blake2b(
        session_id.encode("utf-8", "surrogatepass"), digest_size=8, person=person
    ).digest()
    return 1 + int.from_bytes(digest, "big") % _OFFSETS


def ofd_locks_available() -> bool:
    """Whether this platform has the ``F_OFD_*`` fcntl commands at all (Linux)."""
    return sys.platform.startswith("linux") and all(
        hasattr(fcntl, name) for name in ("F_OFD_SETLK", "F_OFD_GETLK")
    )


def _probe_ofd(path: Path) -> bool:
    """Whether OFD locks work on ``path``: a probe byte locked on one descriptor must read
    back exactly, owned by a description (``l_pid == -1``), on another (or be busy)."""
    if not ofd_locks_available():
        return False
    first = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        second = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            try:
                fcntl.fcntl(first, fcntl.F_OFD_SETLK, _pack(fcntl.F_WRLCK, _PROBE_OFFSET))
            except OSError as error:
                return error.errno in _BUSY
            seen = _unpack(
                fcntl.fcntl(second, fcntl.F_OFD_GETLK, _pack(fcntl.F_WRLCK, _PROBE_OFFSET))
            )
            return bool(
                seen.l_type == fcntl.F_WRLCK
                and seen.l_whence == os.SEEK_SET
                and seen.l_start == _PROBE_OFFSET
                and seen.l_len == 1
                and seen.l_pid == -1
            )
        except OSError:
            return False
        finally:
            os.close(second)
    finally:
        os.close(first)  # drops the probe lock with the description


class SessionLockFile:
    """Per-session locks in one lock file, held through one open file description.

    Exclusive, or ``shared`` (read locks: many descriptions may hold one session's
    byte; any of them is "held elsewhere" for the others). ``offset`` maps a session
    to its byte (default :func:`lock_offset`). ``mechanism`` forces ``"ofd"`` or
    ``"flock"`` (default: OFD when a probe shows they work); a missing file is
    created with ``mode``. Thread-safe. Raises ``OSError``, and ``SharedStoreError``
    for a file not private to this user unless ``allow_shared``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mechanism: LockMechanism | None = None,
        mode: int = PRIVATE_FILE_MODE,
        allow_shared: bool = False,
        shared: bool = False,
        offset: Callable[[str], int] = lock_offset,
    ):
        self._path = Path(os.fspath(path))
        self._shared = shared
        self._offset = offset
        self._mode = mode
        self._allow_shared = allow_shared
        self._mutex = threading.Lock()
        self._fd = self._open()
        try:
            if mechanism is None:
                mechanism = "ofd" if _probe_ofd(self._path) else "flock"
            elif mechanism == "ofd" and not ofd_locks_available():
                raise OSError(errno.ENOSYS, "OFD locks are not available on this platform")
        except BaseException:
            os.close(self._fd)
            raise
        self._mechanism: LockMechanism = mechanism
        self._held: dict[int, str] = {}  # byte -> the session that holds it here
        self._closed = False

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._path

    @property
    def mechanism(self) -> LockMechanism:
        """How sessions are locked (see :data:`LockMechanism`)."""
        return self._mechanism

    def try_lock(self, session_id: str) -> bool:
        """Take ``session_id``'s lock without waiting; False when another holder has it
        (or another session of this object hashes to the same byte)."""
        offset = self._offset(session_id)
        with self._mutex:
            if self._closed:
                raise OSError(errno.EBADF, "the session lock file is closed")
            holder = self._held.get(offset)
            if holder is not None:
                return holder == session_id
            if not self._lock(self._fd, offset, first=not self._held):
                return False
            self._held[offset] = session_id
            return True

    def unlock(self, session_id: str) -> None:
        """Release ``session_id``'s lock (nothing happens if this object does not hold it)."""
        offset = self._offset(session_id)
        with self._mutex:
            if self._closed or self._held.get(offset) != session_id:
                return
            del self._held[offset]
            if self._mechanism == "ofd":
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, _pack(fcntl.F_UNLCK, offset))
            elif not self._held:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def holds(self, session_id: str) -> bool:
        """Whether this object holds ``session_id``'s lock."""
        with self._mutex:
            return self._held.get(self._offset(session_id)) == session_id

    def held_elsewhere(self, session_id: str) -> bool:
        """Whether another open file description locks ``session_id`` now (a snapshot;
        :meth:`try_lock` decides). Always False with the ``flock`` fallback."""
        offset = self._offset(session_id)
        with self._mutex:
            if self._closed:
                raise OSError(errno.EBADF, "the session lock file is closed")
            if self._held.get(offset) is not None:
                return False  # held here, not elsewhere
            if self._mechanism != "ofd":
                return False
            seen = _unpack(fcntl.fcntl(self._fd, fcntl.F_OFD_GETLK, _pack(fcntl.F_WRLCK, offset)))
            return bool(seen.l_type != fcntl.F_UNLCK)

    def ensure_current(self) -> list[str]:
        """Move the locks to the file now at the path if ours was deleted or replaced.

        Locks on an unlinked file exclude nobody, so every held session is locked
        again on the file at the path; returns those another holder took there
        meanwhile. Nothing changes when no file can be made there, or it is refused.
        """
        with self._mutex:
            if self._closed:
                return []
            try:  # (a file renamed away keeps its link: only the path tells)
                now = os.stat(self._path)
            except FileNotFoundError:
                now = None
            except OSError:
                return []
            mine = os.fstat(self._fd)
            if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                return []
            try:
                fd = self._open()
            except (OSError, StoreError):
                return []
            kept: dict[int, str] = {}
            lost: list[str] = []
            for offset, session_id in self._held.items():
                if self._lock(fd, offset, first=not kept):
                    kept[offset] = session_id
                else:
                    lost.append(session_id)
            old, self._fd, self._held = self._fd, fd, kept
            os.close(old)
            return lost

    def close(self) -> None:
        """Drop every lock (closing the descriptor drops them all at once); idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._held.clear()
            os.close(self._fd)

    def _open(self) -> int:
        """Open (or create) the lock file; refuse it unless it is private or shared is allowed."""
        fd = open_private_file(self._path, mode=self._mode)
        if self._allow_shared:
            return fd
        try:
            refused = files_exposure([(self._path, os.fstat(fd))])
        except BaseException:
            os.close(fd)
            raise
        if refused is not None:
            os.close(fd)
            raise refused
        return fd

    def _lock(self, fd: int, offset: int, *, first: bool) -> bool:
        """Take the lock of ``offset`` on ``fd``; ``first``: nothing is held on ``fd`` yet."""
        try:
            if self._mechanism == "ofd":
                kind = fcntl.F_RDLCK if self._shared else fcntl.F_WRLCK
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _pack(kind, offset))
            elif first:
                kind = fcntl.LOCK_SH if self._shared else fcntl.LOCK_EX
                fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in _BUSY or isinstance(error, BlockingIOError):
                return False
            raise
        return True
