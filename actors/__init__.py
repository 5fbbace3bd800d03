"""pykka actors of dsh-tool-schedule, and the runtimes they run on.

:class:`ScheduleOwner` is the actor each root agent gets: its mailbox
serialises tool transactions and due-timer wake-ups. :class:`SessionActor`
mediates a session's appends and flush barriers (:class:`SessionCore` is its
critical section). :class:`WakeUpActor` wakes cold sessions when they are due.
All three are :class:`MailboxActor` s whose every step is a message of
:mod:`messages`; the owner and the wake-up actor share :class:`SupervisedActor`.
A :class:`Runtime` (threading by default, gevent from :mod:`actors.gevent`)
runs them; :func:`get_runtime` resolves a :data:`RuntimeSpec`.
``__distribution__`` marks it as the package of dsh-tool-schedule; importing it
first checks that ``messages`` is too (:class:`dsh_schedule.ShadowedPackageError`).
"""

from __future__ import annotations

__distribution__ = "dsh-tool-schedule"

from dsh_schedule._provenance import require_own_packages

require_own_packages("messages")  # before anything of ours imports it

from actors._base import MailboxActor
from actors._runtime import (
    BlockingInHubError,
    Runtime,
    RuntimeName,
    RuntimeSpec,
    ThreadingRuntime,
    get_runtime,
    run_blocking,
    wait_for,
)
from actors._schedule_owner import ScheduleOwner
from actors._session_actor import PersistenceListener, SessionActor, SessionCore
from actors._supervised import SupervisedActor
from actors._wake_up import WakeUpActor

__all__ = [
    "BlockingInHubError",
    "MailboxActor",
    "PersistenceListener",
    "Runtime",
    "RuntimeName",
    "RuntimeSpec",
    "ScheduleOwner",
    "SessionActor",
    "SessionCore",
    "SupervisedActor",
    "ThreadingRuntime",
    "WakeUpActor",
    "get_runtime",
    "run_blocking",
    "wait_for",
]
