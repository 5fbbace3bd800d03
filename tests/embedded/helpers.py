"""Shared by the embedded tests: a flush listener, a gate, mailbox-level calls, child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pykka

from actors._contract import AppendGuard
from actors._session_actor import SessionActor, SessionCore
from host_bridge._eventlog import EventLog
from host_bridge.embedded.codec import decode_payload, encode_payload
from host_bridge.protocols import SessionEvent, SessionHeader
from host_bridge.testing import FakeClock
from messages._mailbox import AppendEvent, FlushSession

TIMEOUT = 5.0

ActorRef = pykka.ActorRef[SessionActor]


class FakeListener:
    """A persistence listener whose flush futures the test resolves."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.flushes: list[Future[bool]] = []
        self.append_error: Exception | None = None
        self.flush_error: Exception | None = None
        self._lock = threading.Lock()

    def record_append(self, session_id: str, event: SessionEvent, payload: bytes) -> None:
        if self.append_error is not None:
            raise self.append_error
        with self._lock:
            self.calls.append(("append", session_id, event, payload))

    def record_appends(self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]]) -> None:
        if self.append_error is not None:
            raise self.append_error
        with self._lock:  # one call: one unit
            self.calls.append(("appends", session_id, tuple(rows)))

    def flush(self, session_id: str) -> Future[bool]:
        if self.flush_error is not None:
            raise self.flush_error
        future: Future[bool] = Future()
        with self._lock:
            self.calls.append(("flush", session_id))
            self.flushes.append(future)
        return future

    def appended(self) -> list[SessionEvent]:
        events: list[SessionEvent] = []
        for call in self.calls:
            if call[0] == "append":
                events.append(call[2])
            elif call[0] == "appends":
                events.extend(event for event, _ in call[2])
        return events

    def kinds(self) -> list[str]:
        """``flush``, ``appendN`` for one row, ``appendsN+M`` for a unit of rows."""
        kinds = []
        for call in self.calls:
            if call[0] == "flush":
                kinds.append("flush")
            elif call[0] == "append":
                kinds.append(f"append{call[2].seq}")
            else:
                kinds.append("appends" + "+".join(str(event.seq) for event, _ in call[2]))
        return kinds


class Gate:
    """An append guard that holds the actor inside an append whose data is ``"block"``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(
        self, header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any
    ) -> None:
        if data == "block":
            self.entered.set()
            assert self.release.wait(TIMEOUT)


def start(
    listener: Any = None,
    *,
    header: SessionHeader | None = None,
    log: EventLog | None = None,
    guards: Callable[[], Sequence[AppendGuard]] = tuple,
    clock: Callable[[], int] | None = None,
    encode_copy: Callable[[object], tuple[bytes, object]] | None = None,
) -> tuple[ActorRef, EventLog]:
    log = log if log is not None else EventLog()
    core = SessionCore(
        header if header is not None else SessionHeader("s-1"),
        log,
        listener=listener,
        encode=encode_payload,
        decode=decode_payload,
        clock=clock if clock is not None else FakeClock(1000),
        guards=guards,
        encode_copy=encode_copy,
    )
    ref = SessionActor.start(core)
    return ref, log


def send_append(ref: ActorRef, type_: str, data: Any) -> Future[Any]:
    reply: Future[Any] = Future()
    ref.tell(AppendEvent(type_, data, reply))
    return reply


def send_staged(ref: ActorRef, type_: str, data: Any) -> SessionEvent:
    reply: Future[Any] = Future()
    ref.tell(AppendEvent(type_, data, reply, staged=True))
    event: SessionEvent = reply.result(TIMEOUT)
    return event


def make_core(listener: Any, log: EventLog | None = None) -> SessionCore:
    return SessionCore(
        SessionHeader("s-1"),
        log if log is not None else EventLog(),
        listener=listener,
        encode=encode_payload,
        decode=decode_payload,
        clock=FakeClock(1000),
    )


def send_flush(ref: ActorRef) -> Future[bool]:
    reply: Future[bool] = Future()
    ref.tell(FlushSession(reply))
    return reply


def append(ref: ActorRef, type_: str, data: Any) -> SessionEvent:
    event: SessionEvent = send_append(ref, type_, data).result(TIMEOUT)
    return event


REPO_ROOT = Path(__file__).resolve().parents[2]


def python_child(script: str, *args: str) -> subprocess.Popen[str]:
    """A Python process running ``script`` with ``args`` (this checkout importable).

    Its stdin and stdout are text pipes.
    """
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
