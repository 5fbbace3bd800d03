"""An OpenAI Agents SDK chat bot whose reminders survive restarts; one line in, replies out.

python docs/examples/openai_agents_bot.py DATA_DIR     # type: remind me in 5 seconds to stretch
dsh-schedule serve --data DATA_DIR --turn-runner openai_agents_bot:run_turn   # chat closed
"""

import asyncio
import sys

from agents import Agent, set_tracing_disabled

from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.integrations.openai_agents import schedule_tools, turn_runner
from host_bridge.testing.openai_agents import ScriptedReminderModel

agent = Agent(
    name="assistant",
    instructions="Help the user; set reminders with the schedule tools.",
    tools=schedule_tools(),
    model=ScriptedReminderModel(),  # offline; a real model: model="gpt-4.1" (OPENAI_API_KEY)
)
answer = turn_runner(agent)
set_tracing_disabled(True)  # offline: no trace upload (drop this line with a real model)


async def run_turn(turn: AgentTurn) -> str | None:
    reply = await answer(turn)  # a person's message, or a reminder that came due
    print("agent:", reply, flush=True)
    return reply


async def main(data_dir: str) -> None:
    async with AsyncHost(run_turn, data_dir=data_dir) as host:
        chat = await host.open("chat")  # the same conversation after every restart
        while line := await asyncio.to_thread(sys.stdin.readline):
            await chat.send(line.strip())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
