"""One tool-call round trip in OpenAI's formats — the example of docs/llm-apis.md.

Chat completions: a host sends the model ``openai_tools()`` as its ``tools``;
the model answers with ``tool_calls`` whose ``function.arguments`` is a JSON
**string**; the host passes that string to ``tools.execute`` as is and sends
each result back as a ``tool`` message. The Responses API is the same with
``openai_responses_tools()``, ``function_call`` output items and
``function_call_output`` input items. This script does the host's part for a
saved response (no network): it installs Schedule on an embedded host in a
temporary directory, executes every tool call of the response and prints what
goes back to the model::

    python docs/examples/openai_round_trip.py            # openai_chat_completion.json
    python docs/examples/openai_round_trip.py --strict   # openai_chat_completion_strict.json
    python docs/examples/openai_round_trip.py --api responses [--strict]  # openai_responses*.json
    python docs/examples/openai_round_trip.py --now 2026-08-05T12:00:00.000Z

``--strict`` reads a response to a request made with the strict tools
(``strict=True``): its arguments name every parameter, ``null`` for unused
selectors, so they go through ``normalize_strict_arguments`` first. ``--now``
fixes the host's clock (for reproducible output).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_schedule import (
    install_schedule,
    normalize_strict_arguments,
    openai_responses_tools,
    openai_tools,
)
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import Agent, ToolRegistry, wall_clock_ms
from host_bridge.testing import FakeClock
from messages import parse_instant

HERE = Path(__file__).resolve().parent


def tool_messages(
    response: dict[str, Any], tools: ToolRegistry, agent: Agent, *, strict: bool
) -> list[dict[str, Any]]:
    """Execute every tool call of a chat-completions ``response``; the ``tool`` messages."""
    replies = []
    for call in response["choices"][0]["message"].get("tool_calls") or []:
        name = call["function"]["name"]
        arguments = call["function"]["arguments"]  # a JSON string: the tools take it as is
        if strict:
            arguments = normalize_strict_arguments(name, arguments)  # drops the null selectors
        result = tools.execute(name, arguments, agent=agent)
        replies.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
    return replies


def function_call_outputs(
    response: dict[str, Any], tools: ToolRegistry, agent: Agent, *, strict: bool
) -> list[dict[str, Any]]:
    """Execute every function call of a Responses API ``response``; the output items."""
    outputs = []
    for item in response["output"]:
        if item["type"] != "function_call":
            continue  # messages, reasoning: nothing to execute
        arguments = item["arguments"]  # a JSON string, as in chat completions
        if strict:
            arguments = normalize_strict_arguments(item["name"], arguments)
        result = tools.execute(item["name"], arguments, agent=agent)
        outputs.append(
            {"type": "function_call_output", "call_id": item["call_id"], "output": result.content}
        )
    return outputs


def run(
    data_dir: Path, response: dict[str, Any], *, api: str, strict: bool, now: str | None
) -> int:
    """Install Schedule on an embedded host, answer the response's tool calls, print them."""
    host = EmbeddedHost(data_dir, clock=FakeClock(parse_instant(now)) if now else wall_clock_ms)
    plugin = install_schedule(host.context())
    try:
        agent = host.spawn_root(session_id="llm-example")
        if api == "responses":
            offered = [tool["name"] for tool in openai_responses_tools(strict=strict)]
            calls = [item for item in response["output"] if item["type"] == "function_call"]
            replies = function_call_outputs(response, host.tools, agent, strict=strict)
            label = "output"
        else:
            offered = [tool["function"]["name"] for tool in openai_tools(strict=strict)]
            calls = [call["function"] for call in response["choices"][0]["message"]["tool_calls"]]
            replies = tool_messages(response, host.tools, agent, strict=strict)
            label = "tool"
        print(f"request tools{' (strict)' if strict else ''}: {', '.join(offered)}")
        for call, reply in zip(calls, replies, strict=True):
            print(f"call: {call['name']} {call['arguments']}")
            print(f"{label}: {json.dumps(reply, ensure_ascii=False)}")
        return 0
    finally:
        plugin.dispose().result(timeout=10)
        host.close()


SAVED = {
    ("chat", False): "openai_chat_completion.json",
    ("chat", True): "openai_chat_completion_strict.json",
    ("responses", False): "openai_responses.json",
    ("responses", True): "openai_responses_strict.json",
}
"""The saved response each ``--api`` and ``--strict`` read by default."""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and run in a temporary directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--api", choices=["chat", "responses"], default="chat", help="the response's API"
    )
    parser.add_argument("--strict", action="store_true", help="the strict-mode response")
    parser.add_argument("--response", type=Path, help="a response of that API (JSON)")
    parser.add_argument("--now", help="a fixed clock, e.g. 2026-08-05T12:00:00.000Z")
    args = parser.parse_args(argv)
    path: Path = args.response or HERE / SAVED[args.api, args.strict]
    response = json.loads(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="llm-example-") as tmp:
        return run(Path(tmp), response, api=args.api, strict=args.strict, now=args.now)


if __name__ == "__main__":
    sys.exit(main())
