"""Calendar rules: CPU per occurrence search, per folded dispatch and per batch member.

Usage (from the repository root)::

    python -m bench.cron_rules [--ops 2000] [--dispatches 2000] [--members 100] [--quick]

Pure ``messages`` work, no store: every figure is ``time.process_time()`` per
operation, and each is set against its anchor measured in the same run, the
same operation on an ``every`` record (300 s):

* ``next``: ``CronSchedule.next_after`` chained from one occurrence to the
  next, for rules from every five minutes to monthly, in ``UTC``,
  ``America/New_York``, ``Asia/Shanghai`` and ``Pacific/Apia`` (a zone whose
  offsets once differed by 25.5 h, so its searches look furthest); anchor:
  ``every_occurrence_ms``;
* ``latest``: ``CronSchedule.latest_between`` (the occurrence a delivery reports);
* ``fold``: ``fold_schedule_events`` of a log of one record and ``--dispatches``
  dispatches, per dispatch;
* ``batch``: ``plan_delivery`` of ``--members`` due repeating records, per member.

Prints tables with the 1-minute load average beside each and writes
``bench/results/cron_rules.json``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench._common import (
    add_common_arguments,
    data_root,
    fmt,
    header,
    load_average,
    machine_info,
    print_machine,
    print_table,
    write_results,
)
from messages._cron_zone import cron_schedule
from messages._delivery import plan_delivery
from messages._fold import fold_schedule_events
from messages._instant import format_instant, parse_instant
from messages._occurrence import every_occurrence_ms
from messages._records import SCHEDULE_CHANGE_TYPE, CronRecord, EveryRecord

RULES = ("*/5 * * * *", "0 * * * *", "0 9 * * 1-5", "0 8 1 * *")
ZONES = ("UTC", "America/New_York", "Asia/Shanghai", "Pacific/Apia")
START = "2026-08-05T12:00:00.000Z"


@dataclass(frozen=True)
class Event:
    """A session event as the fold reads it."""

    seq: int
    type: str
    data: object


def _cpu_per_op(run: Callable[[], int]) -> float:
    """CPU µs per operation of ``run`` (which returns how many operations it did)."""
    started = time.process_time()
    ops = run()
    return (time.process_time() - started) / max(ops, 1) * 1e6


def _load() -> str:
    load = load_average()
    return "?" if load is None else f"{load[0]:.2f}"


def _every_next(ops: int) -> float:
    record = EveryRecord("e", "p", 300, START)

    def run() -> int:
        target = record.target_ms
        for _ in range(ops):
            _, following = every_occurrence_ms(record, target)
            assert following is not None
            target = following
        return ops

    return _cpu_per_op(run)


def _cron_next(rule: str, zone: str, ops: int) -> float:
    schedule = cron_schedule(rule, zone)

    def run() -> int:
        instant: int | None = parse_instant(START)
        done = 0
        while done < ops and instant is not None:
            instant = schedule.next_after(instant)
            done += 1
        return done

    return _cpu_per_op(run)


def _cron_latest(rule: str, zone: str, ops: int) -> float:
    schedule = cron_schedule(rule, zone)
    targets = schedule.following(parse_instant(START), min(ops, 200))

    def run() -> int:
        for index in range(ops):
            target = targets[index % len(targets)]
            schedule.latest_between(target, target + 90_000)
        return ops

    return _cpu_per_op(run)


def _log(create: dict[str, object], accepted: Sequence[int]) -> list[Event]:
    events = [
        Event(0, SCHEDULE_CHANGE_TYPE, {"version": 1, "operation": "create", "schedule": create})
    ]
    for index, accepted_ms in enumerate(accepted, start=1):
        change = {
            "version": 1,
            "operation": "dispatch",
            "id": "schedule-1",
            "acceptedAt": format_instant(accepted_ms),
        }
        events.append(Event(index, SCHEDULE_CHANGE_TYPE, change))
    return events


def _fold_per_dispatch(events: list[Event]) -> float:
    dispatches = len(events) - 1

    def run() -> int:
        fold_schedule_events(events)
        return dispatches

    return _cpu_per_op(run)


def _fold_rows(dispatches: int) -> list[dict[str, Any]]:
    every = EveryRecord("schedule-1", "p", 300, START)
    accepted = [every.target_ms + index * 300_000 for index in range(dispatches)]
    rows = [
        {
            "record": "every 300 s",
            "us": _fold_per_dispatch(_log(every.to_json(), accepted)),
            "load": _load(),
        }
    ]
    for rule, zone in (("*/5 * * * *", "America/New_York"), ("0 * * * *", "America/New_York")):
        schedule = cron_schedule(rule, zone)
        targets = schedule.following(parse_instant(START) - 1, dispatches)
        record = CronRecord("schedule-1", "p", rule, zone, format_instant(targets[0]))
        rows.append(
            {
                "record": f"cron {rule} {zone}",
                "us": _fold_per_dispatch(_log(record.to_json(), targets)),
                "load": _load(),
            }
        )
    return rows


def _batch_rows(members: int) -> list[dict[str, Any]]:
    now = parse_instant(START) + 3_600_000
    rows = []
    every_log = [
        Event(
            index,
            SCHEDULE_CHANGE_TYPE,
            {
                "version": 1,
                "operation": "create",
                "schedule": EveryRecord(f"schedule-{index + 1}", "p", 300, START).to_json(),
            },
        )
        for index in range(members)
    ]
    cron_log = []
    for index in range(members):
        rule, zone = RULES[index % len(RULES)], ZONES[index % 3]
        first = cron_schedule(rule, zone).next_after(parse_instant(START) - 86_400_000 * 40)
        assert first is not None
        record = CronRecord(f"schedule-{index + 1}", "p", rule, zone, format_instant(first))
        cron_log.append(
            Event(
                index,
                SCHEDULE_CHANGE_TYPE,
                {"version": 1, "operation": "create", "schedule": record.to_json()},
            )
        )
    for name, log in (("every 300 s", every_log), ("cron, four rules, three zones", cron_log)):
        folded = fold_schedule_events(log)

        def run(folded: Any = folded) -> int:
            for _ in range(5):
                plan_delivery(folded, now)
            return 5 * members

        rows.append({"records": name, "us": _cpu_per_op(run), "load": _load()})
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the measurements, print the tables and write the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--ops", type=int, default=2000, help="occurrence searches per row")
    parser.add_argument("--dispatches", type=int, default=2000, help="dispatches per folded log")
    parser.add_argument("--members", type=int, default=100, help="members of the planned batch")
    args = parser.parse_args(argv)
    ops, dispatches, members = args.ops, args.dispatches, args.members
    if args.quick:
        ops, dispatches, members = 20, 20, 8
    with data_root(args.data, "cron-rules-") as data_dir:
        info = machine_info(data_dir)
    print_machine(info)
    anchor = _every_next(ops * 10)
    searches: list[dict[str, Any]] = []
    for rule in RULES:
        for zone in ZONES:
            searches.append(
                {
                    "rule": rule,
                    "zone": zone,
                    "next_us": _cron_next(rule, zone, ops),
                    "latest_us": _cron_latest(rule, zone, ops),
                    "load": _load(),
                }
            )
    print(f"\nanchor: every_occurrence_ms {fmt(anchor, 2)} µs per call (load {_load()})\n")
    print_table(
        ["rule", "zone", "next µs", "÷ anchor", "latest µs", "load"],
        [
            [
                row["rule"],
                row["zone"],
                fmt(row["next_us"], 1),
                fmt(row["next_us"] / anchor, 0),
                fmt(row["latest_us"], 1),
                row["load"],
            ]
            for row in searches
        ],
    )
    folds = _fold_rows(dispatches)
    print()
    print_table(
        ["fold of one record's dispatches", "µs per dispatch", "÷ every", "load"],
        [
            [row["record"], fmt(row["us"], 1), fmt(row["us"] / folds[0]["us"], 1), row["load"]]
            for row in folds
        ],
    )
    batches = _batch_rows(members)
    print()
    print_table(
        [f"plan_delivery, {members} due records", "µs per member", "÷ every", "load"],
        [
            [row["records"], fmt(row["us"], 1), fmt(row["us"] / batches[0]["us"], 1), row["load"]]
            for row in batches
        ],
    )
    payload = {
        **header("cron_rules", argv),
        "machine": info,
        "anchor_every_occurrence_us": anchor,
        "searches": searches,
        "folds": folds,
        "batches": batches,
        "targets": {},
    }
    write_results(args.results, "cron_rules", payload)
    return payload


if __name__ == "__main__":
    main()
