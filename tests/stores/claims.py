"""The batch claim cases of the store contract: many due sessions taken at once, given back at once.

``claim_due_sessions`` takes up to ``limit`` due sessions nobody holds, earliest first,
and keeps every one it returns; whatever else it took goes back, also on an exception.
Two stores claiming together get disjoint sets. ``release_sessions`` lets many go after
one flush of them all.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from host_bridge.protocols import SessionHeader
from tests.stores.backends import Store, StoreError
from tests.stores.case import TIMEOUT, Seam, StoreCase, record
from tests.stores.due_index import T0, YEAR_9999, Log, RaisingInt, at, new_log


class ClaimContract(StoreCase):
    """The batch claim and batch release cases of the store contract."""

    def claimable(self, reminders: dict[str, int]) -> None:
        """Store closed sessions, each with one ``at`` reminder due at the given time."""
        store = self.make()
        for session_id, due in reminders.items():
            log = new_log(store, session_id)
            log.change(at("schedule-1", due))
        assert store.flush_all().result(TIMEOUT) is True
        store.close()

    def test_a_batch_claim_takes_the_earliest_due_sessions_up_to_the_limit(self) -> None:
        self.claimable({f"s{i}": T0 + 1_000 * (5 - i) for i in range(6)} | {"later": T0 + 10**6})
        one, two = self.make(), self.make()
        assert one.claim_due_sessions(T0 + 5_000, 2) == ["s5", "s4"]
        assert one.holds_lease("s5") and one.holds_lease("s4")
        assert two.claim_due_sessions(T0 + 5_000, 3) == ["s3", "s2", "s1"]
        assert one.claim_due_sessions(T0 + 5_000, 0) == []
        assert one.claim_due_sessions(T0 + 5_000, 10) == ["s0"]  # "later" is not due
        assert one.claim_due_sessions(T0 + 5_000, 10) == []
        assert two.claim_due_sessions(T0 + 10**6, 10) == ["later"]
        assert {s for s in ("s0", "s4", "s5") if one.holds_lease(s)} == {"s0", "s4", "s5"}
        two.release_session("s1")
        assert one.claim_due_sessions(T0 + 10**6, 10) == ["s1"]

    def test_a_batch_claim_skips_held_and_not_due_rows_and_takes_unsound_ones(self) -> None:
        self.claimable(
            {
                "fine": T0,
                "live": T0,
                "mine": T0,
                "future": T0 + 60_000,
                "emptied": T0 + 7_000,
                "moved": T0 + 5_000,
            }
        )
        self.sql(f"UPDATE due_index SET due_ms = {YEAR_9999} WHERE session_id = 'moved'")
        self.sql("UPDATE due_index SET schedule_ms = NULL WHERE session_id = 'emptied'")
        owner, one, two = self.make(), self.make(), self.make()
        owner.acquire_session("live")
        one.acquire_session("mine")
        # Unsound rows are due at once, whatever their due_ms says: their logs decide.
        assert one.claim_due_sessions(T0 + 1_000, 10) == ["fine", "emptied", "moved"]
        assert all(one.holds_lease(s) for s in ("fine", "emptied", "moved", "mine"))
        assert not one.holds_lease("future") and not one.holds_lease("live")
        assert two.claim_due_sessions(T0 + 1_000, 10) == []
        assert two.claim_due_sessions(T0 + 60_000, 10) == ["future"]

    def test_a_batch_claim_asks_accept_and_leaves_skipped_sessions(self) -> None:
        self.claimable({name: T0 + n for n, name in enumerate("abcde")})
        one, two = self.make(), self.make()
        asked: list[str] = []

        def accept(session_id: str) -> bool:
            asked.append(session_id)
            return session_id != "b"

        assert one.claim_due_sessions(T0 + 10, 10, accept, skip={"c"}) == ["a", "d", "e"]
        assert "c" not in asked and "b" in asked
        assert not one.holds_lease("b") and not one.holds_lease("c")
        assert two.claim_due_sessions(T0 + 10, 10, skip=("b",)) == ["c"]
        assert two.claim_due_sessions(T0 + 10, 10, lambda s: False) == []
        assert two.claim_due_sessions(T0 + 10, 10) == ["b"]

    def test_two_stores_claiming_together_get_disjoint_sets_covering_every_due_session(
        self,
    ) -> None:
        ids = [f"s{i:02d}" for i in range(60)]
        self.claimable(dict.fromkeys(ids, T0) | {"later": T0 + 10**6})
        stores = [self.make(), self.make()]
        start = threading.Barrier(len(stores))
        claimed: list[list[str]] = [[] for _ in stores]
        failures: list[BaseException] = []

        def claim(index: int) -> None:
            try:
                start.wait(TIMEOUT)
                while batch := stores[index].claim_due_sessions(T0, 7):
                    claimed[index].extend(batch)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive()
        assert failures == []
        first, second = (set(batch) for batch in claimed)
        assert len(first) == len(claimed[0]) and len(second) == len(claimed[1])  # each once
        assert not first & second
        assert sorted(first | second) == ids
        for store, mine in zip(stores, (first, second), strict=True):
            assert all(store.holds_lease(s) for s in mine)

    @pytest.mark.parametrize("fault", ["accept", "the reading"])
    def test_a_batch_claim_that_raises_gives_every_session_it_took_back(self, fault: str) -> None:
        ids = [f"s{i:02d}" for i in range(40)]
        self.claimable(dict.fromkeys(ids, T0))
        one, two = self.make(), self.make()
        held_when_raised: list[bool] = []
        now: int = T0

        def accept(session_id: str) -> bool:
            if session_id == ids[-1]:  # on a later page than the first two
                held_when_raised.append(one.holds_lease(ids[0]) and one.holds_lease(ids[1]))
                raise OSError("accept failed")
            return session_id in ids[:2]

        if fault == "the reading":
            now = RaisingInt(T0)  # compared with a row once its session is taken (SQLite)
        with pytest.raises(OSError):
            one.claim_due_sessions(now, 5, accept if fault == "accept" else None)
        if fault == "accept":
            assert held_when_raised == [True]  # the fault came after sessions were taken
        assert not any(one.holds_lease(s) for s in ids)
        assert sorted(two.claim_due_sessions(T0, 100)) == ids

    @pytest.mark.parametrize("reading", [None, 1.5, True, "x"])
    def test_a_batch_claim_at_a_reading_that_is_not_an_int_takes_nothing(
        self, reading: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        self.claimable({"s": T0})
        one = self.make()
        with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
            assert one.claim_due_sessions(reading, 5) == []
        assert any("not claiming due sessions" in r.getMessage() for r in caplog.records)
        assert not one.holds_lease("s")
        for limit in (-1, 1.5, None):
            with pytest.raises(StoreError, match="limit"):
                one.claim_due_sessions(T0, limit)  # type: ignore[arg-type]
        assert one.claim_due_sessions(T0, 5) == ["s"]

    # --- release_sessions -----------------------------------------------------------------

    def queued(self, store: Store, ids: list[str]) -> None:
        """Take and create sessions ``ids`` in ``store`` with two events each, unflushed."""
        for session_id in ids:
            store.acquire_session(session_id)
            store.create_session(SessionHeader(session_id))
            record(store, session_id, 0)
            record(store, session_id, 1)

    def test_release_sessions_writes_them_in_one_commit_and_frees_them(self) -> None:
        ids = ["a", "b", "c", "d"]
        one, two = self.make(), self.make()
        self.queued(one, ids)
        one.acquire_session("kept")
        commits = one.commit_count
        assert one.release_sessions([*ids, "a", "never-held"]) == []  # none kept
        assert one.commit_count == commits + 1
        assert self.durable_counts() == (4, 8)
        assert not any(one.holds_lease(s) for s in ids) and one.holds_lease("kept")
        for session_id in ids:
            two.acquire_session(session_id)
            Log(two, session_id, seq=2).add("note", {"n": 2})
        assert two.flush_all().result(TIMEOUT) is True
        assert one.release_sessions([]) == []

    def test_release_sessions_keeps_and_logs_sessions_whose_rows_are_not_durable(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        seam = Seam()
        one, two = self.make(fault_hook=seam), self.make()
        self.queued(one, ["a", "b"])
        seam.failures = 1
        with caplog.at_level(logging.ERROR, logger="dsh_schedule"):
            assert one.release_sessions(["a", "b"]) == ["a", "b"]  # kept, for a retry
        assert one.holds_lease("a") and one.holds_lease("b")
        (kept,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("keeping")]
        assert kept.startswith("keeping 2 sessions ('a', 'b'): their rows are not durable")
        assert "injected" not in kept  # no raw backend text
        with pytest.raises(StoreError):
            two.acquire_session("a")
        assert one.release_sessions(["a", "b"]) == []  # the retry writes them, lets them go
        assert self.durable_counts() == (2, 4)
        two.acquire_session("a")
        two.acquire_session("b")
