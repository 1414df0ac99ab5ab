"""JSON text checked the way the services that receive it read it."""

from __future__ import annotations

import json
from typing import Any


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_strict_json(text: str) -> Any:
    """``text`` read as strict JSON, as AWS services read a payload: NaN and Infinity, which
    Python's ``json`` takes, are refused; every failure is a ``ValueError``, too deep a nesting
    (a ``RecursionError`` otherwise, a 500) and an integer of too many digits included."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def whole_if_integral(value: float | None) -> float | int | None:
    """``value`` as an integer when it is a whole number (``3.0`` -> ``3``), else as it is: a
    number stored or validated as a float is answered as it was given (``3``, not ``3.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
