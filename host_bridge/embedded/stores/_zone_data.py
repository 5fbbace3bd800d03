"""The zone data a store's due index was computed with, stamped in its ``meta`` table.

A ``cron`` record's next target is computed with the installed ``tzdata``
package, so a due index built under one release can disagree with a fresh
fold under another that changed a zone's rules. Every whole build of the
index (schema creation or migration, ``reindex``) records the installed
version under :data:`ZONE_DATA_KEY`; a writable open that finds another one
rebuilds the index, and ``verify`` reads such a disagreement in a session with
a ``cron`` record as a note. A store without a stamp was written by a release
without calendar rules, so it holds no ``cron`` record and is only stamped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ZONE_DATA_KEY",
    "ZONE_REFRESH_LOG",
    "ZoneDataCheck",
    "read_zone_stamp",
    "recorded_version",
    "refresh_zone_data",
    "write_zone_stamp",
    "zone_data_version",
]

ZONE_DATA_KEY = "zone_data"
"""The ``meta`` key of the zone data version the due index was last built with."""

_TZDATA: Any = importlib.import_module("tzdata")  # (the package ships no type information)


def zone_data_version() -> str:
    """The IANA release of the installed ``tzdata`` package (``"2025b"``), read when asked."""
    version = getattr(_TZDATA, "IANA_VERSION", None)
    return version if isinstance(version, str) and version else "unknown"


def recorded_version(value: object) -> str | None:
    """A stored ``zone_data`` value as a version, or ``None`` when absent or not text."""
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class ZoneDataCheck:
    """The zone data version a store recorded for its due index beside the installed one."""

    recorded: str | None
    """The stamp in ``meta`` (``None``: none, as an older release wrote the store)."""
    installed: str
    """:func:`zone_data_version` when checked."""

    @property
    def changed(self) -> bool:
        """Whether the index may have been computed with other zone data than installed."""
        return self.recorded != self.installed

    @property
    def recorded_text(self) -> str:
        """The recorded version in words, for notes and log lines."""
        return self.recorded if self.recorded is not None else "of an unrecorded version"


ZONE_REFRESH_LOG = (
    "session store %s: its due index was computed with zone data %s, tzdata %s is installed; "
    "rebuilt the due index and schedule checkpoints (%d sessions due)"
)
"""The INFO line of a writable open that rebuilt the index for other zone data (``%``
arguments: the store's label, the recorded and installed versions, the rows written)."""


def read_zone_stamp(conn: Any) -> str | None:
    """The zone data version recorded in ``meta`` on ``conn`` (see :func:`recorded_version`)."""
    row = conn.execute(f"SELECT value FROM meta WHERE key = '{ZONE_DATA_KEY}'").fetchone()
    return None if row is None else recorded_version(row[0])


def write_zone_stamp(conn: Any, mark: str, version: str) -> None:
    """Record ``version`` in ``meta`` on ``conn`` (in the caller's transaction)."""
    conn.execute(
        f"INSERT INTO meta(key, value) VALUES ('{ZONE_DATA_KEY}', {mark})"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (version,),
    )


def refresh_zone_data(
    conn: Any, mark: str, *, index_existed: bool, rebuild: Callable[[], int]
) -> tuple[ZoneDataCheck, int] | None:
    """Stamp the installed zone data on ``conn``, in the caller's write transaction.

    When the stamp names other zone data and the due index existed before
    this transaction (``index_existed``; one a migration just built is
    current), the index is rebuilt first (``rebuild`` returns the rows
    written). A missing stamp is only written: releases that wrote none had no
    ``cron`` records, whose targets alone depend on zone data, so a store from
    one needs no rebuild (and an upgrade does not rebuild every store once).
    Returns the check and that count when it rebuilt.
    """
    check = ZoneDataCheck(read_zone_stamp(conn), zone_data_version())
    if not check.changed:
        return None
    count = rebuild() if index_existed and check.recorded is not None else None
    write_zone_stamp(conn, mark, check.installed)
    return None if count is None else (check, count)
