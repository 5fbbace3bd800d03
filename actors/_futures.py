"""The project's one set of helpers for :class:`concurrent.futures.Future`, the contract's future.

Settled futures (:func:`resolved`, :func:`failed`), settling a reply its
caller may have cancelled (:func:`settle`, :func:`settle_exception`),
reading a settled flush in one look (:func:`resolved_true`), marking a
thread that settles many futures in a row (:func:`settling_many`), and
copying one future's outcome to another (:func:`chain`). Every package uses
these; none keeps its own copy.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any, TypeVar

__all__ = [
    "chain",
    "failed",
    "resolved",
    "resolved_true",
    "settle",
    "settle_exception",
    "settles_many",
    "settling_many",
]

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


def resolved_true(done: Future[Any]) -> bool:
    """Whether the settled future ``done`` resolved exactly ``True``.

    A failed, cancelled or still pending future is ``False``. One call into the
    future (one hold of its condition), where ``cancelled()``, ``exception()``
    and ``result()`` take three.
    """
    try:
        return done.result(timeout=0) is True
    except BaseException:  # the future's own failure (or cancellation), whatever it is
        return False


_group = threading.local()


@contextlib.contextmanager
def settling_many(many: bool = True) -> Iterator[None]:
    """While this block runs, :func:`settles_many` is ``True`` on this thread (if ``many``).

    A thread that settles a group of futures (a store's writer resolving the
    flushes one commit covered) says so, so that done-callbacks keep their
    work short and hand it elsewhere rather than hold up the rest.
    """
    before = getattr(_group, "many", False)
    _group.many = many or before
    try:
        yield
    finally:
        _group.many = before


def settles_many() -> bool:
    """Whether the calling thread is inside :func:`settling_many` (settling a group)."""
    return bool(getattr(_group, "many", False))


def settle(reply: Future[T], value: T) -> None:
    """Resolve ``reply`` with ``value``, unless it is settled (or cancelled) already."""
    with contextlib.suppress(InvalidStateError):
        reply.set_result(value)


def settle_exception(reply: Future[Any], error: BaseException) -> None:
    """Fail ``reply`` with ``error``, unless it is settled (or cancelled) already."""
    with contextlib.suppress(InvalidStateError):
        reply.set_exception(error)


def chain(source: Future[T], target: Future[T]) -> None:
    """Resolve ``target`` with the outcome of ``source`` when it completes.

    A cancelled ``source`` cancels ``target`` (or fails it with ``CancelledError``
    when it can no longer be cancelled); a ``target`` settled meanwhile is left alone.
    The copy runs where ``source`` settles (inline when it is settled already).
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
