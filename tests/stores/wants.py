"""The hand-over request cases of the store contract: ``want`` a held session, ``wanted`` seen.

A store that waits for a session another holds says so with ``want(id)`` (a
block); the holder polls ``wanted(ids)``. It is a request, never a lock: it
is seen by every other store (another process included), never by its own,
and ends with the block or the process. Two sessions on one key read as
wanted together: a holder lets one go early, nothing worse.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from abc import abstractmethod
from pathlib import Path

import pytest

from tests.stores.case import StoreCase, new_session

REPO_ROOT = Path(__file__).resolve().parents[2]

_WANTER = textwrap.dedent(
    """
    import sys

    from host_bridge.embedded.stores import open_store

    store = open_store(sys.argv[1])
    with store.want("s") as signalled:
        sys.stdout.write(f"wanting {signalled} {getattr(store, 'lease_backend_pid', 0)}\\n")
        sys.stdout.flush()
        sys.stdin.readline()
    sys.stdout.write("done\\n")
    sys.stdout.flush()
    sys.stdin.readline()
    """
)


class WantContract(StoreCase):
    """The ``want`` / ``wanted`` cases of the store contract."""

    @abstractmethod
    def collide_want_keys(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make every session share one want key from now on (before a store wants any)."""

    @abstractmethod
    def wait_gone(self, backend_pid: int) -> None:
        """Wait until the killed wanter's connection (``backend_pid``, if any) has ended."""

    def test_a_want_is_seen_by_other_stores_never_by_its_own_and_ends_with_its_block(
        self,
    ) -> None:
        holder, wanter, other = self.make(), self.make(), self.make()
        new_session(holder, "s")
        new_session(holder, "t")
        assert holder.wanted(["s", "t"]) == set()
        with wanter.want("s") as signalled:
            assert signalled is True
            assert holder.wanted(["s", "t"]) == {"s"}
            assert other.wanted(["s"]) == {"s"}
            assert wanter.wanted(["s"]) == set()  # its own request is not a demand on itself
            with other.want("s"), wanter.want("s"):  # shared: many may want one session
                assert holder.wanted(["s"]) == {"s"}
            assert holder.wanted(["s"]) == {"s"}  # the outer block still wants it
            assert holder.holds_lease("s")  # a request takes nothing
        assert holder.wanted(["s", "t"]) == set()
        assert holder.wanted([]) == set()

    def test_a_want_is_no_lock_the_session_is_taken_as_ever(self) -> None:
        holder, wanter = self.make(), self.make()
        new_session(holder, "s")
        with wanter.want("s"):
            holder.release_session("s")
            assert wanter.acquire_session("s") >= 0  # taken while its own request stands
            assert wanter.holds_lease("s")
            assert holder.wanted(["s"]) == {"s"}
        assert holder.wanted(["s"]) == set()

    def test_a_want_of_another_process_is_seen_until_it_ends_or_that_process_dies(
        self,
    ) -> None:
        holder = self.make()
        new_session(holder, "s")
        for kill in (False, True):
            child = subprocess.Popen(
                [sys.executable, "-c", _WANTER, self.location],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            assert child.stdin is not None and child.stdout is not None
            try:
                words = child.stdout.readline().split()
                assert words[:2] == ["wanting", "True"], words
                assert holder.wanted(["s"]) == {"s"}
                if kill:
                    child.send_signal(signal.SIGKILL)
                    child.wait(60)
                    self.wait_gone(int(words[2]))
                else:
                    child.stdin.write("\n")
                    child.stdin.flush()
                    assert child.stdout.readline() == "done\n"
                assert holder.wanted(["s"]) == set()
            finally:
                child.kill()
                child.wait(60)
                child.stdin.close()
                child.stdout.close()

    def test_sessions_sharing_a_want_key_only_read_as_wanted_together(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.collide_want_keys(monkeypatch)
        holder, wanter = self.make(), self.make()
        new_session(holder, "held")
        with wanter.want("other"):
            assert holder.wanted(["held"]) == {"held"}  # an early let-go at most
            assert holder.acquire_session("free") >= 0  # taking any session is unaffected
            assert wanter.acquire_session("other") >= 0
            assert holder.holds_lease("held") and wanter.holds_lease("other")
        assert holder.wanted(["held"]) == set()
