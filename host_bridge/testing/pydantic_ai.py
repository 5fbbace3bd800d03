"""A scripted Pydantic AI model for tests and examples of Schedule (needs ``pydantic-ai-slim``).

:func:`reminder_model` is a ``FunctionModel`` that plays an assistant using the
Schedule tools, offline and deterministically:

* "remind me in N seconds to X" calls ``schedule_create`` with
  ``{"prompt": X, "after_seconds": N}``, and once the tool answered, says what
  it scheduled (or the error it got);
* a ``[SCHEDULE REMINDER]`` (or batch) message answers ``Reminder: X``
  (``Reminder: X; Y`` for a batch);
* anything else is echoed.

Imported on its own: ``host_bridge.testing`` does not import it, since Pydantic
AI is an optional dependency.
"""

from __future__ import annotations

import json
import re

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from messages import parse_reminder_framing

__all__ = ["reminder_model", "reminder_model_function"]

_REMIND = re.compile(r"remind me in (\d+) seconds? to (.+)", re.IGNORECASE | re.DOTALL)


def _answer_tool(part: ToolReturnPart) -> str:
    content = part.content
    try:
        value = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        return f"{part.tool_name} answered: {content}"
    if isinstance(value, dict) and "code" in value:
        return f"That did not work ({value['code']}): {value.get('message', '')}"
    if isinstance(value, dict) and "scheduledAt" in value:
        return f"OK, I will remind you to {value['prompt']} at {value['scheduledAt']}."
    return f"{part.tool_name} answered: {content}"


def _answer_text(text: str) -> ModelResponse:
    presented = parse_reminder_framing(text)
    if presented:
        return ModelResponse(
            parts=[TextPart("Reminder: " + "; ".join(item.prompt for item in presented))]
        )
    asked = _REMIND.fullmatch(text.strip())
    if asked is not None:
        arguments = {"prompt": asked.group(2).strip(), "after_seconds": int(asked.group(1))}
        return ModelResponse(parts=[ToolCallPart("schedule_create", arguments)])
    return ModelResponse(parts=[TextPart(text)])


def reminder_model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The ``FunctionModel`` function of :func:`reminder_model` (see the module docstring)."""
    request = messages[-1]
    if isinstance(request, ModelRequest):
        returns = [part for part in request.parts if isinstance(part, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(" ".join(_answer_tool(p) for p in returns))])
        for part in request.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return _answer_text(part.content)
    return ModelResponse(parts=[TextPart("")])


def reminder_model() -> FunctionModel:
    """A ``FunctionModel`` that asks for reminders and presents them (see the module docstring)."""
    return FunctionModel(reminder_model_function, model_name="schedule-reminders")
