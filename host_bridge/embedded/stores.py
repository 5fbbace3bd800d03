"""Choose the persistence listener from configuration: an SQLite path or a PostgreSQL URL."""

from __future__ import annotations

import os

from host_bridge.embedded.sqlite_store import SqliteEventStore
from host_bridge.embedded.store_errors import StoreError

__all__ = ["is_postgres_url", "open_store"]


def is_postgres_url(spec: object) -> bool:
    """Whether ``spec`` is a ``postgresql://`` (or ``postgres://``) connection URL."""
    return isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://"))


def open_store(
    spec: str | os.PathLike[str], *, create: bool = True, lease_wait: float = 0.0
) -> SqliteEventStore:
    """Open the session store named by ``spec``.

    A ``postgresql://…`` URL opens a
    :class:`~host_bridge.embedded.postgres_store.PostgresEventStore` (shared by
    many host processes, sessions leased; needs the ``postgres`` extra);
    anything else is the path of an SQLite file (``create``: make it if missing).
    ``lease_wait`` is how long a PostgreSQL store waits for a lease held elsewhere.
    """
    if is_postgres_url(spec):
        try:
            from host_bridge.embedded.postgres_store import PostgresEventStore
        except ImportError as error:  # pragma: no cover - depends on the installation
            raise StoreError(
                "a postgresql:// store needs psycopg 3: pip install 'dsh-tool-schedule[postgres]'"
                f" ({error})"
            ) from None
        assert isinstance(spec, str)
        return PostgresEventStore(spec, lease_wait=lease_wait)
    return SqliteEventStore(spec, create=create)
