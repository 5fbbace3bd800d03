"""Canonical UTC instants."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import format_instant, parse_instant
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS

DAY = 86_400_000


def test_range_constants() -> None:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    first = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
    last = datetime.datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=datetime.UTC)
    assert (first - epoch) // datetime.timedelta(milliseconds=1) == MIN_INSTANT_MS
    assert (last - epoch) // datetime.timedelta(milliseconds=1) == MAX_INSTANT_MS
    assert MIN_INSTANT_MS == -62_135_596_800_000
    assert MAX_INSTANT_MS == 253_402_300_799_999


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-DAY, "1969-12-31T00:00:00.000Z"),
        (MIN_INSTANT_MS, "0001-01-01T00:00:00.000Z"),
        (MIN_INSTANT_MS + 1, "0001-01-01T00:00:00.001Z"),
        (MAX_INSTANT_MS, "9999-12-31T23:59:59.999Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
        (-2_203_891_200_000, "1900-03-01T00:00:00.000Z"),
        (1_767_225_599_999, "2025-12-31T23:59:59.999Z"),
    ],
)
def test_format_and_parse_table(ms: int, text: str) -> None:
    assert format_instant(ms) == text
    assert parse_instant(text) == ms


@pytest.mark.parametrize("ms", [MIN_INSTANT_MS - 1, MAX_INSTANT_MS + 1, True, 1.5, 0.0, "0", None])
def test_format_rejects(ms: object) -> None:
    with pytest.raises(ValueError):
        format_instant(ms)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "string"),
        (0, "string"),
        (b"2026-01-01T00:00:00.000Z", "string"),
        ("", "form"),
        ("2026-02-30T00:00:00.000Z", "calendar date"),
        ("2025-02-29T00:00:00.000Z", "calendar date"),
        ("1900-02-29T00:00:00.000Z", "calendar date"),
        ("2026-04-31T00:00:00.000Z", "calendar date"),
        ("2026-00-10T00:00:00.000Z", "calendar date"),
        ("2026-13-10T00:00:00.000Z", "calendar date"),
        ("2026-01-00T00:00:00.000Z", "calendar date"),
        ("2026-01-32T00:00:00.000Z", "calendar date"),
        ("0000-01-01T00:00:00.000Z", "year"),
        ("10000-01-01T00:00:00.000Z", "form"),
        ("-0001-01-01T00:00:00.000Z", "form"),
        ("2026-01-01T00:00:00.00Z", "form"),
        ("2026-01-01T00:00:00.0000Z", "form"),
        ("2026-01-01T00:00:00Z", "form"),
        ("2026-01-01T00:00:00,000Z", "form"),
        ("2026-01-01T00:00:60.000Z", "time of day"),
        ("2026-01-01T24:00:00.000Z", "time of day"),
        ("2026-01-01T00:60:00.000Z", "time of day"),
        ("2026-01-01T00:00:00.000", "form"),
        ("2026-01-01t00:00:00.000Z", "form"),
        ("2026-01-01T00:00:00.000z", "form"),
        ("2026-01-01T00:00:00.000+00:00", "form"),
        ("2026-01-01 00:00:00.000Z", "form"),
        ("2026-1-01T00:00:00.000Z", "form"),
        (" 2026-01-01T00:00:00.000Z", "form"),
        ("2026-01-01T00:00:00.000Z ", "form"),
        ("2026-01-01T00:00:00.000Z\n", "form"),
        ("２０２６-01-01T00:00:00.000Z", "form"),
        ("२०२६-01-01T00:00:00.000Z", "form"),
    ],
)
def test_parse_rejects_non_canonical(text: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_instant(text)


@settings(max_examples=200)
@given(st.integers(MIN_INSTANT_MS, MAX_INSTANT_MS))
def test_format_parse_round_trip(ms: int) -> None:
    text = format_instant(ms)
    assert parse_instant(text) == ms
    expected = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    assert text == expected.isoformat(timespec="milliseconds") + "Z"
