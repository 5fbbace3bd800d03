"""Per-session lock file of the SQLite store: OFD byte-range locks and the flock fallback."""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.embedded.stores import (
    SessionLockFile,
    lock_offset,
    ofd_locks_available,
)
from host_bridge.embedded.stores import _locks as session_locks
from tests.embedded.helpers import python_child

needs_ofd = pytest.mark.skipif(not ofd_locks_available(), reason="OFD locks are Linux-only")


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.sqlite3.locks"


@pytest.fixture
def opened() -> Iterator[list[SessionLockFile]]:
    files: list[SessionLockFile] = []
    yield files
    for item in files:
        item.close()


def open_locks(path: Path, opened: list[SessionLockFile], **options: object) -> SessionLockFile:
    locks = SessionLockFile(path, **options)  # type: ignore[arg-type]
    opened.append(locks)
    return locks


def getlk(path: Path, offset: int) -> session_locks._Flock:
    """Ask the kernel, through a descriptor of our own, who blocks a write lock of ``offset``."""
    fd = os.open(path, os.O_RDWR)
    try:
        raw = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, session_locks._pack(fcntl.F_WRLCK, offset))
    finally:
        os.close(fd)
    return session_locks._unpack(raw)


def test_offsets_are_stable_63_bit_and_never_the_probe_byte() -> None:
    # Pinned: every version and process must map an id to the same byte.
    assert lock_offset("session-1") == lock_offset("session-1")
    assert lock_offset("session-1") == 2776126443560144700
    offsets = {lock_offset(f"s-{n}") for n in range(2000)}
    assert len(offsets) == 2000
    assert all(1 <= offset <= 2**63 - 2 for offset in offsets)
    assert lock_offset("émoji 🎉") != lock_offset("emoji")


@needs_ofd
def test_struct_flock_matches_the_kernel_layout(
    lock_path: Path, opened: list[SessionLockFile]
) -> None:
    # The platform C layout: two shorts, two 64-bit offsets, a pid, padded to 8 bytes.
    assert ctypes.sizeof(session_locks._Flock) % ctypes.alignment(ctypes.c_int64) == 0
    assert session_locks._Flock.l_start.offset == ctypes.alignment(ctypes.c_int64)
    locks = open_locks(lock_path, opened, mechanism="ofd")
    for session_id in ("session-1", "x" * 500, "last"):
        assert locks.try_lock(session_id)
        seen = getlk(lock_path, lock_offset(session_id))
        assert (seen.l_type, seen.l_whence) == (fcntl.F_WRLCK, os.SEEK_SET)
        assert (seen.l_start, seen.l_len) == (lock_offset(session_id), 1)
        assert seen.l_pid == -1  # an open-file-description lock, not a process lock
    # The highest session byte reads back as a one-byte lock; a free byte as unlocked.
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, session_locks._pack(fcntl.F_WRLCK, 2**63 - 2))
        top = getlk(lock_path, 2**63 - 2)
        assert (top.l_type, top.l_start, top.l_len) == (fcntl.F_WRLCK, 2**63 - 2, 1)
    finally:
        os.close(fd)
    assert getlk(lock_path, 12345).l_type == fcntl.F_UNLCK


@needs_ofd
def test_the_probe_selects_ofd_locks(lock_path: Path, opened: list[SessionLockFile]) -> None:
    assert open_locks(lock_path, opened).mechanism == "ofd"


@pytest.mark.parametrize("mechanism", ["ofd", "flock"])
def test_two_lock_files_in_one_process_exclude_each_other(
    lock_path: Path, opened: list[SessionLockFile], mechanism: str
) -> None:
    if mechanism == "ofd" and not ofd_locks_available():
        pytest.skip("OFD locks are Linux-only")
    one = open_locks(lock_path, opened, mechanism=mechanism)
    two = open_locks(lock_path, opened, mechanism=mechanism)
    assert one.try_lock("a")
    assert one.try_lock("a")  # taking it again here is a no-op
    assert not two.try_lock("a")
    # Classic POSIX locks would be dropped by closing any descriptor of the file.
    with open(lock_path, "rb"):
        pass
    assert not two.try_lock("a")
    assert one.holds("a") and not two.holds("a")
    one.unlock("a")
    assert two.try_lock("a")
    assert not one.try_lock("a")
    two.close()
    assert one.try_lock("a")  # closing drops every lock at once


@needs_ofd
def test_ofd_locks_are_per_session(lock_path: Path, opened: list[SessionLockFile]) -> None:
    one = open_locks(lock_path, opened, mechanism="ofd")
    two = open_locks(lock_path, opened, mechanism="ofd")
    assert one.try_lock("a")
    assert two.try_lock("b")
    assert not two.try_lock("a")
    assert not one.try_lock("b")
    two.unlock("a")  # not held there: nothing happens
    assert not two.try_lock("a")


def test_the_flock_fallback_locks_the_whole_file_while_any_session_is_held(
    lock_path: Path, opened: list[SessionLockFile]
) -> None:
    one = open_locks(lock_path, opened, mechanism="flock")
    two = open_locks(lock_path, opened, mechanism="flock")
    assert one.mechanism == "flock"
    assert one.try_lock("a")
    assert one.try_lock("b")
    assert not two.try_lock("c")  # coarser, never less safe
    one.unlock("a")
    assert not two.try_lock("c")
    one.unlock("b")
    assert two.try_lock("c")
    assert not one.try_lock("a")


def test_the_fallback_is_chosen_without_ofd_locks(
    lock_path: Path, opened: list[SessionLockFile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_locks, "ofd_locks_available", lambda: False)
    assert open_locks(lock_path, opened).mechanism == "flock"
    with pytest.raises(OSError):
        SessionLockFile(lock_path, mechanism="ofd")


_HOLDER = textwrap.dedent(
    """
    import sys
    from host_bridge.embedded.stores import SessionLockFile
    locks = SessionLockFile(sys.argv[1], mechanism=sys.argv[2])
    assert locks.try_lock("shared")
    print("held", flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.parametrize("mechanism", ["ofd", "flock"])
def test_a_killed_process_leaves_no_lock_behind(
    lock_path: Path, opened: list[SessionLockFile], mechanism: str
) -> None:
    if mechanism == "ofd" and not ofd_locks_available():
        pytest.skip("OFD locks are Linux-only")
    child = python_child(_HOLDER, str(lock_path), mechanism)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "held\n"
        locks = open_locks(lock_path, opened, mechanism=mechanism)
        assert not locks.try_lock("shared")
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert locks.try_lock("shared")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)


@pytest.mark.parametrize("mechanism", ["ofd", "flock"])
def test_a_deleted_lock_file_is_made_again_with_the_held_locks(
    lock_path: Path, opened: list[SessionLockFile], mechanism: str
) -> None:
    if mechanism == "ofd" and not ofd_locks_available():
        pytest.skip("OFD locks are Linux-only")
    mine = open_locks(lock_path, opened, mechanism=mechanism)
    assert mine.try_lock("kept")
    assert mine.ensure_current() == []  # nothing changed
    lock_path.unlink()
    assert mine.ensure_current() == []
    assert lock_path.exists()
    later = open_locks(lock_path, opened, mechanism=mechanism)  # sees the new file
    assert not later.try_lock("kept")
    assert mine.holds("kept")


def test_a_session_taken_on_a_replacing_file_is_reported_lost(
    lock_path: Path, opened: list[SessionLockFile]
) -> None:
    mechanism = "ofd" if ofd_locks_available() else "flock"
    mine = open_locks(lock_path, opened, mechanism=mechanism)
    assert mine.try_lock("kept")
    assert mine.try_lock("other")
    lock_path.unlink()
    thief = open_locks(lock_path, opened, mechanism=mechanism)  # a new file at the path
    assert thief.try_lock("kept")
    lost = mine.ensure_current()
    assert "kept" in lost
    assert not mine.holds("kept")
    if mechanism == "ofd":
        assert lost == ["kept"] and mine.holds("other")


def test_a_closed_lock_file_refuses_to_lock(lock_path: Path) -> None:
    locks = SessionLockFile(lock_path)
    locks.close()
    locks.close()
    with pytest.raises(OSError):
        locks.try_lock("a")
    assert locks.ensure_current() == []
