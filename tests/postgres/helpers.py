"""Builders shared by the PostgreSQL store tests."""

from __future__ import annotations

from typing import Any

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import PostgresEventStore
from host_bridge.protocols import SessionEvent

__all__ = ["append", "open_pg"]


def open_pg(url: str, opened: list[PostgresEventStore], **options: Any) -> PostgresEventStore:
    store = PostgresEventStore(url, **options)
    opened.append(store)
    return store


def append(store: PostgresEventStore, session_id: str, seq: int) -> None:
    item = SessionEvent("note", seq, 1_700_000_000_000, {"n": seq})
    store.record_append(session_id, item, encode_payload(item.data))
