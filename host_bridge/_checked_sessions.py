"""Schedule's view of the host's ``SessionStore``: every flush a future, every outcome watched.

:func:`host_bridge._composition.compose` puts a :class:`CheckedSessionStore`
around the host's store at install; the owners flush through it. What it
handles can only be seen at run time: a ``flush`` that returns a pykka future
(adapted), one that returns something else that is not a
:class:`concurrent.futures.Future` (that flush fails, logged once), and a
session whose flushes keep resolving ``False`` (:class:`FlushMonitor`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pykka

from actors._contract import Session, SessionStore
from host_bridge._futures import failed, from_pykka, resolved

__all__ = [
    "FALSE_FLUSH_WARNING_AFTER",
    "CheckedSessionStore",
    "FlushMonitor",
    "FlushProtocolError",
]

FALSE_FLUSH_WARNING_AFTER = 3
"""How many consecutive flushes of one session must resolve ``False`` before a warning."""

_MAX_TRACKED_SESSIONS = 4096
"""At most this many sessions in a ``False`` streak are remembered (the oldest is forgotten)."""


class FlushProtocolError(TypeError):
    """A ``SessionStore.flush`` returned something that is not a future Schedule can wait on."""


class CheckedSessionStore:
    """The host's ``SessionStore`` as Schedule's owners use it (one per installed plugin).

    ``get`` and ``list`` are the host's. ``flush`` calls the host's once and
    returns a :class:`concurrent.futures.Future`:

    - a ``Future`` is returned as is;
    - a pykka future (a ``pykka.Future``, or duck-typed: it has ``get()`` and
      no ``add_done_callback``) is adapted: one that has settled already is
      copied at once, one with done-callbacks (the gevent runtime's) from its
      callback, any other pending one is waited for by
      :func:`host_bridge._futures.from_pykka`;
    - anything else fails that flush with :class:`FlushProtocolError` naming
      the rule (logged at error level once per plugin), so the tool answers
      ``persistence_uncertain`` instead of the owner faulting.

    A ``flush`` that raises still raises (the owner counts it as failed).
    Every outcome is shown to a :class:`FlushMonitor`.
    """

    def __init__(
        self,
        store: SessionStore,
        log: logging.Logger,
        *,
        false_flush_warning_after: int = FALSE_FLUSH_WARNING_AFTER,
    ) -> None:
        self._store = store
        self._log = log
        self.monitor = FlushMonitor(log, false_flush_warning_after)
        self._lock = threading.Lock()
        self._reported: set[str] = set()

    @property
    def store(self) -> SessionStore:
        """The host's own store."""
        return self._store

    def get(self, session_id: str) -> Session | None:
        """The host's ``get``."""
        return self._store.get(session_id)

    def list(self) -> Sequence[Session]:
        """The host's ``list``."""
        return self._store.list()

    def flush(self, session: Session) -> Future[bool]:
        """The host's flush as a ``Future[bool]``; see the class docstring."""
        returned: Any = self._store.flush(session)
        if isinstance(returned, Future):
            future: Future[bool] = returned
        elif isinstance(returned, pykka.Future) or (
            callable(getattr(returned, "get", None)) and not hasattr(returned, "add_done_callback")
        ):
            self._once("pykka", logging.DEBUG, "flush returns pykka futures; Schedule adapts them")
            future = _from_pykka(returned)
        else:
            self._once(
                "not-a-future",
                logging.ERROR,
                "HostContext.sessions (SessionStore): flush returned a %s, not a "
                "concurrent.futures.Future[bool]; every such flush counts as failed, so "
                "Schedule's tools answer persistence_uncertain and nothing is delivered. "
                "Return a concurrent.futures.Future (host_bridge._futures.from_pykka adapts "
                "a pykka future)",
                type(returned).__name__,
            )
            future = failed(
                FlushProtocolError(
                    "SessionStore.flush must return a concurrent.futures.Future[bool]"
                )
            )
        self.monitor.watch(_session_id(session), future)
        return future

    def _once(self, key: str, level: int, message: str, *args: object) -> None:
        with self._lock:
            if key in self._reported:
                return
            self._reported.add(key)
        self._log.log(level, message, *args)


def _session_id(session: Session) -> str:
    try:
        return str(session.id)
    except Exception:
        return "?"


def _from_pykka(future: Any) -> Future[Any]:
    """A pykka future as a ``concurrent.futures.Future``, without a thread where possible.

    A pykka future that has settled is copied at once; one with done-callbacks
    (the gevent runtime's :class:`~actors.gevent.GeventFuture`) is
    copied from its callback; only a pending plain pykka future needs
    :func:`host_bridge._futures.from_pykka`'s waiting thread.
    """
    if not isinstance(future, pykka.Future):
        return from_pykka(future)
    try:
        return resolved(future.get(timeout=0))
    except pykka.Timeout:
        pass
    except Exception as error:
        return failed(error)
    add_done_callback = getattr(future, "add_done_callback", None)
    if not callable(add_done_callback):
        return from_pykka(future)
    adapted: Future[Any] = Future()

    def copy(done: Any) -> None:
        try:
            value = done.get(timeout=0)
        except Exception as error:
            adapted.set_exception(error)
        else:
            adapted.set_result(value)

    add_done_callback(copy)
    return adapted


@dataclass
class _Streak:
    count: int = 0
    warned: bool = False


class FlushMonitor:
    """Watches flush outcomes and says so when a session's flushes keep resolving ``False``.

    After ``warn_after`` consecutive flushes of one session resolved ``False``
    it logs one warning for that session (no persistence listener acknowledged
    durability, so tools answer ``persistence_uncertain`` and reminders wait);
    the first ``True`` after a warning logs one info line. A failed or
    cancelled flush neither extends nor ends a streak (the owner reports
    those). A flush that resolves something other than a ``bool`` is a broken
    ``SessionStore``, logged once at warning level. Callbacks run on whatever
    thread settles the flush; the state is behind a lock.
    """

    def __init__(self, log: logging.Logger, warn_after: int = FALSE_FLUSH_WARNING_AFTER) -> None:
        if warn_after < 1:
            raise ValueError("warn_after must be at least 1")
        self._log = log
        self._warn_after = warn_after
        self._lock = threading.Lock()
        self._streaks: OrderedDict[str, _Streak] = OrderedDict()
        self._odd_value_reported = False
        self.warnings = 0
        """How many sessions were warned about so far."""

    def watch(self, session_id: str, future: Future[bool]) -> None:
        """Observe the outcome of one flush of ``session_id``."""
        future.add_done_callback(lambda done: self._settled(session_id, done))

    def _settled(self, session_id: str, done: Future[bool]) -> None:
        try:
            value = done.result(timeout=0)  # one look at the future
        except BaseException:  # failed or cancelled: the owner reports those
            return
        if value is True:
            self._succeeded(session_id)
        elif value is False:
            self._refused(session_id)
        else:
            with self._lock:
                report, self._odd_value_reported = not self._odd_value_reported, True
            if report:
                self._log.warning(
                    "HostContext.sessions (SessionStore): a flush of session %r resolved a %s "
                    "instead of True or False; it counts as failed",
                    session_id,
                    type(value).__name__,
                )

    def _succeeded(self, session_id: str) -> None:
        with self._lock:
            streak = self._streaks.pop(session_id, None)
        if streak is not None and streak.warned:
            self._log.info(
                "flushes of session %r resolve True again, after %d that resolved False",
                session_id,
                streak.count,
            )

    def _refused(self, session_id: str) -> None:
        with self._lock:
            streak = self._streaks.get(session_id)
            if streak is None:
                streak = self._streaks[session_id] = _Streak()
                if len(self._streaks) > _MAX_TRACKED_SESSIONS:
                    self._streaks.popitem(last=False)
            streak.count += 1
            warn = not streak.warned and streak.count >= self._warn_after
            if warn:
                streak.warned = True
                self.warnings += 1
            count = streak.count
        if warn:
            self._log.warning(
                "%d consecutive flushes of session %r resolved False: no persistence listener "
                "acknowledged durability (is the host's durability service attached to this "
                "session's store?). Until a flush resolves True, Schedule's tools answer "
                "persistence_uncertain and no reminder of this session is delivered",
                count,
                session_id,
            )
