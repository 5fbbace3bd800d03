"""Host-facing surface of dsh-tool-schedule: the plugin, its policies and adapters.

A host builds a :class:`~host_bridge.protocols.HostContext` whose parts satisfy
the protocols of the contract (:mod:`host_bridge.protocols`), calls :func:`install_schedule`
and keeps the :class:`SchedulePlugin` it returns. :class:`TurnAdmission` is a
ready-made turn-admission state machine for a host's agent adapter;
:class:`RestartPolicy` and :class:`WakePolicy` tune supervision and the waking
of cold sessions; :class:`ThreadTimers`, :class:`SteadyClock` and the clock
functions are the defaults a host may pass; :func:`from_pykka` and its siblings
adapt futures; :func:`openai_tools` (chat completions), :func:`openai_responses_tools`
(the Responses API) and :func:`normalize_strict_arguments` serve LLM APIs;
:class:`ScheduleTelemetry` reports through OpenTelemetry. The invariant
companion that checks a host's own store is :mod:`host_bridge.invariant`. The embedded reference
host is :mod:`host_bridge.embedded`, the test kit for hosts :mod:`host_bridge.testing`.
The documented import name for these is :mod:`dsh_schedule`. ``__distribution__``
marks the package as dsh-tool-schedule's; importing it first checks that
``messages`` and ``actors`` are too, or raises :class:`ShadowedPackageError`.
"""

from __future__ import annotations

__distribution__ = "dsh-tool-schedule"

from dsh_schedule._provenance import ShadowedPackageError, require_own_packages

require_own_packages("messages", "actors")  # before anything of ours imports them

from actors._clock import ThreadTimers
from actors._wake_policy import WakePolicy
from host_bridge._admission import AdmissionClosedError, TurnAdmission
from host_bridge._catalog import openai_responses_tools, openai_tools
from host_bridge._composition import CompositionError
from host_bridge._futures import chain, failed, from_pykka, resolved
from host_bridge._openai_strict import normalize_strict_arguments
from host_bridge._plugin import PluginStatus, SchedulePlugin, install_schedule
from host_bridge._steady_clock import SteadyClock
from host_bridge._supervision import RestartPolicy
from host_bridge._telemetry import ScheduleTelemetry

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
