"""TeardownGate: when an owner's teardown began, known at once by the owner and its tools.

An owner hears of its disposal through its mailbox (:class:`~messages._mailbox.DisposeOwner`),
behind every message queued before it: tool calls, settled preflights. Without more, those
would still flush and append after ``dispose()`` was called. The gate says it at once: the
plugin closes it first when it or the agent is disposed, then posts ``DisposeOwner``.

The owner runs each step that must not happen after teardown began (a management append;
a delivery's reservation, follow-up and dispatches) as a :meth:`~TeardownGate.passage`: the
check and the step form one unit against :meth:`~TeardownGate.close`, which waits for a
passage under way on another thread or greenlet. So once ``close`` returns, no passage runs
or starts. ``close`` from inside the passage itself (a host callback that disposes) cannot
wait for it: that passage finishes after ``close`` returns.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Literal, TypeAlias

from actors._waiting import BlockingInHubError, current_hub, wait_for

__all__ = ["TeardownCause", "TeardownGate", "await_passages"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

TeardownCause: TypeAlias = Literal["not_live", "shutting_down"]
"""Why teardown began: the agent was disposed, or the plugin (Schedule) was."""


class TeardownGate:
    """Closed once, for good, when an owner's teardown begins (see the module docstring).

    One passage at a time: the owner's. ``wait_ms`` bounds how long :meth:`close`
    waits for a passage under way (``None``: as long as it takes); a passage only
    makes synchronous host calls (append, follow-up), so the wait is short.
    """

    def __init__(self, wait_ms: int | None = None) -> None:
        self._wait_ms = wait_ms
        self._lock = threading.Lock()
        self._cause: TeardownCause | None = None
        self._passer: object = None  # the thread or greenlet in the passage
        self._left: Future[None] | None = None  # resolved when that passage ends

    @property
    def closed(self) -> bool:
        """Whether teardown began."""
        return self._cause is not None

    @property
    def cause(self) -> TeardownCause | None:
        """Why teardown began (the first reason given), or ``None`` while open."""
        return self._cause

    def close(
        self, cause: TeardownCause = "shutting_down", *, wait: bool = True
    ) -> Future[None] | None:
        """Begin teardown (any thread; never raises); by default return once no passage runs.

        A passage under way on another thread or greenlet is waited for in the
        caller's style (:func:`actors._waiting.wait_for`), at most ``wait_ms``. In
        a gevent hub greenlet, which cannot wait, and from inside the passage
        itself, it returns at once. With ``wait=False`` it never waits: it
        returns the future that resolves when the passage under way ends
        (``None`` when none runs, or it is the caller's own), for
        :func:`await_passages` to wait on together with other gates'.
        """
        with self._lock:
            if self._cause is None:
                self._cause = cause
            passer = self._passer
            if passer is None or passer == _context():
                return None
            if self._left is None:
                self._left = Future()
            left = self._left
        if not wait:
            return left
        await_passages([left], self._wait_ms)
        return None

    @contextlib.contextmanager
    def passage(self) -> Iterator[bool]:
        """Run a step only if teardown has not begun: yields ``True`` (run it) or ``False``."""
        with self._lock:
            if self._cause is not None:
                admitted = False
            else:
                admitted = True
                self._passer = _context()
        if not admitted:
            yield False
            return
        try:
            yield True
        finally:
            with self._lock:
                self._passer = None
                left, self._left = self._left, None
            if left is not None:
                left.set_result(None)


def await_passages(passages: Sequence[Future[None]], wait_ms: int | None) -> None:
    """Wait for the passages under way (from :meth:`TeardownGate.close` with ``wait=False``).

    One deadline for all of them, ``wait_ms`` from now (``None``: as long as it
    takes), so closing many gates waits at most that long in all. Never raises.
    """
    deadline = None if wait_ms is None else time.monotonic() + wait_ms / 1000
    for left in passages:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            wait_for(left, timeout)
        except BlockingInHubError:
            _log.debug("teardown began in the gevent hub; a step under way finishes after it")
            return
        except TimeoutError:
            _log.warning("a schedule step under way did not end within %s ms of teardown", wait_ms)
            return


def _context() -> object:
    """Who is running: the current greenlet on a gevent hub thread, else the thread."""
    if current_hub() is None:
        return threading.get_ident()
    import gevent

    return gevent.getcurrent()
