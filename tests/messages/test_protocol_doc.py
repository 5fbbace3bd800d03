"""docs/protocol.md is executable: every marked example is checked against ``messages``.

A fenced block's info string is ``LANG ROLE [key=value ...]``; tables preceded by
``<!-- test: NAME [key=value ...] -->`` are checked row by row. Blocks are walked
in document order: ``schedule-log`` and ``schedule-change`` blocks set the log and
the record that the blocks after them refer to (see the doc's last section).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from messages import (
    ERROR_CODES,
    REMINDER_SOURCE,
    AfterRecord,
    AtRecord,
    CreateChange,
    CronRecord,
    DispatchChange,
    ErrorCode,
    EveryRecord,
    PresentedReminder,
    ScheduleInputError,
    ScheduleLogError,
    ScheduleRecord,
    allocate_schedule_id,
    canonicalize_time_zone,
    create_at_schedule_record,
    create_cron_schedule_record,
    decode_schedule_change,
    fold_schedule_events,
    format_instant,
    parse_instant,
    parse_reminder_framing,
    render_reminder_batch_framing,
    render_reminder_framing,
    resolve_every_occurrence,
    schedule_reminder_presentation,
    schedule_view,
)
from messages._creation import SELECTOR_KEYS
from messages._cron import CronRuleError, parse_cron_expression
from messages._cron_zone import cron_schedule
from messages._delivery import DeliverBatch, DeliverNow, plan_delivery
from messages._occurrence import resolve_repeating_occurrence
from messages._records import cron_problem
from messages._text import ECMASCRIPT_WHITESPACE, canonical_json
from messages._tool_values import (
    CreateInput,
    CronSelector,
    ToolError,
    active_limit_error,
    corrupt_log_error,
    cross_agent_error,
    input_error,
    internal_error,
    list_value,
    parse_create_input,
    parse_delete_input,
    parse_list_input,
    persistence_uncertain,
    time_out_of_range_error,
)
from tests.messages.helpers import Event

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "protocol.md"
TEXT = DOC.read_text(encoding="utf-8")

# ---- reading the document ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block: ``lang role key=value …``, its body, and the line it starts on."""

    lang: str
    role: str
    options: Mapping[str, str]
    body: str
    line: int


@dataclass(frozen=True, slots=True)
class Context:
    """What a block refers to: the latest log (and its seed) and the latest created record."""

    log: Sequence[Event] | None = None
    seed_length: int = 0
    record: ScheduleRecord | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table after a ``<!-- test: name … -->`` comment: its data rows as cell lists."""

    name: str
    options: Mapping[str, str]
    rows: list[list[str]] = field(default_factory=list)


_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"^<!-- test: ([a-z-]+)((?: [a-z_]+=\S+)*) -->$", re.M)


def _options(words: Sequence[str]) -> dict[str, str]:
    pairs = [word.split("=", 1) for word in words]
    assert all(len(pair) == 2 for pair in pairs), f"malformed options {words}"
    return {key: value for key, value in pairs}


def _blocks(text: str) -> list[Block]:
    blocks = []
    for match in _FENCE.finditer(text):
        words = match.group(1).split()
        lang = words[0] if words else ""
        role = words[1] if len(words) > 1 else ""
        line = text.count("\n", 0, match.start()) + 1
        body = match.group(2).removesuffix("\n")
        blocks.append(Block(lang, role, _options(words[2:]), body, line))
    return blocks


def _tables(text: str) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    for match in _MARKER.finditer(text):
        name = match.group(1)
        table = Table(name, _options(match.group(2).split()))
        lines = text[match.end() :].lstrip("\n").split("\n")
        if lines[0].startswith("|"):
            for row in lines[2:]:  # past the header and the separator
                if not row.startswith("|"):
                    break
                table.rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
        else:
            table.rows.append([lines[0]])
        assert name not in tables, f"two '{name}' tables"
        tables[name] = table
    return tables


def _code(cell: str) -> str:
    """The inside of a cell that is one code span."""
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match is not None, f"expected a code span, got {cell!r}"
    return match.group(1)


def _json(cell: str) -> object:
    return json.loads(_code(cell))


BLOCKS = _blocks(TEXT)
TABLES = _tables(TEXT)


def _walk(blocks: Sequence[Block]) -> list[tuple[Block, Context]]:
    """Each block with the log and the record in force where it stands."""
    context = Context()
    walked = []
    for block in blocks:
        if block.role == "schedule-log":
            items = json.loads(block.body)
            events = [Event(item["type"], item["seq"], item["data"]) for item in items]
            seed = int(block.options.get("seed_length", "0"))
            context = Context(events, seed, context.record)
        walked.append((block, context))
        if block.role == "schedule-change":
            change = decode_schedule_change(json.loads(block.body))
            if isinstance(change, CreateChange):
                context = Context(context.log, context.seed_length, change.schedule)
    return walked


def _same(actual: object, expected: object) -> None:
    """Equal JSON values with equal key order (compared as compact JSON text)."""
    assert canonical_json(actual) == canonical_json(expected)


def _now(block: Block) -> int:
    return parse_instant(block.options["now"])


def _log(context: Context) -> Sequence[Event]:
    assert context.log is not None, "no schedule-log block before this one"
    return context.log


def _record(context: Context) -> ScheduleRecord:
    assert context.record is not None, "no schedule-change create block before this one"
    return context.record


# ---- checks of fenced blocks ---------------------------------------------------------------


def check_change(block: Block, context: Context) -> None:
    payload = json.loads(block.body)
    change = decode_schedule_change(payload)
    _same(change.to_json(), payload)


def check_corrupt_changes(block: Block, context: Context) -> None:
    lines = block.body.split("\n")
    assert len(lines) % 2 == 0 and lines, "payload and rule lines come in pairs"
    for payload_line, rule_line in zip(lines[::2], lines[1::2], strict=True):
        assert rule_line.startswith("  → "), rule_line
        with pytest.raises(ScheduleLogError) as caught:
            decode_schedule_change(json.loads(payload_line))
        assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG
        assert caught.value.message == "schedule/change: " + rule_line.removeprefix("  → ")


def check_valid_changes(block: Block, context: Context) -> None:
    for line in block.body.split("\n"):
        change = decode_schedule_change(json.loads(line))
        written = change.to_json()
        assert decode_schedule_change(json.loads(canonical_json(written))) == change
        assert ".0," not in canonical_json(written)  # integral floats are written as integers


def check_log(block: Block, context: Context) -> None:
    assert [event.seq for event in _log(context)] == list(range(len(_log(context))))


def check_active(block: Block, context: Context) -> None:
    folded = fold_schedule_events(_log(context), context.seed_length)
    _same([record.to_json() for record in folded.active], json.loads(block.body))
    if "next_id" in block.options:
        assert allocate_schedule_id(folded) == block.options["next_id"]


def check_log_error(block: Block, context: Context) -> None:
    with pytest.raises(ScheduleLogError) as caught:
        fold_schedule_events(_log(context), context.seed_length)
    assert caught.value.message == block.body


def _plan(block: Block, context: Context) -> DeliverNow | DeliverBatch:
    folded = fold_schedule_events(_log(context), context.seed_length)
    plan = plan_delivery(folded, _now(block))
    assert isinstance(plan, DeliverNow | DeliverBatch), plan
    return plan


def check_dispatches(block: Block, context: Context) -> None:
    plan = _plan(block, context)
    if isinstance(plan, DeliverNow):
        dispatches = [DispatchChange(plan.record.id).to_json()]
    else:
        dispatches = [DispatchChange(m.record.id, plan.accepted_at).to_json() for m in plan.members]
    _same(dispatches, json.loads(block.body))
    log = list(_log(context))
    for payload in dispatches:  # the dispatches fold cleanly after the log
        log.append(Event("schedule/change", len(log), payload))
    fold_schedule_events(log, context.seed_length)


def check_batch(block: Block, context: Context) -> None:
    plan = _plan(block, context)
    assert isinstance(plan, DeliverBatch)
    text = render_reminder_batch_framing(plan.framing_items())
    assert text.encode("utf-8") == block.body.encode("utf-8")
    assert parse_reminder_framing(block.body) == tuple(
        PresentedReminder(record.id, occurrence, record.prompt)
        for record, occurrence in plan.framing_items()
    )


def check_framing(block: Block, context: Context) -> None:
    record = _record(context)
    assert isinstance(record, AfterRecord | AtRecord)
    text = render_reminder_framing(record)
    assert text.encode("utf-8") == block.body.encode("utf-8")
    assert parse_reminder_framing(block.body) == (
        PresentedReminder(record.id, record.scheduled_at, record.prompt),
    )


def check_view(block: Block, context: Context) -> None:
    _same(schedule_view(_record(context), _now(block)), json.loads(block.body))


def check_list(block: Block, context: Context) -> None:
    folded = fold_schedule_events(_log(context), context.seed_length)
    now = _now(block)
    _same(list_value([schedule_view(r, now) for r in folded.active]), json.loads(block.body))


def check_presentation(block: Block, context: Context) -> None:
    seq = int(block.options["dispatch_seq"])
    seed = int(block.options.get("seed_length", "0"))
    receipt = schedule_reminder_presentation(_log(context), seq, seed)
    _same(receipt, json.loads(block.body))


def _fixed_errors(schedule_id: str) -> list[ToolError]:
    """Every error value the tools answer; ``schedule_id`` where an answer names one.

    ``persistence_uncertain`` carries the id for a delete (known before the
    preflight) and for a create whose record was appended, never otherwise.
    """
    return [
        corrupt_log_error(),
        active_limit_error(),
        time_out_of_range_error(),
        cross_agent_error(),
        internal_error(),
        internal_error("not_live"),
        internal_error("shutting_down"),
        persistence_uncertain("create", appended=False),
        persistence_uncertain("create", appended=True, id=schedule_id),
        persistence_uncertain("list", appended=False),
        persistence_uncertain("delete", appended=False, id=schedule_id),
        persistence_uncertain("delete", appended=True, id=schedule_id),
        *(input_error(code, key) for code in ErrorCode for key in SELECTOR_KEYS),
    ]


def check_tool_error(block: Block, context: Context) -> None:
    value = json.loads(block.body)
    candidates = [canonical_json(e.to_json()) for e in _fixed_errors(value.get("id", "-"))]
    assert canonical_json(value) in candidates


def check_source(block: Block, context: Context) -> None:
    _same(dict(REMINDER_SOURCE), json.loads(block.body))


CHECKS: dict[str, Callable[[Block, Context], None]] = {
    "schedule-change": check_change,
    "corrupt-changes": check_corrupt_changes,
    "valid-changes": check_valid_changes,
    "schedule-log": check_log,
    "schedule-active": check_active,
    "schedule-log-error": check_log_error,
    "schedule-dispatches": check_dispatches,
    "reminder-batch": check_batch,
    "reminder-framing": check_framing,
    "schedule-view": check_view,
    "schedule-list": check_list,
    "schedule-presentation": check_presentation,
    "tool-error": check_tool_error,
    "reminder-source": check_source,
}

CASES = [(block, context) for block, context in _walk(BLOCKS) if block.role]


@pytest.mark.parametrize(
    ("block", "context"), CASES, ids=[f"line{b.line}-{b.role}" for b, _ in CASES]
)
def test_example(block: Block, context: Context) -> None:
    CHECKS[block.role](block, context)


def test_every_block_is_known_and_every_kind_is_used() -> None:
    for block in BLOCKS:
        if block.lang == "json":
            assert block.role in CHECKS, f"line {block.line}: json block without a known role"
            json.loads(block.body)
        assert block.role == "" or block.role in CHECKS, f"line {block.line}: {block.role}"
    assert {block.role for block in BLOCKS} - {""} == set(CHECKS)


# ---- checks of marked tables ---------------------------------------------------------------


def test_tables_are_present() -> None:
    assert set(TABLES) == {
        "whitespace",
        "occurrence-table",
        "tool-arguments",
        "at-table",
        "zone-names",
        "error-codes",
        "cron-expressions",
        "cron-occurrences",
        "constants",
    }
    assert all(table.rows for table in TABLES.values())


def _code_points(text: str) -> set[str]:
    points: set[str] = set()
    for item in text.split(","):
        bounds = [int(part.strip().removeprefix("U+"), 16) for part in item.split("–")]
        points.update(chr(c) for c in range(bounds[0], bounds[-1] + 1))
    return points


def test_whitespace_set() -> None:
    assert _code_points(TABLES["whitespace"].rows[0][0]) == ECMASCRIPT_WHITESPACE


def test_occurrence_table() -> None:
    table = TABLES["occurrence-table"]
    record = EveryRecord("schedule-1", "p", int(table.options["every"]), table.options["target"])
    for accepted_cell, steps, occurrence, following in table.rows:
        accepted = parse_instant(_code(accepted_cell))
        if occurrence.startswith("corrupt"):
            with pytest.raises(ScheduleLogError):
                resolve_every_occurrence(record, accepted)
            continue
        assert (accepted - record.target_ms) // record.interval_ms == int(steps)
        expected = (_code(occurrence), _code(following))
        assert resolve_every_occurrence(record, accepted) == expected


_PARSERS: dict[str, Callable[[object], object]] = {
    "schedule_create": parse_create_input,
    "schedule_list": parse_list_input,
    "schedule_delete": parse_delete_input,
}


def test_tool_arguments_table() -> None:
    for tool, arguments, answer in TABLES["tool-arguments"].rows:
        result = _PARSERS[_code(tool)](_json(arguments))
        if answer == "admitted":
            assert not isinstance(result, ToolError), (arguments, result)
        else:
            assert isinstance(result, ToolError), arguments
            assert result.code == _code(answer), arguments


def _at_outcome(at: object, now: int) -> str:
    """The stored instant or the error code, judged as the create transaction does."""
    direct: str
    try:
        direct = create_at_schedule_record("schedule-1", "p", at, now).scheduled_at
    except ScheduleInputError as error:
        direct = str(error.code)
    parsed = parse_create_input({"prompt": "p", "at": at})  # the tool boundary's copy
    assert isinstance(parsed, CreateInput)
    try:
        record = parsed.when.record("schedule-1", parsed.prompt, now)
    except ScheduleInputError as error:
        assert str(error.code) == direct
    else:
        assert isinstance(record, AtRecord)
        assert record.scheduled_at == direct
    return direct


def test_at_table() -> None:
    table = TABLES["at-table"]
    now = parse_instant(table.options["now"])
    for at, result, _why in table.rows:
        assert _at_outcome(_json(at), now) == _code(result), at


def test_zone_names_table() -> None:
    for name_cell, result in TABLES["zone-names"].rows:
        name = _json(name_cell)
        if _code(result) == "invalid_time_zone":
            with pytest.raises(ScheduleInputError) as caught:
                canonicalize_time_zone(name)
            assert caught.value.code is ErrorCode.INVALID_TIME_ZONE
        else:
            assert canonicalize_time_zone(name) == _code(result)


def test_error_codes_table() -> None:
    assert [_code(row[0]) for row in TABLES["error-codes"].rows] == list(ERROR_CODES)


def _cron_outcome(expression: object) -> str:
    """The canonical text or the error code, judged by the parser and by the tool boundary."""
    direct: str
    try:
        direct = parse_cron_expression(expression).expression
    except CronRuleError as error:
        direct = error.code
    parsed = parse_create_input(
        {"prompt": "p", "cron": {"expression": expression, "time_zone": "UTC"}}
    )
    if isinstance(parsed, ToolError):
        assert str(parsed.code) == direct, expression
    else:
        assert isinstance(parsed.when, CronSelector)
        assert parsed.when.expression == direct, expression
    return direct


def test_cron_expressions_table() -> None:
    for expression_cell, result, _why in TABLES["cron-expressions"].rows:
        expression = _json(expression_cell)
        outcome = _cron_outcome(expression)
        if result.startswith('`"'):  # a canonical text, which a stored record may hold
            canonical = _json(result)
            assert outcome == canonical, expression
            assert cron_problem(canonical, "UTC") is None
            if expression != canonical:  # a log holds only the canonical text
                assert cron_problem(expression, "UTC") is not None, expression
        else:
            assert outcome == _code(result), expression


def _instants(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def test_cron_occurrences_table() -> None:
    for expression_cell, zone_cell, after_cell, following, _why in TABLES["cron-occurrences"].rows:
        expression, zone = _code(expression_cell), _code(zone_cell)
        after = parse_instant(_code(after_cell))
        expected = _instants(following)
        exhausted = following.endswith("then none")
        assert len(expected) == (1 if exhausted else 3), following
        schedule = cron_schedule(expression, zone)
        assert [format_instant(ms) for ms in schedule.following(after, 3)] == expected
        cron = {"expression": expression, "time_zone": zone}
        record = create_cron_schedule_record("schedule-1", "p", cron, after)
        assert record.scheduled_at == expected[0]  # the first target of a create at `after`
        nexts: list[str | None] = [*expected[1:], None] if exhausted else [*expected[1:]]
        for occurrence, next_at in zip(expected, nexts, strict=False):
            # a dispatch accepted at its target delivers it and moves to the next occurrence
            at_target = CronRecord("schedule-1", "p", expression, zone, occurrence)
            resolved = resolve_repeating_occurrence(at_target, parse_instant(occurrence))
            assert resolved == (occurrence, next_at), expression


def test_constants_table() -> None:
    for name, value in TABLES["constants"].rows:
        module, _, attribute = _code(name).rpartition(".")
        actual = getattr(importlib.import_module(module), attribute)
        expected = _json(value)
        if isinstance(actual, Mapping):
            _same(dict(actual), expected)
        else:
            assert actual == expected and type(actual) is type(expected), name


# ---- links -------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rules) gives a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


ANCHORS = {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", TEXT, re.M)}
SOURCES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_links_into_the_protocol_resolve(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    pattern = r"\]\(#([^)]+)\)" if path == DOC else r"\]\((?:docs/)?protocol\.md#([^)]+)\)"
    for anchor in re.findall(pattern, text):
        assert anchor in ANCHORS, f"{path.name}: no heading for #{anchor}"


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_links_between_the_docs_resolve(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for target, anchor in re.findall(r"\]\(((?:docs/)?[\w-]+\.md)#([^)]+)\)", text):
        linked = (path.parent / target).resolve()
        assert linked.exists(), f"{path.name}: no file {target}"
        headings = re.findall(r"^#{1,6} (.+)$", linked.read_text(encoding="utf-8"), re.M)
        slugs = {_slug(heading) for heading in headings}
        assert anchor in slugs, f"{path.name}: no heading for {target}#{anchor}"


def test_the_docs_point_to_the_protocol_not_to_an_unshipped_spec() -> None:
    for path in SOURCES:
        assert "SPEC.md" not in path.read_text(encoding="utf-8"), path.name
    assert "](docs/protocol.md" in (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("host-integration.md", "tool-catalog.md"):
        assert "](protocol.md" in (REPO / "docs" / name).read_text(encoding="utf-8"), name
