"""Small helpers around :class:`concurrent.futures.Future`, the contract's future type."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any, TypeVar

__all__ = ["chain", "failed", "from_pykka", "resolved"]

T = TypeVar("T")


def resolved(value: T) -> Future[T]:
    """A future already resolved with ``value``."""
    future: Future[T] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[Any]:
    """A future already failed with ``error``."""
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


def chain(source: Future[T], target: Future[T]) -> None:
    """Resolve ``target`` with the outcome of ``source`` when it completes.

    A cancelled ``source`` cancels ``target`` (or fails it with ``CancelledError``
    when it can no longer be cancelled); a ``target`` settled meanwhile is left alone.
    """

    def _copy(done: Future[T]) -> None:
        if target.done():
            return
        with contextlib.suppress(InvalidStateError):  # settled meanwhile
            if done.cancelled():
                if not target.cancel():
                    target.set_exception(CancelledError())
                return
            error = done.exception()
            if error is not None:
                target.set_exception(error)
            else:
                target.set_result(done.result())

    source.add_done_callback(_copy)


def from_pykka(
    future: Any, *, on_thread: Callable[[Callable[[], None]], None] | None = None
) -> Future[Any]:
    """Adapt a pykka future (which has no done-callbacks) to a ``concurrent.futures.Future``.

    A short-lived daemon thread waits on the pykka future and copies its
    outcome; pass ``on_thread`` to run that wait elsewhere (e.g. a pool).
    """
    adapted: Future[Any] = Future()

    def _wait() -> None:
        try:
            value = future.get()
        except BaseException as error:
            with contextlib.suppress(InvalidStateError):  # the caller cancelled it
                adapted.set_exception(error)
        else:
            with contextlib.suppress(InvalidStateError):  # the caller cancelled it
                adapted.set_result(value)

    if on_thread is not None:
        on_thread(_wait)
    else:
        threading.Thread(target=_wait, name="pykka-future-adapter", daemon=True).start()
    return adapted
