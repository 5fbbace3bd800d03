"""``cron`` records: strict decoding, the fold's rules, checkpoints and views."""

from __future__ import annotations

import copy

import pytest

from messages import (
    CreateChange,
    CronRecord,
    ErrorCode,
    EveryRecord,
    ScheduleLogError,
    decode_schedule_change,
    decode_schedule_state,
    encode_schedule_state,
    fold_schedule_events,
    parse_instant,
    schedule_view,
)
from messages._delivery import (
    DeliverBatch,
    plan_delivery,
)
from messages._fold import check_schedule_candidate
from messages._instant import MAX_INSTANT_MS
from tests.messages.cron_cases import MONDAY, SHANGHAI, WEEKDAYS, create_cron, t
from tests.messages.helpers import (
    DROP,
    REFUSED_ZONE_NAMES,
    changed_schedule,
    create_at,
    create_every,
    delete,
    dispatch,
    dispatch_every,
    log,
    other,
)

# ---- decoding ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "zone", "at"),
    [
        (WEEKDAYS, SHANGHAI, MONDAY),
        ("@daily", "UTC", "2026-08-06T00:00:00.000Z"),
        ("0 9 * * MON-FRI", "US/Eastern", MONDAY),  # a link, spelled as the database does
        ("*/5 * * * *", "Etc/GMT+3", MONDAY),
        ("0 9 * * 1-5", SHANGHAI, "2026-08-03T01:17:00.000Z"),  # a target off the rule: tzdata
    ],
)
def test_decode_accepts_cron_records(expression: str, zone: str, at: str) -> None:
    payload = create_cron("s", "standup", expression, zone, at)
    change = decode_schedule_change(payload)
    assert change == CreateChange(CronRecord("s", "standup", expression, zone, at))
    assert change.to_json() == payload
    assert isinstance(change, CreateChange)
    assert list(change.schedule.to_json()) == [
        "id",
        "kind",
        "prompt",
        "expression",
        "timeZone",
        "scheduledAt",
    ]
    assert change.schedule.target_ms == parse_instant(at)


NOT_CANONICAL_ZONE = "timeZone must be UTC or a tz database zone name, as the database spells it"
NOT_CANONICAL_RULE = "expression must be in canonical form"
INVALID = "expression must be a valid cron rule: "

REJECTIONS: list[tuple[str, object, str]] = [
    (
        "missing expression",
        changed_schedule(create_cron("s"), expression=DROP),
        "missing key 'expression'",
    ),
    (
        "missing timeZone",
        changed_schedule(create_cron("s"), timeZone=DROP),
        "missing key 'timeZone'",
    ),
    (
        "missing scheduledAt",
        changed_schedule(create_cron("s"), scheduledAt=DROP),
        "missing key 'scheduledAt'",
    ),
    ("missing prompt", changed_schedule(create_cron("s"), prompt=DROP), "missing key 'prompt'"),
    ("missing id", changed_schedule(create_cron("s"), id=DROP), "missing key 'id'"),
    (
        "extra everySeconds",
        changed_schedule(create_cron("s"), everySeconds=300),
        "unknown key 'everySeconds'",
    ),
    (
        "extra afterSeconds",
        changed_schedule(create_cron("s"), afterSeconds=5),
        "unknown key 'afterSeconds'",
    ),
    (
        "snake time_zone",
        changed_schedule(create_cron("s"), time_zone="UTC"),
        "unknown key 'time_zone'",
    ),
    (
        "time_zone for timeZone",
        changed_schedule(create_cron("s"), timeZone=DROP, time_zone="UTC"),
        "unknown key 'time_zone'",
    ),
    (
        "extra acceptedAt",
        changed_schedule(create_cron("s"), acceptedAt=MONDAY),
        "unknown key 'acceptedAt'",
    ),
    (
        "every as cron",
        changed_schedule(create_every("s"), kind="cron"),
        "unknown key 'everySeconds'",
    ),
    ("cron as every", changed_schedule(create_cron("s"), kind="every"), "unknown key 'expression'"),
    ("cron as at", changed_schedule(create_cron("s"), kind="at"), "unknown key 'expression'"),
    ("kind CRON", changed_schedule(create_cron("s"), kind="CRON"), "kind must be one of"),
    ("expression int", create_cron("s", expression=5), "expression must be a string"),
    ("expression null", create_cron("s", expression=None), "expression must be a string"),
    ("expression list", create_cron("s", expression=["0", "9"]), "expression must be a string"),
    ("timeZone int", create_cron("s", zone=8), "timeZone must be a string"),
    ("timeZone null", create_cron("s", zone=None), "timeZone must be a string"),
    ("too frequent", create_cron("s", expression="*/4 * * * *"), INVALID + "matching times"),
    ("never matches", create_cron("s", expression="0 9 31 4,6 *"), INVALID + "the day of month"),
    ("four fields", create_cron("s", expression="0 9 * *"), INVALID + "the expression must have"),
    ("empty", create_cron("s", expression=""), INVALID),
    ("@reboot", create_cron("s", expression="@reboot"), INVALID + "the macros are"),
    ("a # field", create_cron("s", expression="0 9 * * 1#2"), INVALID),
    ("a seconds field", create_cron("s", expression="0 0 9 * * *"), INVALID),
    ("over 128 characters", create_cron("s", expression="0 9 * * " + "1," * 62 + "1"), INVALID),
    ("lower-case name", create_cron("s", expression="0 9 * * mon"), NOT_CANONICAL_RULE),
    ("lower-case month", create_cron("s", expression="0 9 * jan *"), NOT_CANONICAL_RULE),
    ("leading space", create_cron("s", expression=" 0 9 * * 1"), NOT_CANONICAL_RULE),
    ("trailing space", create_cron("s", expression="0 9 * * 1 "), NOT_CANONICAL_RULE),
    ("upper-case macro", create_cron("s", expression="@DAILY"), NOT_CANONICAL_RULE),
    ("mixed-case macro", create_cron("s", expression="@Daily"), NOT_CANONICAL_RULE),
    ("zone lower case", create_cron("s", zone="asia/shanghai"), NOT_CANONICAL_ZONE),
    *(
        (f"zone {name!r}", create_cron("s", zone=name), NOT_CANONICAL_ZONE)
        for name in REFUSED_ZONE_NAMES
    ),
    ("zone posix/", create_cron("s", zone="posix/Asia/Shanghai"), NOT_CANONICAL_ZONE),
    (
        "both bad: the expression first",
        create_cron("s", expression="0 9 * * mon", zone="utc"),
        NOT_CANONICAL_RULE,
    ),
    (
        "scheduledAt short",
        create_cron("s", at="2026-08-03T01:00:00Z"),
        "scheduledAt must be a canonical",
    ),
    (
        "scheduledAt offset",
        create_cron("s", at="2026-08-03T09:00:00.000+08:00"),
        "scheduledAt must be a canonical",
    ),
    ("scheduledAt ms", create_cron("s", at=parse_instant(MONDAY)), "scheduledAt must be a string"),
    (
        "scheduledAt Feb 30",
        create_cron("s", at="2026-02-30T01:00:00.000Z"),
        "scheduledAt.*calendar",
    ),
    (
        "scheduledAt year 0",
        create_cron("s", at="0000-01-01T00:00:00.000Z"),
        "scheduledAt must be a canonical",
    ),
    ("prompt padded", create_cron("s", prompt=" p"), "prompt must be"),
    ("id empty", create_cron(""), "id must be"),
]


@pytest.mark.parametrize(
    ("payload", "rule"), [(p, r) for _, p, r in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_decode_rejects_malformed_cron_records(payload: object, rule: str) -> None:
    with pytest.raises(ScheduleLogError, match=rule) as caught:
        decode_schedule_change(payload)
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG
    assert caught.value.message.startswith("schedule/change: ")


def test_the_record_constructor_checks_the_same_rules() -> None:
    with pytest.raises(ValueError, match="canonical form"):
        CronRecord("s", "p", "0 9 * * mon", SHANGHAI, MONDAY)
    with pytest.raises(ValueError, match="timeZone"):
        CronRecord("s", "p", WEEKDAYS, "asia/shanghai", MONDAY)
    with pytest.raises(ValueError, match="valid cron rule"):
        CronRecord("s", "p", "*/4 * * * *", SHANGHAI, MONDAY)
    with pytest.raises(ValueError):
        CronRecord("s", "p", WEEKDAYS, SHANGHAI, "2026-08-03T01:00:00Z")


# ---- the fold ------------------------------------------------------------------------------


def test_a_cron_dispatch_must_carry_accepted_at() -> None:
    events = log(create_cron("s"), dispatch("s"))
    with pytest.raises(ScheduleLogError, match="event seq 1: dispatch of cron record 's' lacks"):
        fold_schedule_events(events)


def test_a_cron_dispatch_must_not_precede_its_target() -> None:
    events = log(create_cron("s"), dispatch_every("s", "2026-08-03T00:59:59.999Z"))
    expected = (
        "event seq 1: cron dispatch of 's' accepted at 2026-08-03T00:59:59.999Z precedes its "
        "target 2026-08-03T01:00:00.000Z"
    )
    with pytest.raises(ScheduleLogError) as caught:
        fold_schedule_events(events)
    assert caught.value.message == expected
    folded = fold_schedule_events(log(create_cron("s")))
    with pytest.raises(ScheduleLogError, match="candidate: cron dispatch of 's' accepted at"):
        check_schedule_candidate(folded, dispatch_every("s", "2026-08-03T00:59:59.999Z"))


@pytest.mark.parametrize(
    ("accepted", "following"),
    [
        (MONDAY, "2026-08-04T01:00:00.000Z"),  # on the target: the next one
        ("2026-08-03T01:00:00.001Z", "2026-08-04T01:00:00.000Z"),
        ("2026-08-04T00:59:59.999Z", "2026-08-04T01:00:00.000Z"),
        ("2026-08-04T01:00:00.000Z", "2026-08-05T01:00:00.000Z"),  # strictly after acceptedAt
        ("2026-08-07T01:00:00.000Z", "2026-08-10T01:00:00.000Z"),  # Friday → Monday
        ("2026-08-08T12:00:00.000Z", "2026-08-10T01:00:00.000Z"),  # a Saturday
        ("2027-03-01T00:00:00.000Z", "2027-03-01T01:00:00.000Z"),  # long after: no backlog
    ],
)
def test_a_dispatch_advances_the_record_in_place(accepted: str, following: str) -> None:
    items = [
        create_at("a", at=t("12:00:00")),
        create_cron("c", "standup"),
        create_every("b", at=t("12:00:00")),
    ]
    folded = fold_schedule_events(log(*items, dispatch_every("c", accepted)))
    assert [record.id for record in folded.active] == ["a", "c", "b"]
    assert folded.get("c") == CronRecord("c", "standup", WEEKDAYS, SHANGHAI, following)
    assert folded.seen_ids == ("a", "c", "b")
    candidate = check_schedule_candidate(
        fold_schedule_events(log(*items)), dispatch_every("c", accepted)
    )
    assert candidate.get("c") == folded.get("c")


def test_advancing_keeps_the_earliest_right() -> None:
    folded = fold_schedule_events(
        log(
            create_cron("first", expression="0 9 * * *", zone="UTC", at=t("09:00:00")),
            create_cron("second", expression="30 9 * * *", zone="UTC", at=t("09:30:00")),
        )
    )
    assert folded.earliest() == folded.get("first")
    advanced = fold_schedule_events(
        log(
            create_cron("first", expression="0 9 * * *", zone="UTC", at=t("09:00:00")),
            create_cron("second", expression="30 9 * * *", zone="UTC", at=t("09:30:00")),
            dispatch_every("first", t("09:00:10")),
        )
    )
    assert advanced.earliest() == advanced.get("second")
    assert advanced.get("first") == CronRecord(
        "first", "p", "0 9 * * *", "UTC", t("09:00:00", "2026-08-06")
    )


@pytest.mark.parametrize(
    ("expression", "zone", "target", "accepted"),
    [
        ("0 0 31 12 *", "UTC", "9999-12-31T00:00:00.000Z", "9999-12-31T00:00:00.000Z"),
        ("0 0 31 12 *", "UTC", "9999-12-31T00:00:00.000Z", "9999-12-31T23:59:59.999Z"),
        (
            "0 18 31 12 *",
            "America/New_York",
            "9999-12-31T23:00:00.000Z",
            "9999-12-31T23:00:00.000Z",
        ),
        ("*/5 * * * *", "UTC", "9999-12-31T23:55:00.000Z", "9999-12-31T23:55:00.000Z"),
        ("@yearly", "Asia/Tokyo", "9999-12-31T15:00:00.000Z", "9999-12-31T15:00:00.000Z"),
    ],
)
def test_exhaustion_removes_the_record(
    expression: str, zone: str, target: str, accepted: str
) -> None:
    # (Asia/Tokyo's @yearly: 10000-01-01 local is past the range, so there is no next)
    created = create_cron("c", expression=expression, zone=zone, at=target)
    assert fold_schedule_events(log(created)).get("c") is not None
    done = fold_schedule_events(log(created, other(), dispatch_every("c", accepted)))
    assert done.get("c") is None
    assert done.active == ()
    assert done.seen_ids == ("c",)


def test_exhaustion_with_one_occurrence_left() -> None:
    created = create_cron("c", expression="0 0 1 1 *", zone="UTC", at="9998-01-01T00:00:00.000Z")
    folded = fold_schedule_events(log(created, dispatch_every("c", "9998-01-01T00:00:00.000Z")))
    assert folded.get("c") == CronRecord("c", "p", "0 0 1 1 *", "UTC", "9999-01-01T00:00:00.000Z")
    plan = plan_delivery(folded, MAX_INSTANT_MS)
    assert isinstance(plan, DeliverBatch)
    assert [(m.occurrence_at, m.next_scheduled_at) for m in plan.members] == [
        ("9999-01-01T00:00:00.000Z", None)
    ]


# ---- checkpoints and views -----------------------------------------------------------------


def test_checkpoint_round_trip_with_cron_records() -> None:
    events = log(
        create_cron("c", "standup"),
        create_every("e", at=t("12:00:00")),
        create_cron("d", "rent", "0 8 1 * *", "UTC", "2026-09-01T08:00:00.000Z"),
        dispatch_every("c", "2026-08-07T05:00:00.000Z"),
        delete("d"),
        create_cron("f", "tea", "@daily", "Europe/London", "2026-08-05T23:00:00.000Z"),
    )
    folded = fold_schedule_events(events)
    encoded = encode_schedule_state(folded)
    assert encoded["active"] == [
        {
            "id": "c",
            "kind": "cron",
            "prompt": "standup",
            "expression": WEEKDAYS,
            "timeZone": SHANGHAI,
            "scheduledAt": "2026-08-10T01:00:00.000Z",  # advanced past Friday's acceptance
            "acceptedAt": "2026-08-07T05:00:00.000Z",  # what moved it (fold state)
        },
        EveryRecord("e", "p", 300, t("12:00:00")).to_json(),
        {
            "id": "f",
            "kind": "cron",
            "prompt": "tea",
            "expression": "@daily",
            "timeZone": "Europe/London",
            "scheduledAt": "2026-08-05T23:00:00.000Z",
        },
    ]
    decoded = decode_schedule_state(copy.deepcopy(encoded))
    assert decoded == folded
    assert [r.target_ms for r in decoded.active] == [r.target_ms for r in folded.active]
    moved = decoded.get("c")
    assert isinstance(moved, CronRecord)
    assert moved.moved_by_ms == parse_instant("2026-08-07T05:00:00.000Z")
    assert decoded.earliest() == folded.earliest()
    assert encode_schedule_state(decoded) == encoded


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"expression": "0 9 * * mon"}, "canonical form"),
        ({"timeZone": "utc"}, "timeZone must be UTC"),
        ({"expression": "*/4 * * * *"}, "valid cron rule"),
        ({"scheduledAt": "2026-08-03T01:00:00Z"}, "scheduledAt"),
    ],
)
def test_a_checkpoint_with_a_malformed_cron_record_is_refused(
    changes: dict[str, object], reason: str
) -> None:
    encoded = encode_schedule_state(fold_schedule_events(log(create_cron("c"))))
    encoded["active"] = [{**encoded["active"][0], **changes}]  # type: ignore[index]
    with pytest.raises(ScheduleLogError, match=reason):
        decode_schedule_state(encoded)


def test_schedule_view_of_a_cron_record() -> None:
    record = CronRecord("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY)
    view = schedule_view(record, parse_instant(MONDAY) - 1)
    assert view == {
        "id": "schedule-1",
        "kind": "cron",
        "prompt": "standup",
        "expression": WEEKDAYS,
        "timeZone": SHANGHAI,
        "scheduledAt": MONDAY,
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert list(view) == [
        "id",
        "kind",
        "prompt",
        "expression",
        "timeZone",
        "scheduledAt",
        "state",
        "deliveryMode",
    ]
    assert schedule_view(record, parse_instant(MONDAY))["state"] == "overdue"
