"""An asyncio loop on a thread of its own, and loading a turn runner by its import path."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
import threading

from host_bridge.aio._turn import TurnRunner

__all__ = ["LoopThread", "TurnRunnerImportError", "import_turn_runner"]


class TurnRunnerImportError(ValueError):
    """A ``MODULE:ATTR`` path that names no async turn runner."""


def import_turn_runner(path: str) -> TurnRunner:
    """The turn runner ``MODULE:ATTR`` names (``ATTR`` may be dotted), as uvicorn loads apps.

    The current directory is put first on ``sys.path`` if it is not there.
    Raises :class:`TurnRunnerImportError` saying what is wrong: no ``:``, a
    module that cannot be found or fails while being imported (its exception's
    type is named, not its text), a missing attribute, or one that is not an
    async callable.
    """
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise TurnRunnerImportError(f"{path!r} is not of the form MODULE:ATTR")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as error:
        raise TurnRunnerImportError(f"module {module_name!r} cannot be imported: {error}") from None
    except SyntaxError as error:
        where = f"{os.path.basename(error.filename or '?')}, line {error.lineno}"
        message = f"module {module_name!r} has a syntax error ({where})"
        raise TurnRunnerImportError(message) from None
    except Exception as error:  # its own code failed: name the type, keep its text out
        raise TurnRunnerImportError(
            f"module {module_name!r} raised {type(error).__name__} while being imported"
        ) from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise TurnRunnerImportError(f"{module_name!r} has no attribute {attribute!r}") from None
    call = getattr(target, "__call__", None)  # noqa: B004 (an object with an async __call__ counts)
    if not (inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(call)):
        raise TurnRunnerImportError(f"{path!r} is not an async function (async def run_turn(turn))")
    return target  # type: ignore[return-value]


class LoopThread:
    """An event loop running on a daemon thread, for a program that is not async itself.

    ``serve`` runs a host's turn runner on one. :meth:`stop` cancels what is
    still scheduled on it, stops it and joins the thread.
    """

    def __init__(self, name: str = "dsh-schedule-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the loop (its remaining tasks cancelled); whether its thread ended in ``timeout``.

        A task that ignores cancellation (or blocks the loop) keeps the thread
        alive past it; it is a daemon thread, so it does not hold the process.
        """
        if self.loop.is_closed():
            return True
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            return True  # closed meanwhile
        self._thread.join(timeout)
        return not self._thread.is_alive()
