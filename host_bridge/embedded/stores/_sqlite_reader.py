"""A session store file opened strictly read-only, for tools that only look (inspect, verify).

:class:`SqliteStoreReader` opens a ``file:…?mode=ro`` URI (``immutable=1`` in
a directory it cannot write), migrates nothing, locks nothing and starts no
writer. Where SQLite keeps its companions, and shared stores: docs/storage.md.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from host_bridge.embedded.private_files import store_exposure
from host_bridge.embedded.stores._errors import SharedStoreError, StoreError, StoreMissingError
from host_bridge.embedded.stores._reads import OneConnectionReader
from host_bridge.embedded.stores._sqlite import (
    BUSY_TIMEOUT_MS,
    CHECKPOINT_SCHEMA_VERSION,
    DUE_INDEX_SCHEMA_VERSION,
    SQLITE_READS,
    _category,
    _closing_on_failure,
    _file_error,
    _sidecar,
    schema_version,
)

__all__ = ["SqliteStoreReader"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_T = TypeVar("_T")


class SqliteStoreReader(OneConnectionReader[sqlite3.Connection]):
    """Durably stored sessions of one SQLite store file, read without writing anything.

    Raises on open: :class:`StoreMissingError` (no file, an empty one, no tables),
    :class:`StoreError` (a directory, unreadable), or like the writable store.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(os.fspath(path))
        self._immutable = _needs_immutable(self._path)
        conn = self._open()
        with _closing_on_failure(conn, self._path):
            version = schema_version(conn, self._path)
        if version == 0:
            conn.close()
            raise StoreMissingError(
                f"{self._path} is an SQLite database without tables: "
                "no session store was written to it",
                location=str(self._path),
                reason="an SQLite database without tables",
            )
        super().__init__(
            str(self._path),
            SQLITE_READS,
            conn,
            version=version,
            due_index_version=DUE_INDEX_SCHEMA_VERSION,
            checkpoint_version=CHECKPOINT_SCHEMA_VERSION,
            errors=(sqlite3.Error,),
            translate=self._read_error,
        )
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
            raise _file_error(self._path, error) from None

    def _read_error(self, error: Exception) -> StoreError:
        _log.debug("read of %s failed (%s)", self._path, _category(error))
        assert isinstance(error, sqlite3.Error)
        return _file_error(self._path, error, "read")


def _needs_immutable(path: Path) -> bool:
    """Check the file before SQLite sees it (raising like the reader); whether it must be
    opened ``immutable=1``."""
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
