"""The schedule checkpoint cases of the store contract: written with the rows, read with the tail.

A session's checkpoint is its projection as of some seq, stored in the same
commit as the rows that move it; reads fold only the rows after it. An
unusable one is folded from the log instead and rewritten; a wrong one that
decodes is what ``verify`` reports and ``reindex`` repairs.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from host_bridge.cli._verify import REINDEX_HINT, verify_session
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.stores._checkpoints import decode_checkpoint, encode_checkpoint
from host_bridge.embedded.stores._due import SessionProjection
from host_bridge.embedded.stores._reads import STATES_CHUNK
from host_bridge.protocols import SessionEvent, SessionHeader
from messages._fold import fold_schedule_events
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.cron_records import cron_create, next_after
from tests.stores.backends import DueEntry, Store, StoreWriteError, open_store, project_session
from tests.stores.case import TIMEOUT, Seam, StoreCase
from tests.stores.due_index import (
    REMINDER_SOURCE,
    T0,
    Log,
    at,
    delete,
    dispatch,
    every,
    new_log,
)

CRON_RULES = {False: ("*/5 * * * *", "UTC"), True: ("0 9 * * 1-5", "Asia/Shanghai")}
"""The rules of the random cron records (by whether the id ends in an even digit)."""
REMINDER = {"content": ["[SCHEDULE REMINDER]"], "source": REMINDER_SOURCE}
PERSON = {"content": ["hello"], "source": {"kind": "user"}}
MINUTE = 60_000


def projection(store: Store, session_id: str, end: int | None = None) -> SessionProjection:
    """The projection of the stored log of ``session_id`` (its prefix ``[0, end)``)."""
    stored = store.load(session_id)
    assert stored is not None
    events = stored.events if end is None else stored.events[:end]
    state = project_session(
        stored.header.seed_length, ((e.seq, e.type, e.time, e.data) for e in events)
    )
    state.next_seq = len(events)
    return state


def same(one: SessionProjection, other: SessionProjection) -> bool:
    """Whether two untold projections hold the same durable state."""
    return (one.seed_length, one.next_seq, one.folded, one.pending, one.unfinished) == (
        other.seed_length,
        other.next_seq,
        other.folded,
        other.pending,
        other.unfinished,
    )


class RandomLog:
    """A session's appends drawn at random, every kind that moves a projection included
    (``cron`` records among them)."""

    def __init__(self, store: Store, session_id: str, rng: random.Random, tell: float) -> None:
        self.log = new_log(store, session_id)
        self.rng = rng
        self.tell = tell  # how often an append tells its schedule target
        self.events: list[SessionEvent] = []
        self.active: dict[str, tuple[str, int]] = {}  # id -> (kind, current target)
        self.open: list[int] = []  # inbox entries whose turn is not completed
        self.created = 0

    def step(self) -> None:
        """Append one event; now and then tell its schedule target as a live owner may."""
        rng = self.rng
        kinds = ["at", "every", "cron", "dispatch", "delete", "inbox", "done", "note"]
        choice = rng.choice(kinds)
        data: dict[str, Any]
        type_ = SCHEDULE_CHANGE_TYPE
        if choice in ("at", "every", "cron"):
            self.created += 1
            record_id = f"schedule-{self.created}"
            target = T0 + rng.randrange(1, 10_000) * MINUTE  # off a cron rule's grid too
            if choice == "cron":
                data = cron_create(record_id, "p", *CRON_RULES[record_id[-1] in "02468"], target)
            else:
                data = at(record_id, target) if choice == "at" else every(record_id, target)
            self.active[record_id] = (choice, target)
        elif choice in ("dispatch", "delete") and self.active:
            record_id = rng.choice(sorted(self.active))
            kind, target = self.active.pop(record_id)
            if choice == "delete":
                data = delete(record_id)
            elif kind == "every":
                late = rng.randrange(0, 3) * 300_000
                data = dispatch(record_id, target + late)
                self.active[record_id] = (kind, target + late + 300_000)
            elif kind == "cron":
                accepted = target + rng.randrange(0, 3) * 7 * MINUTE
                data = dispatch(record_id, accepted)
                rule = CRON_RULES[record_id[-1] in "02468"]
                self.active[record_id] = (kind, next_after(*rule, accepted))
            else:
                data = dispatch(record_id)
        elif choice == "inbox":
            type_, data = INBOX_EVENT, rng.choice([REMINDER, PERSON, {"malformed": True}])
            self.open.append(self.log.seq)
        elif choice == "done" and self.open:
            entry = self.open.pop(rng.randrange(len(self.open)))
            type_, data = TURN_COMPLETED_EVENT, {"inbox": entry, "failed": False}
        else:
            type_, data = "message", {"role": "assistant", "content": "unrelated"}
        event = SessionEvent(type_, self.log.seq, T0 + self.log.seq, data)
        self.events.append(event)
        store, session_id = self.log.store, self.log.session_id
        if rng.random() < self.tell:
            earliest = fold_schedule_events(self.events).earliest()
            told = None if earliest is None else earliest.target_ms
            store.record_append(session_id, event, encode_payload(data), schedule_due_ms=told)
        else:
            store.record_append(session_id, event, encode_payload(data))
        self.log.seq += 1


class CheckpointContract(StoreCase):
    """The schedule checkpoint cases of the store contract."""

    def checkpoint(self, session_id: str) -> tuple[Any, Any] | None:
        """A session's ``(next_seq, state)`` as stored, read behind the store's back."""
        rows = self.sql(
            "SELECT next_seq, state FROM schedule_checkpoints WHERE session_id = ?", session_id
        )
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def stored_checkpoint(self, session_id: str) -> SessionProjection:
        """A session's stored checkpoint, decoded (it must decode)."""
        row = self.checkpoint(session_id)
        assert row is not None
        return decode_checkpoint(*row)

    def assert_checkpoint_agrees(self, store: Store, session_id: str) -> SessionProjection:
        """The stored checkpoint is the projection of the log before its ``next_seq``."""
        stored = self.stored_checkpoint(session_id)
        assert same(stored, projection(store, session_id, stored.next_seq))
        return stored

    # --- written with the rows ---------------------------------------------------------

    @pytest.mark.parametrize(("cache", "tell"), [(1, 0.0), (4096, 0.0), (1, 0.3), (4096, 0.3)])
    @pytest.mark.parametrize("seed", range(3))
    def test_checkpoints_follow_random_appends(self, seed: int, cache: int, tell: float) -> None:
        """Untold, every session has a checkpoint; a told one may keep none (its fold is
        stale) until a round reads its log."""
        rng = random.Random(seed)
        store, reader = self.make(due_cache_sessions=cache), self.make()
        logs = [RandomLog(store, f"s{n}", rng, tell) for n in range(3)]
        checked = 0
        for _ in range(12):
            for _ in range(rng.randrange(1, 8)):
                rng.choice(logs).step()
            assert store.flush_all().result(TIMEOUT) is True
            states = reader.schedule_states([log.log.session_id for log in logs])
            for log in logs:
                session_id = log.log.session_id
                if tell == 0 or self.checkpoint(session_id) is not None:
                    self.assert_checkpoint_agrees(reader, session_id)
                    checked += 1
                assert same(states[session_id], projection(reader, session_id))
                assert states[session_id].entry() == reader.due_entry(session_id)
        assert checked >= 12

    def test_a_new_session_has_a_checkpoint_and_a_plain_one_stays_behind_its_log(
        self,
    ) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.add("message", {"role": "user", "content": "hi"})
        log.flush()
        assert self.stored_checkpoint("s").next_seq == 1
        log.add("message", {"role": "assistant", "content": "unrelated"})
        log.flush()  # nothing that moves the projection: the older checkpoint stays right
        assert self.stored_checkpoint("s").next_seq == 1
        log.change(at("schedule-1", T0))
        log.flush()
        assert self.assert_checkpoint_agrees(store, "s").next_seq == 3

    def test_a_told_round_leaves_the_older_checkpoint(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        log.flush()
        before = self.checkpoint("s")
        change = at("schedule-2", T0 - 5)
        event = SessionEvent(SCHEDULE_CHANGE_TYPE, 1, T0, change)
        store.record_append("s", event, encode_payload(change), schedule_due_ms=T0 - 5)
        log.seq = 2
        log.flush()
        assert store.due_entry("s") == DueEntry(T0 - 5, None)
        assert self.checkpoint("s") == before  # a told fold is stale: never checkpointed
        state = self.make().schedule_state("s")
        assert state is not None and state.entry() == DueEntry(T0 - 5, None)
        assert same(state, projection(store, "s"))

    def test_a_failed_round_writes_neither_the_rows_nor_the_checkpoint(self) -> None:
        seam = Seam()
        store = self.make(fault_hook=seam)
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        log.flush()
        before = self.checkpoint("s")
        assert before is not None and before[0] == 1
        log.change(at("schedule-2", T0 - 5))
        seam.failures = 1
        with pytest.raises(StoreWriteError, match="could not commit"):
            store.flush("s").result(TIMEOUT)
        assert self.checkpoint("s") == before
        assert self.durable_counts() == (1, 1)
        log.flush()  # the retry commits both
        assert self.assert_checkpoint_agrees(store, "s").next_seq == 2
        assert store.due_entry("s") == DueEntry(T0 - 5, None)

    def test_the_writer_reads_only_the_rows_after_the_checkpoint(self) -> None:
        """A damaged payload before the checkpoint is never read again: the tail is."""
        first = self.make()
        log = new_log(first, "s")
        log.change(at("schedule-1", T0))
        log.flush()
        first.close()
        self.sql("UPDATE events SET data = ? WHERE session_id = 's' AND seq = 0", b"\xc1")
        second = self.make()
        second.acquire_session("s")
        Log(second, "s", seq=1).add(INBOX_EVENT, PERSON)
        assert second.flush("s").result(TIMEOUT) is True
        assert second.due_projector.reads == 1
        assert second.due_entry("s") == DueEntry(T0, None)  # a full fold would say corrupt
        state = self.stored_checkpoint("s")
        assert state.next_seq == 2 and state.unfinished == {1: T0}

    # --- read from checkpoint and tail ------------------------------------------------

    def test_schedule_states_of_many_sessions_take_a_bounded_number_of_statements(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        writer = self.make()
        sessions = [f"s{n:04d}" for n in range(1_000)]
        for n, session_id in enumerate(sessions):
            log = new_log(writer, session_id)
            log.change(at("schedule-1", T0 + n))
            if n % 3 == 0:
                log.add(INBOX_EVENT, REMINDER)
        assert writer.flush_all().result(TIMEOUT) is True
        writer.close()
        self.sql("DELETE FROM schedule_checkpoints WHERE session_id LIKE ?", "%5")  # to fold
        store = self.make()
        statements = [0]
        run = store._run

        class Counting:
            def __init__(self, conn: Any) -> None:
                self._conn = conn

            def execute(self, *args: Any, **kwargs: Any) -> Any:
                statements[0] += 1
                return self._conn.execute(*args, **kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._conn, name)

        def counting(query: Callable[[Any], Any]) -> Any:
            return run(lambda conn: query(Counting(conn)))

        monkeypatch.setattr(store, "_run", counting)
        states = store.schedule_states([*sessions, "not-stored", "s0000"])
        chunks = math.ceil((len(sessions) + 1) / STATES_CHUNK)  # (one id is not stored)
        assert 0 < statements[0] <= 4 * chunks
        assert sorted(states) == sessions
        monkeypatch.undo()
        due = store.due_entries()
        assert {s: state.entry() for s, state in states.items()} == due
        assert all(same(states[s], projection(store, s)) for s in ("s0000", "s0005", "s0999"))

    def test_schedule_states_prime_the_writer(self) -> None:
        first = self.make()
        log = new_log(first, "s")
        log.change(at("schedule-1", T0))
        log.add(INBOX_EVENT, PERSON)
        log.flush()
        first.close()
        store = self.make()
        state = store.schedule_state("s")
        assert state is not None and state.unfinished == {1: T0}
        assert store.schedule_state("missing") is None
        state.pending[99] = 1  # the caller's copy is its own
        store.acquire_session("s")
        Log(store, "s", seq=2).change(dispatch("schedule-1"))
        assert store.flush("s").result(TIMEOUT) is True
        assert store.due_projector.reads == 0  # primed: nothing read in the transaction
        assert store.due_entry("s") is None
        self.assert_checkpoint_agrees(store, "s")

    def test_a_stale_state_is_never_carried_on(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        log.flush()
        stale = store.schedule_state("s")
        assert stale is not None
        log.change(at("schedule-2", T0 - 5))
        log.flush()
        kept = store.due_projector.cached_state("s")
        store.due_projector.prime({"s": stale})
        assert store.due_projector.cached_state("s") == kept  # a kept state is at least as new
        store.forget("s")
        store.due_projector.prime({"s": stale})  # older than the log: adopted, never used
        log.add("message", {"role": "assistant", "content": "unrelated"})
        log.change(delete("schedule-2"))
        log.flush()
        assert store.due_projector.reads == 1
        assert store.due_entry("s") == DueEntry(T0, None)
        self.assert_checkpoint_agrees(store, "s")

    # --- unusable, wrong, rebuilt -----------------------------------------------------

    def stored_session(self) -> None:
        """Store ``s``: a reminder due at ``T0``, an owed reminder turn, a person's message."""
        store = self.make()
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        log.add(INBOX_EVENT, REMINDER, T0 - 1)
        log.add(INBOX_EVENT, PERSON, T0 - 2)
        log.flush()
        store.close()

    def damage_checkpoint(self, damage: str) -> None:
        """Damage the stored checkpoint of ``s`` in one of the ways a reader can detect."""
        if damage == "garbage":
            self.sql("UPDATE schedule_checkpoints SET state = ?", b"\x00\xc1garbage")
        elif damage == "beyond the log":
            state = decode_checkpoint(*self.checkpoint("s") or (None, None))
            state.next_seq = 50
            self.sql("UPDATE schedule_checkpoints SET next_seq = 50, state = ?", encode(state))
        elif damage == "column":
            self.sql("UPDATE schedule_checkpoints SET next_seq = 1")
        else:
            state = decode_checkpoint(*self.checkpoint("s") or (None, None))
            state.seed_length = 2
            self.sql("UPDATE schedule_checkpoints SET state = ?", encode(state))

    @pytest.mark.parametrize("damage", ["garbage", "beyond the log", "column", "seed"])
    def test_an_unusable_checkpoint_is_folded_from_the_log_logged_once_and_rewritten(
        self, damage: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        self.stored_session()
        self.damage_checkpoint(damage)
        store = self.make()
        with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
            first = store.schedule_state("s")
            again = store.schedule_states(["s"])["s"]
        for state in (first, again):
            assert state is not None and same(state, projection(store, "s"))
            assert state.entry() == DueEntry(T0, T0 - 1) and state.unfinished == {2: T0 - 2}
        (warning,) = [r for r in caplog.records if "schedule checkpoint" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert warning.getMessage().startswith("session 's': its schedule checkpoint is ")
        with open_store(self.location, read_only=True) as reader:
            problem = verify_session(reader, "s").problem
        assert problem is not None and problem.startswith("the schedule checkpoint is ")
        assert problem.endswith(f"({REINDEX_HINT})")
        store.acquire_session("s")  # a round that does not move the projection rewrites it
        Log(store, "s", seq=3).add("message", {"role": "assistant", "content": "unrelated"})
        assert store.flush("s").result(TIMEOUT) is True
        assert self.assert_checkpoint_agrees(store, "s").next_seq == 4

    @pytest.mark.parametrize("damage", ["garbage", "beyond the log"])
    def test_the_writer_folds_an_unusable_checkpoint_from_the_log(self, damage: str) -> None:
        self.stored_session()
        self.damage_checkpoint(damage)
        store = self.make()
        store.acquire_session("s")
        Log(store, "s", seq=3).add(TURN_COMPLETED_EVENT, {"inbox": 1, "failed": False})
        assert store.flush("s").result(TIMEOUT) is True
        assert store.due_projector.reads == 1
        assert store.due_entry("s") == DueEntry(T0, None)
        assert self.assert_checkpoint_agrees(store, "s").next_seq == 4

    def test_a_wrong_checkpoint_that_decodes_is_reported_by_verify_and_repaired(
        self,
    ) -> None:
        self.stored_session()
        wrong = decode_checkpoint(*self.checkpoint("s") or (None, None))
        wrong.folded = fold_schedule_events([])
        wrong.unfinished = {}
        self.sql("UPDATE schedule_checkpoints SET state = ?", encode(wrong))
        with open_store(self.location, read_only=True) as reader:
            assert verify_session(reader, "s").problem == (
                "the schedule checkpoint as of seq 3 disagrees with the log on its reminders "
                f"and its unfinished inbox entries ({REINDEX_HINT})"
            )
        store = self.make()
        assert store.reindex() == 1
        self.assert_checkpoint_agrees(store, "s")
        self.sql("UPDATE schedule_checkpoints SET state = ?", encode(wrong))
        assert store.reindex_session("s") == DueEntry(T0, T0 - 1)
        self.assert_checkpoint_agrees(store, "s")
        self.sql("DELETE FROM schedule_checkpoints")
        with open_store(self.location, read_only=True) as reader:
            assert verify_session(reader, "s").problem is None  # none is fine
        assert store.reindex_session("gone") is None

    def test_the_migration_builds_every_sessions_checkpoint(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.change(every("schedule-1", T0))
        log.change(dispatch("schedule-1", T0 + 1))
        log.add(INBOX_EVENT, PERSON)
        new_log(store, "quiet").add("message", {"role": "user", "content": "hi"})
        store.acquire_session("fork")
        copied = SessionEvent(SCHEDULE_CHANGE_TYPE, 0, T0, at("schedule-1", T0))
        store.create_session(
            SessionHeader("fork", seed_length=1, parent_session="s"),
            [(copied, encode_payload(copied.data))],
        )
        assert store.flush_all().result(TIMEOUT) is True
        store.close()
        self.sql("DROP TABLE schedule_checkpoints")
        previous = str(self.schema_version - 1)
        self.sql("UPDATE meta SET value = ? WHERE key = 'schema_version'", previous)
        reopened = self.make()
        for session_id, length in (("s", 3), ("quiet", 1), ("fork", 1)):
            assert self.assert_checkpoint_agrees(reopened, session_id).next_seq == length
        assert self.stored_checkpoint("s").unfinished == {2: T0}
        assert self.stored_checkpoint("fork").folded == fold_schedule_events([])


def encode(state: SessionProjection) -> bytes:
    """A checkpoint state column."""
    return encode_checkpoint(state)
