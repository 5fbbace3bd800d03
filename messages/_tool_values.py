"""Tool inputs and values: shape checks before the queue, and every value a tool returns.

``schedule_create`` takes ``prompt`` plus exactly one selector: ``after_seconds``,
``at``, ``every_seconds`` or ``cron``. :func:`parse_create_input` judges the
shape, the prompt, the two numeric selectors and the ``cron`` rule before the
queue; the ``at`` value is only copied (see :class:`AtSelector`) and judged in
the queue, after the preflight, where :meth:`CreateSelector.record
<AfterSelector.record>` builds the record with one clock sample and
:func:`input_error` turns a refusal into its fixed value.

Diagnostic messages are fixed per code and situation; none embeds input or
exception text, so a tool value never leaks backend details and the same
situation always renders the same bytes.

Arguments may also be given as JSON text (the ``arguments`` string of an
OpenAI-format tool call): a ``str`` is decoded once by
:func:`messages._json_arguments.decode_json_arguments` (strict JSON, bounded
length and nesting) and the value is then judged exactly like an object handed
over directly. A text that cannot be decoded is ``invalid_selector``, like any
other argument that is not an object.

The ``parse_*_input`` functions are the boundary: they read the arguments
through the built-in types' own methods (never through methods a subclass may
override) and hand on plain built-ins only, so everything after them sees an
exact ``str``, ``int`` or ``dict``. A ``str`` subclass whose ``__len__`` lies,
an ``int`` subclass whose ``__index__`` lies, or a mapping whose ``__iter__``
and ``__getitem__`` disagree cannot get past a limit that way.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

from messages._absolute import LOCAL_AT_KEYS
from messages._creation import (
    CREATE_ARGUMENT_KEYS,
    CRON_KEYS,
    SelectorKey,
    after_record,
    at_record,
    check_after_seconds,
    check_cron,
    check_every_seconds,
    create_selector,
    cron_record,
    every_record,
)
from messages._cron import MAX_CRON_EXPRESSION_LENGTH
from messages._errors import ErrorCode, ScheduleInputError
from messages._json_arguments import (
    MAX_JSON_ARGUMENTS_DEPTH,
    MAX_JSON_ARGUMENTS_LENGTH,
    JsonArgumentsError,
    decode_json_arguments,
)
from messages._numbers import MAX_SAFE_INTEGER, json_integer
from messages._records import MIN_EVERY_SECONDS, AfterRecord, AtRecord, CronRecord, EveryRecord
from messages._text import ecma_trim, has_lone_surrogate, is_ecma_trimmed

__all__ = [
    "CREATE_KEYS",
    "DELETE_KEYS",
    "MAX_ACTIVE_SCHEDULES",
    "MAX_AT_TEXT_LENGTH",
    "MAX_JSON_ARGUMENTS_DEPTH",
    "MAX_JSON_ARGUMENTS_LENGTH",
    "MAX_PROMPT_LENGTH",
    "MAX_SCHEDULE_ID_LENGTH",
    "AfterSelector",
    "AtSelector",
    "CreateInput",
    "CreateSelector",
    "CronSelector",
    "DeleteInput",
    "ErrorSituation",
    "EverySelector",
    "FlushPhase",
    "ListInput",
    "Operation",
    "ToolError",
    "active_limit_error",
    "corrupt_log_error",
    "cross_agent_error",
    "delete_value",
    "input_error",
    "internal_error",
    "list_value",
    "not_found_value",
    "parse_create_input",
    "parse_delete_input",
    "parse_list_input",
    "persistence_uncertain",
    "time_out_of_range_error",
    "valid_prompt",
]

Operation = Literal["create", "list", "delete", "dispatch"]
"""The operation a ``persistence_uncertain`` error is about."""

CREATE_KEYS = CREATE_ARGUMENT_KEYS
"""The argument keys ``schedule_create`` accepts: ``prompt`` and the four selectors."""

DELETE_KEYS = frozenset({"id"})
"""The only argument key ``schedule_delete`` accepts."""

MAX_PROMPT_LENGTH = 4096
"""The longest ``schedule_create`` prompt accepted, in characters (code points) as given.

An input limit of the tool only: logs written without it (protocol version 1
has no limit) still decode, fold and deliver."""

MAX_SCHEDULE_ID_LENGTH = 128
"""The longest ``schedule_delete`` id accepted, in characters (code points) as given.

Ids that ``schedule_create`` allocates are ``schedule-N`` (at most 25
characters). A longer id is ``invalid_rule`` and is never echoed back, so a
call cannot make the tool repeat megabytes of input into the model's context
and the session's log. Logs written elsewhere with longer ids still load and
deliver; only their deletion through the tool is refused."""

MAX_ACTIVE_SCHEDULES = 1000
"""The most active reminders one session may hold; a create beyond it is refused."""

MAX_AT_TEXT_LENGTH = 64
"""The longest ``at`` string (or ``date``/``time``/``time_zone`` field) kept for judging.

The longest valid one is a 29-character instant; the longest zone name has 32
characters. A longer string is copied as ``""``, which is refused with exactly
the code the long string would get, so the bound changes no answer and the
owner's queue never holds megabytes of ``at`` text."""

ErrorSituation = Literal[
    "not_object",
    "json_text",
    "create_keys",
    "create_keys_without_cron",
    "create_selector_count",
    "create_selector_count_without_cron",
    "delete_keys",
    "prompt",
    "prompt_too_long",
    "active_limit",
    "after_seconds",
    "every_seconds",
    "frequency_too_high",
    "cron",
    "cron_frequency",
    "at",
    "time_zone",
    "not_future",
    "at_out_of_range",
    "delete_id",
    "delete_id_too_long",
    "time_out_of_range",
    "corrupt",
    "internal",
    "cross_agent",
    "not_live",
    "shutting_down",
]
"""A situation with a fixed diagnostic message: what :meth:`ToolError.of` accepts."""

_MESSAGES: Mapping[ErrorSituation, str] = {
    "not_object": "Tool arguments must be a JSON object.",
    "json_text": (
        "Tool arguments given as text must be one JSON object in strict JSON (no NaN or "
        f"Infinity, no repeated key), at most {MAX_JSON_ARGUMENTS_LENGTH} characters long "
        f"and nested at most {MAX_JSON_ARGUMENTS_DEPTH} levels deep."
    ),
    "create_keys": (
        "schedule_create accepts only prompt and one of after_seconds, at, every_seconds or "
        "cron; a time_zone belongs inside at or cron."
    ),
    "create_keys_without_cron": (
        "schedule_create accepts only prompt and one of after_seconds, at or every_seconds; "
        "cron and a time_zone outside at are not supported."
    ),
    "create_selector_count": (
        "schedule_create needs exactly one of after_seconds, at, every_seconds or cron."
    ),
    "create_selector_count_without_cron": (
        "schedule_create needs exactly one of after_seconds, at or every_seconds."
    ),
    "delete_keys": "schedule_delete accepts only id.",
    "prompt": "prompt must be a non-empty string of valid Unicode text.",
    "prompt_too_long": f"prompt must be at most {MAX_PROMPT_LENGTH} characters long.",
    "active_limit": (
        f"This session already has {MAX_ACTIVE_SCHEDULES} active reminders, the most it may "
        "hold; delete one or let one be delivered before creating another."
    ),
    "after_seconds": f"after_seconds must be an integer from 1 to {MAX_SAFE_INTEGER}.",
    "every_seconds": (
        f"every_seconds must be a whole number of seconds, at least {MIN_EVERY_SECONDS}."
    ),
    "frequency_too_high": (
        f"every_seconds must be at least {MIN_EVERY_SECONDS} (five minutes); "
        "reminders cannot repeat more often."
    ),
    "cron": (
        "cron must be an object with exactly expression and time_zone; expression has five "
        "fields (minute hour day-of-month month day-of-week, such as 0 9 * * 1-5 for weekdays "
        "at 9:00) or is a macro such as @daily, and must name times that can happen."
    ),
    "cron_frequency": (
        "A cron rule must not match twice within five minutes; reminders cannot repeat "
        "more often."
    ),
    "at": (
        "at must be an instant with an explicit offset, such as 2026-08-06T09:00:00+08:00 or "
        "2026-08-06T01:00:00Z, or an object with exactly date (YYYY-MM-DD), time (HH:MM:SS) "
        "and time_zone, naming a real date and time that exists in that zone."
    ),
    "time_zone": (
        "time_zone must be UTC or a tz database zone name such as Asia/Shanghai or "
        "America/New_York; abbreviations such as EST and offsets are not zone names."
    ),
    "not_future": "The reminder time must be later than now.",
    "at_out_of_range": (
        "The reminder time must fall within 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z."
    ),
    "delete_id": "id must be a non-empty string without leading or trailing whitespace.",
    "delete_id_too_long": (
        f"id must be at most {MAX_SCHEDULE_ID_LENGTH} characters long; "
        "schedule_create gives ids such as schedule-1."
    ),
    "time_out_of_range": "The reminder would fall after 9999-12-31T23:59:59.999Z.",
    "corrupt": "The session's schedule log is corrupt; schedules cannot be read or changed.",
    "internal": "An internal error stopped the schedule operation.",
    "cross_agent": "This schedule tool belongs to another agent.",
    "not_live": "The agent that owns these schedules is no longer live.",
    "shutting_down": (
        "Schedule is shutting down, so the operation did not run; nothing was changed."
    ),
}

FlushPhase: TypeAlias = Literal["preflight", "barrier"]
"""Which flush of a transaction: the preflight before it acts, or the barrier after its append."""

_UNCERTAIN: Mapping[FlushPhase, str] = {
    "preflight": "The session's log could not be confirmed durable, so the {op} did not run.",
    "barrier": (
        "The {op} was appended but could not be confirmed durable; "
        "a later schedule_list confirms the retained log."
    ),
}


@dataclass(frozen=True, slots=True)
class ToolError:
    """A closed-code domain error value: ``{"code", "message"}`` plus optional fields."""

    code: ErrorCode
    message: str
    operation: Operation | None = None
    id: str | None = None

    def to_json(self) -> dict[str, object]:
        """The canonical value: code, message, then operation and id when present."""
        value: dict[str, object] = {"code": str(self.code), "message": self.message}
        if self.operation is not None:
            value["operation"] = self.operation
        if self.id is not None:
            value["id"] = self.id
        return value

    @classmethod
    def of(cls, code: ErrorCode, situation: ErrorSituation) -> ToolError:
        """The error for ``code`` with the fixed message of ``situation``."""
        return cls(code, _MESSAGES[situation])


@dataclass(frozen=True, slots=True)
class AfterSelector:
    """``after_seconds``: due that many seconds after the create's clock sample.

    ``seconds`` is judged once, here (``ScheduleInputError("invalid_rule")`` as
    :func:`messages._creation.check_after_seconds`), so :meth:`record` does not
    judge it again.
    """

    seconds: int
    key: ClassVar[SelectorKey] = "after_seconds"

    def __post_init__(self) -> None:
        seconds = self.seconds
        if type(seconds) is not int or not 1 <= seconds <= MAX_SAFE_INTEGER:
            object.__setattr__(self, "seconds", check_after_seconds(seconds))

    def record(self, id: str, prompt: str, now_ms: object) -> AfterRecord:
        """The record for this selector (raises ``ScheduleInputError``, see ``creation``)."""
        return after_record(id, prompt, self.seconds, now_ms)


@dataclass(frozen=True, slots=True)
class AtSelector:
    """``at``: due at an absolute instant; ``value`` is judged only in the queue.

    ``value`` is a plain copy of the argument, made at the tool boundary without
    judging it: an exact ``str``; a ``dict`` of at most four exact-``str`` keys
    whose string values are exact ``str`` and whose other values are ``None``;
    or ``None`` for anything else. Strings longer than
    :data:`MAX_AT_TEXT_LENGTH` become ``""``. Every copy gets the same answer
    as the original would.
    """

    value: object
    key: ClassVar[SelectorKey] = "at"

    def record(self, id: str, prompt: str, now_ms: object) -> AtRecord:
        """The record for this selector (raises ``ScheduleInputError``, see ``creation``)."""
        return at_record(id, prompt, self.value, now_ms)


@dataclass(frozen=True, slots=True)
class EverySelector:
    """``every_seconds``: due every that many seconds, the first one interval after now.

    ``seconds`` is judged once, here (``invalid_rule``, ``frequency_too_high`` as
    :func:`messages._creation.check_every_seconds`).
    """

    seconds: int
    key: ClassVar[SelectorKey] = "every_seconds"

    def __post_init__(self) -> None:
        seconds = self.seconds
        if type(seconds) is not int or not MIN_EVERY_SECONDS <= seconds <= MAX_SAFE_INTEGER:
            object.__setattr__(self, "seconds", check_every_seconds(seconds))

    def record(self, id: str, prompt: str, now_ms: object) -> EveryRecord:
        """The record for this selector (raises ``ScheduleInputError``, see ``creation``)."""
        return every_record(id, prompt, self.seconds, now_ms)


@dataclass(frozen=True, slots=True)
class CronSelector:
    """``cron``: due at each match of a calendar rule in a zone, the first one after now.

    ``expression`` and ``time_zone`` are canonical, judged once before the queue
    (:func:`messages._creation.check_cron`).
    """

    expression: str
    time_zone: str
    key: ClassVar[SelectorKey] = "cron"

    def record(self, id: str, prompt: str, now_ms: object) -> CronRecord:
        """The record for this selector (raises ``ScheduleInputError``, see ``creation``)."""
        return cron_record(id, prompt, self.expression, self.time_zone, now_ms)


CreateSelector: TypeAlias = AfterSelector | AtSelector | EverySelector | CronSelector
"""When a created reminder is due: the one selector a ``schedule_create`` call named."""


@dataclass(frozen=True, slots=True)
class CreateInput:
    """Shape-checked ``schedule_create`` input (prompt still untrimmed)."""

    prompt: str
    when: CreateSelector


@dataclass(frozen=True, slots=True)
class ListInput:
    """``schedule_list`` input (it has no parameters)."""


@dataclass(frozen=True, slots=True)
class DeleteInput:
    """Shape-checked ``schedule_delete`` input."""

    id: str


_BAD_TEXT = object()
"""What :func:`_decoded` returns for a text that is not acceptable JSON."""


def _decoded(arguments: object) -> object:
    """``arguments``, or the value of the JSON text it is; :data:`_BAD_TEXT` for a bad text.

    A ``str`` (or subclass) is measured through ``str``'s own method before
    anything copies it, so an over-long text is refused without a copy.
    """
    length = _str_length(arguments)
    if length is None:
        return arguments
    if length > MAX_JSON_ARGUMENTS_LENGTH:
        return _BAD_TEXT
    text = _exact_str(arguments)
    assert text is not None
    try:
        return decode_json_arguments(text)
    except JsonArgumentsError:
        return _BAD_TEXT


def _plain_object(arguments: object, limit: int) -> dict[str, object] | None:
    """At most ``limit + 1`` entries of a JSON object, as a plain dict; ``None`` if not an object.

    An object is a mapping whose keys are exact ``str``. A ``dict`` (or a dict
    subclass) is read from its storage through ``dict``'s own methods, every
    key judged; any other mapping through a walk of its ``items()`` that stops
    after ``limit + 1`` entries (only those are judged; a walk that raises means
    not an object). Callers judge the copy only, so a mapping that answers
    differently when asked twice cannot change a verdict after it was made.
    """
    if issubclass(type(arguments), dict):
        assert isinstance(arguments, dict)
        if not all(type(key) is str for key in dict.__iter__(arguments)):
            return None
        return dict(itertools.islice(dict.items(arguments), limit + 1))
    if not issubclass(type(arguments), Mapping):
        return None
    assert isinstance(arguments, Mapping)
    try:
        entries: list[tuple[object, object]] = [
            (key, value) for key, value in itertools.islice(arguments.items(), limit + 1)
        ]
    except Exception:
        return None
    plain: dict[str, object] = {}
    for key, value in entries:
        if type(key) is not str:
            return None
        assert isinstance(key, str)
        plain[key] = value
    return plain


def _str_length(value: object) -> int | None:
    """The real length of a ``str`` (a subclass's ``__len__`` is not asked), else ``None``."""
    if not issubclass(type(value), str):  # ``type`` cannot lie; ``__class__`` can
        return None
    assert isinstance(value, str)
    return str.__len__(value)


def _exact_str(value: object) -> str | None:
    """``value`` as an exact ``str`` (a subclass copied by ``str``'s own method), else ``None``."""
    if not issubclass(type(value), str):
        return None
    assert isinstance(value, str)
    return str.__str__(value)


def _exact_integer(value: object) -> int | None:
    """``value`` as an exact ``int`` under JSON number rules, else ``None``.

    ``int`` and ``float`` subclasses are converted by the built-in types' own
    methods (an overridden ``__index__``, ``__int__``, ``__float__`` or
    ``is_integer`` is never called); ``bool`` is never a number.
    """
    kind = type(value)
    if kind is bool:
        return None
    if issubclass(kind, int):
        assert isinstance(value, int)
        return int.__int__(value)
    if issubclass(kind, float):
        assert isinstance(value, float)
        return json_integer(float.__float__(value))
    return None


def valid_prompt(value: object) -> bool:
    """Whether ``value`` is a usable prompt: an exact ``str``, not blank, no lone surrogate.

    Blank means empty after ECMAScript trim. A ``str`` subclass is not a usable
    prompt here; :func:`parse_create_input` converts it first.
    """
    return type(value) is str and not has_lone_surrogate(value) and ecma_trim(value) != ""


def _at_text(value: object) -> str | None:
    """An exact copy of a string (``""`` past :data:`MAX_AT_TEXT_LENGTH`), else ``None``."""
    length = _str_length(value)
    if length is None:
        return None
    return _exact_str(value) if length <= MAX_AT_TEXT_LENGTH else ""


def _plain_at(value: object) -> object:
    """The ``at`` argument copied to exact built-ins, not judged (see :class:`AtSelector`)."""
    text = _at_text(value)
    if text is not None:
        return text
    fields = _plain_object(value, len(LOCAL_AT_KEYS))
    if fields is None:
        return None
    return {key: _at_text(field) for key, field in fields.items()}


def _plain_cron(value: object) -> object:
    """The ``cron`` argument copied to exact built-ins (over-long strings as ``""``)."""
    fields = _plain_object(value, len(CRON_KEYS))
    if fields is None:
        return None
    copied: dict[str, object] = {}
    for key, field in fields.items():
        length = _str_length(field)
        limit = MAX_CRON_EXPRESSION_LENGTH if key == "expression" else MAX_AT_TEXT_LENGTH
        copied[key] = None if length is None else (_exact_str(field) if length <= limit else "")
    return copied


def _selector(key: SelectorKey, raw: object) -> CreateSelector:
    """The selector named ``key`` with its value converted; raises ``ScheduleInputError``."""
    if key == "at":
        return AtSelector(_plain_at(raw))
    if key == "cron":
        return CronSelector(*check_cron(_plain_cron(raw)))
    if key == "every_seconds":
        return EverySelector(check_every_seconds(_exact_integer(raw)))  # judged once: exact int
    return AfterSelector(check_after_seconds(_exact_integer(raw)))


def parse_create_input(arguments: object, *, cron: bool = True) -> CreateInput | ToolError:
    """Check ``schedule_create`` arguments in the contract's order, before the queue.

    1. any key other than ``prompt``, ``after_seconds``, ``at``, ``every_seconds``,
       ``cron``, or not exactly one of the four selectors present (a present
       ``null`` counts) → ``invalid_selector``;
    2. a missing, blank, too long or non-Unicode prompt → ``invalid_prompt``;
    3. ``after_seconds`` not an integer in 1..2**53-1 → ``invalid_rule``;
    4. ``every_seconds`` not a safe integer → ``invalid_rule``, below 300 →
       ``frequency_too_high``;
    5. ``cron`` as :func:`messages._creation.check_cron` (``invalid_rule``,
       ``invalid_time_zone``, ``frequency_too_high``).

    ``at`` is not judged here (only copied). With ``cron=False`` (a host whose
    logs must stay readable by implementations without calendar rules) ``cron``
    is an unknown key. The returned input holds an exact ``str`` prompt and a
    selector of exact built-ins. A ``str`` is JSON text, decoded first (see the
    module docstring).
    """
    arguments = _decoded(arguments)
    if arguments is _BAD_TEXT:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "json_text")
    given = _plain_object(arguments, len(CREATE_KEYS))
    if given is None:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "not_object")
    if any(key not in CREATE_KEYS for key in given) or (not cron and "cron" in given):
        return ToolError.of(
            ErrorCode.INVALID_SELECTOR, "create_keys" if cron else "create_keys_without_cron"
        )
    key = create_selector(given, cron=cron)
    if key is None:
        return ToolError.of(
            ErrorCode.INVALID_SELECTOR,
            "create_selector_count" if cron else "create_selector_count_without_cron",
        )
    raw_prompt = given.get("prompt")
    if (_str_length(raw_prompt) or 0) > MAX_PROMPT_LENGTH:
        return ToolError.of(ErrorCode.INVALID_PROMPT, "prompt_too_long")
    prompt = _exact_str(raw_prompt)
    if prompt is None or not valid_prompt(prompt):
        return ToolError.of(ErrorCode.INVALID_PROMPT, "prompt")
    try:
        when = _selector(key, given[key])
    except ScheduleInputError as error:
        return input_error(error.code, key)
    return CreateInput(prompt, when)


def parse_list_input(arguments: object) -> ListInput | ToolError:
    """``schedule_list`` accepts any object, or JSON text of one (its keys are ignored)."""
    arguments = _decoded(arguments)
    if arguments is _BAD_TEXT:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "json_text")
    if _plain_object(arguments, 0) is None:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "not_object")
    return ListInput()


def parse_delete_input(arguments: object) -> DeleteInput | ToolError:
    """Check ``schedule_delete`` arguments: only ``id``, a trimmed non-empty string.

    An id longer than :data:`MAX_SCHEDULE_ID_LENGTH` is ``invalid_rule`` with a
    message that does not repeat it; the returned input holds an exact ``str``.
    A ``str`` is JSON text, decoded first (see the module docstring).
    """
    arguments = _decoded(arguments)
    if arguments is _BAD_TEXT:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "json_text")
    given = _plain_object(arguments, len(DELETE_KEYS))
    if given is None:
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "not_object")
    if any(key not in DELETE_KEYS for key in given):
        return ToolError.of(ErrorCode.INVALID_SELECTOR, "delete_keys")
    raw_id = given.get("id")
    if (_str_length(raw_id) or 0) > MAX_SCHEDULE_ID_LENGTH:
        return ToolError.of(ErrorCode.INVALID_RULE, "delete_id_too_long")
    schedule_id = _exact_str(raw_id)
    if schedule_id is None or schedule_id == "" or not is_ecma_trimmed(schedule_id):
        return ToolError.of(ErrorCode.INVALID_RULE, "delete_id")
    return DeleteInput(schedule_id)


def persistence_uncertain(
    operation: Operation, *, appended: bool, id: str | None = None
) -> ToolError:
    """``persistence_uncertain`` for a failed preflight (``appended=False``) or barrier."""
    template = _UNCERTAIN["barrier" if appended else "preflight"]
    return ToolError(ErrorCode.PERSISTENCE_UNCERTAIN, template.format(op=operation), operation, id)


def internal_error(
    situation: Literal["internal", "cross_agent", "not_live", "shutting_down"] = "internal",
) -> ToolError:
    """``internal_error`` with the fixed message of ``situation``.

    ``not_live`` and ``shutting_down`` refuse a call that appended nothing: its
    agent is gone, or Schedule is being disposed.
    """
    return ToolError.of(ErrorCode.INTERNAL_ERROR, situation)


def cross_agent_error() -> ToolError:
    """The refusal of a tool executed for an agent other than its owner's."""
    return internal_error("cross_agent")


def corrupt_log_error() -> ToolError:
    """``corrupt_schedule_log`` for any operation."""
    return ToolError.of(ErrorCode.CORRUPT_SCHEDULE_LOG, "corrupt")


def active_limit_error() -> ToolError:
    """``invalid_rule``: the session already holds :data:`MAX_ACTIVE_SCHEDULES` active reminders.

    Version 1's error codes are closed; a create the session cannot take is
    reported as a rule it cannot accept, with its own fixed message.
    """
    return ToolError.of(ErrorCode.INVALID_RULE, "active_limit")


def time_out_of_range_error() -> ToolError:
    """``time_out_of_range`` for a create past the last representable instant."""
    return ToolError.of(ErrorCode.TIME_OUT_OF_RANGE, "time_out_of_range")


_INPUT_SITUATIONS: Mapping[tuple[SelectorKey, ErrorCode], ErrorSituation] = {
    ("after_seconds", ErrorCode.INVALID_RULE): "after_seconds",
    ("after_seconds", ErrorCode.TIME_OUT_OF_RANGE): "time_out_of_range",
    ("every_seconds", ErrorCode.INVALID_RULE): "every_seconds",
    ("every_seconds", ErrorCode.FREQUENCY_TOO_HIGH): "frequency_too_high",
    ("every_seconds", ErrorCode.TIME_OUT_OF_RANGE): "time_out_of_range",
    ("at", ErrorCode.INVALID_RULE): "at",
    ("at", ErrorCode.INVALID_TIME_ZONE): "time_zone",
    ("at", ErrorCode.TIME_OUT_OF_RANGE): "at_out_of_range",
    ("at", ErrorCode.NOT_FUTURE): "not_future",
    ("cron", ErrorCode.INVALID_RULE): "cron",
    ("cron", ErrorCode.INVALID_TIME_ZONE): "time_zone",
    ("cron", ErrorCode.FREQUENCY_TOO_HIGH): "cron_frequency",
    ("cron", ErrorCode.TIME_OUT_OF_RANGE): "time_out_of_range",
}


def input_error(code: ErrorCode, selector: SelectorKey = "after_seconds") -> ToolError:
    """The fixed error value for a ``ScheduleInputError`` raised while judging ``selector``.

    ``invalid_prompt`` has one message for every selector; a code the selector
    cannot raise is reported as ``internal_error``.
    """
    if code == ErrorCode.INVALID_PROMPT:
        return ToolError.of(code, "prompt")
    situation = _INPUT_SITUATIONS.get((selector, code))
    return ToolError.of(code, situation) if situation is not None else internal_error()


def list_value(views: list[dict[str, object]]) -> dict[str, object]:
    """The ``schedule_list`` value: every active view in create order."""
    return {"schedules": views}


def delete_value(schedule_id: str) -> dict[str, object]:
    """The value of a delete that retired an active record."""
    return {"id": schedule_id, "deleted": True}


def not_found_value(schedule_id: str) -> dict[str, object]:
    """The value of a delete of an unknown, deleted or dispatched id."""
    return {"id": schedule_id, "deleted": False, "code": "schedule_not_found"}
