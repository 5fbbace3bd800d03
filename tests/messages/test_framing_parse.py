"""Reading reminders back from a framing: ``parse_reminder_framing`` inverts the renderers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    AfterRecord,
    AtRecord,
    EveryRecord,
    PresentedReminder,
    parse_reminder_framing,
    render_reminder_batch_framing,
    render_reminder_framing,
)
from messages._presentation import REMINDER_BATCH_HEADER, REMINDER_HEADER
from tests.messages.helpers import AT, instants

T1 = "2026-08-05T12:15:00.000Z"
T2 = "2026-08-05T12:10:00.000Z"

# any text, lone surrogates included: the renderers escape them, the parser reads them back
texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


def one_shot() -> str:
    return render_reminder_framing(AfterRecord("schedule-1", 'say "hi"\nthen go', 5, AT))


def batch() -> str:
    return render_reminder_batch_framing(
        [
            (EveryRecord("schedule-one", 'line\n"quoted"', 600, T2), T1),
            (EveryRecord("schedule-two", "check metrics", 900, T2), T2),
        ]
    )


def test_headers_are_the_framings_first_lines() -> None:
    assert one_shot().split("\n")[0] == REMINDER_HEADER
    assert batch().split("\n")[0] == REMINDER_BATCH_HEADER


def test_one_shot_framing_gives_its_reminder() -> None:
    assert parse_reminder_framing(one_shot()) == (
        PresentedReminder("schedule-1", AT, 'say "hi"\nthen go'),
    )


def test_at_framing_gives_its_reminder() -> None:
    text = render_reminder_framing(AtRecord("schedule-9", "stand-up", T1))
    assert parse_reminder_framing(text) == (PresentedReminder("schedule-9", T1, "stand-up"),)


def test_batch_framing_gives_every_member_in_order() -> None:
    assert parse_reminder_framing(batch()) == (
        PresentedReminder("schedule-one", T1, 'line\n"quoted"'),
        PresentedReminder("schedule-two", T2, "check metrics"),
    )


@settings(max_examples=200)
@given(texts, texts, instants)
def test_one_shot_round_trip(schedule_id: str, prompt: str, at: str) -> None:
    text = render_reminder_framing(AfterRecord(schedule_id, prompt, 5, at))
    assert parse_reminder_framing(text) == (PresentedReminder(schedule_id, at, prompt),)


@settings(max_examples=100)
@given(st.lists(st.tuples(texts, texts, instants), min_size=1, max_size=4))
def test_batch_round_trip(members: list[tuple[str, str, str]]) -> None:
    items = [(EveryRecord(i, p, 300, at), at) for i, p, at in members]
    assert parse_reminder_framing(render_reminder_batch_framing(items)) == tuple(
        PresentedReminder(i, at, p) for i, p, at in members
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "remind me about [SCHEDULE REMINDER] later",
        REMINDER_HEADER,
        REMINDER_BATCH_HEADER,
        one_shot() + "\n",  # an extra line
        one_shot().replace("\n", "\r\n"),
        "\n".join(one_shot().split("\n")[:4]),  # the prompt line is missing
        one_shot().replace("Present this due reminder", "Ignore this reminder"),
        one_shot().replace('"schedule-1"', "1"),  # the id is not a JSON string
        one_shot().replace('"schedule-1"', '"sched\\u0075le-1"'),  # escaped otherwise
        one_shot().replace("schedule_id_json: ", "schedule_id_json:"),
        one_shot().replace('reminder_prompt_json: "', "reminder_prompt_json: '"),  # not JSON
        one_shot().replace(REMINDER_HEADER, REMINDER_BATCH_HEADER),
        batch().replace("reminders_json: [", "reminders_json: [1,"),  # a non-object member
        batch().replace('"schedule_id":"schedule-two"', '"schedule_id":2'),
        batch().replace(',"reminder_prompt":"check metrics"', ""),  # a member lacks its prompt
        batch().replace('"check metrics"}', '"check metrics","x":1}'),  # an extra key
        batch().replace("reminders_json: ", "reminders_json:  "),
        batch().split("\n")[0] + "\n" + batch().split("\n")[1] + "\nreminders_json: []",
        batch().split("\n")[0] + "\n" + batch().split("\n")[1] + '\nreminders_json: {"a":1}',
        batch().replace("reminders_json: [", "reminders_json: "),  # not JSON
        batch() + "\n" + batch(),
        batch().replace("reminders_json: [", "reminders_json: " + "[" * 100_000),  # too deep
        one_shot().replace('"schedule-1"', "[" * 100_000),
    ],
)
def test_anything_but_an_exact_framing_gives_nothing(text: str) -> None:
    assert parse_reminder_framing(text) == ()
