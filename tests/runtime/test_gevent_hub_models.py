"""Where the hub runs: a dedicated runtime thread, or a host's own gevent thread.

Misuse gives a clear error instead of a hang: a closed runtime, or waiting from
another thread on actors whose hub is not running.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors._base import MailboxActor
from actors._runtime import wait_for
from actors.gevent import GeventFuture, GeventRuntime, GeventRuntimeError
from host_bridge._plugin import install_schedule
from host_bridge.embedded.host import EmbeddedHost


@dataclass(frozen=True)
class Where:
    pass


class Echo(MailboxActor):
    def handle_Where(self, message: Where) -> str:
        return threading.current_thread().name


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


def test_a_host_that_runs_on_gevent_uses_its_own_hub(tmp_path: Path) -> None:
    """Everything (host, owners, tool calls, waits) on one attached hub in the host's thread."""
    outcome: Future[dict[str, Any]] = Future()

    def host_main() -> None:
        try:
            runtime = GeventRuntime.attach()
            host = EmbeddedHost(tmp_path, runtime=runtime)
            plugin = install_schedule(host.context(), runtime=runtime)
            agent = host.spawn_root(session_id="s")
            created = host.tools.execute(  # waits as a greenlet: the owner runs meanwhile
                "schedule_create", {"prompt": "p", "after_seconds": 60}, agent=agent, timeout=5
            )
            owner = plugin.owner_of(agent)
            assert owner is not None
            bound_here = owner.actor_class.gevent_runtime() is runtime  # type: ignore[attr-defined]
            wait_for(plugin.dispose(), timeout=5)  # not .result(): that would block the hub
            host.close()
            runtime.close()
            outcome.set_result({"created": created.value, "bound_here": bound_here})
        except BaseException as error:
            outcome.set_exception(error)

    thread = threading.Thread(target=host_main, name="gevent-host-main")
    thread.start()
    result = outcome.result(timeout=30)
    thread.join(5)
    assert result["created"]["id"] == "schedule-1"
    assert result["bound_here"] is True
