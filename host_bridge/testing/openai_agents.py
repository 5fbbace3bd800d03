"""An offline OpenAI Agents SDK model that sets and presents reminders, for tests and examples.

:class:`ScriptedReminderModel` is an SDK :class:`agents.testing.ScriptedModel`:
steps a test enqueues run first, as usual; when none is left, it answers from
the conversation instead of failing:

- a user message such as ``remind me in 5 seconds to stretch`` (or ``remind me
  to stretch in 2 minutes``): one ``schedule_create`` function call with
  ``{"prompt": "stretch", "after_seconds": 5}``;
- the output of that call: a short confirmation (or the error code it got);
- a ``[SCHEDULE REMINDER]`` (or batch) message: ``Reminder: stretch``;
- anything else: the message itself, echoed.

Imported on its own (it needs the ``openai-agents`` extra), never by
:mod:`host_bridge.testing`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agents.items import (
    ModelResponse,
    TResponseInputItem,
    TResponseOutputItem,
    TResponseStreamEvent,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from messages import parse_reminder_framing

__all__ = ["ScriptedReminderModel", "reminder_request"]

_UNITS = {"second": 1, "minute": 60, "hour": 3600}
_UNIT = r"(second|minute|hour)s?"
_IN_N_TO_X = re.compile(rf"remind me in (\d+) {_UNIT},? to (.+)", re.IGNORECASE)
_TO_X_IN_N = re.compile(rf"remind me to (.+?),? in (\d+) {_UNIT}", re.IGNORECASE)


def reminder_request(text: str) -> tuple[str, int] | None:
    """``(prompt, after_seconds)`` for "remind me in N units to X" or "remind me to X in N units".

    Units are seconds, minutes or hours; ``None`` for any other text.
    """
    text = text.strip().rstrip(".!")
    if match := _IN_N_TO_X.fullmatch(text):
        count, unit, prompt = match.groups()
    elif match := _TO_X_IN_N.fullmatch(text):
        prompt, count, unit = match.groups()
    else:
        return None
    return prompt.strip(), int(count) * _UNITS[unit.lower()]


class ScriptedReminderModel(ScriptedModel):
    """A scripted SDK model that, past its enqueued steps, answers as the module says."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The next enqueued step's response, or the reminder answer to the input."""
        self._answer_when_unscripted()
        return await super().get_response(*args, **kwargs)

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The same answer as :meth:`get_response`, as stream events."""
        self._answer_when_unscripted()
        async for event in super().stream_response(*args, **kwargs):
            yield event

    def _answer_when_unscripted(self) -> None:
        if self.remaining_steps == 0:
            self.enqueue(ModelStep.respond(_answer))


def _answer(call: ModelCall) -> list[TResponseOutputItem]:
    items: list[Any] = (
        [{"role": "user", "content": call.input}] if isinstance(call.input, str) else call.input
    )
    last = _plain(items[-1]) if items else {}
    if last.get("type") == "function_call_output":
        return [_say(_confirmation(last.get("output")))]
    text = next((_text(_plain(i)) for i in reversed(items) if _plain(i).get("role") == "user"), "")
    reminders = parse_reminder_framing(text)
    if reminders:
        return [_say("Reminder: " + "; ".join(item.prompt for item in reminders))]
    request = reminder_request(text)
    if request is None:
        return [_say(text)]
    prompt, seconds = request
    arguments = {"prompt": prompt, "after_seconds": seconds}
    return [function_call("schedule_create", arguments, call_id=f"call_{uuid.uuid4().hex}")]


def _confirmation(output: Any) -> str:
    try:
        value = json.loads(output) if isinstance(output, str) else None
    except ValueError:
        value = None
    if isinstance(value, dict) and "scheduledAt" in value:
        return f"OK, I will remind you to {value['prompt']} at {value['scheduledAt']}."
    if isinstance(value, dict) and "code" in value:
        return f"I could not set that reminder: {value['code']}."
    return f"The tool answered: {output}"


def _say(text: str) -> TResponseOutputItem:
    return assistant_message(text, item_id=f"msg_{uuid.uuid4().hex}")


def _plain(item: TResponseInputItem | Any) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    return dump() if callable(dump) else {}


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(_plain(p).get("text", "")) for p in parts)
