"""``dsh-schedule reindex``: rebuild the store's due index and checkpoints from the logs."""

from __future__ import annotations

import contextlib

import click

from host_bridge.cli._common import (
    StoreUnavailable,
    allow_shared_store,
    allow_shared_store_option,
    exit_codes_help,
    location_options,
    resolve_data_dir,
    shared_store_refused,
    store_spec,
    visible,
)
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SharedStoreError, SqliteEventStore, StoreError, open_store

__all__ = ["reindex_command"]


@click.command(
    "reindex",
    short_help="Rebuild the due index (when each session is due) from the logs.",
    epilog=exit_codes_help(
        (0, "the index was rebuilt"),
        (
            2,
            "usage error, or the session store cannot be written: missing, unreadable, "
            "corrupt, of a newer schema, read-only, locked by another process, or open to "
            "other local users (without --allow-shared-store)",
        ),
    ),
)
@location_options
@allow_shared_store_option
def reindex_command() -> None:
    """Rebuild the due index and the schedule checkpoints from the stored session logs.

    The due index says, per session, when it is due (its earliest reminder, or
    a reminder turn a crash cut); `serve` wakes sessions from it. A session's
    schedule checkpoint is its folded schedule and inbox state as of some event,
    so reads fold only the events after it. The store keeps both in the same
    commit as the events that move them, and rebuilds them when it is opened
    for writing under other zone data (tzdata) than they were built with, so
    this is needed only after they were damaged by hand (`verify` says so).
    Safe while hosts run: the rebuild is one transaction that no commit can
    interleave with. It records the installed tzdata version in the store.
    """
    directory = resolve_data_dir()
    spec = store_spec()
    shared = allow_shared_store()
    try:
        store = (
            open_store(spec, create=False, allow_shared_store=shared)
            if spec is not None
            else SqliteEventStore(store_path(directory), create=False, allow_shared_store=shared)
        )
    except SharedStoreError as error:
        raise shared_store_refused(error) from None
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None
    try:
        count = store.reindex()
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None
    finally:
        with contextlib.suppress(StoreError):
            store.close()
    click.echo(f"rebuilt the due index of {visible(store.label)}: {count} session(s) due")
