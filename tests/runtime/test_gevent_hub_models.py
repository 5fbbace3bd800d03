"""Where the hub runs: a dedicated runtime thread, or a host's own gevent thread.

Misuse gives a clear error instead of a hang: a closed runtime, or waiting from
another thread on actors whose hub is not running.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pykka
import pytest

from actors.base import MailboxActor
from actors.gevent_runtime import GeventFuture, GeventRuntime, GeventRuntimeError


@dataclass(frozen=True)
class Where:
    pass


class Echo(MailboxActor):
    def handle_Where(self, message: Where) -> str:
        return threading.current_thread().name


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def test_a_private_runtime_starts_lazily_and_closes() -> None:
    runtime = GeventRuntime(thread_name="dsh-test-private-hub")
    assert runtime.thread is None  # nothing runs until first use
    ref = runtime.bind(Echo).start()
    assert ref.ask(Where(), timeout=5) == "dsh-test-private-hub"
    ref.stop(timeout=5)
    thread = runtime.thread
    runtime.close()
    runtime.close()  # idempotent
    assert thread is not None and not thread.is_alive()
    with pytest.raises(GeventRuntimeError, match="closed"):
        runtime.bind(Echo).start()


def test_waiting_on_a_closed_runtime_is_an_error() -> None:
    runtime = GeventRuntime(thread_name="dsh-test-closing-hub")
    pending = runtime.bind(Echo).start().ask(Where(), block=False)
    assert pending.get(timeout=5) == "dsh-test-closing-hub"
    late: GeventFuture[str] = GeventFuture(runtime)
    runtime.close()  # with the actor still alive
    with pytest.raises(GeventRuntimeError, match="closed"):
        late.get(timeout=5)
    assert not pykka.ActorRegistry.get_by_class(runtime.bind(Echo))


class HostThread:
    """A host thread that runs on gevent: it attaches a runtime, then runs jobs."""

    def __init__(self) -> None:
        self.runtime_ready: Future[GeventRuntime] = Future()
        self.run_hub = threading.Event()
        self.hub_running = threading.Event()
        self._thread = threading.Thread(target=self._main, name="host-gevent-main", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        import gevent
        import gevent.event

        runtime = GeventRuntime.attach()
        self.stop_hub = gevent.event.Event()
        self.runtime_ready.set_result(runtime)
        self.run_hub.wait()  # a plain blocking wait: the hub does not run yet
        gevent.spawn(self.hub_running.set)  # runs as soon as the hub runs
        self.stop_hub.wait()  # a gevent wait: the hub runs until stop
        runtime.close()

    def stop(self) -> None:
        runtime = self.runtime_ready.result(5)
        runtime.call_soon(self.stop_hub.set)
        self._thread.join(5)


def test_an_attached_runtime_refuses_waits_until_its_thread_runs_the_hub() -> None:
    host = HostThread()
    runtime = host.runtime_ready.result(timeout=5)
    try:
        ref = runtime.bind(Echo).start()  # fine: it starts once the hub runs
        with pytest.raises(GeventRuntimeError, match="not running"):
            ref.ask(Where(), timeout=5)
        host.run_hub.set()
        assert host.hub_running.wait(5)
        assert ref.ask(Where(), timeout=5) == "host-gevent-main"
        ref.stop(timeout=5)
    finally:
        host.run_hub.set()
        host.stop()
