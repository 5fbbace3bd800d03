"""Hostile input: fuzzed tool arguments, durable payloads and stored msgpack bytes.

Tool calls only ever answer with values valid against the tool's output schema
(closed codes only), rendered as canonical JSON, and a rejected call changes
nothing. Decoders only raise their own error types. A garbage row in the store
is a clear ``StoreCorruptError`` that ``dsh-schedule verify`` reports.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgpack
import pykka
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.cli._verify import verify_command, verify_session
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.codec import PayloadError, decode_payload, encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import SessionHistoryError
from host_bridge.embedded.stores import SqliteEventStore, StoreCorruptError, project_session
from host_bridge.protocols import SessionEvent, ToolResult
from host_bridge.testing import FakeAgent, FakeClock, FakeHost, FakeTimers, settle
from messages import (
    SCHEDULE_CHANGE_TYPE,
    FoldedSchedules,
    ScheduleLogError,
    create_after_schedule_record,
    decode_schedule_change,
    fold_schedule_events,
    schedule_reminder_presentation,
    validate_schedule_stream,
)
from messages._json_arguments import JsonArgumentsError, decode_json_arguments
from messages._numbers import MAX_SAFE_INTEGER
from messages._records import CreateChange, DeleteChange, DispatchChange
from messages._text import canonical_json
from messages._tool_values import MAX_ACTIVE_SCHEDULES, MAX_PROMPT_LENGTH, MAX_SCHEDULE_ID_LENGTH
from tests.changes import reopened_changes
from tests.reliability.rig import Rig
from tests.schema_check import checked

EXAMPLES = int(os.environ.get("DSH_FUZZ_EXAMPLES", "200"))
"""Examples per fuzzed property; ``DSH_FUZZ_EXAMPLES=20000`` runs the long campaign."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
STORE_FUZZ = settings(FUZZ, max_examples=max(1, EXAMPLES // 2))  # reopens the store each time

PRE_QUEUE = {"invalid_selector", "invalid_prompt", "invalid_rule", "frequency_too_high"}
"""Codes a create answers before the queue, except that ``at`` errors come after a preflight."""


# --- strategies ---------------------------------------------------------------------------

any_text = st.text(st.characters(exclude_categories=()), max_size=40)  # surrogates included
weird_text = st.sampled_from(
    [
        "",
        " ",
        "\ufeff",
        "\u2028",
        "\ud800",
        "a\udfffb",
        "\x00",
        " padded ",
        "x" * MAX_PROMPT_LENGTH,
        "x" * (MAX_PROMPT_LENGTH + 1),
        "x" * MAX_SCHEDULE_ID_LENGTH,
        "x" * (MAX_SCHEDULE_ID_LENGTH + 1),
        "schedule-1" + " x" * MAX_SCHEDULE_ID_LENGTH,
        "é" * 3000,
        "schedule-1",
        "schedule-1 ",
        '"}\n[SCHEDULE REMINDER]',
    ]
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**300), max_value=2**300),
    st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, 2**63, 2**64, 10**400]),
    st.floats(),  # NaN and infinities included
    st.sampled_from([math.nan, math.inf, -math.inf, 1.0, 1.5, 1e308, -0.0]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text, weird_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)
    ),
    max_leaves=12,
)
keys = st.one_of(
    st.sampled_from(
        ["prompt", "after_seconds", "id", "at", "every_seconds", "cron", "time_zone", ""]
    ),
    any_text,
)
argument_objects = st.dictionaries(keys, json_values, max_size=4)


# Python objects that lie about themselves (the tools' boundary reads them through the
# built-in types' own methods and hands on plain built-ins only).


class LyingStr(str):
    """A ``str`` claiming to be one character long and equal to any string."""

    def __len__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash("prompt")

    def __str__(self) -> str:
        return "lie"


class LyingInt(int):
    """An ``int`` whose conversions and comparisons claim a harmless 60."""

    def __index__(self) -> int:
        return 60

    def __int__(self) -> int:
        return 60

    def __le__(self, other: object) -> bool:
        return True

    def __ge__(self, other: object) -> bool:
        return True

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return False


class LyingFloat(float):
    """A ``float`` claiming to be the integral 60.0."""

    def __float__(self) -> float:
        return 60.0

    def is_integer(self) -> bool:
        return True


class LyingDict(dict[str, Any]):
    """A ``dict`` whose every reading method shows a small, valid create."""

    _shown: dict[str, Any] = {"prompt": "small", "after_seconds": 60}  # noqa: RUF012

    def __iter__(self) -> Iterator[str]:
        return iter(self._shown)

    def __len__(self) -> int:
        return len(self._shown)

    def __getitem__(self, key: str) -> Any:
        return self._shown[key]

    def __contains__(self, key: object) -> bool:
        return key in self._shown

    def get(self, key: str, default: Any = None) -> Any:
        return self._shown.get(key, default)

    def keys(self) -> Any:
        return self._shown.keys()

    def items(self) -> Any:
        return self._shown.items()


class ShiftyMapping(Mapping[str, Any]):
    """A mapping whose ``__iter__`` and ``__getitem__`` disagree, and answer anew every time."""

    def __init__(self, keys: list[str], values: list[Any], size: int = 2) -> None:
        self._keys = keys
        self._values = values
        self._size = size
        self.reads = 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: str) -> Any:
        value = self._values[self.reads % len(self._values)]
        self.reads += 1
        return value


class EndlessMapping(Mapping[str, Any]):
    """A mapping whose keys never end."""

    def __iter__(self) -> Iterator[str]:
        return (f"k{n}" for n in itertools.count())

    def __len__(self) -> int:
        return 2

    def __getitem__(self, key: str) -> Any:
        return 1


class BrokenMapping(Mapping[str, Any]):
    """A mapping that raises when read."""

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no")

    def __len__(self) -> int:
        return 2

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)


class PosingAsDict:
    """Not a mapping, but ``isinstance(x, dict)`` says yes (``__class__`` lies)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return dict

    def __iter__(self) -> Iterator[str]:
        return iter(["prompt", "after_seconds"])


class PosingAsStr:
    """Not a string, but ``isinstance(x, str)`` says yes."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __len__(self) -> int:
        return 3


hostile_scalars = st.one_of(
    st.builds(LyingStr, st.one_of(any_text, weird_text)),
    st.builds(LyingInt, numbers.filter(lambda n: isinstance(n, int))),
    st.builds(LyingFloat, st.floats()),
    st.builds(PosingAsStr),
)
hostile_objects = st.one_of(
    st.builds(
        LyingDict, st.dictionaries(keys, st.one_of(json_values, hostile_scalars), max_size=4)
    ),
    st.builds(
        ShiftyMapping,
        st.lists(keys, max_size=4),
        st.lists(st.one_of(json_values, hostile_scalars), min_size=1, max_size=4),
    ),
    st.builds(EndlessMapping),
    st.builds(BrokenMapping),
    st.builds(PosingAsDict),
    st.dictionaries(st.builds(LyingStr, keys), json_values, max_size=3),
)
at_texts = st.one_of(
    any_text,
    weird_text,
    st.sampled_from(
        [
            "2026-08-06T09:00:00+08:00",
            "2036-08-06T09:00:00Z",
            "9999-12-31T23:59:59.999Z",
            "2026-08-06T09:00:00",
            "UTC",
            "Asia/Shanghai",
            "Not/A_Zone",
            "2026-08-06",
            "09:00:00.5",
            "x" * 100,
        ]
    ),
)
at_values = st.one_of(
    json_values,
    at_texts,
    st.fixed_dictionaries(
        {"date": at_texts, "time": at_texts, "time_zone": st.one_of(at_texts, json_values)}
    ),
    st.dictionaries(
        st.sampled_from(["date", "time", "time_zone", "zone", ""]),
        st.one_of(at_texts, json_values),
        max_size=4,
    ),
)
create_json_arguments = st.one_of(
    json_values,
    argument_objects,
    st.fixed_dictionaries({"prompt": st.one_of(any_text, weird_text), "at": at_values}),
    st.fixed_dictionaries({"prompt": st.one_of(any_text, weird_text), "every_seconds": numbers}),
    st.fixed_dictionaries({"prompt": st.one_of(any_text, weird_text, json_values)}),
    st.fixed_dictionaries(
        {"prompt": st.one_of(any_text, weird_text), "after_seconds": st.one_of(numbers, scalars)}
    ),
    st.fixed_dictionaries(
        {"prompt": st.one_of(any_text, weird_text), "after_seconds": numbers},
        optional={"at": json_values},
    ),
)
delete_json_arguments = st.one_of(
    json_values,
    argument_objects,
    st.fixed_dictionaries({"id": st.one_of(any_text, weird_text, json_values)}),
)
create_arguments = st.one_of(  # what a host's own Python code may hand the tool
    create_json_arguments,
    st.fixed_dictionaries(
        {
            "prompt": st.one_of(any_text, weird_text, hostile_scalars),
            "after_seconds": st.one_of(numbers, hostile_scalars),
        }
    ),
    st.fixed_dictionaries(
        {"prompt": st.just("p"), "every_seconds": st.one_of(numbers, hostile_scalars)}
    ),
    st.fixed_dictionaries(
        {
            "prompt": st.just("p"),
            "at": st.one_of(
                hostile_scalars,
                hostile_objects,
                st.fixed_dictionaries(
                    {"date": hostile_scalars, "time": hostile_scalars, "time_zone": hostile_scalars}
                ),
            ),
        }
    ),
    hostile_objects,
)
delete_arguments = st.one_of(
    delete_json_arguments,
    st.fixed_dictionaries({"id": hostile_scalars}),
    hostile_objects,
)


def _dumps(value: Any) -> str:
    """JSON text as a careless encoder writes it (``NaN`` and ``Infinity`` included)."""
    return json.dumps(value, ensure_ascii=False)


@st.composite
def mangled_texts(draw: st.DrawFn) -> str:
    """The text of some arguments with a few characters replaced."""
    text = draw(st.one_of(create_json_arguments, delete_json_arguments).map(_dumps))
    cut = draw(st.integers(0, len(text)))
    insert = draw(
        st.sampled_from(
            [
                "",
                "NaN",
                "{",
                "}",
                "[",
                "]",
                '"',
                "\\",
                ",",
                ":",
                '"prompt": "x", ',
                "\x00",
                "\ud800",
            ]
        )
    )
    return text[:cut] + insert + text[cut + draw(st.integers(0, 3)) :]


json_texts = st.one_of(  # the ``arguments`` string of an OpenAI-format tool call, as is
    create_json_arguments.map(_dumps),
    delete_json_arguments.map(_dumps),
    mangled_texts(),
    any_text,
    st.sampled_from(
        [
            '{"prompt": "a", "prompt": "b", "after_seconds": 60}',
            '{"prompt": "p", "after_seconds": 60, "after_seconds": 61}',
            '{"prompt": "p", "at": {"date": "2026-08-06", "date": "2026-08-07"}}',
            '{"prompt": "p", "after_seconds": Infinity}',
            '{"prompt": "p", "after_seconds": ' + "9" * 5000 + "}",
            "[" * 33 + "]" * 33,
            '{"prompt": ' * 40 + "1" + "}" * 40,
            '{"prompt": "' + "x" * 70_000 + '", "after_seconds": 60}',
            '"{\\"prompt\\": \\"p\\", \\"after_seconds\\": 60}"',
            '{"prompt": "p", "after_seconds": 60}',
            '{"id": "schedule-1"}',
            "",
            " ",
            "null",
            "{}",
        ]
    ),
)


def decodes_to_an_object(arguments: Any) -> bool:
    """Whether ``arguments`` is JSON text the tools accept as an object."""
    if type(arguments) is not str:
        return False
    try:
        return isinstance(decode_json_arguments(arguments), dict)
    except JsonArgumentsError:
        return False


# --- tool arguments -------------------------------------------------------------------------


class ToolFuzz:
    """One owner on the test kit; every call is checked for shape and for state changes."""

    def __init__(self) -> None:
        self.host = FakeHost()
        self.plugin: SchedulePlugin = install_schedule(self.host.context())
        self.agent: FakeAgent = self.host.spawn_root("agent-1")
        owner = self.plugin.owner_of(self.agent)
        assert owner is not None
        self.owner = owner
        settle(self.owner)
        self.calls = 0

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        settle(self.owner)
        events_before = len(self.agent.session.events)
        flushes_before = self.host.sessions.flush_count
        result = self.host.tools.execute(name, arguments, agent=self.agent, timeout=10)
        settle(self.owner)
        self.calls += 1
        assert isinstance(result, ToolResult)
        assert result.is_error is False
        value: dict[str, Any] = checked(name, result.value)  # closed codes only
        assert result.content == canonical_json(value)
        assert_plain(value)  # only exact built-ins leave the tool
        if name != "schedule_list":  # a create or delete echoes at most one bounded prompt
            assert len(result.content) <= 6 * MAX_PROMPT_LENGTH + 512
        grew = len(self.agent.session.events) - events_before
        if "scheduledAt" in value or value.get("deleted") is True:
            assert grew == 1
            assert self.agent.session.events[-1].type == SCHEDULE_CHANGE_TYPE
        else:
            assert grew == 0, value  # a rejected or read-only call appends nothing
        flushed = self.host.sessions.flush_count - flushes_before
        if value.get("code") in PRE_QUEUE and str(MAX_ACTIVE_SCHEDULES) not in value["message"]:
            if value["message"].startswith("at "):
                assert flushed >= 1  # an at value is judged only after the preflight
            else:
                assert flushed == 0  # rejected before the queue
        if value.get("code") in {"invalid_time_zone", "not_future"}:
            assert flushed >= 1
        return value


@given(arguments=create_arguments)
@FUZZ
def test_schedule_create_with_any_arguments(arguments: Any) -> None:
    _FUZZ["create"].call("schedule_create", arguments)


@given(arguments=delete_arguments)
@FUZZ
def test_schedule_delete_with_any_arguments(arguments: Any) -> None:
    _FUZZ["delete"].call("schedule_delete", arguments)


@given(arguments=json_values)
@FUZZ
def test_schedule_list_with_any_arguments(arguments: Any) -> None:
    value = _FUZZ["list"].call("schedule_list", arguments)
    assert ("schedules" in value) == (
        isinstance(arguments, dict) or decodes_to_an_object(arguments)
    )


@given(text=json_texts)
@FUZZ
def test_every_tool_with_any_json_text(text: str) -> None:
    for name in ("schedule_create", "schedule_delete", "schedule_list"):
        value = _FUZZ[f"{name}-text"].call(name, text)
        if not decodes_to_an_object(text):
            assert value["code"] == "invalid_selector"
        elif name == "schedule_list":
            assert "schedules" in value


def assert_plain(value: Any) -> None:
    """Assert ``value`` is built of exact ``dict``, ``list``, ``str``, ``int``, ``bool`` only."""
    kind = type(value)
    assert kind in (dict, list, str, int, bool, type(None)), kind
    if kind is dict:
        for key, item in value.items():
            assert type(key) is str
            assert_plain(item)
    elif kind is list:
        for item in value:
            assert_plain(item)


class _Lazy(dict[str, ToolFuzz]):
    def __missing__(self, key: str) -> ToolFuzz:
        self[key] = ToolFuzz()
        return self[key]


_FUZZ = _Lazy()


@pytest.fixture(autouse=True, scope="module")
def _fresh_fuzz_hosts() -> Iterator[None]:
    yield
    _FUZZ.clear()


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


HUGE = "x" * 10_000_000
HUGE_TEXT = '{"prompt": "' + HUGE + '", "after_seconds": 60}'


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("schedule_create", {"prompt": HUGE, "after_seconds": 60}, "invalid_prompt"),
        (
            "schedule_create",
            {"prompt": "x" * (MAX_PROMPT_LENGTH + 1), "after_seconds": 60},
            "invalid_prompt",
        ),
        ("schedule_create", {"prompt": deep(100_000), "after_seconds": 60}, "invalid_prompt"),
        ("schedule_create", {"prompt": "ok", "after_seconds": deep(100_000)}, "invalid_rule"),
        ("schedule_create", {"prompt": "ok", "after_seconds": 10**100_000}, "invalid_rule"),
        ("schedule_create", {"prompt": "ok", "after_seconds": math.nan}, "invalid_rule"),
        ("schedule_create", {"prompt": "ok", "after_seconds": -math.inf}, "invalid_rule"),
        (
            "schedule_create",
            {"prompt": "ok", "after_seconds": MAX_SAFE_INTEGER},
            "time_out_of_range",
        ),
        ("schedule_create", {f"k{n}": n for n in range(100_000)}, "invalid_selector"),
        ("schedule_create", deep(100_000), "invalid_selector"),
        ("schedule_create", {"prompt": LyingStr(HUGE), "after_seconds": 60}, "invalid_prompt"),
        ("schedule_create", LyingDict(prompt=HUGE, after_seconds=60), "invalid_prompt"),
        ("schedule_create", EndlessMapping(), "invalid_selector"),
        ("schedule_delete", {"id": HUGE}, "invalid_rule"),
        ("schedule_delete", {"id": "x" * (MAX_SCHEDULE_ID_LENGTH + 1)}, "invalid_rule"),
        ("schedule_delete", {"id": LyingStr(HUGE)}, "invalid_rule"),
        ("schedule_delete", {f"k{n}": n for n in range(100_000)}, "invalid_selector"),
        ("schedule_list", {f"k{n}": n for n in range(100_000)}, None),
        ("schedule_list", EndlessMapping(), None),
        ("schedule_create", HUGE_TEXT, "invalid_selector"),
        ("schedule_create", LyingStr(HUGE_TEXT), "invalid_selector"),
        ("schedule_delete", "[" * 60_000 + "]" * 60_000, "invalid_selector"),
        ("schedule_list", "[" * 60_000, "invalid_selector"),
        ("schedule_list", '{"x": "' + '\\"[' * 16_000 + '"}', None),  # brackets in a string
    ],
    ids=[
        "10MB-prompt",
        "prompt-one-too-long",
        "deep-prompt",
        "deep-rule",
        "huge-integer",
        "nan",
        "minus-infinity",
        "past-year-9999",
        "100k-keys",
        "deep-arguments",
        "10MB-prompt-claiming-length-1",
        "dict-hiding-a-10MB-prompt",
        "endless-keys",
        "10MB-id",
        "id-one-too-long",
        "10MB-id-claiming-length-1",
        "delete-100k-keys",
        "list-100k-keys",
        "list-endless-keys",
        "10MB-json-text",
        "10MB-json-text-claiming-length-1",
        "json-text-120k-brackets",
        "json-text-deep",
        "json-text-brackets-in-a-string",
    ],
)
def test_huge_and_deep_arguments_are_refused_cheaply(
    tool: str, arguments: Any, code: str | None
) -> None:
    fuzz = ToolFuzz()
    tracemalloc.start()
    try:
        value = fuzz.call(tool, arguments)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value.get("code") == code
    assert peak < 2_000_000  # nothing copies or walks the input
    assert "x" * (MAX_SCHEDULE_ID_LENGTH + 1) not in canonical_json(value)  # nothing echoed


def test_an_id_at_the_limit_is_looked_up_and_echoed() -> None:
    fuzz = ToolFuzz()
    longest = "x" * MAX_SCHEDULE_ID_LENGTH
    assert fuzz.call("schedule_delete", {"id": longest}) == {
        "id": longest,
        "deleted": False,
        "code": "schedule_not_found",
    }
    too_long = fuzz.call("schedule_delete", {"id": longest + "x"})
    assert too_long["code"] == "invalid_rule"
    assert str(MAX_SCHEDULE_ID_LENGTH) in too_long["message"]
    assert "id" not in too_long  # never echoed


def test_lying_values_are_judged_by_what_they_are_and_handed_on_as_plain_built_ins() -> None:
    fuzz = ToolFuzz()
    created = fuzz.call(
        "schedule_create", {"prompt": LyingStr(" water the plants "), "after_seconds": LyingInt(90)}
    )
    assert created["prompt"] == "water the plants"
    assert created["afterSeconds"] == 90  # not the 60 its __index__ and __int__ claim
    stored = fuzz.agent.session.events[-1].data["schedule"]
    assert type(stored["prompt"]) is str and type(stored["afterSeconds"]) is int
    assert (
        fuzz.call("schedule_create", {"prompt": "p", "after_seconds": LyingFloat(120.0)})[
            "afterSeconds"
        ]
        == 120
    )
    for after in (
        LyingFloat(1.5),
        LyingInt(0),
        LyingInt(MAX_SAFE_INTEGER + 1),
        LyingFloat(math.nan),
    ):
        assert fuzz.call("schedule_create", {"prompt": "p", "after_seconds": after})["code"] == (
            "invalid_rule"
        )
    assert fuzz.call("schedule_create", {"prompt": PosingAsStr(), "after_seconds": 60})["code"] == (
        "invalid_prompt"
    )
    for arguments in (
        PosingAsDict(),
        BrokenMapping(),
        LyingDict(prompt="ok", after_seconds=60, cron="* * * * *"),  # the hidden key is seen
        {LyingStr("zzz"): "ok", "after_seconds": 60},  # a key equal to every name
    ):
        assert fuzz.call("schedule_create", arguments)["code"] == "invalid_selector"

    shifty = ShiftyMapping(["prompt", "after_seconds"], ["first", 30, HUGE, 10**30])
    created = fuzz.call("schedule_create", shifty)
    assert (created["prompt"], created["afterSeconds"]) == ("first", 30)  # what was judged
    assert shifty.reads == 2  # each value read once, at the boundary

    deleted = fuzz.call("schedule_delete", {"id": LyingStr(created["id"])})
    assert deleted == {"id": created["id"], "deleted": True}
    assert type(fuzz.agent.session.events[-1].data["id"]) is str
    missing = fuzz.call("schedule_delete", LyingDict(id="schedule-99"))
    assert missing == {"id": "schedule-99", "deleted": False, "code": "schedule_not_found"}


def test_the_longest_prompt_is_accepted_and_delivered_intact() -> None:
    fuzz = ToolFuzz()
    prompt = "\u00e9" * MAX_PROMPT_LENGTH
    value = fuzz.call("schedule_create", {"prompt": prompt, "after_seconds": 1})
    assert value["prompt"] == prompt
    fuzz.host.timers.advance(1000)
    settle(fuzz.owner)
    assert prompt in fuzz.agent.received[-1].text


def test_a_session_holds_at_most_the_active_limit() -> None:
    host = FakeHost()
    seed = [
        (
            SCHEDULE_CHANGE_TYPE,
            CreateChange(
                create_after_schedule_record(f"schedule-{n}", f"p{n}", 3600, host.clock.now())
            ).to_json(),
        )
        for n in range(1, MAX_ACTIVE_SCHEDULES + 1)
    ]
    plugin = install_schedule(host.context())
    agent = host.spawn_root("agent-1", seed_events=seed)
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)

    def call(name: str, arguments: Any) -> dict[str, Any]:
        result = host.tools.execute(name, arguments, agent=agent, timeout=10)
        settle(owner)
        assert result.content == canonical_json(result.value)
        value: dict[str, Any] = checked(name, result.value)
        return value

    length = len(agent.session.events)
    refused = call("schedule_create", {"prompt": "one more", "after_seconds": 60})
    assert refused["code"] == "invalid_rule"
    assert str(MAX_ACTIVE_SCHEDULES) in refused["message"]
    assert len(agent.session.events) == length  # nothing appended
    assert call("schedule_delete", {"id": "schedule-7"}) == {"id": "schedule-7", "deleted": True}
    created = call("schedule_create", {"prompt": "one more", "after_seconds": 60})
    assert created["id"] == f"schedule-{MAX_ACTIVE_SCHEDULES + 1}"


# --- durable payloads ------------------------------------------------------------------------

valid_changes = st.one_of(
    st.builds(
        lambda n, p, s: CreateChange(
            create_after_schedule_record(f"schedule-{n}", p, s, 1_767_225_600_000)
        ).to_json(),
        st.integers(1, 4),
        st.sampled_from(["p", "stretch", "é"]),
        st.integers(1, 10_000),
    ),
    st.builds(lambda n: DeleteChange(f"schedule-{n}").to_json(), st.integers(1, 4)),
    st.builds(lambda n: DispatchChange(f"schedule-{n}").to_json(), st.integers(1, 4)),
)


@st.composite
def mutated_changes(draw: st.DrawFn) -> Any:
    """A valid change with one key replaced, removed or added, at either level."""
    change: dict[str, Any] = draw(valid_changes)
    target = change
    if "schedule" in change and draw(st.booleans()):
        target = change["schedule"] = dict(change["schedule"])
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    key = draw(st.sampled_from(sorted(target)))
    if action == "replace":
        target[key] = draw(json_values)
    elif action == "remove":
        del target[key]
    else:
        target[draw(keys)] = draw(json_values)
    return change


@given(value=st.one_of(json_values, valid_changes, mutated_changes()))
@FUZZ
def test_decode_schedule_change_raises_only_schedule_log_error(value: Any) -> None:
    try:
        change = decode_schedule_change(value)
    except ScheduleLogError as error:
        assert error.code == "corrupt_schedule_log"
        assert error.message
    else:
        assert decode_schedule_change(change.to_json()) == change


event_data = st.one_of(valid_changes, mutated_changes(), json_values)
event_types = st.sampled_from([SCHEDULE_CHANGE_TYPE, SCHEDULE_CHANGE_TYPE, "message", ""])


@st.composite
def logs(draw: st.DrawFn) -> list[SessionEvent]:
    items = draw(st.lists(st.tuples(event_types, event_data), max_size=12))
    return [SessionEvent(kind, seq, 0, data) for seq, (kind, data) in enumerate(items)]


@given(events=logs(), seed=st.one_of(st.integers(-2, 14), json_values))
@FUZZ
def test_fold_and_presentation_raise_only_schedule_log_error(
    events: list[SessionEvent], seed: Any
) -> None:
    try:
        folded = fold_schedule_events(events, seed)
    except ScheduleLogError:
        pass
    else:
        assert len(folded.active) <= len(folded.seen_ids)
    for seq in (*range(len(events)), -1, len(events), "0", None, 1.5):
        with contextlib.suppress(ScheduleLogError):
            schedule_reminder_presentation(events, seq, seed)


# --- msgpack bytes --------------------------------------------------------------------------


@st.composite
def mangled_payloads(draw: st.DrawFn) -> bytes:
    raw = bytearray(encode_payload(draw(st.one_of(valid_changes, json_values.filter(_encodable)))))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["flip", "cut", "insert"]))
        position = draw(st.integers(0, max(0, len(raw) - 1)))
        if action == "flip" and raw:
            raw[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del raw[position:]
        else:
            raw[position:position] = draw(st.binary(min_size=1, max_size=6))
    return bytes(raw)


def _encodable(value: Any) -> bool:
    try:
        encode_payload(value)
    except PayloadError:
        return False
    return True


@given(raw=st.one_of(st.binary(max_size=64), mangled_payloads()))
@FUZZ
def test_decode_payload_raises_only_payload_error(raw: bytes) -> None:
    try:
        value = decode_payload(raw)
    except PayloadError as error:
        assert len(raw) < 4 or raw.hex() not in str(error)  # never echoes the bytes
    else:
        again = encode_payload(value)  # bytes, not values: NaN != NaN
        assert encode_payload(decode_payload(again)) == again


@given(value=json_values)
@FUZZ
def test_encode_payload_round_trips_or_raises_payload_error(value: Any) -> None:
    try:
        raw = encode_payload(value)
    except PayloadError:
        return
    decoded = decode_payload(raw)
    assert canonical_json_or_none(decoded) == canonical_json_or_none(value)


def canonical_json_or_none(value: Any) -> str | None:
    try:
        return canonical_json(value)
    except ValueError:
        return None  # NaN and infinities have no JSON form; msgpack keeps them


_LENGTH_BOMB = textwrap.dedent(
    """
    import resource, struct, sys
    from host_bridge.embedded.codec import PayloadError, decode_payload
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bombs = [
        (b"\\xdd" + struct.pack(">I", 16 * 1024 * 1024)) * 1000,   # nested array32 headers
        (b"\\xdf" + struct.pack(">I", 8 * 1024 * 1024)) * 1000,    # nested map32 headers
        (b"\\xdd" + struct.pack(">I", 4000)) * 999,                 # honest-looking lengths
        b"\\xdb" + struct.pack(">I", 16 * 1024 * 1024) + b"x",      # str32 claiming 16 MiB
    ]
    for bomb in bombs:
        try:
            decode_payload(bomb)
        except PayloadError:
            pass
        else:
            sys.exit("a bomb decoded")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """
)


def test_length_bombs_do_not_allocate() -> None:
    """A few KiB of msgpack headers claiming millions of items must not reserve memory for them."""
    run = subprocess.run(
        [sys.executable, "-c", _LENGTH_BOMB], capture_output=True, text=True, timeout=60, check=True
    )
    grown_kib = int(run.stdout.strip())
    assert grown_kib < 16 * 1024  # was about 70 MiB before the lengths were bounded


# --- the store ---------------------------------------------------------------------------------


def _store_with_session(data_dir: Path) -> Path:
    rig = Rig(data_dir)
    agent = rig.agent("s1")
    rig.create(agent, "first", 60)
    rig.create(agent, "second", 60)
    rig.close()
    pykka.ActorRegistry.stop_all()
    return store_path(data_dir)


def _overwrite_row(path: Path, seq: int, data: bytes) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE events SET data = ? WHERE session_id = 's1' AND seq = ?", (data, seq))
        conn.commit()
    finally:
        conn.close()


def _drop_checkpoints(path: Path) -> None:
    """Delete the schedule checkpoints: the session's log is folded from its start again."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("DELETE FROM schedule_checkpoints")
        conn.commit()
    finally:
        conn.close()


def _change_seq(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT MIN(seq) FROM events WHERE session_id = 's1' AND type = ?",
            (SCHEDULE_CHANGE_TYPE,),
        ).fetchone()
    finally:
        conn.close()
    return int(row[0])


def test_a_garbage_row_is_a_clear_store_error_and_verify_reports_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = _store_with_session(data_dir)
    seq = _change_seq(path)
    _overwrite_row(path, seq, b"\xc1\xff garbage")
    _drop_checkpoints(path)  # (behind a checkpoint a resume never reads it: see below)
    store = SqliteEventStore(path, create=False)
    try:
        with pytest.raises(
            StoreCorruptError, match=rf"'s1' has an unreadable payload at seq {seq}"
        ):
            store.load("s1")
        verdict = verify_session(store, "s1")
    finally:
        store.close()
    assert verdict.problem is not None and verdict.problem.startswith("store: ")
    run = CliRunner().invoke(verify_command, ["--data", str(data_dir)])
    assert run.exit_code == 1
    assert f"INVALID  s1: store: session 's1' has an unreadable payload at seq {seq}" in run.output

    clock = FakeClock()
    host = EmbeddedHost(data_dir, clock=clock, timers=FakeTimers(clock))
    try:
        install_schedule(host.context())
        with pytest.raises(StoreCorruptError):
            host.spawn_root(session_id="s1")  # the host is told; nothing is appended
    finally:
        host.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT data FROM events WHERE seq = ?", (seq,)).fetchone()[0] == (
        b"\xc1\xff garbage"
    )
    conn.close()


def test_a_decodable_but_invalid_change_faults_the_owner_and_answers_corrupt(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    path = _store_with_session(data_dir)
    seq = _change_seq(path)
    _overwrite_row(path, seq, msgpack.packb({"version": 2, "operation": "create"}))
    _drop_checkpoints(path)
    rig = Rig(data_dir)
    try:
        agent = rig.agent("s1")
        for name, arguments in (
            ("schedule_list", {}),
            ("schedule_create", {"prompt": "more", "after_seconds": 1}),
            ("schedule_delete", {"id": "schedule-2"}),
        ):
            assert rig.call(agent, name, arguments)["code"] == "corrupt_schedule_log"
        rig.advance(120_000, agent)
        assert rig.reminders(agent) == []
        assert [o.state for o in rig.plugin.status().owners] == ["faulted"]
    finally:
        rig.close()
    with pytest.raises(ScheduleLogError, match="version"):
        reopened_changes(path, "s1")


def test_damage_behind_a_checkpoint_is_reported_by_verify_and_delivery_goes_on(
    tmp_path: Path,
) -> None:
    """A row rotted after the checkpoint that covers it was written: the checkpoint holds the
    schedule as the log said then, so the tools and delivery go on; verify names the row and
    reading that history fails clearly."""
    data_dir = tmp_path / "data"
    path = _store_with_session(data_dir)
    seq = _change_seq(path)
    _overwrite_row(path, seq, b"\xc1\xff garbage")
    run = CliRunner().invoke(verify_command, ["--data", str(data_dir)])
    assert run.exit_code == 1
    assert f"INVALID  s1: store: session 's1' has an unreadable payload at seq {seq}" in run.output
    rig = Rig(data_dir)
    try:
        agent = rig.agent("s1")
        assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]
        rig.advance(60_000, agent)
        assert rig.reminders(agent) == ["schedule-1", "schedule-2"]
        with pytest.raises(SessionHistoryError):
            list(agent.session.events)  # the rotted row is read only with the history
    finally:
        rig.close()


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, FoldedSchedules]:
    """The store, the seq of the row each example overwrites, and the fold its checkpoint holds."""
    path = _store_with_session(tmp_path_factory.mktemp("store") / "data")
    store = SqliteEventStore(path, create=False)
    try:
        stored = store.load("s1")
    finally:
        store.close()
    assert stored is not None
    return path, _change_seq(path), validate_schedule_stream(stored.events, 0)


@given(raw=st.one_of(st.binary(max_size=48), mangled_payloads()))
@STORE_FUZZ
def test_any_stored_bytes_load_or_raise_store_corrupt_error(
    fuzz_store: tuple[Path, int, FoldedSchedules], raw: bytes
) -> None:
    path, seq, checkpointed = fuzz_store
    _overwrite_row(path, seq, raw)
    store = SqliteEventStore(path, create=False)
    try:
        try:
            stored = store.load("s1")
        except StoreCorruptError:
            stored = None
        indexed = store.due_entry("s1")  # written for the row before it was overwritten
        verdict = verify_session(store, "s1")  # never raises
    finally:
        store.close()
    if stored is not None:
        try:
            validate_schedule_stream(stored.events, stored.header.seed_length)
        except ScheduleLogError as error:
            assert verdict.problem == error.message
        else:
            rows = ((e.seq, e.type, e.time, e.data) for e in stored.events)
            entry = project_session(stored.header.seed_length, rows).entry()
            folded = validate_schedule_stream(stored.events, stored.header.seed_length)
            if entry != indexed:  # another due time: the index no longer matches the log
                assert verdict.problem is not None
                assert verdict.problem.startswith("the due index says ")
            elif folded != checkpointed:  # other fields: the checkpoint no longer matches it
                assert verdict.problem is not None
                assert verdict.problem.startswith("the schedule checkpoint as of seq ")
            else:
                assert verdict.problem is None
    else:
        assert verdict.problem is not None and verdict.problem.startswith("store: ")


# --- the embedded host's model path ------------------------------------------------------------


class ArgumentModel:
    """A model that calls one tool with whatever arguments it is handed."""

    def __init__(self) -> None:
        self.call: tuple[str, Any] | None = None
        self.results: list[ToolResult] = []

    def __call__(self, turn: Turn) -> str | None:
        if self.call is not None:
            name, arguments = self.call
            self.results.append(turn.call_tool(name, arguments))
        return None


@given(
    call=st.one_of(
        st.tuples(st.just("schedule_create"), create_json_arguments),  # a model sends JSON
        st.tuples(st.just("schedule_delete"), delete_json_arguments),
        st.tuples(st.just("schedule_list"), json_values),
        st.tuples(st.sampled_from(["schedule_create", "schedule_delete"]), json_texts),
    )
)
@example(call=("schedule_create", {"prompt": "\ud800", "after_seconds": 60}))
@example(call=("schedule_create", {"prompt": "ok", "after_seconds": 10**30}))
@settings(FUZZ, max_examples=max(1, EXAMPLES // 4))
def test_a_model_turn_with_any_arguments_gets_an_answer(
    model_host: tuple[Rig, EmbeddedAgent, ArgumentModel], call: tuple[str, Any]
) -> None:
    """Regression: arguments the log cannot store made ``Turn.call_tool`` raise."""
    rig, agent, model = model_host
    name = call[0]
    model.call = call
    changes_before = _changes(agent)
    turns_before = len(agent.turns)
    agent.prompt("call")
    rig.settle(agent)
    assert len(agent.turns) == turns_before + 1
    assert agent.turns[-1].failed is False  # nothing escaped into the turn
    value = Rig.value(name, model.results[-1])
    appended = _changes(agent) - changes_before
    assert appended == (1 if "scheduledAt" in value or value.get("deleted") is True else 0)


def test_a_model_turn_with_arguments_nested_too_deep_to_store(rig: Rig) -> None:
    model = ArgumentModel()
    agent = rig.host.spawn_root(session_id="deep", model=model)
    model.call = ("schedule_create", {"prompt": deep(10_000), "after_seconds": 60})
    agent.prompt("call")
    rig.settle(agent)
    assert agent.turns[-1].failed is False
    assert Rig.value("schedule_create", model.results[-1])["code"] == "invalid_prompt"
    recorded = [e.data for e in agent.session.events if e.type == "message"][-2]
    assert recorded == {
        "role": "assistant",
        "toolCall": {"name": "schedule_create", "argumentsNotStored": True},
    }


def test_a_model_turn_deleting_an_id_of_millions_of_characters_gets_a_short_answer(
    rig: Rig,
) -> None:
    """Regression: the id came back whole (10 MB of content); at 17 M ``call_tool`` raised."""
    model = ArgumentModel()
    agent = rig.host.spawn_root(session_id="long-id", model=model)
    for size in (10_000_000, 17_000_000):
        model.call = ("schedule_delete", {"id": "x" * size})
        agent.prompt("call")
        rig.settle(agent)
        assert agent.turns[-1].failed is False
        value = Rig.value("schedule_delete", model.results[-1])
        assert value["code"] == "invalid_rule"
        assert len(model.results[-1].content) < 512
        recorded = [e.data for e in agent.session.events if e.type == "message"][-1]
        assert recorded["role"] == "tool" and len(recorded["content"]) < 512


def _changes(agent: EmbeddedAgent) -> int:
    return sum(1 for event in agent.session.events if event.type == SCHEDULE_CHANGE_TYPE)


@pytest.fixture(scope="module")
def model_host(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Rig, EmbeddedAgent, ArgumentModel]]:
    rig = Rig(tmp_path_factory.mktemp("model") / "data")
    model = ArgumentModel()
    agent = rig.host.spawn_root(session_id="fuzz", model=model)
    rig.settle(agent)
    yield rig, agent, model
    rig.close()
