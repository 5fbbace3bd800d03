"""A mailbox-level harness: one ScheduleOwner on the host test kit, driven message by message."""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from typing import Any

import pykka

from actors._observer import NO_OBSERVER, OwnerObserver
from actors._runtime import Runtime, get_runtime
from actors._schedule_owner import OwnerStatusBox, ScheduleOwner
from host_bridge.protocols import HostContext, SessionEvent
from host_bridge.testing import FakeAgent, FakeHost, FakeSession, settle
from messages._mailbox import (
    CreateSchedule,
    DeleteSchedule,
    DisposeOwner,
    ListSchedules,
    RequestDrive,
    StartOwner,
)
from messages._status import OwnerStatus
from messages._tool_values import AfterSelector, AtSelector, CreateSelector, EverySelector
from tests.changes import schedule_changes
from tests.schema_check import checked

DELIVERY_STEPS: tuple[tuple[Any, ...], ...] = (
    ("flush",),
    ("flushed", True),
    ("reserve", True),
    ("followup",),
    ("append", "dispatch"),
    ("release",),
    ("flush",),
    ("flushed", True),
)
"""The :meth:`Harness.steps` of one good delivery: preflight, reserve, follow-up, dispatch,
release, barrier."""


class Harness:
    """A FakeHost, one root agent and its owner, driven message by message."""

    def __init__(
        self,
        host: FakeHost,
        *,
        seed_events: tuple[SessionEvent | tuple[str, Any], ...] = (),
        seed_length: int | None = None,
        start: bool = True,
        runtime: Runtime | None = None,
        context: HostContext | None = None,
        observer: OwnerObserver = NO_OBSERVER,
        session: FakeSession | None = None,
    ) -> None:
        self.host = host
        self.runtime = runtime if runtime is not None else get_runtime("threading")
        if session is None:
            self.agent: FakeAgent = host.spawn_root(
                "agent-1", seed_events=seed_events, seed_length=seed_length
            )
        else:  # a session the test built (say, a subclass): added as it is
            host.sessions.add(session)
            self.agent = host.agents.create_root("agent-1", session)
        live = self.agent.session
        assert isinstance(live, FakeSession)
        self.session = live
        self.status_box = OwnerStatusBox(self.agent.id)
        owner_class = self.runtime.bind(ScheduleOwner)
        self.context = context if context is not None else host.context()
        self.owner = owner_class.start(self.agent, self.context, self.status_box, observer=observer)
        if start:
            self.send(StartOwner())

    @property
    def journal(self) -> Any:
        return self.host.journal

    @property
    def status(self) -> OwnerStatus:
        return self.status_box.current

    def settle(self) -> None:
        settle(self.owner)

    def send(self, message: Any) -> None:
        self.owner.tell(message)
        self.settle()

    def create(self, prompt: str = "stretch", after_seconds: int = 60) -> Future[Any]:
        return self.create_when(prompt, AfterSelector(after_seconds))

    def create_when(self, prompt: str, when: CreateSelector) -> Future[Any]:
        """Send a create with any selector; the reply future (not yet checked)."""
        reply: Future[Any] = Future()
        self.send(CreateSchedule(prompt, when, reply))
        return reply

    def created_at(self, prompt: str, at: object) -> dict[str, Any]:
        """Create an ``at`` reminder; its view."""
        value = self.value(self.create_when(prompt, AtSelector(at)), "create")
        assert value.get("kind") == "at", value
        return dict(value)

    def created_every(self, prompt: str, every_seconds: int) -> dict[str, Any]:
        """Create an ``every`` reminder; its view."""
        value = self.value(self.create_when(prompt, EverySelector(every_seconds)), "create")
        assert value.get("kind") == "every", value
        return dict(value)

    def list_schedules(self) -> Future[Any]:
        reply: Future[Any] = Future()
        self.send(ListSchedules(reply))
        return reply

    def delete(self, schedule_id: str) -> Future[Any]:
        reply: Future[Any] = Future()
        self.send(DeleteSchedule(schedule_id, reply))
        return reply

    def value(self, reply: Future[Any], tool: str) -> Any:
        assert reply.done(), "the owner has not answered"
        return checked(tool, reply.result(timeout=0))

    def created(self, prompt: str = "stretch", after_seconds: int = 60) -> dict[str, Any]:
        value = self.value(self.create(prompt, after_seconds), "create")
        assert "scheduledAt" in value, value
        return dict(value)

    def drive(self) -> None:
        self.send(RequestDrive("test"))

    def advance(self, ms: int) -> None:
        self.host.timers.advance(ms)
        self.settle()

    def dispose(self) -> Future[None]:
        reply: Future[None] = Future()
        self.owner.tell(DisposeOwner(reply))
        with contextlib.suppress(pykka.ActorDeadError):
            self.settle()
        return reply

    def changes(self) -> list[tuple[str, str]]:
        """(operation, id) of every schedule/change in the log."""
        return schedule_changes(self.session.events)

    def steps(self) -> list[tuple[Any, ...]]:
        """The journal reduced to protocol steps (flush/reserve/followup/append/release)."""
        wanted = {"flush", "flush-resolved", "reserve", "followup", "append", "release"}
        steps: list[tuple[Any, ...]] = []
        for entry in self.journal.entries():
            if entry[0] not in wanted:
                continue
            if entry[0] == "append":
                data = entry[3]
                op = data.get("operation") if isinstance(data, dict) else None
                steps.append(("append", op))
            elif entry[0] == "reserve":
                steps.append(("reserve", entry[2]))
            elif entry[0] == "flush-resolved":
                outcome = entry[2]
                steps.append(("flushed", outcome if isinstance(outcome, bool) else "error"))
            else:
                steps.append((entry[0],))
        return steps
