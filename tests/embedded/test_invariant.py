"""The invariant companion on the embedded session store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore
from host_bridge.invariant import (
    ScheduleInvariant,
    ScheduleInvariantError,
    install_schedule_invariant,
)
from host_bridge.protocols import SessionHeader
from host_bridge.testing import FakeHost
from messages import SCHEDULE_CHANGE_TYPE, ScheduleLogError

TIMEOUT = 10.0
AT = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[EmbeddedHost]:
    with EmbeddedHost(tmp_path / "data") as embedded:
        yield embedded


@pytest.fixture
def store() -> Iterator[EmbeddedSessionStore]:
    sessions = EmbeddedSessionStore(None)
    yield sessions
    sessions.close()


def create(schedule_id: str, prompt: str = "stretch") -> dict[str, Any]:
    return {
        "version": 1,
        "operation": "create",
        "schedule": {
            "id": schedule_id,
            "kind": "after",
            "prompt": prompt,
            "afterSeconds": 60,
            "scheduledAt": AT,
        },
    }


def delete(schedule_id: str) -> dict[str, Any]:
    return {"version": 1, "operation": "delete", "id": schedule_id}


def dispatch(schedule_id: str) -> dict[str, Any]:
    return {"version": 1, "operation": "dispatch", "id": schedule_id}


def change(session: EmbeddedSession, payload: Any) -> None:
    session.append(SCHEDULE_CHANGE_TYPE, payload)


def stored_data(host: EmbeddedHost, session: EmbeddedSession) -> list[Any]:
    assert host.sessions.flush(session).result(TIMEOUT) is True
    assert host.persistence is not None
    stored = host.persistence.load(session.id)
    assert stored is not None
    return [event.data for event in stored.events]


def test_a_corrupt_existing_stream_fails_installation_naming_the_session(
    store: EmbeddedSessionStore,
) -> None:
    healthy = store.create("healthy")
    change(healthy, create("schedule-1"))
    broken = store.create("broken'; --")
    broken.append("message", "hello")
    change(broken, delete("schedule-9"))
    with pytest.raises(ScheduleInvariantError) as caught:
        install_schedule_invariant(store)
    assert caught.value.session_id == "broken'; --"
    assert "broken'; --" in str(caught.value)
    assert "inactive id" in caught.value.reason
    assert isinstance(caught.value, ScheduleLogError)
    assert caught.value.code == "corrupt_schedule_log"
    # nothing was installed: appends are not judged
    change(healthy, create("schedule-1"))
    assert len(healthy.events) == 2


@pytest.mark.parametrize(
    ("label", "payload"),
    [
        ("reused id", create("schedule-1")),
        ("delete of inactive id", delete("schedule-2")),
        ("dispatch of inactive id", dispatch("nope")),
        ("delete after dispatch", "DISPATCHED"),
        ("missing key", {"version": 1, "operation": "delete"}),
        ("extra key", {**delete("schedule-1"), "extra": True}),
        ("unknown operation", {"version": 1, "operation": "snooze", "id": "schedule-1"}),
        ("wrong version", {**delete("schedule-1"), "version": 2}),
        ("bool version", {**delete("schedule-1"), "version": True}),
        ("not an object", ["delete", "schedule-1"]),
        ("padded id", delete(" schedule-1")),
        ("blank prompt", create("schedule-3", prompt="   ")),
        (
            "bad instant",
            {
                **create("schedule-3"),
                "schedule": {**create("x")["schedule"], "scheduledAt": "2026-02-30T00:00:00.000Z"},
            },
        ),
    ],
)
def test_rejected_candidates_raise_and_are_neither_appended_nor_stored(
    host: EmbeddedHost, label: str, payload: Any
) -> None:
    session = host.sessions.create("s-1")
    change(session, create("schedule-1"))
    invariant = install_schedule_invariant(host.sessions)
    if payload == "DISPATCHED":
        change(session, create("schedule-5"))
        change(session, dispatch("schedule-5"))
        payload = delete("schedule-5")
    before = list(session.events)
    with pytest.raises(ScheduleInvariantError) as caught:
        change(session, payload)
    assert caught.value.session_id == "s-1"
    assert "candidate rejected" in str(caught.value)
    assert list(session.events) == before
    assert stored_data(host, session) == [event.data for event in before]
    # the session is still usable and still judged
    change(session, delete("schedule-1"))
    assert len(session.events) == len(before) + 1
    invariant.uninstall()


def test_valid_candidates_pass_and_are_stored(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    install_schedule_invariant(host.sessions)
    payloads = [
        create("schedule-1"),
        create("schedule-2"),
        delete("schedule-1"),
        dispatch("schedule-2"),
        create("schedule-3"),
        {**dispatch("schedule-3"), "version": 1.0},  # JSON number semantics
    ]
    for payload in payloads:
        change(session, payload)
    assert stored_data(host, session) == payloads


def test_sessions_created_after_install_are_judged(store: EmbeddedSessionStore) -> None:
    install_schedule_invariant(store)
    later = store.create("later")
    change(later, create("schedule-1"))
    with pytest.raises(ScheduleInvariantError, match="later"):
        change(later, create("schedule-1"))
    other = store.create("other")
    change(other, create("schedule-1"))  # ids are per session


def test_non_schedule_events_are_never_judged(store: EmbeddedSessionStore) -> None:
    session = store.create("s-1")
    session.append("message", delete("schedule-404"))
    session.append("schedule/changes", "not a change at all")
    install_schedule_invariant(store)
    session.append("message", {"version": 99, "operation": "delete"})
    session.append("Schedule/Change", delete("nothing"))
    assert len(session.events) == 4


def test_events_before_a_forks_seed_are_never_judged(store: EmbeddedSessionStore) -> None:
    parent = store.create("parent")
    change(parent, create("schedule-1"))
    change(parent, create("schedule-1"))  # corrupt: appended before any invariant
    change(parent, {"version": 7})
    child = store.fork(parent, session_id="child")
    assert child.header == SessionHeader("child", seed_length=3, parent_session="parent")
    store.detach(parent)
    invariant = install_schedule_invariant(store)  # the child's own suffix is empty: fine
    assert invariant.check_session(child).active == ()
    change(child, create("schedule-1"))  # a fork does not inherit its parent's ids
    with pytest.raises(ScheduleInvariantError, match="inactive id"):
        change(child, delete("schedule-2"))
    change(child, delete("schedule-1"))
    assert len(child.events) == 5


def test_a_fork_boundary_inside_a_healthy_stream(store: EmbeddedSessionStore) -> None:
    parent = store.create("parent")
    install_schedule_invariant(store)
    change(parent, create("schedule-1"))
    child = store.fork(parent, session_id="child")
    # schedule-1 is active in the parent, but not in the child's suffix
    with pytest.raises(ScheduleInvariantError, match="inactive id"):
        change(child, dispatch("schedule-1"))
    change(parent, dispatch("schedule-1"))
    change(child, create("schedule-1"))


def test_uninstall_stops_judging(store: EmbeddedSessionStore) -> None:
    session = store.create("s-1")
    invariant = install_schedule_invariant(store)
    with pytest.raises(ScheduleInvariantError):
        change(session, delete("schedule-1"))
    invariant.uninstall()
    invariant.uninstall()
    change(session, delete("schedule-1"))
    assert len(session.events) == 1


def test_two_invariants_judge_independently(store: EmbeddedSessionStore) -> None:
    session = store.create("s-1")
    first = install_schedule_invariant(store)
    second = install_schedule_invariant(store)
    change(session, create("schedule-1"))
    first.uninstall()
    with pytest.raises(ScheduleInvariantError):
        change(session, create("schedule-1"))
    second.uninstall()
    change(session, create("schedule-1"))


def test_a_new_log_under_a_reused_id_is_judged_on_its_own(store: EmbeddedSessionStore) -> None:
    """A session id can come back with a different log (no persistence, or a fresh fork)."""
    install_schedule_invariant(store)
    first = store.create("s-1")
    change(first, create("schedule-1"))
    change(first, create("schedule-2"))  # judged against a log that holds schedule-1
    store.detach(first)
    second = store.create("s-1")  # a different, empty log with the same id
    second.append("message", "a")
    second.append("message", "b")
    with pytest.raises(ScheduleInvariantError, match="inactive id"):
        change(second, delete("schedule-1"))
    change(second, create("schedule-1"))  # not a reuse in this log
    assert ScheduleInvariant().check_session(second).seen_ids == ("schedule-1",)


def test_a_reused_id_with_another_seed_length_is_judged_with_its_own(
    store: EmbeddedSessionStore,
) -> None:
    install_schedule_invariant(store)
    donor = store.create("donor")
    change(donor, create("schedule-1"))
    plain = store.create("s-1")
    change(plain, create("schedule-1"))
    change(plain, create("schedule-2"))  # judged against a log that holds schedule-1
    store.detach(plain)
    forked = store.fork(donor, session_id="s-1")  # seed_length 1: schedule-1 is not its own
    forked.append("message", "z")
    with pytest.raises(ScheduleInvariantError, match="inactive id"):
        change(forked, delete("schedule-1"))


def test_a_resumed_session_is_judged_on_its_stored_log(tmp_path: Path) -> None:
    with EmbeddedHost(tmp_path / "data") as first:
        session = first.sessions.create("s-1")
        change(session, create("schedule-1"))
        assert first.sessions.flush(session).result(TIMEOUT) is True
    with EmbeddedHost(tmp_path / "data") as second:
        install_schedule_invariant(second.sessions)
        resumed = second.sessions.resume("s-1")
        with pytest.raises(ScheduleInvariantError, match="reused"):
            change(resumed, create("schedule-1"))
        change(resumed, delete("schedule-1"))


# --- sessions created after install ----------------------------------------------------------


def test_an_invalid_seeded_session_is_refused_at_creation() -> None:
    host = FakeHost()
    install_schedule_invariant(host.sessions)
    with pytest.raises(ScheduleInvariantError, match=r"'seeded'.*reused"):
        host.new_session(
            "seeded",
            seed_events=(
                (SCHEDULE_CHANGE_TYPE, create("schedule-1")),
                (SCHEDULE_CHANGE_TYPE, create("schedule-1")),
            ),
        )
    with pytest.raises(ScheduleInvariantError, match="inactive id"):
        host.new_session(
            "forked",
            seed_events=(
                (SCHEDULE_CHANGE_TYPE, create("schedule-1")),
                (SCHEDULE_CHANGE_TYPE, dispatch("schedule-1")),  # owned, but not its own id
            ),
            seed_length=1,
            parent_session="parent",
        )
    host.new_session("ok", seed_events=((SCHEDULE_CHANGE_TYPE, create("schedule-1")),))
    assert [s.id for s in host.sessions.list()] == ["ok"]  # nothing of the refused ones


def test_a_seed_before_the_fork_point_is_not_judged_at_creation() -> None:
    host = FakeHost()
    install_schedule_invariant(host.sessions)
    corrupt_parent_part = ((SCHEDULE_CHANGE_TYPE, delete("schedule-9")), ("message", "hi"))
    child = host.new_session("child", seed_events=corrupt_parent_part, seed_length=2)
    change_fake = child.append
    change_fake(SCHEDULE_CHANGE_TYPE, create("schedule-1"))  # its own suffix starts clean
    with pytest.raises(ScheduleInvariantError, match="reused"):
        change_fake(SCHEDULE_CHANGE_TYPE, create("schedule-1"))  # judged by the store-wide guard


def test_the_embedded_store_judges_new_and_forked_sessions_before_storing_them(
    host: EmbeddedHost,
) -> None:
    seen: list[tuple[str, int | None, int]] = []

    def refuse_forks(header: SessionHeader, events: Any) -> None:
        seen.append((header.id, header.seed_length, len(events)))
        if header.parent_session is not None:
            raise ScheduleInvariantError(header.id, "refused by the test")

    invariant = install_schedule_invariant(host.sessions)
    remove = host.sessions.add_creation_guard(refuse_forks)
    parent = host.sessions.create("parent")
    change(parent, create("schedule-1"))
    with pytest.raises(ScheduleInvariantError, match="refused by the test"):
        host.sessions.fork(parent, session_id="child")
    assert seen == [("parent", None, 0), ("child", 1, 1)]
    assert host.sessions.get("child") is None
    assert host.persistence is not None
    assert host.persistence.load_header("child") is None  # nothing of it was stored
    remove()
    remove()
    child = host.sessions.fork(parent, session_id="child")
    assert invariant.check_session(child).active == ()
    invariant.uninstall()
    assert host.sessions.create("later").events == ()
