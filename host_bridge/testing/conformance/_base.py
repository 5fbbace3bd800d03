"""The scaffolding every group of checks shares: the host fixture and waiting helpers."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import ClassVar, NoReturn, TypeVar

import pytest

from actors._clock import default_timers
from actors._contract import Agent, HostContext, TextBlock, Timers, UserMessage
from host_bridge.testing.conformance._host import ConformanceHost
from host_bridge.testing.conformance._probes import ScriptedModel

__all__ = ["ConformanceBase", "fail"]

T = TypeVar("T")

_texts = itertools.count(1)


def fail(rule: str, detail: str) -> NoReturn:
    """Raise the kit's ``AssertionError``: the rule the host broke, then what was seen."""
    raise AssertionError(f"{rule}: {detail}")


def expect(condition: object, rule: str, detail: str) -> None:
    """:func:`fail` unless ``condition`` holds (not an ``assert``: ``-O`` keeps it)."""
    if not condition:
        fail(rule, detail)


class ConformanceBase:
    """Builds the host for each check, and the helpers checks wait with.

    Subclasses implement :meth:`make_host`. :attr:`timeout` bounds every wait
    (seconds); :attr:`time_window_ms` is how long a check lets host time pass
    to see that something does *not* happen; :attr:`quick_turns` how many
    ungated turns the status-order check runs.
    """

    timeout: ClassVar[float] = 5.0
    time_window_ms: ClassVar[int] = 60
    quick_turns: ClassVar[int] = 20
    host: ConformanceHost

    def make_host(self, tmp_path: Path) -> ConformanceHost:
        """Build a fresh host for one check (``tmp_path`` is an empty directory)."""
        raise NotImplementedError("a HostConformance subclass must implement make_host(tmp_path)")

    # --- running ---------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _conformance_host(self, tmp_path: Path) -> Iterator[None]:
        with self._hosted(tmp_path):
            yield

    @contextlib.contextmanager
    def _hosted(self, tmp_path: Path) -> Iterator[None]:
        self.host = self.make_host(tmp_path)
        self._models: list[ScriptedModel] = []
        self._drivers: list[threading.Thread] = []
        try:
            yield
        finally:
            for model in self._models:
                model.open()
            for driver in self._drivers:
                driver.join(self.timeout)
            self.host.close()

    @classmethod
    def run_check(cls, name: str, tmp_path: Path) -> None:
        """Run the check ``name`` on a fresh host outside pytest's collection.

        Raises what the check raises: ``AssertionError`` naming the broken rule,
        or pytest's skip exception when the host lacks a hook the check needs.
        """
        if not name.startswith("test_") or not callable(getattr(cls, name, None)):
            raise ValueError(f"{cls.__name__} has no check {name!r}")
        case = cls()
        with case._hosted(tmp_path):
            getattr(case, name)()

    # --- helpers -----------------------------------------------------------------------

    @property
    def ctx(self) -> HostContext:
        """The host's context."""
        return self.host.context

    @property
    def timers(self) -> Timers:
        """The host's timers (a process-wide default when the context leaves them to Schedule)."""
        timers: Timers | None = self.ctx.timers
        return timers if timers is not None else default_timers()

    def host_timers(self) -> Timers:
        """The host's own timers; skips the check when the context has none."""
        timers: Timers | None = self.ctx.timers
        self.need(timers, "HostContext.timers")
        assert timers is not None
        return timers

    def model(self) -> ScriptedModel:
        """A new scripted model, opened again when the check ends."""
        model = ScriptedModel(self.timeout)
        self._models.append(model)
        return model

    def spawn(self, model: ScriptedModel | None = None) -> tuple[Agent, ScriptedModel]:
        """A new root agent on a new session, and its model."""
        model = model if model is not None else self.model()
        return self.host.spawn_root(model), model

    def message(self, label: str = "conformance") -> UserMessage:
        """A distinct user message."""
        return UserMessage(
            (TextBlock(f"{label} #{next(_texts)}"),), {"kind": "conformance", "label": label}
        )

    def followup(self, agent: Agent, message: UserMessage | None = None) -> UserMessage:
        """``agent.followup(message)``, then let a fake host run what it may."""
        message = message if message is not None else self.message()
        agent.followup(message)
        self.kick(agent)
        return message

    def release(self, agent: Agent, release: Callable[[], None]) -> None:
        """Call a turn-admission ``release``, then let a fake host run what it may."""
        release()
        self.kick(agent)

    def kick(self, agent: Agent) -> None:
        """For hosts with ``run_turns``: run the agent's startable turns on a new thread."""
        run_turns = self.host.run_turns
        if run_turns is None:
            return
        driver = threading.Thread(target=run_turns, args=(agent,), daemon=True)
        self._drivers.append(driver)
        driver.start()

    def wait(self, future: Future[T], rule: str, what: str) -> T:
        """The future's result within :attr:`timeout`, else :func:`fail` with ``rule``."""
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            fail(rule, f"{what} did not happen within {self.timeout} s")

    def pass_time(self, ms: int) -> None:
        """Let ``ms`` of host time pass: ``advance`` on fake time, else a host timer."""
        if self.host.advance is not None:
            self.host.advance(ms)
            return
        passed: Future[None] = Future()
        self.timers.call_later(ms, lambda: passed.set_result(None))
        self.wait(passed, "Timers.call_later", f"a {ms} ms timer firing")

    def wait_idle(self, agent: Agent, rule: str) -> None:
        """Wait for ``agent.when_idle()`` (bounded)."""
        self.wait(agent.when_idle(), rule, f"agent {agent.id!r} becoming idle")

    def need(self, hook: object, name: str) -> None:
        """Skip the check when the host does not provide the hook ``name``."""
        if hook is None or hook is False:
            check = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0]
            pytest.skip(f"{check or 'this check'}: the host provides no {name!r}")
