"""``plugin.dispose()`` amid tool calls from several threads, on the embedded host.

Real SQLite, real actors, fake time; on both runtimes. A few threads call the
three tools while the main thread disposes the plugin after a fixed number of
calls were made. Nothing may be appended once ``dispose()`` has returned, every
answer must be one of the classified ones, and every change a call confirmed is
in the log and the store (see ``tests/owner/test_dispose_race.py`` for each
interleaving on its own).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from actors._runtime import Runtime
from host_bridge._plugin import install_schedule
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import ToolCall, ToolDefinition, ToolResult
from host_bridge.testing import FakeClock, FakeTimers, settle_host
from tests.changes import reopened_changes, schedule_changes
from tests.schema_check import checked

ROUNDS = 3
THREADS = 4
CALLS = 30  # per thread
DISPOSE_AFTER = 40  # calls made (of THREADS * CALLS) before dispose begins
TIMEOUT_S = 30.0

SHUTTING_DOWN = {
    "code": "internal_error",
    "message": "Schedule is shutting down, so the operation did not run; nothing was changed.",
}


def call_of(thread: int, number: int) -> tuple[str, dict[str, Any]]:
    """The ``number``-th call of a thread: creates, lists and deletes in turn."""
    kind = number % 3
    if kind == 0:
        return "schedule_create", {"prompt": f"t{thread} c{number}", "after_seconds": 60}
    if kind == 1:
        return "schedule_list", {}
    return "schedule_delete", {"id": f"schedule-{number}"}


def race(data_dir: Path, runtime: Runtime) -> Counter[str]:
    """One round: the answers by kind (``create ok``, ``list shutting_down`` ...)."""
    clock = FakeClock()
    host = EmbeddedHost(data_dir, clock=clock, timers=FakeTimers(clock), runtime=runtime)
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root(session_id="s-1")
    settle_host(host, plugin)
    tools: dict[str, ToolDefinition] = {}
    for name in ("schedule_create", "schedule_list", "schedule_delete"):
        tool = host.tools.get(name, agent=agent)
        assert tool is not None
        tools[name] = tool
    replies: list[tuple[str, Future[ToolResult]]] = []
    lock = threading.Lock()
    made = threading.Semaphore(0)

    def caller(thread: int) -> None:
        for number in range(CALLS):
            name, arguments = call_of(thread, number)
            reply = tools[name].execute(arguments, ToolCall(f"t{thread}-{number}", agent))
            with lock:
                replies.append((name, reply))
            made.release()

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for _ in range(DISPOSE_AFTER):
        assert made.acquire(timeout=TIMEOUT_S)
    disposed = plugin.dispose()
    at_dispose = schedule_changes(agent.session.events)
    for thread in threads:
        thread.join()
    assert disposed.result(timeout=TIMEOUT_S) is None
    changes = schedule_changes(agent.session.events)
    assert changes == at_dispose  # nothing appended once dispose() returned

    answers: Counter[str] = Counter()
    confirmed: list[tuple[str, str]] = []
    for name, reply in replies:
        value = checked(name, reply.result(timeout=TIMEOUT_S).value)
        if value == SHUTTING_DOWN:
            answers[f"{name} shutting_down"] += 1
            continue
        assert "code" not in value or value.get("deleted") is False, value
        answers[f"{name} ok"] += 1
        if name == "schedule_create":
            confirmed.append(("create", value["id"]))
        elif name == "schedule_delete" and value["deleted"]:
            confirmed.append(("delete", value["id"]))
    assert sum(answers.values()) == THREADS * CALLS
    assert sorted(confirmed) == sorted(changes)  # each confirmed change, no other one
    assert host.close() is None
    assert reopened_changes(data_dir / "sessions.sqlite3", "s-1") == changes
    return answers


def test_dispose_amid_tool_calls_from_threads_appends_nothing_once_it_returned(
    tmp_path: Path, runtime: Runtime
) -> None:
    totals: Counter[str] = Counter()
    for round_number in range(ROUNDS):
        totals += race(tmp_path / f"round-{round_number}", runtime)
    assert sum(totals.values()) == ROUNDS * THREADS * CALLS
