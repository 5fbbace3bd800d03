"""A turn runner for ``dsh-schedule serve`` whose SDK turn stops dead inside the model call.

``--turn-runner tests.integrations.oai_pausing_bot:run_turn``: the reminder's
turn runs the Agents SDK with the log-backed session. The model first calls
``schedule_list``, whose flush makes what the turn wrote so far durable (the
SDK saved the turn's input to the history before the first model call); called
again, it prints ``PAUSED in the model`` and never answers, so a test can
SIGKILL the process in the middle of the turn, its partial history stored.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agents import Agent, set_tracing_disabled
from agents.items import TResponseOutputItem
from agents.testing import ModelCall, ModelStep, ScriptedModel, function_call

from host_bridge.integrations.openai_agents import schedule_tools, turn_runner

set_tracing_disabled(True)


async def _pause(call: ModelCall) -> list[TResponseOutputItem]:
    sys.stdout.write("PAUSED in the model\n")
    sys.stdout.flush()
    await asyncio.Event().wait()
    return []


_list = ModelStep(output=[function_call("schedule_list", "{}", call_id="call_list")])
_steps = [_list, ModelStep.respond(_pause)]
agent: Agent[Any] = Agent(name="assistant", tools=schedule_tools(), model=ScriptedModel(_steps))
run_turn = turn_runner(agent)
