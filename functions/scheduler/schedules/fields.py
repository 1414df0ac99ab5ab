"""Cron fields: lists, ranges, steps and names, shared by 5-field cron and EventBridge ``cron()``.

Each field is described by a :class:`_Field` (its name, range and names); the parsers answer the
set of values a field denotes or raise :class:`ScheduleError` naming the field and the token.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass

from scheduler.schedules.base import ScheduleError

_MONTH_NAMES = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAY_NAMES_CLASSIC = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_DAY_NAMES_EB = {k: v + 1 for k, v in _DAY_NAMES_CLASSIC.items()}


@dataclass(frozen=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: dict[str, int] | None = None
    hint: str = ""

    def error(self, detail: str, prefix: str) -> ScheduleError:
        return ScheduleError(f"{prefix}{self.name} field: {detail}")


_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTH_NAMES, " (or JAN-DEC)")
_DOW_CLASSIC = _Field("day-of-week", 0, 7, _DAY_NAMES_CLASSIC, " (0 and 7 = Sunday, or SUN-SAT)")
_DOW_EB = _Field("day-of-week", 1, 7, _DAY_NAMES_EB, " (1 = Sunday, or SUN-SAT)")
_YEAR = _Field("year", 1970, 2199)

_CLASSIC_PREFIX = ""
_EB_PREFIX = "cron(): "


def _show(token: str) -> str:
    return repr(token if len(token) <= 20 else token[:17] + "...")


def _value(token: str, spec: _Field, prefix: str) -> int:
    if token.isascii() and token.isdigit():
        v = int(token)
    elif spec.names is not None and token.isascii() and token.isalpha():
        named = spec.names.get(token.upper())
        if named is None:
            names = "JAN-DEC" if spec is _MONTH else "SUN-SAT"
            raise spec.error(f"unknown name {_show(token)} (use {names} or {spec.lo}-{spec.hi})", prefix)
        v = named
    elif token == "":
        raise spec.error("missing value", prefix)
    else:
        what = "a number or a name" if spec.names else "a number"
        raise spec.error(f"{_show(token)} is not {what}", prefix)
    if not spec.lo <= v <= spec.hi:
        raise spec.error(f"{v} is out of range {spec.lo}-{spec.hi}{spec.hint}", prefix)
    return v


def _item(item: str, spec: _Field, prefix: str) -> set[int]:
    """One comma-separated element: ``*``, ``a``, ``a-b``, each optionally ``/step``."""
    if item == "":
        raise spec.error("empty list element (check the commas)", prefix)
    base, sep, step_text = item.partition("/")
    step = 1
    if sep:
        if "/" in step_text:
            raise spec.error(f"{_show(item)} has more than one '/'", prefix)
        if not (step_text.isascii() and step_text.isdigit()):
            raise spec.error(f"step {_show(step_text)} in {_show(item)} is not a whole number", prefix)
        step = int(step_text)
        if step < 1:
            raise spec.error(f"step must be at least 1 in {_show(item)}", prefix)
        if step > spec.hi - spec.lo + 1:
            raise spec.error(f"step {step} in {_show(item)} is larger than the range {spec.lo}-{spec.hi}", prefix)
    if base == "*":
        lo, hi = spec.lo, spec.hi
    elif "-" in base:
        a, _, b = base.partition("-")
        if "-" in b:
            raise spec.error(f"{_show(item)} is not a valid range", prefix)
        if a == "":
            raise spec.error(f"{_show(item)} is not a valid value (negative numbers are not allowed)", prefix)
        lo, hi = _value(a, spec, prefix), _value(b, spec, prefix)
        if lo > hi:
            raise spec.error(f"range {_show(base)} is backwards ({lo} > {hi}); write the smaller value first", prefix)
    else:
        lo = _value(base, spec, prefix)
        hi = spec.hi if sep else lo
    return set(range(lo, hi + 1, step))


def _reject_chars(text: str, spec: _Field, prefix: str, chars: str, where: str) -> None:
    for ch in chars:
        if ch in text:
            raise spec.error(f"{ch!r} is only supported in {where}", prefix)


def _plain_field(text: str, spec: _Field, prefix: str) -> set[int]:
    """A field made of lists/ranges/steps/names only."""
    if "?" in text:
        if prefix == _EB_PREFIX:
            raise spec.error("'?' is only allowed (alone) in the day-of-month or day-of-week field", prefix)
        raise spec.error("'?' is not supported in 5-field cron (use '*')", prefix)
    values: set[int] = set()
    for item in text.split(","):
        values |= _item(item, spec, prefix)
    return values
