"""Conformance bundles of the hosts the suite checks: fake, embedded, pykka example, asyncio."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import sys
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from host_bridge.aio import AgentTurn, AsyncHost, LoopThread
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteStoreReader
from host_bridge.protocols import Agent, SessionEvent, SessionHeader
from host_bridge.testing import FakeAgent, FakeHost
from host_bridge.testing.conformance import ConformanceHost, TurnModel

_T = TypeVar("_T")

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pykka_host.py"


# --- the fake host -----------------------------------------------------------------------------


class FakeTurnDriver:
    """Runs a :class:`FakeAgent`'s startable turns, calling the kit's model per message."""

    def __init__(self) -> None:
        self.models: dict[str, TurnModel] = {}
        self._locks: dict[str, threading.Lock] = {}

    def adopt(self, agent: FakeAgent, model: TurnModel) -> FakeAgent:
        self.models[agent.id] = model
        self._locks[agent.id] = threading.Lock()
        return agent

    def run_turns(self, agent: Agent) -> None:
        assert isinstance(agent, FakeAgent)
        with self._locks[agent.id]:
            while agent.queued and not agent.reserved and agent.status == "idle":
                try:
                    taken = agent.begin_turn()
                except RuntimeError:
                    return  # reserved meanwhile: the release kicks again
                try:
                    for message in taken:
                        self.models[agent.id](message)
                finally:
                    agent.end_turn()


def _storable(header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any) -> None:
    json.dumps(data)  # the fake host stores JSON: refuse anything else


def _advance(host: FakeHost, ms: int) -> None:
    host.timers.advance(ms)


def fake_host(_: Path) -> ConformanceHost:
    """:class:`FakeHost` on fake time; durable means "covered by a flush that resolved True"."""
    host = FakeHost()
    host.sessions.add_append_guard(_storable)
    driver = FakeTurnDriver()
    ids = itertools.count(1)

    def spawn_root(model: TurnModel) -> Agent:
        return driver.adopt(host.spawn_root(f"root-{next(ids)}"), model)

    def spawn_child(parent: Agent, model: TurnModel) -> Agent:
        return driver.adopt(host.spawn_child(f"child-{next(ids)}"), model)

    def durable_events(session_id: str) -> Sequence[SessionEvent]:
        session = host.sessions.get(session_id)
        assert session is not None
        return session.events[: host.sessions.durable_length(session_id)]

    def detach(session: Any) -> None:
        session.detach()
        host.sessions.remove(session)

    def dispose(agent: Agent) -> None:
        host.agents.dispose(agent)

    return ConformanceHost(
        context=host.context(),
        spawn_root=spawn_root,
        run_turns=driver.run_turns,
        advance=lambda ms: _advance(host, ms),
        durable_events=durable_events,
        detach=detach,
        dispose=dispose,
        spawn_child=spawn_child,
    )


# --- the embedded host ---------------------------------------------------------------------------


def embedded_host(tmp_path: Path) -> ConformanceHost:
    """:class:`EmbeddedHost` on SQLite in ``tmp_path``, read back through a second connection."""
    host = EmbeddedHost(tmp_path / "data")
    host.enable_activation()

    def spawn_root(model: TurnModel) -> Agent:
        return host.spawn_root(model=lambda turn: _turn(model, turn))

    def spawn_child(parent: Agent, model: TurnModel) -> Agent:
        assert parent in host.agents.roots()
        root = host.agents.get(parent.id)
        assert root is not None
        return host.spawn_child(root, model=lambda turn: _turn(model, turn))

    def durable_events(session_id: str) -> Sequence[SessionEvent]:
        with SqliteStoreReader(store_path(host.data_dir)) as reader:
            stored = reader.load(session_id)
        return () if stored is None else stored.events

    def detach(session: Any) -> None:
        host.sessions.detach(session)

    def dispose(agent: Agent) -> None:
        live = host.agents.get(agent.id)
        assert live is agent
        host.agents.dispose(live)

    def resume_root(session_id: str, model: TurnModel) -> Agent:
        return host.spawn_root(session_id=session_id, model=lambda turn: _turn(model, turn))

    return ConformanceHost(
        context=host.context(),
        spawn_root=spawn_root,
        close=lambda: _closed(host),
        durable_events=durable_events,
        detach=detach,
        dispose=dispose,
        spawn_child=spawn_child,
        durable_inbox=True,
        resume_root=resume_root,
    )


def _turn(model: TurnModel, turn: Turn) -> None:
    model(turn.message)


def _closed(host: EmbeddedHost) -> None:
    error = host.close()
    assert error is None, error


# --- the pykka example of the integration guide ------------------------------------------------


def load_example() -> ModuleType:
    """Import ``docs/examples/pykka_host.py`` by path (it is not a package), once."""
    name = "docs_examples_pykka_host"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def example_host(tmp_path: Path, module: ModuleType | None = None) -> ConformanceHost:
    """The example's ``PykkaHost``, its JSON-lines files in ``tmp_path`` read back from disk."""
    example = module if module is not None else load_example()
    host = example.PykkaHost(tmp_path)
    ids = itertools.count(1)

    def spawn_root(model: TurnModel) -> Agent:
        session = host.sessions.open(f"conformance-{next(ids)}")
        agent: Agent = host.agents.spawn(session, lambda _agent, message: model(message))
        return agent

    def durable_events(session_id: str) -> Sequence[SessionEvent]:
        path = tmp_path / f"{session_id}.jsonl"
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        return [SessionEvent(r["type"], r["seq"], r["time"], r["data"]) for r in rows]

    def dispose(agent: Agent) -> None:
        host.agents.dispose(agent)

    return ConformanceHost(
        context=host.context(),
        spawn_root=spawn_root,
        close=host.close,
        durable_events=durable_events,
        dispose=dispose,
    )


# --- the asyncio host, bringing its own agent loop ---------------------------------------------


def async_host(tmp_path: Path) -> ConformanceHost:
    """:class:`AsyncHost` on SQLite, its turns run by one async runner on a loop thread.

    The kit's model of each agent is called from the runner in a worker thread
    (it blocks to hold turns open), so the loop stays free as a host's would.
    """
    loop = LoopThread("conformance-loop")
    models: dict[str, TurnModel] = {}

    async def run_turn(turn: AgentTurn) -> str | None:
        model = models.get(turn.session_id)  # a session the kit's activation woke has none
        if model is not None:
            await asyncio.to_thread(model, turn.message)
        return None

    def on_loop(work: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(work, loop.loop).result(timeout=60)

    host = AsyncHost(run_turn, data_dir=tmp_path / "data", schedule=False)  # the kit installs none
    on_loop(host.start())
    ids = itertools.count(1)

    def spawn_root(model: TurnModel) -> Agent:
        session_id = f"conformance-{next(ids)}"
        models[session_id] = model  # before the open: a turn may start as it returns
        return on_loop(host.open(session_id)).agent  # a new session

    def resume_root(session_id: str, model: TurnModel) -> Agent:
        models[session_id] = model
        return on_loop(host.open(session_id)).agent  # resumed from the store

    def durable_events(session_id: str) -> Sequence[SessionEvent]:
        with SqliteStoreReader(store_path(host.embedded.data_dir)) as reader:
            stored = reader.load(session_id)
        return () if stored is None else stored.events

    def dispose(agent: Agent) -> None:
        live = host.embedded.agents.get(agent.id)
        assert live is agent
        host.embedded.agents.dispose(live)

    def close() -> None:
        try:
            on_loop(host.aclose())
        finally:
            loop.stop()

    return ConformanceHost(
        context=host.embedded.context(),
        spawn_root=spawn_root,
        close=close,
        durable_events=durable_events,
        detach=host.embedded.sessions.detach,
        dispose=dispose,
        durable_inbox=True,
        resume_root=resume_root,
    )
