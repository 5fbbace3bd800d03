"""Read deliveries back from a session log: the dispatches, and "delivered exactly once".

What the log alone can show: a ``dispatch`` record is Schedule's statement that
it queued the reminder (or, for ``every`` and ``cron``, one occurrence of it)
to the agent as a follow-up, written right after that follow-up inside one
turn-admission reservation. So "exactly one dispatch for this reminder
(occurrence)" is what "delivered once" means in the log. Whether the model was
then shown the message once is the host's business: pass the messages the host
presented (a fake agent's ``received``, a model's recorded texts, the host's
own user-message events) as ``presented=`` to check that too. One gap is by
design: a crash between the follow-up and the durable dispatch can repeat a
reminder after recovery while the log still holds a single dispatch; only
``presented`` shows that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from actors._contract import Session, UserMessage
from messages._fold import EventLike
from messages._presentation import parse_reminder_framing, schedule_reminder_presentation
from messages._records import SCHEDULE_CHANGE_TYPE, DispatchChange, decode_schedule_change

__all__ = ["Dispatch", "assert_delivered_once", "dispatches", "reminder_mentions"]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One ``dispatch`` record of a session log, decoded.

    ``seq`` is the event's position; ``occurrence_at`` the occurrence it delivered
    (a one-shot's ``scheduledAt``; for ``every`` and ``cron``, the occurrence its
    ``accepted_at`` selects); ``prompt`` the reminder's prompt; ``accepted_at``
    is set for the dispatches of repeating records only.
    """

    seq: int
    schedule_id: str
    occurrence_at: str
    prompt: str
    accepted_at: str | None = None

    @property
    def every(self) -> bool:
        """True for the dispatch of a repeating (``every`` or ``cron``) reminder."""
        return self.accepted_at is not None


def _events(log: Session | Sequence[EventLike]) -> tuple[Sequence[EventLike], int]:
    """The events and the seed length (a session's header, else 0)."""
    if isinstance(log, Sequence):
        return log, 0
    seed = log.header.seed_length
    return log.events, seed if seed is not None else 0


def dispatches(log: Session | Sequence[EventLike]) -> list[Dispatch]:
    """Every ``dispatch`` of the session's own suffix, in log order.

    ``log`` is a ``Session`` (its ``events``; a fork's inherited prefix before
    ``header.seed_length`` is skipped: those dispatches were delivered to the
    parent) or a sequence of events whose ``seq`` equals its index. Built on
    :func:`~messages._records.decode_schedule_change` and
    :func:`~messages._presentation.schedule_reminder_presentation`; a malformed
    ``schedule/change`` raises ``ScheduleLogError``.
    """
    events, seed = _events(log)
    found: list[Dispatch] = []
    for index in range(seed, len(events)):
        event = events[index]
        if event.type != SCHEDULE_CHANGE_TYPE:
            continue
        change = decode_schedule_change(event.data)
        if not isinstance(change, DispatchChange):
            continue
        receipt = schedule_reminder_presentation(events, index, seed)
        assert receipt is not None  # a dispatch always has one (or the call raised)
        found.append(
            Dispatch(
                index, change.id, receipt["occurrenceAt"], receipt["prompt"], change.accepted_at
            )
        )
    return found


def _text(message: UserMessage | str) -> str:
    return message if isinstance(message, str) else message.text


def reminder_mentions(message: UserMessage | str) -> tuple[tuple[str, str], ...]:
    """The ``(schedule_id, occurrence_at)`` pairs a reminder message presents.

    One pair for a one-shot framing, one per member for a batch of repeating
    reminders, none for any other text (or a framing that does not parse; see
    :func:`~messages._presentation.parse_reminder_framing`).
    """
    return tuple(
        (reminder.schedule_id, reminder.occurrence_at)
        for reminder in parse_reminder_framing(_text(message))
    )


def _describe(found: Sequence[Dispatch]) -> str:
    if not found:
        return "none"
    return ", ".join(
        f"{d.schedule_id} at seq {d.seq} (occurrence {d.occurrence_at})" for d in found
    )


def assert_delivered_once(
    log: Session | Sequence[EventLike],
    schedule_id: str,
    *,
    occurrence_at: str | None = None,
    presented: Iterable[UserMessage | str] | None = None,
) -> Dispatch:
    """Assert the log holds exactly one dispatch of ``schedule_id``; return it.

    For a repeating (``every``, ``cron``) reminder give ``occurrence_at`` (the
    canonical instant, as in :attr:`Dispatch.occurrence_at`) to check one
    occurrence; without it, all dispatches of the id count, so a second
    occurrence fails the check. With ``presented`` (the reminder messages the
    host showed the model, as ``UserMessage`` values or texts), also assert
    that exactly one of them presents this reminder occurrence. Raises
    ``AssertionError`` listing what was found otherwise. See the module
    docstring for what the log can prove.
    """
    every = dispatches(log)
    mine = [d for d in every if d.schedule_id == schedule_id]
    matching = [d for d in mine if occurrence_at is None or d.occurrence_at == occurrence_at]
    if len(matching) != 1:
        what = f"{schedule_id!r}" + ("" if occurrence_at is None else f" at {occurrence_at}")
        hint = ""
        if occurrence_at is None and len(mine) > 1 and all(d.every for d in mine):
            hint = "; it is a repeating reminder: pass occurrence_at= to check one occurrence"
        raise AssertionError(
            f"expected exactly one dispatch of {what}, found {len(matching)}: "
            f"{_describe(matching)}; every dispatch in the log: {_describe(every)}{hint}"
        )
    (dispatch,) = matching
    if presented is not None:
        key = (dispatch.schedule_id, dispatch.occurrence_at)
        texts = [_text(message) for message in presented]
        shown = [i for i, text in enumerate(texts) if key in reminder_mentions(text)]
        if len(shown) != 1:
            mentioned = [pair for text in texts for pair in reminder_mentions(text)]
            raise AssertionError(
                f"dispatch of {schedule_id!r} at seq {dispatch.seq} (occurrence "
                f"{dispatch.occurrence_at}) was presented {len(shown)} times "
                f"(messages {shown} of {len(texts)}); reminders presented: {mentioned}"
            )
    return dispatch
