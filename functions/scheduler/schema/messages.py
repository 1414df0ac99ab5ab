"""The API's own words for pydantic's validation errors: ``is required`` rather than ``Field
required``, ``must not be empty`` rather than ``String should have at least 1 character``. Each
message reads after the field's name (``name: must not be empty``)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

Context = Mapping[str, Any]


class FieldError(ValueError):
    """A model-level error that names its field (kept by ``details.validation_details``)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


#: An AMQP message's headers, names and values, at most (they travel in one frame).
MAX_AMQP_HEADER_BYTES = 64 * 1024


def amqp_headers_problem(headers: dict[str, str]) -> str | None:
    """What makes ``headers`` unfit for an AMQP message (a job's, or a manual run's merged over
    them), or None: a name is a short string (255 bytes), and the properties travel in one frame
    (the broker's frame_max: 128 KiB by default) with the scheduler's own headers: past it the
    broker closes the connection at every attempt."""
    for name in headers:
        if len(name.encode("utf-8", "surrogatepass")) > 255:
            return f"header {name[:64]!r}: a name is at most 255 bytes once encoded as UTF-8"
    size = sum(len((name + value).encode("utf-8", "surrogatepass")) for name, value in headers.items())
    if size > MAX_AMQP_HEADER_BYTES:
        return (
            f"add up to {size} bytes; an AMQP message's headers take at most {MAX_AMQP_HEADER_BYTES}"
            " (they travel in one frame of the broker's)"
        )
    return None


def single_line(value: str, latin1: bool = False) -> str:
    """Refuse what cannot go on one line (of a header, an event's source): CR, LF, U+2028/2029
    and other control characters; with ``latin1``, characters an HTTP header cannot carry (past
    U+00FF). The value, when it passes."""
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            raise ValueError(
                f"must be single-line printable text (no line breaks or control characters: U+{ord(ch):04X})"
            )
        if latin1 and ord(ch) > 0xFF:
            raise ValueError(f"must be Latin-1 text to go in an HTTP header (U+{ord(ch):04X} is not)")
    return value


def http_header_value(value: str) -> str:
    """An HTTP header's value, refused when it cannot go on the wire as it is: on one line, in
    Latin-1 (no tab: a control character), and not starting with a space (which would read as
    the previous header's continuation: the delivery refuses to send it)."""
    single_line(value, latin1=True)
    if value.startswith(" "):
        raise ValueError("must not begin with a space")
    return value


def _count(ctx: Context, key: str, unit: str) -> str:
    n = ctx.get(key)
    return f"{n} {unit}{'' if n == 1 else 's'}"


def _too_short(ctx: Context) -> str:
    return (
        "must not be empty"
        if ctx.get("min_length") == 1
        else f"must be at least {_count(ctx, 'min_length', 'character')}"
    )


def _bound(ctx: Context, key: str) -> str:
    """A bound as written: a whole number without its ``.0`` (a float field's bound of 86400 is
    86400.0 in pydantic's context)."""
    bound = ctx.get(key)
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


def _choices(ctx: Context) -> str:
    return f"must be one of {ctx.get('expected', 'the allowed values')}"


_MESSAGES: dict[str, Callable[[Context], str]] = {
    "missing": lambda ctx: "is required",
    "extra_forbidden": lambda ctx: "is not a field here (unknown fields are refused)",
    "string_too_short": _too_short,
    "string_too_long": lambda ctx: f"must be at most {_count(ctx, 'max_length', 'character')}",
    "too_short": lambda ctx: f"must have at least {_count(ctx, 'min_length', 'item')}",
    "too_long": lambda ctx: f"must have at most {_count(ctx, 'max_length', 'item')}",
    "greater_than_equal": lambda ctx: f"must be at least {_bound(ctx, 'ge')}",
    "greater_than": lambda ctx: f"must be more than {_bound(ctx, 'gt')}",
    "less_than_equal": lambda ctx: f"must be at most {_bound(ctx, 'le')}",
    "less_than": lambda ctx: f"must be less than {_bound(ctx, 'lt')}",
    "int_type": lambda ctx: "must be a whole number (a JSON integer)",
    "int_parsing": lambda ctx: "must be a whole number (a JSON integer)",
    "int_from_float": lambda ctx: "must be a whole number (a JSON integer)",
    "float_type": lambda ctx: "must be a number",
    "float_parsing": lambda ctx: "must be a number",
    "finite_number": lambda ctx: "must be a finite number",
    "string_type": lambda ctx: "must be a string",
    "bool_type": lambda ctx: "must be true or false",
    "bool_parsing": lambda ctx: "must be true or false",
    "list_type": lambda ctx: "must be a list",
    "dict_type": lambda ctx: "must be a JSON object",
    "model_type": lambda ctx: "must be a JSON object",
    "model_attributes_type": lambda ctx: "must be a JSON object",
    "literal_error": _choices,
    "enum": _choices,
    "string_pattern_mismatch": lambda ctx: "is not in the expected form",
}


def plain_message(error: Mapping[str, Any]) -> str:
    """The API's wording of one pydantic error (its ``type`` and ``ctx``); pydantic's message
    for a type this table does not know, and a validator's own message as it is."""
    kind = str(error.get("type") or "")
    message = str(error.get("msg") or "is not valid")
    if message.startswith("Value error, "):
        return message[len("Value error, ") :]
    word = _MESSAGES.get(kind)
    return word(error.get("ctx") or {}) if word else message
