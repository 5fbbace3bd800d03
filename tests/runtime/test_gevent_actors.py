"""Greenlet actors: pykka semantics from any thread, on one hub, without blocking it."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
import pytest
from pykka._envelope import Envelope

from actors._base import MailboxActor
from actors._runtime import get_runtime, run_blocking, wait_for
from actors.gevent import GeventFuture, GeventInbox, GeventRuntime, default_runtime
from actors.gevent._inbox import StopFlag
from host_bridge.embedded.sessions import EmbeddedSessionStore
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.testing import settle
from host_bridge.testing._settle import settle_all


@pytest.fixture
def hub_runtime() -> GeventRuntime:
    return default_runtime()


@dataclass(frozen=True)
class Note:
    sender: int
    n: int


@dataclass(frozen=True)
class Where:
    pass


@dataclass(frozen=True)
class Boom:
    pass


@dataclass(frozen=True)
class AskOther:
    other: pykka.ActorRef[Any]


@dataclass(frozen=True)
class Wait:
    gate: Future[str]


@dataclass(frozen=True)
class Call:
    function: Any


class Recorder(MailboxActor):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[Note] = []

    def handle_Note(self, message: Note) -> None:
        self.notes.append(message)

    def handle_Where(self, message: Where) -> tuple[str, bool]:
        hub = get_runtime("gevent").hub  # type: ignore[attr-defined]
        import gevent

        return threading.current_thread().name, gevent.getcurrent().parent is hub

    def handle_Boom(self, message: Boom) -> None:
        raise ValueError("boom")

    def handle_AskOther(self, message: AskOther) -> Any:
        return ask(message.other, Where())

    def handle_Wait(self, message: Wait) -> str:
        return wait_for(message.gate, timeout=5)

    def handle_Call(self, message: Call) -> Any:
        return message.function()

    def count(self) -> int:
        return len(self.notes)


def start(hub_runtime: GeventRuntime) -> pykka.ActorRef[Recorder]:
    return hub_runtime.bind(Recorder).start()


def ask(ref: pykka.ActorRef[Any], message: Any) -> Any:
    return ref.ask(message, block=True, timeout=5)


def test_an_actor_is_a_greenlet_of_the_runtime_hub(hub_runtime: GeventRuntime) -> None:
    ref = start(hub_runtime)
    assert ask(ref, Where()) == ("dsh-gevent-hub", True)
    assert isinstance(ref.ask(Where(), block=False), GeventFuture)


def test_tells_from_many_threads_arrive_in_per_sender_order(hub_runtime: GeventRuntime) -> None:
    ref = start(hub_runtime)
    senders, per_sender = 8, 250
    go = threading.Barrier(senders)

    def send(sender: int) -> None:
        go.wait()
        for n in range(per_sender):
            ref.tell(Note(sender, n))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    settle(ref)
    assert ref.actor_inbox.unfinished_tasks >= senders * per_sender  # type: ignore[attr-defined]
    notes: list[Note] = ref.proxy().notes.get(timeout=5)
    assert len(notes) == senders * per_sender
    for sender in range(senders):
        assert [note.n for note in notes if note.sender == sender] == list(range(per_sender))


def test_actors_on_one_hub_ask_each_other_without_deadlock(hub_runtime: GeventRuntime) -> None:
    first, second = start(hub_runtime), start(hub_runtime)
    assert ask(first, AskOther(second)) == ("dsh-gevent-hub", True)


def test_proxies_futures_and_errors_follow_pykka(hub_runtime: GeventRuntime) -> None:
    ref = start(hub_runtime)
    proxy = ref.proxy()
    ref.tell(Note(0, 1))
    assert proxy.count().get(timeout=5) == 1
    with pytest.raises(ValueError, match="boom"):
        ask(ref, Boom())
    assert ref.is_alive()  # an asked failure goes back to the asker
    joined = proxy.count().join(proxy.count()).map(sum)
    assert joined.get(timeout=5) == 2


def test_ask_times_out_and_a_greenlet_wait_does_not_block_the_hub(
    hub_runtime: GeventRuntime,
) -> None:
    waiting, other = start(hub_runtime), start(hub_runtime)
    gate: Future[str] = Future()
    pending = waiting.ask(Wait(gate), block=False)
    with pytest.raises(pykka.Timeout):
        pending.get(timeout=0.05)
    # the waiting actor is suspended, not the hub: another actor still answers
    assert ask(other, Where())[0] == "dsh-gevent-hub"
    gate.set_result("opened")  # resolved from this (foreign) thread
    assert pending.get(timeout=5) == "opened"


def test_stop_from_a_foreign_thread_and_dead_actor_errors(hub_runtime: GeventRuntime) -> None:
    ref = start(hub_runtime)
    ref.tell(Note(0, 0))
    assert ref.stop(timeout=5) is True
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(Note(0, 1))
    with pytest.raises(pykka.ActorDeadError):
        ask(ref, Where())
    assert ref.stop(timeout=5) is False


def test_an_unhandled_failure_stops_only_that_actor(hub_runtime: GeventRuntime) -> None:
    failing, bystander = start(hub_runtime), start(hub_runtime)
    failing.tell(Boom())
    assert failing.actor_stopped.wait(5)
    assert ask(bystander, Where())[0] == "dsh-gevent-hub"


def test_a_busy_actor_yields_so_its_neighbours_stay_responsive(hub_runtime: GeventRuntime) -> None:
    class Spinner(MailboxActor):
        def handle_Note(self, message: Note) -> None:
            if not stop.is_set():
                self.actor_ref.tell(message)

    stop = threading.Event()
    spinner = hub_runtime.bind(Spinner).start()
    spinner.tell(Note(0, 0))
    neighbour = start(hub_runtime)
    try:
        assert ask(neighbour, Where())[0] == "dsh-gevent-hub"
    finally:
        stop.set()
    settle_all(spinner, neighbour)


def test_run_blocking_leaves_the_hub_free(hub_runtime: GeventRuntime) -> None:
    blocker, helper = start(hub_runtime), start(hub_runtime)
    released = threading.Event()
    threads: list[str] = []

    def blocking_io() -> bool:
        threads.append(threading.current_thread().name)
        return released.wait(5)  # a blocking call that only another actor can end

    pending = blocker.ask(Call(lambda: run_blocking(blocking_io)), block=False)
    ask(helper, Call(released.set))  # the hub still runs actors meanwhile
    assert pending.get(timeout=5) is True
    assert threads and threads[0] != "dsh-gevent-hub"
    assert run_blocking(threading.current_thread) is threading.current_thread()


def test_sqlite_work_of_the_session_store_runs_off_the_hub(
    hub_runtime: GeventRuntime, tmp_path: Path
) -> None:
    store = SqliteEventStore(tmp_path / "s.sqlite3")
    seen: list[str] = []
    create = store.create_session

    def spy(*args: Any) -> None:
        seen.append(threading.current_thread().name)
        create(*args)

    store.create_session = spy  # type: ignore[method-assign,assignment]
    sessions = EmbeddedSessionStore(store, runtime=hub_runtime)
    try:
        ref = start(hub_runtime)
        session = ask(ref, Call(lambda: sessions.create("s-1")))
        # an append from a greenlet waits for the session actor on the same hub
        event = ask(ref, Call(lambda: session.append("note", {"n": 1})))
        assert event.seq == 0
        assert wait_for(sessions.flush(session), timeout=5) is True
        assert seen and seen[0] != "dsh-gevent-hub"
        assert type(session.actor_ref.actor_class).__name__ != "ThreadingActor"
        assert session.actor_ref.actor_class.gevent_runtime() is hub_runtime
    finally:
        sessions.close()
        store.close()


def test_an_idle_actor_holds_no_greenlet_and_late_asks_get_actor_dead(
    hub_runtime: GeventRuntime,
) -> None:
    ref = start(hub_runtime)
    assert ask(ref, Where())[0] == "dsh-gevent-hub"
    inbox = ref.actor_inbox
    assert isinstance(inbox, GeventInbox)
    state: Future[str] = Future()
    hub_runtime.spawn(lambda: state.set_result(inbox._state))  # runs once the runner yielded
    assert state.result(timeout=5) == "idle"  # the runner ended with the inbox empty
    ref.stop(timeout=5)
    late: GeventFuture[Any] = GeventFuture(hub_runtime)
    inbox.put(Envelope(Where(), reply_to=late))  # a racing ask after the stop
    with pytest.raises(pykka.ActorDeadError):
        late.get(timeout=5)


def test_the_stop_flag_is_waitable_from_threads_and_greenlets(hub_runtime: GeventRuntime) -> None:
    ref = start(hub_runtime)
    flag = ref.actor_stopped
    assert isinstance(flag, StopFlag) and not flag.wait(0.001)
    in_greenlet: Future[bool] = Future()
    hub_runtime.spawn(lambda: in_greenlet.set_result(flag.wait(5)))
    ref.stop(block=False)
    assert flag.wait(5) is True
    assert in_greenlet.result(timeout=5) is True
