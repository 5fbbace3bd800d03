"""A Pydantic AI turn runner whose model hangs in every reminder's turn, for SIGKILL tests.

``run_turn`` answers a person's messages like the scripted reminder model; in
a reminder's turn the model prints ``PAUSED in the reminder's turn`` and never
answers, so a test can kill the process there. ``python -m
tests.integrations.pai_hanging DATA_DIR`` runs it in an :class:`AsyncHost`
that wakes cold sessions (prints ``READY`` once started);
``dsh-schedule serve --turn-runner pai_hanging:run_turn`` runs it in ``serve``.
"""

from __future__ import annotations

import asyncio
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from host_bridge.aio import AsyncHost
from host_bridge.integrations.pydantic_ai import ScheduleToolset, turn_runner
from host_bridge.testing.pydantic_ai import reminder_model_function
from messages import parse_reminder_framing

PAUSED = "PAUSED in the reminder's turn"


async def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompts = [p.content for p in messages[-1].parts if isinstance(p, UserPromptPart)]
    if any(isinstance(text, str) and parse_reminder_framing(text) for text in prompts):
        print(PAUSED, flush=True)
        await asyncio.Event().wait()
    return reminder_model_function(messages, info)


run_turn = turn_runner(Agent(FunctionModel(_model), toolsets=[ScheduleToolset()]))


async def _serve(data_dir: str) -> None:
    async with AsyncHost(run_turn, data_dir=data_dir):
        print("READY", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
