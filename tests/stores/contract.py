"""The store contract: what every backend's store does, run once per backend by subclassing.

Rows are queued, committed together by one writer and durable across
reopening; flush futures cover what was queued before them; a session has one
owner at a time and a writer whose rows conflict is fenced out; a whole-store
failure keeps every row queued; close writes what it can and says what it
could not.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from host_bridge.embedded.codec import MAX_PAYLOAD_BYTES, encode_payload
from host_bridge.embedded.sessions import EmbeddedSessionStore, SessionLeaseRefusedError
from host_bridge.protocols import SessionEvent, SessionHeader
from tests.embedded.helpers import REPO_ROOT
from tests.stores.backends import (
    SessionLeaseError,
    Store,
    StoreClosedError,
    StoreCorruptError,
    StoredSession,
    StoreError,
    StoreReader,
    StoreVersionError,
    StoreWriteError,
    open_store,
    writer_module,
)
from tests.stores.case import (
    TIMEOUT,
    Seam,
    StoreCase,
    event,
    new_session,
    ok,
    record,
    row,
)

HOSTILE_IDS = [
    "'; DROP TABLE events; --",
    "Robert'); DROP TABLE sessions;--",
    "x'; DROP TABLE sessions; --",
    "../../etc/passwd",
    "..\\..\\windows\\system32",
    "\"double\" and 'single' quotes",
    "x" * 10_000,
    "🎉🔥 emoji ✓",
    "line\nbreak\ttab\r",
    "%",
    "_",
    "%s %(x)s",
    "\\x00",
    "* ? [a-z]",
    " padded ",
    " ",
    "\u202eright-to-left",
    "\ufeffbom",
    "NULL",
]


class StoreContract(StoreCase):
    """Every case of the store contract; a backend subclasses it with its three hooks."""

    # --- opening, round trips and durability ------------------------------------------

    def test_open_store_picks_this_backend_for_its_location(self) -> None:
        store = open_store(self.location)
        self.opened.append(store)
        assert isinstance(store, self.store_class)
        assert store.owner != self.make().owner  # every store is an owner of its own

    def test_the_schema_is_versioned_and_a_newer_one_is_refused(self) -> None:
        self.make().close()
        version = "SELECT value FROM meta WHERE key = 'schema_version'"
        assert self.sql(version) == [(str(self.schema_version),)]
        newer = self.schema_version + 1
        self.sql("UPDATE meta SET value = ? WHERE key = 'schema_version'", str(newer))
        with pytest.raises(StoreVersionError, match=f"schema version {newer}"):
            self.construct()

    def test_events_and_header_round_trip_and_read_back_after_reopening(self) -> None:
        store = self.make()
        before = time.time_ns() // 1_000_000
        new_session(store, "s1")
        written = [
            record(store, "s1", 0, {"version": 1, "operation": "create"}),
            record(store, "s1", 1, ["list", 2, 3.5, None, True]),
            record(store, "s1", 2, "é 🎉 \x00"),
            record(store, "s1", 3, {"text": "hé\0", "list": [1, 2.5, None]}),
        ]
        ok(store.flush("s1"))
        after = time.time_ns() // 1_000_000
        assert store.pending_rows == 0
        assert store.load("s1") == StoredSession(SessionHeader("s1"), tuple(written))
        ((created_at,),) = self.sql("SELECT created_at FROM sessions")
        assert before <= created_at <= after
        store.close()
        for _ in range(2):  # reopening keeps the schema and the data
            other = self.make()
            assert other.load("s1") == StoredSession(SessionHeader("s1"), tuple(written))
            assert other.load_header("s1") == SessionHeader("s1")
            assert other.session_ids() == ["s1"]
            assert other.load("missing") is None and other.load_header("missing") is None
            other.close()

    def test_a_fork_header_and_its_seed_round_trip(self) -> None:
        store = self.make()
        new_session(store, "parent")
        parent_events = [record(store, "parent", i) for i in range(3)]
        fork = SessionHeader("child", seed_length=2, parent_session="parent")
        store.acquire_session("child")
        store.create_session(fork, [(e, encode_payload(e.data)) for e in parent_events[:2]])
        own = record(store, "child", 2, {"own": True})
        ok(store.flush_all())
        store.close()
        reopened = self.make()
        assert reopened.load("child") == StoredSession(fork, (*parent_events[:2], own))
        assert reopened.load_header("child") == fork
        assert reopened.session_ids() == ["child", "parent"]

    def test_seed_length_none_and_zero_stay_distinct(self) -> None:
        store = self.make()
        new_session(store, "none")
        new_session(store, "zero", SessionHeader("zero", seed_length=0, parent_session="none"))
        ok(store.flush_all())
        assert store.load_header("none") == SessionHeader("none", None, None)
        assert store.load_header("zero") == SessionHeader("zero", 0, "none")

    def test_a_seed_must_be_contiguous(self) -> None:
        store = self.make()
        store.acquire_session("f")
        with pytest.raises(StoreError, match="seed event 1"):
            store.create_session(
                SessionHeader("f", seed_length=2, parent_session="p"), [row(0), row(2)]
            )
        assert store.pending_rows == 0

    def test_unflushed_rows_are_not_visible_to_reads(self) -> None:
        store = self.make()
        new_session(store, "s")
        record(store, "s", 0)
        assert store.pending_rows == 2
        assert store.load("s") is None
        assert store.session_ids() == []
        ok(store.flush("s"))
        assert store.pending_rows == 0
        loaded = store.load("s")
        assert loaded is not None and len(loaded.events) == 1

    def test_fork_detach_and_resume_through_the_session_store(self) -> None:
        store = self.make()
        sessions = EmbeddedSessionStore(store)
        parent = sessions.create("parent")
        for index in range(3):
            parent.append("note", {"i": index})
        child = sessions.fork(parent, at=2, session_id="child")
        child.append("note", {"child": True})
        ok(sessions.flush(child))
        sessions.close()
        store.close()

        resumed = EmbeddedSessionStore(self.make())
        child2 = resumed.resume("child")
        assert child2.header == SessionHeader("child", seed_length=2, parent_session="parent")
        assert [e.data for e in child2.events] == [{"i": 0}, {"i": 1}, {"child": True}]
        parent2 = resumed.open("parent")
        assert [e.data for e in parent2.events] == [{"i": 0}, {"i": 1}, {"i": 2}]
        parent2.append("note", "more")
        ok(resumed.flush(parent2))
        resumed.close()

    def test_data_survives_a_process_that_exits_without_closing(self) -> None:
        script = textwrap.dedent(
            """
            import os, sys
            from host_bridge.embedded.codec import encode_payload
            from host_bridge.embedded.stores import open_store
            from host_bridge.protocols import SessionEvent, SessionHeader

            store = open_store(sys.argv[1])
            store.acquire_session("proc")
            store.create_session(SessionHeader("proc"))
            for i in range(5):
                event = SessionEvent("note", i, 1000 + i, {"i": i, "text": "é"})
                store.record_append("proc", event, encode_payload(event.data))
            assert store.flush("proc").result(30) is True
            sys.stdout.write("flushed\\n")
            sys.stdout.flush()
            os._exit(0)  # no close(): durability must not depend on a clean shutdown
            """
        )
        done = subprocess.run(
            [sys.executable, "-c", script, self.location],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "flushed\n"
        stored = self.make().load("proc")
        assert stored is not None and stored.header == SessionHeader("proc")
        assert stored.events == tuple(
            SessionEvent("note", i, 1000 + i, {"i": i, "text": "é"}) for i in range(5)
        )

    def test_a_read_only_opening_reads_what_is_committed_and_takes_no_lease(self) -> None:
        store = self.make()
        for session_id in ("a", "live"):
            new_session(store, session_id)
            record(store, session_id, 0)
        ok(store.flush_all())
        store.release_session("a")
        record(store, "live", 1)  # queued, not committed
        as_reader: StoreReader = store  # the writable store offers the reader's reads too
        assert as_reader.session_ids() == ["a", "live"]
        with open_store(self.location, read_only=True) as reader:
            assert reader.session_ids() == ["a", "live"]
            assert reader.load_header("a") == SessionHeader("a")
            stored = reader.load("live")
            assert stored is not None and [e.data for e in stored.events] == [{"n": 0}]
            assert reader.load("missing") is None and reader.load_header("missing") is None
        with pytest.raises(StoreClosedError):
            reader.session_ids()
        reader.close()  # idempotent
        assert store.holds_lease("live")
        self.make().acquire_session("a")  # the reader took nothing
        assert self.durable_counts() == (2, 2)

    # --- flush futures and group commit -----------------------------------------------

    def test_a_flush_covers_only_what_was_queued_before_it(self) -> None:
        store = self.make()
        ok(store.flush("nobody"))
        new_session(store, "a")
        new_session(store, "b")
        mine = [record(store, "a", 0), record(store, "a", 1)]
        record(store, "b", 0)
        ok(store.flush("a"))
        reader = self.make()
        loaded = reader.load("a")
        assert loaded is not None and loaded.events == tuple(mine)
        ok(store.flush_all())
        stored = reader.load("b")
        assert stored is not None and len(stored.events) == 1

    def test_a_flush_requested_during_a_write_waits_for_its_own_rows(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        ok(store.flush("a"))
        seam.pause()
        first = record(store, "a", 0)
        early = store.flush("a")
        assert seam.entered.wait(TIMEOUT)  # the writer holds [first] in an open transaction
        second = record(store, "a", 1)
        late = store.flush("a")
        assert not early.done()
        assert not late.done()
        commits = store.commit_count
        seam.unpause()
        ok(early)
        ok(late)
        loaded = store.load("a")
        assert loaded is not None and loaded.events == (first, second)
        assert store.commit_count == commits + 2

    def paused_with_sessions_a_and_b(self) -> tuple[Store, Seam]:
        """A store holding sessions "a" and "b", its writer's next transaction held."""
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        new_session(store, "b")
        ok(store.flush_all())
        seam.pause()
        return store, seam

    def test_flushes_of_one_session_waiting_for_the_next_round_share_one_future(self) -> None:
        store, seam = self.paused_with_sessions_a_and_b()
        record(store, "a", 0)
        in_flight = store.flush("a")
        assert seam.entered.wait(TIMEOUT)  # the writer holds a round open
        second = record(store, "a", 1)
        waiting = store.flush("a")
        third = record(store, "a", 2)
        again = store.flush("a")  # covers the row queued after the first request too
        record(store, "b", 0)
        other = store.flush("b")
        assert again is waiting
        assert in_flight is not waiting and other is not waiting
        commits = store.commit_count
        seam.unpause()
        for future in (in_flight, waiting, other):
            ok(future)
        loaded = store.load("a")
        assert loaded is not None and loaded.events[1:] == (second, third)
        assert store.commit_count == commits + 2

    def test_a_flush_with_nothing_pending_writes_no_rows(self) -> None:
        store = self.make()
        new_session(store, "a")
        record(store, "a", 0)
        ok(store.flush("a"))
        commits = store.commit_count
        requests = store.flush_requests
        quiet = store.flush("a")
        if not self.flush_confirms_lease:
            assert quiet.done()
            assert store.commit_count == commits
        ok(quiet)
        ok(store.flush("never-created"))
        ok(store.flush_all())
        assert store.flush_requests == requests + 3
        assert self.durable_counts() == (1, 1)

    def test_a_flush_of_one_session_does_not_wait_for_another_sessions_rows(self) -> None:
        store, seam = self.paused_with_sessions_a_and_b()
        record(store, "b", 0)
        busy = store.flush("b")
        assert seam.entered.wait(TIMEOUT)
        quiet = store.flush("a")  # nothing of "a" is uncommitted
        if not self.flush_confirms_lease:
            assert quiet.done()  # no need to wait for "b"
        ok(store.flush("unknown"))  # a session nobody holds waits for nothing
        seam.unpause()
        ok(quiet)
        ok(busy)

    def test_flush_rejects_a_non_string_id(self) -> None:
        store = self.make()
        with pytest.raises(StoreError, match="session id string"):
            store.flush(42).result(TIMEOUT)  # type: ignore[arg-type]

    def test_flush_futures_cannot_be_cancelled(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        seam.pause()
        pending = store.flush("a")
        assert seam.entered.wait(TIMEOUT)
        assert pending.cancel() is False
        seam.unpause()
        ok(pending)

    def test_flushes_from_many_threads_share_one_group_commit(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        count = 50
        ids = [f"session-{i}" for i in range(count)]
        for session_id in [*ids, "blocker"]:
            new_session(store, session_id)
        ok(store.flush_all())
        base_requests = store.flush_requests

        seam.pause()
        record(store, "blocker", 0)
        blocker = store.flush("blocker")
        assert seam.entered.wait(TIMEOUT)  # the writer is inside a transaction

        futures: list[Future[bool] | None] = [None] * count
        start = threading.Barrier(count)

        def flush_one(index: int) -> None:
            start.wait(TIMEOUT)
            record(store, ids[index], 0, {"from": index})
            futures[index] = store.flush(ids[index])

        threads = [threading.Thread(target=flush_one, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        commits = store.commit_count
        requests = store.flush_requests
        assert all(f is not None and not f.done() for f in futures)

        seam.unpause()
        ok(blocker)
        for future in futures:
            assert future is not None
            ok(future)
        # one commit finishes the paused batch, ONE more makes all 50 sessions durable
        assert store.commit_count - commits == 2
        assert requests == base_requests + count + 1
        reader = self.make()
        for index, session_id in enumerate(ids):
            loaded = reader.load(session_id)
            assert loaded is not None and [e.data for e in loaded.events] == [{"from": index}]

    def test_the_writer_commits_a_large_queue_without_a_flush(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(writer_module, "AUTO_WRITE_ROWS", 10)
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        ok(store.flush("a"))
        requests = store.flush_requests
        seam.pause()
        for seq in range(10):
            record(store, "a", seq)
        assert seam.entered.wait(TIMEOUT)  # a write started although nobody flushed
        assert store.flush_requests == requests
        seam.unpause()
        ok(store.flush("a"))
        loaded = store.load("a")
        assert loaded is not None and len(loaded.events) == 10

    def test_many_threads_write_and_read_concurrently(self) -> None:
        store = self.make()
        sessions_per_thread, events_per_session, workers = 5, 8, 8
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for s in range(sessions_per_thread):
                    session_id = f"w{worker}-s{s}"
                    new_session(store, session_id)
                    for seq in range(events_per_session):
                        record(store, session_id, seq, {"w": worker, "seq": seq})
                        if seq % 3 == 0:
                            ok(store.flush(session_id))
                    ok(store.flush(session_id))
                    loaded = store.load(session_id)
                    assert loaded is not None and len(loaded.events) == events_per_session
                    store.session_ids()
            except BaseException as error:  # reported below, on the test's thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 3)
        assert errors == []
        assert len(store.session_ids()) == workers * sessions_per_thread
        assert store.commit_count <= store.flush_requests

    def test_done_callbacks_may_call_back_into_the_store(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        record(store, "a", 0)
        seam.pause()
        first = store.flush("a")
        assert seam.entered.wait(TIMEOUT)
        chained: list[Future[bool]] = []

        def on_done(_: Future[bool]) -> None:  # runs on the writer thread
            record(store, "a", 1)
            chained.append(store.flush("a"))

        first.add_done_callback(on_done)
        seam.unpause()
        ok(first)
        assert len(chained) == 1
        ok(chained[0])
        loaded = store.load("a")
        assert loaded is not None and len(loaded.events) == 2

    def test_record_appends_queues_a_unit_that_commits_together_or_not_at_all(self) -> None:
        seam = Seam()
        seam.failures = 1
        store = self.make(fault_hook=seam)
        new_session(store, "s")
        assert store.flush("s").exception(TIMEOUT) is not None  # the session row waits
        rows = [event(0), event(1)]
        with pytest.raises(StoreError, match="seq"):  # a gap inside the unit refuses all of it
            store.record_appends("s", [row(0), (event(2), b"\x00")])
        assert store.pending_rows == 1
        store.record_appends("s", [(item, encode_payload(item.data)) for item in rows])
        assert store.pending_rows == 3
        ok(store.flush("s"))
        stored = self.make().load("s")
        assert stored is not None and stored.events == tuple(rows)
        store.record_appends("s", [])  # an empty unit queues nothing
        assert store.pending_rows == 0
        record(store, "s", 2)  # the next seq follows the unit

    # --- sessions: ids, duplicates, appends -------------------------------------------

    def test_hostile_ids_are_stored_verbatim(self) -> None:
        store = self.make()
        for index, session_id in enumerate(HOSTILE_IDS):
            header = SessionHeader(session_id, seed_length=0, parent_session=session_id)
            new_session(store, session_id, header)
            record(store, session_id, 0, {"index": index, "id": session_id})
        ok(store.flush_all())
        store.close()
        reader = self.make()
        assert reader.session_ids() == sorted(HOSTILE_IDS)
        for index, session_id in enumerate(HOSTILE_IDS):
            stored = reader.load(session_id)
            assert stored is not None
            assert stored.header == SessionHeader(session_id, 0, session_id)
            assert [e.data for e in stored.events] == [{"index": index, "id": session_id}]
        assert reader.load("%%") is None
        assert reader.load("x") is None
        assert reader.load("'") is None
        assert self.durable_counts() == (len(HOSTILE_IDS), len(HOSTILE_IDS))

    @pytest.mark.parametrize(
        "bad_id",
        ["", "nul\x00inside", "\x00", "\ud800", "lone\udfffsurrogate", "lone \udc80"],
        ids=["empty", "nul", "only-nul", "high-surrogate", "low-surrogate", "lone-surrogate"],
    )
    def test_unstorable_ids_are_refused(self, bad_id: str) -> None:
        store = self.make()
        with pytest.raises(StoreError, match="cannot be stored"):
            new_session(store, bad_id)
        assert store.pending_rows == 0
        with pytest.raises(StoreError, match=r"unknown|does not hold"):
            record(store, bad_id, 0)
        assert store.load(bad_id) is None
        assert store.load_header(bad_id) is None
        ok(store.flush_all())
        assert store.session_ids() == []

    def test_an_unstorable_parent_session_or_id_type_is_refused(self) -> None:
        store = self.make()
        store.acquire_session("child")
        with pytest.raises(StoreError, match="parent_session"):
            store.create_session(SessionHeader("child", seed_length=0, parent_session="p\x00"))
        with pytest.raises(StoreError, match="must be a string"):
            store.create_session(SessionHeader(7))  # type: ignore[arg-type]
        assert store.pending_rows == 0

    @pytest.mark.parametrize("seed_length", [-1, True, 2**63, "2"])
    def test_an_invalid_seed_length_is_refused(self, seed_length: Any) -> None:
        store = self.make()
        store.acquire_session("s")
        with pytest.raises(StoreError, match="seed_length"):
            store.create_session(SessionHeader("s", seed_length=seed_length))
        assert store.pending_rows == 0

    def test_a_duplicate_create_is_refused_while_pending_and_once_durable(self) -> None:
        first = self.make()
        new_session(first, "dup")
        record(first, "dup", 0, {"original": True})
        with pytest.raises(StoreError, match="already exists"):
            first.create_session(SessionHeader("dup"))
        ok(first.flush("dup"))
        with pytest.raises(StoreError, match="already exists"):
            first.create_session(SessionHeader("dup", seed_length=0, parent_session="x"))
        first.close()
        second = self.make()
        with pytest.raises(StoreError, match="already exists"):
            new_session(second, "dup")
        stored = second.load("dup")
        assert stored is not None and stored.header == SessionHeader("dup")
        assert [e.data for e in stored.events] == [{"original": True}]

    def test_an_append_to_an_unknown_session_is_refused(self) -> None:
        store = self.make()
        store.acquire_session("ghost")
        with pytest.raises(StoreError, match="unknown to the store"):
            record(store, "ghost", 0)
        assert store.pending_rows == 0

    def test_an_append_with_a_wrong_seq_is_refused(self) -> None:
        store = self.make()
        new_session(store, "a")
        record(store, "a", 0)
        for wrong in (0, 2, 5):
            with pytest.raises(StoreError, match=f"has seq {wrong}, expected 1"):
                record(store, "a", wrong)
        assert store.pending_rows == 2
        record(store, "a", 1)
        ok(store.flush("a"))
        loaded = store.load("a")
        assert loaded is not None and [e.seq for e in loaded.events] == [0, 1]

    @pytest.mark.parametrize(
        ("item", "payload", "reason"),
        [
            (SessionEvent("t", 0, 1, None), "not bytes", "payload must be bytes"),
            (SessionEvent("t", 0, 1, None), b"\xc0" * (MAX_PAYLOAD_BYTES + 1), "larger than"),
            (SessionEvent("t", True, 1, None), b"\xc0", "seq"),
            (SessionEvent("t", -1, 1, None), b"\xc0", "negative"),
            (SessionEvent("t", 0, 2**63, None), b"\xc0", "time"),
            (SessionEvent("t", 0, 1.5, None), b"\xc0", "time"),  # type: ignore[arg-type]
            (SessionEvent("", 0, 1, None), b"\xc0", "event type"),
            (SessionEvent("t\udc00", 0, 1, None), b"\xc0", "event type"),
            ("not an event", b"\xc0", "SessionEvent"),
        ],
    )
    def test_invalid_rows_are_refused_before_queueing(
        self, item: Any, payload: Any, reason: str
    ) -> None:
        store = self.make()
        new_session(store, "a")
        with pytest.raises(StoreError, match=reason):
            store.record_append("a", item, payload)
        assert store.pending_rows == 1  # only the session row
        record(store, "a", 0)  # the expected seq did not move

    def test_appends_continue_a_reopened_session(self) -> None:
        first = self.make()
        for session_id in ("loaded", "lazy"):
            new_session(first, session_id)
            for seq in range(3):
                record(first, session_id, seq)
        ok(first.flush_all())
        first.close()
        second = self.make()
        second.acquire_session("loaded")
        second.acquire_session("lazy")
        assert second.load("loaded") is not None
        with pytest.raises(StoreError, match="expected 3"):
            record(second, "loaded", 0)
        record(second, "loaded", 3)
        with pytest.raises(StoreError, match="expected 3"):
            record(second, "lazy", 1)  # not loaded: its length is read once
        record(second, "lazy", 3)
        ok(second.flush_all())
        for session_id in ("loaded", "lazy"):
            stored = second.load(session_id)
            assert stored is not None and [e.seq for e in stored.events] == [0, 1, 2, 3]

    # --- rows damaged behind the store's back -----------------------------------------

    def stored_with(self, session_id: str, events: int) -> Store:
        """Store ``session_id`` with ``events`` notes and a healthy session; a new reader."""
        writer = self.make()
        new_session(writer, session_id)
        for seq in range(events):
            record(writer, session_id, seq)
        new_session(writer, "healthy")
        record(writer, "healthy", 0)
        ok(writer.flush_all())
        writer.close()
        return self.make()

    @staticmethod
    def assert_healthy_still_loads(reader: Store) -> None:
        """The undamaged session of :meth:`stored_with` still reads."""
        healthy = reader.load("healthy")
        assert healthy is not None and len(healthy.events) == 1

    @pytest.mark.parametrize(
        "broken",
        [b"\xc1", b"\x92\x01", b"\xc4\x01x", b"\xd4\x05\x00", b"\xa1\xff"],
        ids=["garbage", "truncated", "bin", "ext", "bad-utf8"],
    )
    def test_a_broken_payload_fails_load_naming_session_and_seq(self, broken: bytes) -> None:
        reader = self.stored_with("victim's", 3)
        self.sql("UPDATE events SET data = ? WHERE seq = 1 AND session_id = ?", broken, "victim's")
        with pytest.raises(StoreCorruptError, match=r"session \"victim's\" .*seq 1") as info:
            reader.load("victim's")
        assert repr(broken) not in str(info.value)
        assert reader.session_ids() == ["healthy", "victim's"]
        self.assert_healthy_still_loads(reader)

    def test_a_seq_gap_fails_load_naming_the_missing_seq(self) -> None:
        reader = self.stored_with("gappy", 4)
        self.sql("DELETE FROM events WHERE session_id = 'gappy' AND seq = 1")
        with pytest.raises(StoreCorruptError, match=r"'gappy'.*seq 1 \(found 2\)"):
            reader.load("gappy")
        reader.acquire_session("gappy")
        with pytest.raises(StoreCorruptError, match="gap"):
            record(reader, "gappy", 4)
        self.assert_healthy_still_loads(reader)

    def test_a_log_not_starting_at_zero_is_corrupt(self) -> None:
        reader = self.stored_with("headless", 2)
        self.sql("DELETE FROM events WHERE session_id = 'headless' AND seq = 0")
        with pytest.raises(StoreCorruptError, match="seq 0"):
            reader.load("headless")

    # --- failures and retries ---------------------------------------------------------

    def test_a_failed_commit_keeps_the_rows_queued_and_the_next_flush_retries(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        new_session(store, "b")
        a_events = [record(store, "a", i) for i in range(3)]
        b_events = [record(store, "b", i) for i in range(2)]
        seam.failures = 1
        with pytest.raises(StoreWriteError, match="stay queued") as info:
            store.flush("a").result(TIMEOUT)
        assert info.value.category == "OSError"
        assert "injected" not in str(info.value)  # no raw backend text
        assert seam.calls == 1
        assert store.commit_count == 0
        assert store.pending_rows == 7
        assert self.durable_counts() == (0, 0)  # rolled back: nothing half-written
        assert store.load("a") is None

        ok(store.flush("b"))  # the retry writes every queued row, once
        assert seam.calls == 2
        assert store.commit_count == 1
        assert store.pending_rows == 0
        assert self.durable_counts() == (2, 5)
        assert store.load("a") == StoredSession(SessionHeader("a"), tuple(a_events))
        assert store.load("b") == StoredSession(SessionHeader("b"), tuple(b_events))

    def test_a_failure_fails_only_the_requests_made_before_that_attempt(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        ok(store.flush("a"))
        seam.failures = 1
        seam.pause()
        first = record(store, "a", 0)
        early = store.flush("a")
        assert seam.entered.wait(TIMEOUT)
        second = record(store, "a", 1)
        late = store.flush("a")
        seam.unpause()
        with pytest.raises(StoreWriteError):
            early.result(TIMEOUT)
        ok(late)  # its own attempt came after the failure, and it covers the re-queued rows
        loaded = store.load("a")
        assert loaded is not None and loaded.events == (first, second)

    def test_a_whole_store_failure_keeps_every_session_queued_and_fences_nobody(self) -> None:
        seam = Seam()
        seam.failures = 1
        store = self.make(fault_hook=seam)
        for session_id in ("a", "b"):
            new_session(store, session_id)
            record(store, session_id, 0)
        with pytest.raises(StoreWriteError):
            store.flush_all().result(TIMEOUT)
        assert not store.lease_lost("a") and not store.lease_lost("b")
        assert store.pending_rows == 4
        ok(store.flush("a"))
        ok(store.flush("b"))

    # --- one owner per session, fencing -----------------------------------------------

    def test_a_session_is_owned_by_one_store_at_a_time(self) -> None:
        one = self.make()
        two = self.make()  # another store on the same location, in the same process
        new_session(one, "s")
        record(one, "s", 0)
        ok(one.flush("s"))
        with pytest.raises(SessionLeaseError, match="live in another process") as refused:
            two.acquire_session("s")
        assert refused.value.session_id == "s"
        assert refused.value.holder == one.owner
        assert one.owner in str(refused.value)
        with pytest.raises(SessionLeaseError):
            record(two, "s", 1)  # nor can it write the session
        with pytest.raises(SessionLeaseError, match="already"):
            one.acquire_session("s")
        new_session(two, "t")  # other sessions are free
        assert one.holds_lease("s") and not two.holds_lease("s") and two.holds_lease("t")

        one.release_session("s")
        assert not one.holds_lease("s")
        two.acquire_session("s")
        record(two, "s", 1)
        ok(two.flush("s"))
        with pytest.raises(SessionLeaseError):
            record(one, "s", 1)
        stored = self.make().load("s")
        assert stored is not None and len(stored.events) == 2

    def test_closing_a_store_gives_its_sessions_back(self) -> None:
        one = self.make()
        new_session(one, "s")
        record(one, "s", 0)
        one.close()  # writes the queued rows, then lets go
        two = self.make()
        two.acquire_session("s")
        stored = two.load("s")
        assert stored is not None and len(stored.events) == 1
        record(two, "s", 1)
        ok(two.flush("s"))

    def test_the_session_store_refuses_a_session_held_elsewhere_naming_the_holder(self) -> None:
        first_store = self.make()
        one = EmbeddedSessionStore(first_store)
        two = EmbeddedSessionStore(self.make())
        live = one.create("shared")
        live.append("note", 1)
        ok(one.flush(live))
        for attempt in (two.open, two.resume, two.create):
            with pytest.raises(SessionLeaseRefusedError) as refused:
                attempt("shared")
            assert isinstance(refused.value, SessionLeaseError)
            assert refused.value.holder == first_store.owner
            assert "live in another process" in str(refused.value)
        assert two.get("shared") is None
        one.detach(live)
        resumed = two.open("shared")
        assert [e.data for e in resumed.events] == [1]
        assert not resumed.lease_lost
        one.close()
        two.close()

    def test_a_row_conflict_is_named_by_the_backends_own_error_category(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = self.make()
        new_session(store, "s")
        ok(store.flush("s"))
        self.foreign_event("s", 0)  # another writer took seq 0
        record(store, "s", 0)
        with (
            caplog.at_level(logging.INFO, logger="dsh_schedule"),
            pytest.raises(
                SessionLeaseError, match=f"fenced out.*{self.conflict_category}"
            ) as raised,
        ):
            store.flush("s").result(TIMEOUT)
        driver_texts = ("UNIQUE constraint failed", "duplicate key")
        logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
        assert any(self.conflict_category in message for message in logged)
        assert not [t for t in [str(raised.value), *logged] if any(d in t for d in driver_texts)]

    def test_a_session_whose_rows_conflict_is_fenced_and_the_others_still_commit(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        armed = threading.Event()
        entered = threading.Event()
        release = threading.Event()

        def hook() -> None:
            if armed.is_set():
                armed.clear()
                entered.set()
                assert release.wait(TIMEOUT)

        store = self.make(fault_hook=hook)
        ids = [f"s-{n}" for n in range(7)]
        for session_id in [*ids, "quiet", "busy"]:
            new_session(store, session_id)
            record(store, session_id, 0)
        ok(store.flush_all())
        poisoned = {"s-1", "s-4", "s-5"}
        for session_id in sorted(poisoned):
            self.foreign_event(session_id, 1)  # another writer took the next seq
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="dsh_schedule"):
            armed.set()
            record(store, "busy", 1)
            busy = store.flush("busy")
            assert entered.wait(TIMEOUT)  # the writer waits inside a round
            for session_id in ids:
                record(store, session_id, 1)
            flushes = {session_id: store.flush(session_id) for session_id in ids}
            quiet = store.flush("quiet")  # nothing queued, in the same round
            commits = store.commit_count
            release.set()
            ok(busy)
            ok(quiet)
            for session_id, future in flushes.items():
                if session_id in poisoned:
                    with pytest.raises(SessionLeaseError, match="fenced out"):
                        future.result(TIMEOUT)
                else:
                    ok(future)
        assert store.commit_count > commits  # the healthy sessions committed
        assert {s for s in ids if store.lease_lost(s)} == poisoned
        with pytest.raises(SessionLeaseError, match="fenced out"):
            record(store, "s-1", 2)
        with pytest.raises(SessionLeaseError, match="fenced out"):
            store.flush("s-1").result(TIMEOUT)
        record(store, "s-0", 2)  # the write queue is not stuck behind the refused rows
        ok(store.flush("s-0"))
        assert store.pending_rows == 0
        fenced = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert sorted(r.getMessage().split("'")[1] for r in fenced) == sorted(poisoned)
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and r.exc_info]
        reader = self.make()
        for session_id in ids:
            stored = reader.load(session_id)
            assert stored is not None
            if session_id in poisoned:
                assert stored.events[1].data == {"foreign": 1} and len(stored.events) == 2
            else:
                expected = [0, 1, 2] if session_id == "s-0" else [0, 1]
                assert [e.seq for e in stored.events] == expected

    # --- close ------------------------------------------------------------------------

    def test_close_writes_pending_rows(self) -> None:
        store = self.make()
        new_session(store, "a")
        written = record(store, "a", 0)
        store.close()
        assert self.make().load("a") == StoredSession(SessionHeader("a"), (written,))

    def test_close_resolves_flushes_in_flight(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        seam.pause()
        waiting = store.flush("a")
        assert seam.entered.wait(TIMEOUT)
        closer = threading.Thread(target=store.close)
        closer.start()
        seam.unpause()
        closer.join(TIMEOUT)
        assert not closer.is_alive()
        ok(waiting)
        assert store.closed

    def test_every_call_after_close_fails(self) -> None:
        store = self.make()
        new_session(store, "a")
        store.close()
        with pytest.raises(StoreClosedError):
            store.acquire_session("b")
        with pytest.raises(StoreClosedError):
            record(store, "a", 0)
        with pytest.raises(StoreClosedError):
            store.flush("a").result(TIMEOUT)
        with pytest.raises(StoreClosedError):
            store.flush_all().result(TIMEOUT)
        with pytest.raises(StoreClosedError):
            store.load("a")
        with pytest.raises(StoreClosedError):
            store.session_ids()
        store.close()  # idempotent
        assert issubclass(StoreClosedError, StoreError)

    def test_close_reports_rows_it_could_not_write(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        new_session(store, "a")
        record(store, "a", 0)
        seam.failures = 1
        with pytest.raises(StoreWriteError, match="could not write 2 unflushed rows"):
            store.close()
        store.close()  # reported once
        assert self.make().session_ids() == []

    def test_close_stops_waiting_for_a_writer_stuck_in_a_commit(self) -> None:
        """A hung disk or database: close() returns, says what is not durable, fails every flush.

        The writer finishes its commit once the disk moves. SQLite keeps the
        session locked meanwhile, so the writer also writes what was queued
        after. On PostgreSQL the lease goes with the lease connection at
        close: the writer's lease check discards the queued row, unless the
        server had not yet ended that connection's backend when it asked.
        """
        entered = threading.Event()
        release = threading.Event()

        def stuck_disk() -> None:
            entered.set()
            assert release.wait(TIMEOUT)

        store, join_writer = self.make_with_writer(fault_hook=stuck_disk)
        try:
            new_session(store, "a")
            record(store, "a", 0)
            in_flight = store.flush("a")
            assert entered.wait(TIMEOUT)  # the writer is inside the commit
            record(store, "a", 1)
            queued = store.flush("a")  # waits for the next round
            store.start_closing(0)
            store.release_session("a")  # returns at the deadline, keeping the session
            assert store.holds_lease("a")
            with pytest.raises(StoreWriteError, match="timed out") as caught:
                store.close(timeout=0)
            assert caught.value.category == "CLOSE_TIMEOUT"
            assert "3 unflushed rows of sessions 'a' are not confirmed durable" in str(caught.value)
            assert store.closed
            for flush in (in_flight, queued):
                with pytest.raises(StoreWriteError, match="timed out"):
                    flush.result(0)  # failed at once, not left pending
            with pytest.raises(StoreError, match="closed"):
                record(store, "a", 2)
            with pytest.raises(StoreError, match="closed"):
                store.flush("a").result(0)
            store.close()  # idempotent: reported once
        finally:
            release.set()
        join_writer()  # the writer finishes on its own once the disk moves
        stored = self.make().load("a")
        assert stored is not None
        assert len(stored.events) in self.events_after_a_stuck_close
