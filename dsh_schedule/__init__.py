"""dsh-tool-schedule's public import name: the host-facing API of :mod:`host_bridge`.

Import from here (``from dsh_schedule import install_schedule``) rather than from
the generic top-level names the distribution also installs (``messages``,
``actors``, ``host_bridge``): the names of ``host_bridge.__all__`` are the same
objects, resolved on first use. That first use checks that those three names
are this distribution's packages and raises :class:`ShadowedPackageError` (one
message naming the shadowing file and what to do) when they are not. The
embedded host, the asyncio host, the integrations and the test kit stay at
:mod:`host_bridge.embedded`, :mod:`host_bridge.aio`, :mod:`host_bridge.integrations`
and :mod:`host_bridge.testing`. The ``dsh-schedule`` command is :mod:`dsh_schedule.cli`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_schedule._provenance import DISTRIBUTION, ShadowedPackageError, require_own_packages

if TYPE_CHECKING:
    from host_bridge import (
        AdmissionClosedError,
        CompositionError,
        PluginStatus,
        RestartPolicy,
        SchedulePlugin,
        ScheduleTelemetry,
        SteadyClock,
        ThreadTimers,
        TurnAdmission,
        WakePolicy,
        chain,
        failed,
        from_pykka,
        install_schedule,
        normalize_strict_arguments,
        openai_responses_tools,
        openai_tools,
        resolved,
    )

__distribution__ = DISTRIBUTION

__all__ = [
    "AdmissionClosedError",
    "CompositionError",
    "PluginStatus",
    "RestartPolicy",
    "SchedulePlugin",
    "ScheduleTelemetry",
    "ShadowedPackageError",
    "SteadyClock",
    "ThreadTimers",
    "TurnAdmission",
    "WakePolicy",
    "chain",
    "failed",
    "from_pykka",
    "install_schedule",
    "normalize_strict_arguments",
    "openai_responses_tools",
    "openai_tools",
    "resolved",
]

_PACKAGES = ("messages", "actors", "host_bridge")


def _resolve(name: str) -> object:
    """Import ``host_bridge`` (after the provenance check) and cache ``name`` from it."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_own_packages(*_PACKAGES)
    import host_bridge

    value: object = getattr(host_bridge, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy re-exports included."""
    return sorted({*globals(), *__all__})


if not TYPE_CHECKING:  # mypy sees the imports above; a module __getattr__ would hide typos
    __getattr__ = _resolve
