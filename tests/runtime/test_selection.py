"""Choosing a runtime; binding actor classes; the threading path never loads gevent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pykka
import pytest

from actors._base import MailboxActor
from actors._runtime import ThreadingRuntime, get_runtime
from actors._schedule_owner import ScheduleOwner
from actors._session_actor import SessionActor
from actors.gevent import GeventActor, GeventRuntime, default_runtime

ROOT = Path(__file__).resolve().parents[2]


def test_threading_is_the_default_and_binds_classes_unchanged() -> None:
    runtime = get_runtime()
    assert isinstance(runtime, ThreadingRuntime)
    assert runtime.name == "threading"
    assert get_runtime("threading") is runtime
    assert runtime.bind(ScheduleOwner) is ScheduleOwner
    with pytest.raises(TypeError):
        runtime.bind(GeventActor)


def test_gevent_name_is_the_process_wide_gevent_runtime() -> None:
    runtime = get_runtime("gevent")
    assert runtime is default_runtime()
    assert runtime.name == "gevent"
    assert get_runtime(runtime) is runtime


def test_unknown_runtimes_are_refused() -> None:
    with pytest.raises(ValueError, match="asyncio"):
        get_runtime("asyncio")
    with pytest.raises(TypeError, match="not an actor runtime"):
        get_runtime(object())  # type: ignore[arg-type]


def test_gevent_bind_mixes_the_hooks_in_ahead_of_the_base_and_caches() -> None:
    runtime = get_runtime("gevent")
    bound = runtime.bind(ScheduleOwner)
    assert bound is runtime.bind(ScheduleOwner)
    assert issubclass(bound, ScheduleOwner) and issubclass(bound, GeventActor)
    mro = bound.__mro__
    assert mro.index(GeventActor) < mro.index(MailboxActor) < mro.index(pykka.ThreadingActor)
    assert bound.__name__ == "ScheduleOwner" and bound.__module__ == ScheduleOwner.__module__
    assert runtime.bind(SessionActor) is not bound  # type: ignore[comparison-overlap]
    # the class's own code is shared: nothing but the pykka hooks is overridden
    assert bound.handle_CreateSchedule is ScheduleOwner.handle_CreateSchedule
    own = {name for name in vars(bound) if not name.startswith(("__", "_abc"))}
    assert own == {"_gevent_runtime"}


def test_a_gevent_actor_class_binds_to_another_runtime_by_subclassing() -> None:
    class Plain(GeventActor):
        pass

    assert default_runtime().bind(Plain) is Plain
    other = GeventRuntime(thread_name="dsh-test-other-hub")
    try:
        rebound = other.bind(Plain)
        assert rebound is not Plain and issubclass(rebound, Plain)
        assert rebound.gevent_runtime() is other
    finally:
        other.close()


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_threading_path_never_imports_gevent(tmp_path: Path) -> None:
    out = _run(
        f"""
        import sys
        import actors, actors._runtime, host_bridge, host_bridge.testing
        from host_bridge.embedded.host import EmbeddedHost
        from host_bridge._plugin import install_schedule

        host = EmbeddedHost({str(tmp_path)!r})
        plugin = install_schedule(host.context())
        agent = host.spawn_root(session_id="s")
        result = host.tools.execute(
            "schedule_create", {{"prompt": "x", "after_seconds": 60}}, agent=agent, timeout=10
        )
        assert result.value["id"] == "schedule-1", result
        plugin.dispose().result(10)
        host.close()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("gevent", "greenlet")))
        """
    )
    assert out == "[]"


def test_the_gevent_runtime_never_monkey_patches(tmp_path: Path) -> None:
    out = _run(
        f"""
        import socket, sys, threading, time
        originals = (threading.Lock, threading.Thread, socket.socket, time.sleep)
        from host_bridge.embedded.host import EmbeddedHost
        from host_bridge._plugin import install_schedule

        host = EmbeddedHost({str(tmp_path)!r}, runtime="gevent")
        plugin = install_schedule(host.context(), runtime="gevent")
        agent = host.spawn_root(session_id="s")
        result = host.tools.execute(
            "schedule_create", {{"prompt": "x", "after_seconds": 60}}, agent=agent, timeout=10
        )
        assert result.value["id"] == "schedule-1", result
        assert plugin.owner_of(agent).actor_class.gevent_runtime().thread.name == "dsh-gevent-hub"
        plugin.dispose().result(10)
        host.close()
        assert "gevent.monkey" not in sys.modules
        # (threading.Lock is _thread.allocate_lock only before Python 3.13: compare identities)
        assert (threading.Lock, threading.Thread, socket.socket, time.sleep) == originals
        assert threading.Thread.__module__ == "threading"
        assert socket.socket.__module__ == "socket"
        assert time.sleep.__module__ == "time"
        print("unpatched")
        """
    )
    assert out == "unpatched"
