"""The EventBridge dialect: ``cron(min hr dom mon dow year)`` with ``?``, ``L``, ``W`` and ``#``.

Parsed into the same :class:`CronSchedule` as 5-field cron, with EventBridge's day rules.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from scheduler.schedules.base import ScheduleError
from scheduler.schedules.cron import CronSchedule, DayRule
from scheduler.schedules.fields import (
    _DOM,
    _DOW_EB,
    _EB_PREFIX,
    _HOUR,
    _MINUTE,
    _MONTH,
    _YEAR,
    _item,
    _plain_field,
    _reject_chars,
    _show,
    _value,
)


@dataclass(frozen=True)
class _EventBridgeDomDays:
    days_set: frozenset[int]
    last: bool = False
    last_weekday: bool = False
    nearest_weekday: frozenset[int] = frozenset()

    def days(self, year: int, month: int) -> tuple[int, ...]:
        first_wd, ndays = calendar.monthrange(year, month)
        out = {d for d in self.days_set if d <= ndays}
        if self.last:
            out.add(ndays)
        if self.last_weekday:
            wd = (first_wd + ndays - 1) % 7
            out.add(ndays - 1 if wd == 5 else ndays - 2 if wd == 6 else ndays)
        for n in self.nearest_weekday:
            if n > ndays:
                continue
            wd = (first_wd + n - 1) % 7
            if wd == 5:  # Saturday: the Friday before, unless that leaves the month
                out.add(n - 1 if n > 1 else n + 2)
            elif wd == 6:  # Sunday: the Monday after, unless that leaves the month
                out.add(n + 1 if n < ndays else n - 2)
            else:
                out.add(n)
        return tuple(sorted(out))


@dataclass(frozen=True)
class _EventBridgeDowDays:
    weekdays: frozenset[int]
    last_of: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()

    def days(self, year: int, month: int) -> tuple[int, ...]:
        first_wd, ndays = calendar.monthrange(year, month)
        out = {d for d in range(1, ndays + 1) if (first_wd + d - 1) % 7 in self.weekdays}
        last_wd = (first_wd + ndays - 1) % 7
        for wd in self.last_of:
            out.add(ndays - (last_wd - wd) % 7)
        for wd, k in self.nth:
            d = 1 + (wd - first_wd) % 7 + 7 * (k - 1)
            if d <= ndays:
                out.add(d)
        return tuple(sorted(out))


def _parse_eventbridge(body: str, tz: ZoneInfo, expression: str) -> CronSchedule:
    fields = body.split()
    if len(fields) != 6:
        raise ScheduleError(
            f"cron() needs exactly 6 fields (minutes hours day-of-month month day-of-week year), got {len(fields)}"
        )
    p = _EB_PREFIX
    minute_t, hour_t, dom_t, month_t, dow_t, year_t = fields
    for text_, spec in ((minute_t, _MINUTE), (hour_t, _HOUR), (month_t, _MONTH), (year_t, _YEAR)):
        _reject_chars(text_.upper(), spec, p, "#", "the day-of-week field")
        if spec is not _MONTH:  # (the month names JUL, NOV... contain these letters)
            _reject_chars(text_.upper(), spec, p, "LW", "the day fields")
    minutes = _plain_field(minute_t, _MINUTE, p)
    hours = _plain_field(hour_t, _HOUR, p)
    months = _plain_field(month_t, _MONTH, p)
    years = None if year_t == "*" else _plain_field(year_t, _YEAR, p)

    dom_q, dow_q = dom_t == "?", dow_t == "?"
    if dom_q and dow_q:
        raise ScheduleError("cron(): day-of-month and day-of-week are both '?'; exactly one of them must be '?'")
    if not dom_q and not dow_q:
        raise ScheduleError(
            "cron(): exactly one of day-of-month and day-of-week must be '?' "
            "(e.g. cron(0 12 * * ? *) or cron(0 12 ? * MON-FRI *))"
        )
    rule: DayRule = _parse_eb_dom(dom_t, p) if dow_q else _parse_eb_dow(dow_t, p)
    return CronSchedule(
        expression=expression,
        tz=tz,
        kind="eventbridge_cron",
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        months=tuple(sorted(months)),
        years=tuple(sorted(years)) if years is not None else None,
        day_rule=rule,
    )


def _parse_eb_dom(text: str, p: str) -> _EventBridgeDomDays:
    if "?" in text:
        raise _DOM.error("'?' must be the whole field", p)
    _reject_chars(text, _DOM, p, "#", "the day-of-week field")
    days: set[int] = set()
    last = last_weekday = False
    nearest: set[int] = set()
    for item in text.split(","):
        up = item.upper()
        if up == "L":
            last = True
        elif up == "LW":
            last_weekday = True
        elif up.endswith("W"):
            n_text = item[:-1]
            if not (n_text.isascii() and n_text.isdigit()):
                raise _DOM.error(f"{_show(item)}: 'W' needs a single day before it (e.g. 15W) or 'LW'", p)
            nearest.add(_value(n_text, _DOM, p))
        elif "L" in up or "W" in up:
            raise _DOM.error(f"{_show(item)} is not valid: use L, LW or nW (e.g. 15W)", p)
        else:
            days |= _item(item, _DOM, p)
    return _EventBridgeDomDays(frozenset(days), last, last_weekday, frozenset(nearest))


def _parse_eb_dow(text: str, p: str) -> _EventBridgeDowDays:
    if "?" in text:
        raise _DOW_EB.error("'?' must be the whole field", p)
    weekdays: set[int] = set()
    last_of: set[int] = set()
    nth: set[tuple[int, int]] = set()

    def py(e: int) -> int:  # EventBridge 1 = Sunday -> Python Monday = 0
        return (e - 2) % 7

    for item in text.split(","):
        up = item.upper()
        if up == "L":
            weekdays.add(py(7))  # the last day of the week: Saturday
        elif "#" in item:
            day_text, _, k_text = item.partition("#")
            if not day_text or "/" in day_text or "-" in day_text:
                raise _DOW_EB.error(f"{_show(item)}: '#' needs a single day before it (e.g. 2#1 = first Monday)", p)
            day = _value(day_text, _DOW_EB, p)
            if not (k_text.isascii() and k_text.isdigit()) or not 1 <= int(k_text) <= 5:
                raise _DOW_EB.error(f"{_show(item)}: the number after '#' must be 1-5", p)
            nth.add((py(day), int(k_text)))
        elif re.fullmatch(r"(?:\d+|[A-Z]{3})L", up):
            last_of.add(py(_value(item[:-1], _DOW_EB, p)))
        elif up.endswith("L"):
            raise _DOW_EB.error(
                f"{_show(item)}: 'L' needs a single day before it (e.g. 6L = last Friday) or stands alone", p
            )
        else:
            weekdays |= {py(v) for v in _item(item, _DOW_EB, p)}
    return _EventBridgeDowDays(frozenset(weekdays), frozenset(last_of), frozenset(nth))
