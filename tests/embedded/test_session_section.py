"""The SessionActor's critical section: a caller runs its append or flush itself only when
the actor has nothing unhandled, and never overtakes a message queued before it."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors._runtime import get_runtime
from actors._session_actor import SessionActor, SessionCore
from host_bridge._eventlog import EventLog
from host_bridge.embedded.codec import decode_payload, encode_payload
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader
from host_bridge.testing import FakeClock, settle
from tests.embedded.helpers import TIMEOUT, FakeListener, send_append

HEADER = SessionHeader("s-1")


@dataclass(frozen=True)
class Hold:
    """Keeps the actor busy in a handler (outside the section) until ``opened`` is set."""

    entered: threading.Event
    opened: threading.Event


class HoldingSessionActor(SessionActor):
    """A SessionActor that can be held busy with a :class:`Hold` message."""

    def handle_Hold(self, message: Hold) -> None:
        message.entered.set()
        assert message.opened.wait(TIMEOUT)


class CountedInbox:
    """An inbox stand-in: only the count of puts matters to the section."""

    def __init__(self) -> None:
        self.unfinished_tasks = 0


def _core(listener: Any, log: EventLog, guards: Sequence[Any] = ()) -> SessionCore:
    return SessionCore(
        HEADER,
        log,
        listener=listener,
        encode=encode_payload,
        decode=decode_payload,
        clock=FakeClock(1000),
        guards=lambda: tuple(guards),
    )


@pytest.fixture
def actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def test_the_section_opens_only_when_every_put_was_handled() -> None:
    core = _core(FakeListener(), EventLog())
    assert not core.enter_if_idle()  # no actor serves it yet
    inbox = CountedInbox()
    core.serve(inbox)
    assert core.enter_if_idle()
    assert core.section.locked()
    core.leave()
    inbox.unfinished_tasks = 1  # a message was put and is not handled yet
    assert not core.enter_if_idle()
    assert not core.section.locked()
    core.handled = 1  # the actor finished it
    assert core.enter_if_idle()
    core.leave()


@pytest.mark.usefixtures("actors")
def test_an_idle_actor_lets_the_caller_run_the_append_itself() -> None:
    listener = FakeListener()
    threads: list[str] = []

    def guard(*_: object) -> None:
        threads.append(threading.current_thread().name)

    log = EventLog()
    core = _core(listener, log, [guard])
    ref = SessionActor.start(core)
    session = EmbeddedSession(HEADER, log, ref, core=core)
    settle(ref)
    handled = core.handled
    event = session.append("note", {"n": 1})
    flushed = session.request_flush()
    assert event.seq == 0
    assert threads == [threading.current_thread().name]
    assert core.handled == handled  # no message went through the mailbox
    assert listener.kinds() == ["append0", "flush"]
    assert listener.flushes == [flushed]


@pytest.mark.usefixtures("actors")
def test_a_call_never_overtakes_a_message_queued_or_in_hand() -> None:
    listener = FakeListener()
    log = EventLog()
    core = _core(listener, log)
    ref: pykka.ActorRef[SessionActor] = HoldingSessionActor.start(core)  # type: ignore[assignment]
    session = EmbeddedSession(HEADER, log, ref, core=core)
    hold = Hold(threading.Event(), threading.Event())
    ref.tell(hold)
    assert hold.entered.wait(TIMEOUT)  # the actor has the message in hand, outside the section
    first = send_append(ref, "note", "first")  # queued behind it

    assert not core.enter_if_idle()
    flushed = session.request_flush()  # must go behind "first", through the mailbox
    assert listener.calls == []  # run in the caller, it would have reached the listener now
    assert not flushed.done()
    second: list[SessionEvent] = []
    caller = threading.Thread(target=lambda: second.append(session.append("note", "second")))
    caller.start()

    hold.opened.set()
    caller.join(TIMEOUT)
    settle(ref)
    assert first.result(TIMEOUT).data == "first"
    assert [event.data for event in log.snapshot()] == ["first", "second"]
    assert second[0].seq == 1
    assert listener.kinds() == ["append0", "flush", "append1"]
    assert listener.flushes[0] is not flushed  # the actor forwarded the listener's future
    listener.flushes[0].set_result(True)
    assert flushed.result(TIMEOUT) is True
    assert core.enter_if_idle()  # idle again
    core.leave()


@pytest.mark.usefixtures("actors")
@pytest.mark.parametrize("runtime", ["threading", "gevent"])
def test_concurrent_callers_keep_one_order_with_the_store(tmp_path: Path, runtime: str) -> None:
    """Callers on several threads, some in the section and some through the mailbox, with
    flushes in between: the store (which refuses a seq out of order) receives the live
    log exactly, and every flush covers what was appended before it."""
    threads, appends = 4, 60
    with SqliteEventStore(tmp_path / "store.sqlite") as store:
        sessions = EmbeddedSessionStore(store, runtime=get_runtime(runtime))
        session = sessions.create("s-1")
        errors: list[BaseException] = []
        start = threading.Barrier(threads)

        def work(worker: int) -> None:
            try:
                start.wait(TIMEOUT)
                for index in range(appends):
                    event = session.append("note", {"worker": worker, "index": index})
                    if index % 7 == 0:
                        flushed = sessions.flush(session).result(TIMEOUT)
                        assert flushed is True
                        assert session.durable_length >= event.seq + 1
            except BaseException as error:
                errors.append(error)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(TIMEOUT * 4)
        assert errors == []
        assert sessions.flush(session).result(TIMEOUT) is True
        live = list(session.events)
        assert [event.seq for event in live] == list(range(threads * appends))
        for worker in range(threads):  # each caller's appends stay in its own order
            mine = [e.data["index"] for e in live if e.data["worker"] == worker]
            assert mine == list(range(appends))
        stored = store.load("s-1")
        assert stored is not None
        assert list(stored.events) == live
        sessions.close()
