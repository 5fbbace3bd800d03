"""The ``dsh-schedule`` console script: the provenance check, then :mod:`host_bridge.cli`.

Importing this module imports nothing of ``messages``, ``actors`` or
``host_bridge``, so :func:`main` can report a shadowed package in one line on
stderr (exit status 2, the command's usage-error status) instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dsh_schedule._provenance import ShadowedPackageError, require_own_packages

__all__ = ["main"]

_EXIT_SHADOWED = 2  # host_bridge.cli's EXIT_USAGE, which cannot be imported before the check


def _one_line(text: str) -> str:
    """``text`` with what a terminal would act on (controls, format characters) escaped.

    The message names a path, which may hold anything; the rest of the CLI
    escapes the same way through ``host_bridge.cli``, which cannot be imported here.
    """
    return "".join(
        char if char.isprintable() and char != "\\" else ascii(char)[1:-1] for char in text
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``dsh-schedule`` with ``argv`` (default: the process arguments) and exit."""
    try:
        require_own_packages("messages", "actors", "host_bridge")
        from host_bridge.cli import main as run
    except ShadowedPackageError as error:
        sys.stderr.write(f"Error: {_one_line(str(error))}\n")
        raise SystemExit(_EXIT_SHADOWED) from None
    run(argv)
