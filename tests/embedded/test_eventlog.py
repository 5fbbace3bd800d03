"""EventLog and LogSnapshot: append-only, contiguous seqs, O(1) immutable snapshots."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from host_bridge._eventlog import EventLog, LogSnapshot
from host_bridge.protocols import SessionEvent


def _filled(count: int) -> EventLog:
    log = EventLog()
    for i in range(count):
        log.append("t", 1000 + i, {"i": i})
    return log


def test_append_assigns_contiguous_seqs_and_returns_the_event() -> None:
    log = EventLog()
    first = log.append("a", 5, {"x": 1})
    second = log.append("b", 6, None)
    assert first == SessionEvent("a", 0, 5, {"x": 1})
    assert second == SessionEvent("b", 1, 6, None)
    assert len(log) == 2
    assert list(log.snapshot()) == [first, second]


def test_seed_events_are_kept_and_must_be_contiguous() -> None:
    seed = [SessionEvent("a", 0, 1, None), SessionEvent("b", 1, 2, None)]
    log = EventLog(seed)
    assert list(log.snapshot()) == seed
    assert log.append("c", 3, None).seq == 2
    with pytest.raises(ValueError, match="seq"):
        EventLog([SessionEvent("a", 1, 1, None)])
    with pytest.raises(ValueError, match="seq"):
        EventLog([SessionEvent("a", 0, 1, None), SessionEvent("a", 0, 1, None)])


def test_seed_is_copied_not_shared() -> None:
    seed = [SessionEvent("a", 0, 1, None)]
    log = EventLog(seed)
    log.append("b", 2, None)
    assert len(seed) == 1


def test_a_snapshot_never_changes_after_it_was_taken() -> None:
    log = _filled(3)
    snap = log.snapshot()
    before = list(snap)
    log.append("late", 9, None)
    assert len(snap) == 3
    assert list(snap) == before
    with pytest.raises(IndexError):
        snap[3]
    assert len(log.snapshot()) == 4


def test_indexing_follows_sequence_semantics() -> None:
    snap = _filled(4).snapshot()
    assert snap[0].seq == 0
    assert snap[-1].seq == 3
    assert snap[-4].seq == 0
    for bad in (4, -5, 100):
        with pytest.raises(IndexError):
            snap[bad]
    assert all(event.seq == i for i, event in enumerate(snap))


def test_slices_are_windows_that_do_not_grow() -> None:
    log = _filled(5)
    snap = log.snapshot()
    tail = snap[2:]
    assert isinstance(tail, LogSnapshot)
    assert [e.seq for e in tail] == [2, 3, 4]
    log.append("late", 0, None)
    assert [e.seq for e in tail] == [2, 3, 4]
    assert [e.seq for e in snap[1:3]] == [1, 2]
    assert [e.seq for e in snap[-2:]] == [3, 4]
    assert [e.seq for e in snap[:-3]] == [0, 1]
    assert len(snap[4:2]) == 0
    assert len(snap[10:]) == 0
    # slicing a slice stays inside the window
    inner = tail[1:]
    assert [e.seq for e in inner] == [3, 4]
    assert inner[0].seq == 3
    with pytest.raises(IndexError):
        inner[2]


def test_slices_with_a_step_match_list_slicing() -> None:
    log = _filled(6)
    snap = log.snapshot()
    window = snap[1:5]
    as_list = list(snap)
    cases = [slice(None, None, 2), slice(None, None, -1), slice(None, None, -2), slice(4, 0, -1)]
    for case in cases:
        assert [e.seq for e in snap[case]] == [e.seq for e in as_list[case]], case
        assert [e.seq for e in window[case]] == [e.seq for e in as_list[1:5][case]], case
    log.append("late", 0, None)
    assert [e.seq for e in snap[::-1]] == [5, 4, 3, 2, 1, 0]


def test_sequence_helpers_work_on_snapshots() -> None:
    snap = _filled(3).snapshot()
    assert snap[1] in snap
    assert SessionEvent("t", 9, 0, None) not in snap
    assert snap.index(snap[2]) == 2
    assert [e.seq for e in reversed(snap)] == [2, 1, 0]
    assert isinstance(snap, Sequence)


def test_equality_with_snapshots_lists_and_tuples() -> None:
    log = _filled(2)
    snap = log.snapshot()
    assert snap == list(snap)
    assert snap == tuple(snap)
    assert snap == log.snapshot()
    log.append("more", 0, None)
    assert snap != log.snapshot()
    assert snap != list(log.snapshot())
    assert snap[:1] != snap
    assert (snap == "not a log") is False
    with pytest.raises(TypeError):
        hash(snap)


def test_concurrent_appends_are_contiguous() -> None:
    log = EventLog()
    threads = 8
    per_thread = 200
    start = threading.Barrier(threads)
    results: list[list[SessionEvent]] = [[] for _ in range(threads)]

    def worker(index: int) -> None:
        start.wait(timeout=5)
        for n in range(per_thread):
            results[index].append(log.append("t", 0, [index, n]))

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=10)
    snap = log.snapshot()
    assert len(snap) == threads * per_thread
    assert [e.seq for e in snap] == list(range(threads * per_thread))
    for index, mine in enumerate(results):
        assert [e.data for e in mine] == [[index, n] for n in range(per_thread)]
        assert all(snap[e.seq] is e for e in mine)


def test_snapshot_and_slice_copy_nothing() -> None:
    log = _filled(1000)
    snap = log.snapshot()
    part = snap[10:20]
    # a window onto the same storage: the very same event objects
    assert part[0] is snap[10]
    assert snap[999] is log.snapshot()[999]
