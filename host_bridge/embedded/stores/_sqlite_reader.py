"""A session store file opened strictly read-only, for tools that only look (inspect, verify).

:class:`SqliteStoreReader` never writes the database file: it opens it through
an SQLite ``file:…?mode=ro`` URI, runs no migration (a schema version 1 file,
before the ``leases`` table, is read as it is), takes no session lock (no
``.locks`` file is created) and starts no writer thread. It reads what is
durably committed, in one snapshot per session, so it works while another
process writes to the same store; that writer's locks never block it (WAL).

Where SQLite keeps its companions. A WAL reader takes part in SQLite's locking
through the ``-shm`` file, so in a writable directory a reader creates the
``-wal`` and ``-shm`` companions when they are missing (empty; the next writer
uses them as they are) and leaves them there. In a directory it cannot write
(a read-only mount, no write permission) those files cannot be created, and a
``mode=ro`` open fails; then, and only when there is no ``-wal`` file with
content, the file is opened ``immutable=1``: SQLite reads it without any
locking and ignores a ``-wal``. That is safe there because nothing can be
writing: a writer in WAL mode needs a ``-wal`` file in that same directory.
A non-empty ``-wal`` beside the file in such a directory holds committed rows
an immutable open would not see, so that case keeps ``mode=ro`` (SQLite reads
it when the ``-shm`` is there too, and says it cannot open the file otherwise).

A store that other local users can reach (its directory writable by others,
a file of it open to group or others) is read all the same, with a warning
(:attr:`SqliteStoreReader.exposure`): a reader creates no file of its own, so
refusing would protect nothing that is not already exposed, and would keep
the owner from looking at a store before fixing it. Files of another user are
not reported: reading a store one does not own is a normal thing to do.

A missing file, an empty (zero-length) file and an SQLite database without
any table are :class:`StoreMissingError` ("there is nothing to read"); a file of
another application, a corrupt file or a newer schema raise the same errors
as :class:`~host_bridge.embedded.stores._sqlite.SqliteEventStore` does.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from host_bridge.embedded.private_files import store_exposure
from host_bridge.embedded.stores._errors import (
    SharedStoreError,
    StoreClosedError,
    StoreError,
    StoreMissingError,
)
from host_bridge.embedded.stores._reads import ReadQueries, StoreReadsBase
from host_bridge.embedded.stores._sqlite import (
    BUSY_TIMEOUT_MS,
    DUE_INDEX_SCHEMA_VERSION,
    SQLITE_READS,
    _category,
    _open_error,
    _read_error,
    _sidecar,
    schema_version,
)

__all__ = ["SqliteStoreReader"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_T = TypeVar("_T")


class SqliteStoreReader(StoreReadsBase[sqlite3.Connection]):
    """Durably stored sessions of one SQLite store file, read without writing anything.

    Raises on open: :class:`StoreMissingError` when ``path`` does not exist, is
    empty, or is an SQLite database without tables; :class:`StoreError` when it
    is a directory or cannot be read, :class:`StoreCorruptError` /
    :class:`StoreVersionError` like the writable store. Reads are safe from
    any thread; :meth:`close` is idempotent.
    """

    _due_index_version = DUE_INDEX_SCHEMA_VERSION

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(os.fspath(path))
        self._label = str(self._path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._immutable = _needs_immutable(self._path)
        conn = self._open()
        try:
            version = schema_version(conn, self._path)
        except sqlite3.Error as error:
            conn.close()
            raise _open_error(self._path, error) from None
        except BaseException:
            conn.close()
            raise
        if version == 0:
            conn.close()
            raise StoreMissingError(
                f"{self._path} is an SQLite database without tables: "
                "no session store was written to it",
                location=str(self._path),
                reason="an SQLite database without tables",
            )
        self._version = version
        self._conn = conn
        self._exposure = store_exposure(self._path, owners=False)
        if self._exposure is not None:
            _log.warning("reading a shared session store: %s", self._exposure.problem)
        _log.debug(
            "session store %s open read-only (schema version %d%s)",
            self._path,
            version,
            ", immutable" if self._immutable else "",
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def exposure(self) -> SharedStoreError | None:
        """What lets other local users at this store, found on open (None: it is private)."""
        return self._exposure

    @property
    def immutable(self) -> bool:
        """Whether the file was opened ``immutable=1`` (its directory cannot be written)."""
        return self._immutable

    # --- internals -------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        uri = f"file:{quote(os.fspath(self._path))}?mode=ro"
        if self._immutable:
            uri += "&immutable=1"
        try:
            return sqlite3.connect(
                uri,
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise _open_error(self._path, error) from None

    def _reads(self) -> ReadQueries[sqlite3.Connection]:
        return SQLITE_READS

    def _read(self, query: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._path} is closed")
            try:
                return query(conn)
            except sqlite3.Error as error:
                _log.debug("read of %s failed (%s)", self._path, _category(error))
                raise _read_error(self._path, error) from None


def _needs_immutable(path: Path) -> bool:
    """Check the file before SQLite sees it; whether it must be opened ``immutable=1``.

    Raises :class:`StoreMissingError` for a missing or empty file and
    :class:`StoreError` for a directory or a file this process cannot read.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise StoreMissingError(
            f"there is no session store at {path}", location=str(path), reason="no such file"
        ) from None
    except OSError as error:
        raise StoreError(
            f"cannot read the session store {path} ({error.strerror or type(error).__name__})"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path} is not a file")
    wal_bytes = _size(_sidecar(path, "-wal"))
    if info.st_size == 0 and wal_bytes == 0:
        raise StoreMissingError(
            f"{path} is empty: no session store was written to it",
            location=str(path),
            reason="the file is empty",
        )
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read the session store {path} (permission denied)")
    directory = path.parent
    return wal_bytes == 0 and not os.access(directory, os.W_OK | os.X_OK)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
