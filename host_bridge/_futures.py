"""Future helpers of the host side: :mod:`actors._futures` plus adapting pykka futures."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from actors._futures import chain, failed, resolved, settle, settle_exception

__all__ = ["chain", "failed", "from_pykka", "resolved"]


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
            settle_exception(adapted, error)  # unless the caller cancelled it
        else:
            settle(adapted, value)

    if on_thread is not None:
        on_thread(_wait)
    else:
        threading.Thread(target=_wait, name="pykka-future-adapter", daemon=True).start()
    return adapted
