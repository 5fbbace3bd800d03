"""A Pydantic AI agent whose reminders survive restarts: ``python pydantic_ai_bot.py DATA_DIR``.

Type "remind me in 20 seconds to stretch", quit (Ctrl-D), start it again: the
reminder arrives. Closed for good, ``dsh-schedule --data DATA_DIR serve
--turn-runner pydantic_ai_bot:run_turn`` delivers it instead.
"""

import asyncio
import sys

from pydantic_ai import Agent

from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.integrations.pydantic_ai import ScheduleToolset, turn_runner
from host_bridge.testing.pydantic_ai import reminder_model

# Offline and scripted; for a real model: Agent("openai:gpt-4.1", toolsets=[ScheduleToolset()])
agent = Agent(reminder_model(), toolsets=[ScheduleToolset()])
answer = turn_runner(agent)


async def run_turn(turn: AgentTurn) -> str | None:
    """Answer one turn, a person's or a reminder's; print a reminder's reply."""
    reply = await answer(turn)
    if turn.is_reminder:
        print(reply, flush=True)
    return reply


async def main(data_dir: str) -> None:
    """Chat on one session of the store in ``data_dir``, a line of stdin a message."""
    async with AsyncHost(run_turn, data_dir=data_dir) as host:
        chat = await host.open("pydantic-ai-bot")
        while line := await asyncio.to_thread(sys.stdin.readline):
            print(await chat.send(line.strip()), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
