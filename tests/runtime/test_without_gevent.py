"""gevent is an extra: without it the defaults work and the gevent runtime says what to install.

Each check runs in a subprocess whose import system refuses ``gevent`` and
``greenlet`` (a ``sys.meta_path`` finder installed before anything else), as
in an environment where ``pip install dsh-tool-schedule`` left the extra out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_BLOCKER = textwrap.dedent(
    """
    import sys

    class _NoGevent:
        '''Finds ``gevent`` and ``greenlet`` nowhere, as if they were not installed.'''

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.split(".")[0] in ("gevent", "greenlet"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoGevent)
    """
)


def _run(code: str, *args: str) -> str:
    """Run ``code`` without gevent; its stdout, once it exited 0."""
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKER + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_blocker_really_hides_gevent() -> None:
    out = _run(
        """
        try:
            import gevent
        except ModuleNotFoundError as error:
            print(error.name)
        """
    )
    assert out == "gevent"


def test_the_embedded_host_creates_and_delivers_on_threading_without_gevent(
    tmp_path: Path,
) -> None:
    out = _run(
        """
        import json, sys
        from host_bridge._plugin import install_schedule
        from host_bridge.embedded.host import EmbeddedHost
        from host_bridge.testing import (
            FakeClock, FakeTimers, assert_delivered_once, call_tool_json, settle_host,
        )

        clock = FakeClock()
        timers = FakeTimers(clock)
        host = EmbeddedHost(sys.argv[1], clock=clock, timers=timers)
        plugin = install_schedule(host.context(), runtime=host.runtime)
        agent = host.spawn_root(session_id="s")
        created = call_tool_json(
            host, agent, "schedule_create", {"prompt": "tea", "after_seconds": 60}
        )
        settle_host(host, plugin)
        timers.advance(60_000)
        settle_host(host, plugin, run_turns=True)
        dispatch = assert_delivered_once(agent.session, created["id"])
        plugin.dispose().result(10)
        host.close()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("gevent", "greenlet"))
        print(json.dumps([host.runtime.name, dispatch.prompt, loaded]))
        """,
        str(tmp_path),
    )
    assert json.loads(out) == ["threading", "tea", []]


def test_the_cli_works_without_gevent() -> None:
    out = _run(
        """
        from host_bridge.cli import main

        main(["catalog"])
        """
    )
    names = {tool["name"] for tool in json.loads(out)["tools"]}
    assert names == {"schedule_create", "schedule_list", "schedule_delete"}


def test_the_asyncio_host_works_without_gevent(tmp_path: Path) -> None:
    out = _run(
        """
        import asyncio, json, sys
        from host_bridge.aio import AgentTurn, AsyncHost

        async def runner(turn: AgentTurn) -> str:
            result = await turn.call_tool(
                "schedule_create", json.dumps({"prompt": "tea", "after_seconds": 60})
            )
            return str(json.loads(result.content)["id"])

        async def chat() -> str:
            async with AsyncHost(runner, data_dir=sys.argv[1]) as host:
                conversation = await host.open("u-1")
                return str(await conversation.send("remind me"))

        print(json.dumps([asyncio.run(chat()), "gevent" in sys.modules]))
        """,
        str(tmp_path),
    )
    assert json.loads(out) == ["schedule-1", False]


def test_asking_for_the_gevent_runtime_says_to_install_the_extra(tmp_path: Path) -> None:
    out = _run(
        """
        import json, sys
        from actors import get_runtime
        from host_bridge.embedded.host import EmbeddedHost

        seen = []
        asks = (lambda: get_runtime("gevent"), lambda: EmbeddedHost(sys.argv[1], runtime="gevent"))
        for ask in asks:
            try:
                ask()
            except ImportError as error:
                seen.append([type(error).__name__, error.name, str(error)])
        print(json.dumps(seen))
        """,
        str(tmp_path),
    )
    seen = json.loads(out)
    assert len(seen) == 2
    for kind, name, message in seen:
        assert (kind, name) == ("ModuleNotFoundError", "gevent")
        assert "pip install 'dsh-tool-schedule[gevent]'" in message
        assert "threading" in message
