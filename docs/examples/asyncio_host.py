"""An asyncio agent with durable reminders and no framework: the pattern of docs/asyncio.md.

    python docs/examples/asyncio_host.py DATA_DIR "remind 2 stretch"  # sets one, exits
    python docs/examples/asyncio_host.py DATA_DIR  # a later start: waits for it, presents it
"""

import asyncio
import re
import sys

from host_bridge.aio import AgentTurn, AsyncHost

presented = asyncio.Event()


async def run_turn(turn: AgentTurn) -> str | None:
    """The whole agent: a reminder is presented; "remind SECONDS TEXT" sets one."""
    if turn.is_reminder:
        print("REMINDER", turn.text.splitlines()[-1], flush=True)
        presented.set()
        return "presented"
    match = re.fullmatch(r"remind (\d+) (.+)", turn.text)
    if match is None:
        return "say: remind SECONDS TEXT"
    arguments = {"prompt": match[2], "after_seconds": int(match[1])}
    return (await turn.call_tool("schedule_create", arguments)).content


async def main(data_dir: str, text: str | None) -> None:
    async with AsyncHost(run_turn, data_dir=data_dir) as host:
        chat = await host.open("chat")
        if text is not None:
            print(await chat.send(text), flush=True)
        else:
            await asyncio.wait_for(presented.wait(), timeout=60)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
