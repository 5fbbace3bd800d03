"""Per-operation counts: actor messages, futures, thread wake-ups, context switches, flushes.

Two instruments, used around a batch of operations and divided by the batch size:

* :class:`Counters` reads what costs nothing to read: voluntary and involuntary
  context switches of the whole process (``resource.getrusage``), and the store's
  flush requests and commits. Safe around timed runs.
* :class:`CallCounter` counts calls of a few functions in every thread with a
  profile hook (``threading.setprofile``): mailbox messages handled
  (pykka's ``Actor._handle_receive``, so an owner step completed in the same
  handler is not a message), futures made (``concurrent.futures.Future``
  and pykka's), and condition notifications (``threading.Condition.notify``).
  The hook slows Python down several times, so it runs on a separate, untimed
  batch, and only threads started while it is installed are seen (open the host
  inside it); on the gevent runtime it is also installed in the hub's thread.
"""

from __future__ import annotations

import resource
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pykka

__all__ = ["CallCounter", "Counters", "OpCounts"]


@dataclass(frozen=True)
class OpCounts:
    """Totals of one batch; :meth:`per` divides them by the number of operations."""

    voluntary_switches: float = 0.0
    involuntary_switches: float = 0.0
    flush_requests: float = 0.0
    commits: float = 0.0
    messages: float | None = None
    futures: float | None = None
    notifications: float | None = None

    def per(self, operations: int) -> dict[str, float | None]:
        """Every count divided by ``operations``."""
        return {
            key: None if value is None else value / operations
            for key, value in self.__dict__.items()
        }


class Counters:
    """Process context switches and a store's flush requests and commits, before and after."""

    def __init__(self, store: Any | None) -> None:
        self._store = store
        self._start = self._read()

    def _read(self) -> tuple[int, int, int, int]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        store = self._store
        flushes = 0 if store is None else store.flush_requests
        commits = 0 if store is None else store.commit_count
        return usage.ru_nvcsw, usage.ru_nivcsw, flushes, commits

    def stop(self) -> OpCounts:
        """The totals since this object was made."""
        end = self._read()
        vol, invol, flushes, commits = (b - a for a, b in zip(self._start, end, strict=True))
        return OpCounts(float(vol), float(invol), float(flushes), float(commits))


_TARGETS: dict[str, tuple[Callable[..., Any], ...]] = {
    "messages": (pykka.Actor._handle_receive,),
    "futures": (Future.__init__, pykka.Future.__init__),
    "notifications": (threading.Condition.notify,),
}


class CallCounter:
    """Counts messages, futures and notifications in every thread (see the module docstring).

    Use as a context manager; :meth:`mark` snapshots the counts so a warm-up
    can be left out, :meth:`since_mark` returns the counts after it.
    """

    def __init__(self, gevent_runtime: Any | None = None) -> None:
        self._codes = {
            function.__code__: key for key, functions in _TARGETS.items() for function in functions
        }
        self._counts: Counter[str] = Counter()
        self._mark: Counter[str] = Counter()
        self._runtime = gevent_runtime

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            key = self._codes.get(frame.f_code)
            if key is not None:
                self._counts[key] += 1

    def __enter__(self) -> CallCounter:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        if self._runtime is not None:
            self._on_hub(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)
        if self._runtime is not None:
            self._on_hub(None)

    def _on_hub(self, hook: Any) -> None:
        runtime = self._runtime
        assert runtime is not None
        done = threading.Event()

        def install() -> None:
            sys.setprofile(hook)
            done.set()

        runtime.call_soon(install)
        done.wait(10)

    def mark(self) -> None:
        """Start counting from here (e.g. after a warm-up)."""
        self._mark = Counter(self._counts)

    def since_mark(self) -> dict[str, int]:
        """Calls counted since :meth:`mark`."""
        return {key: self._counts[key] - self._mark[key] for key in _TARGETS}
