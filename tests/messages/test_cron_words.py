"""A calendar rule in plain words (what ``dsh-schedule inspect`` shows beside a cron record)."""

from __future__ import annotations

import pytest

from messages._cron import parse_cron_expression


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("0 9 * * 1-5", "at 09:00, on Monday to Friday"),
        ("0 8 1 * *", "at 08:00, on day 1 of the month"),
        ("30 8 * * MON", "at 08:30, on Monday"),
        ("0 0 * * 6,0", "at 00:00, on Saturday and Sunday"),
        ("0 9 * * 0-7", "at 09:00, on every day of the week"),
        ("0 9 * * */2", "at 09:00, on Tuesday, Thursday, Saturday and Sunday"),
        ("0 9 */2 * *", "at 09:00, on every 2nd day from 1 to 31 of the month"),
        ("0 9 1,15 1-3 *", "at 09:00, on days 1 and 15 of the month in January to March"),
        ("0 9 13 * 5", "at 09:00, on day 13 of the month or on Friday"),
        ("0 9 * 1-12/3 *", "at 09:00, every day in every 3rd month from January to October"),
        ("0 9,17 * * *", "at 09:00 and 17:00, every day"),
        ("*/5 * * * *", "every 5 minutes, every day"),
        ("3-59/5 * * * *", "every 5 minutes from minute 3, every day"),
        ("0,20,40 * * * *", "every 20 minutes, every day"),
        ("5,10,20,40 * * * *", "at minutes 5, 10, 20 and 40 of every hour, every day"),
        ("0,30 9-17 * * *", "at minutes 0 and 30 past hours 9 to 17, every day"),
        ("15 */2 * * *", "at minute 15 past every 2nd hour from 0 to 22, every day"),
        ("@weekly", "at 00:00, on Sunday"),
        ("@yearly", "at 00:00, on day 1 of the month in January"),
    ],
)
def test_describe(expression: str, words: str) -> None:
    assert parse_cron_expression(expression).describe() == words
