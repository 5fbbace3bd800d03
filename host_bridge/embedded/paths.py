"""Where the embedded host keeps its data.

The data directory is chosen, first match wins, from:

1. ``$DSH_SCHEDULE_HOME`` when it is set and not empty (``~`` is expanded);
2. ``$XDG_DATA_HOME/dsh-schedule`` when ``$XDG_DATA_HOME`` is set to an absolute
   path (the XDG Base Directory rule: empty or relative values are ignored);
3. ``~/.local/share/dsh-schedule``.

The session store is the SQLite file ``sessions.sqlite3`` inside that directory
(plus SQLite's ``-wal`` and ``-shm`` companions while it is open). Every path
can also be passed explicitly, so none of this is required.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "APP_DIR_NAME",
    "DEFAULT_DATA_ENV",
    "STORE_FILE_NAME",
    "default_data_dir",
    "is_postgres_url",
    "store_path",
]

DEFAULT_DATA_ENV = "DSH_SCHEDULE_HOME"
"""The environment variable that overrides the data directory."""

APP_DIR_NAME = "dsh-schedule"
"""The directory name used under ``$XDG_DATA_HOME`` or ``~/.local/share``."""

STORE_FILE_NAME = "sessions.sqlite3"
"""The file name of the SQLite session store inside the data directory."""


def default_data_dir() -> Path:
    """The data directory.

    ``$DSH_SCHEDULE_HOME`` if set and not empty, else ``$XDG_DATA_HOME/dsh-schedule``
    (only for an absolute ``$XDG_DATA_HOME``), else ``~/.local/share/dsh-schedule``.

    The directory is not created here; the store creates it when it opens.
    """
    override = os.environ.get(DEFAULT_DATA_ENV, "")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / APP_DIR_NAME
    return Path.home() / ".local" / "share" / APP_DIR_NAME


def store_path(data_dir: str | os.PathLike[str]) -> Path:
    """The session store file inside ``data_dir``: ``data_dir / "sessions.sqlite3"``."""
    return Path(data_dir) / STORE_FILE_NAME


def is_postgres_url(spec: object) -> bool:
    """Whether a store spec is a ``postgresql://`` (or ``postgres://``) connection URL.

    Any other spec is the path of an SQLite file.
    """
    return isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://"))
