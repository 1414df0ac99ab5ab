"""Wall-time schedules and their search: 5-field cron, the ``@daily``-style macros, and the
:class:`CronSchedule` that EventBridge ``cron()`` shares.

Next/previous occurrences walk matching *days* (skipping months and years that cannot match) and
bisect the matching times of a day, never minute by minute.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from scheduler.schedules.base import HORIZON_YEARS, Schedule, ScheduleError, _require_aware
from scheduler.schedules.fields import (
    _CLASSIC_PREFIX,
    _DOM,
    _DOW_CLASSIC,
    _HOUR,
    _MINUTE,
    _MONTH,
    _plain_field,
    _reject_chars,
)
from scheduler.schedules.zones import _resolve_wall, _wall

# Wall-time searches never touch the last year datetime can hold (conversions would overflow).
_LAST_DATE = date(9998, 12, 31)
_FIRST_DATE = date(1, 1, 2)
_LAST_WALL = datetime(9998, 12, 30)
# UTC offsets lie within -12h..+14h, so an instant's wall time is never more than 26 h past
# the wall time of a later instant.
_MAX_OFFSET_SPREAD = timedelta(hours=26)


# Day rules: given (year, month) answer the sorted matching days. Weekdays are Python's
# (Monday = 0 ... Sunday = 6) internally.


class DayRule(Protocol):
    """The days of a month the day fields select."""

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of that month, ascending."""
        ...


@dataclass(frozen=True)
class _VixieDays:
    dom: frozenset[int]
    dow: frozenset[int]
    dom_star: bool
    dow_star: bool

    def days(self, year: int, month: int) -> tuple[int, ...]:
        first_wd, ndays = calendar.monthrange(year, month)
        either = not (self.dom_star or self.dow_star)
        out = []
        for d in range(1, ndays + 1):
            dom_ok = d in self.dom
            dow_ok = (first_wd + d - 1) % 7 in self.dow
            if (dom_ok or dow_ok) if either else (dom_ok and dow_ok):
                out.append(d)
        return tuple(out)


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class CronSchedule(Schedule):
    """A wall-time schedule: 5-field cron, macros or EventBridge ``cron()``.

    ``minutes``/``hours``/``months`` are sorted tuples, ``years`` a sorted tuple or ``None``
    (any year), ``day_rule`` the days of a month the day fields select. Fires at second 0 of
    each matching minute, under the DST rule.
    """

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...] | None
    day_rule: DayRule
    # The matching days of recently searched months: (year, month) -> days.
    _cache: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "minutes", tuple(sorted(self.minutes)))
        object.__setattr__(self, "hours", tuple(sorted(self.hours)))
        object.__setattr__(self, "months", tuple(sorted(self.months)))
        if self.years is not None:
            object.__setattr__(self, "years", tuple(sorted(self.years)))

    # -- days ----------------------------------------------------------------------------

    def _month_days(self, year: int, month: int) -> tuple[int, ...]:
        key = (year, month)
        days = self._cache.get(key)
        if days is None:
            if len(self._cache) > 1024:
                self._cache.clear()
            days = self._cache[key] = self.day_rule.days(year, month)
        return days

    def _days_forward(self, start: date, stop: date) -> Iterator[date]:
        """Matching dates from ``start`` to ``stop`` inclusive, ascending."""
        y, m, first = start.year, start.month, start.day
        months, years = self.months, self.years
        while (y, m) <= (stop.year, stop.month):
            if years is not None and y not in years:
                i = bisect_right(years, y)
                if i == len(years):
                    return
                y, m, first = years[i], 1, 1
                continue
            if m not in months:
                i = bisect_right(months, m)
                if i == len(months):
                    y, m, first = y + 1, 1, 1
                else:
                    m, first = months[i], 1
                continue
            for d in self._month_days(y, m):
                if d >= first:
                    day = date(y, m, d)
                    if day > stop:
                        return
                    yield day
            y, m, first = (y + 1, 1, 1) if m == 12 else (y, m + 1, 1)

    def _days_backward(self, start: date, stop: date) -> Iterator[date]:
        """Matching dates from ``start`` down to ``stop`` inclusive, descending."""
        y, m, last = start.year, start.month, start.day
        months, years = self.months, self.years
        while (y, m) >= (stop.year, stop.month):
            if years is not None and y not in years:
                i = bisect_left(years, y)
                if i == 0:
                    return
                y, m, last = years[i - 1], 12, 31
                continue
            if m not in months:
                i = bisect_left(months, m)
                if i == 0:
                    y, m, last = y - 1, 12, 31
                else:
                    m, last = months[i - 1], 31
                continue
            for d in reversed(self._month_days(y, m)):
                if d <= last:
                    day = date(y, m, d)
                    if day < stop:
                        return
                    yield day
            y, m, last = (y - 1, 12, 31) if m == 1 else (y, m - 1, 31)

    # -- times within a day --------------------------------------------------------------

    def _count_le(self, wall: datetime) -> int:
        """How many of a day's candidate times are <= the time of day of ``wall``."""
        n_min = len(self.minutes)
        count = bisect_left(self.hours, wall.hour) * n_min
        if wall.hour in self.hours:
            count += bisect_right(self.minutes, wall.minute)
        return count

    def _candidate(self, day: date, i: int) -> datetime:
        h, m = divmod(i, len(self.minutes))
        return datetime(day.year, day.month, day.day, self.hours[h], self.minutes[m])

    def next_after(self, after: datetime) -> datetime | None:
        after = _require_aware(after, "after")
        tz = self.tz
        # f(w) > after implies w > wall(after): start the walk right there.
        try:
            low = _wall(after, tz)
        except OverflowError:
            return None
        stop = self._stop_forward(low.date())
        n = len(self.hours) * len(self.minutes)

        def fires_later(i: int, day: date) -> bool:
            return _resolve_wall(self._candidate(day, i), tz) > after

        for day in self._days_forward(low.date(), stop):
            i = self._count_le(low) if day == low.date() else 0
            if i >= n:
                continue
            if fires_later(i, day):
                return _resolve_wall(self._candidate(day, i), tz)
            if not fires_later(n - 1, day):
                continue
            lo, hi = i + 1, n - 1  # fires_later(hi) is True; find the first True
            while lo < hi:
                mid = (lo + hi) // 2
                if fires_later(mid, day):
                    hi = mid
                else:
                    lo = mid + 1
            return _resolve_wall(self._candidate(day, lo), tz)
        return None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        at = _require_aware(at, "at")
        tz = self.tz
        try:
            wall = _wall(at, tz)
        except OverflowError:
            return None
        # f(w) <= at implies w <= the largest wall time of an instant <= at.
        high = min(wall, _LAST_WALL) + _MAX_OFFSET_SPREAD
        stop = self._stop_backward(wall.date())

        def fires_by(i: int, day: date) -> bool:
            return _resolve_wall(self._candidate(day, i), tz) <= at

        n = len(self.hours) * len(self.minutes)
        for day in self._days_backward(high.date(), stop):
            end = self._count_le(high) if day == high.date() else n
            if end <= 0:
                continue
            if fires_by(end - 1, day):
                return _resolve_wall(self._candidate(day, end - 1), tz)
            if not fires_by(0, day):
                continue
            lo, hi = 0, end - 2  # fires_by(lo) is True; find the last True
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if fires_by(mid, day):
                    lo = mid
                else:
                    hi = mid - 1
            return _resolve_wall(self._candidate(day, lo), tz)
        return None

    def _stop_forward(self, start: date) -> date:
        if self.years is not None:
            return date(self.years[-1], 12, 31)
        try:
            return min(start.replace(year=start.year + HORIZON_YEARS, day=min(start.day, 28)), _LAST_DATE)
        except ValueError:
            return _LAST_DATE

    def _stop_backward(self, start: date) -> date:
        if self.years is not None:
            return date(self.years[0], 1, 1)
        if start.year - HORIZON_YEARS < 1:
            return _FIRST_DATE
        return max(start.replace(year=start.year - HORIZON_YEARS, day=min(start.day, 28)), _FIRST_DATE)


_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _parse_classic(text: str, tz: ZoneInfo, expression: str, kind: str = "cron") -> CronSchedule:
    fields = text.split()
    if len(fields) != 5:
        hint = ""
        if len(fields) == 6:
            hint = "; for a 6-field expression with a year use cron(min hr dom mon dow year)"
        raise ScheduleError(
            f"expected 5 cron fields (minute hour day-of-month month day-of-week), got {len(fields)}{hint}"
        )
    p = _CLASSIC_PREFIX
    where = "the cron(...) form"
    for text_, spec in zip(fields, (_MINUTE, _HOUR, _DOM, _MONTH, _DOW_CLASSIC)):
        _reject_chars(text_.upper(), spec, p, "#", where)
    _reject_chars(fields[2].upper(), _DOM, p, "LW", where)
    _reject_chars(fields[4].upper(), _DOW_CLASSIC, p, "L", where)
    minutes = _plain_field(fields[0], _MINUTE, p)
    hours = _plain_field(fields[1], _HOUR, p)
    dom = _plain_field(fields[2], _DOM, p)
    months = _plain_field(fields[3], _MONTH, p)
    dow_cron = _plain_field(fields[4], _DOW_CLASSIC, p)
    dow = frozenset((c - 1) % 7 for c in dow_cron)  # cron 0/7 = Sunday -> Python 6
    rule = _VixieDays(frozenset(dom), dow, fields[2].startswith("*"), fields[4].startswith("*"))
    return CronSchedule(
        expression=expression,
        tz=tz,
        kind=kind,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        months=tuple(sorted(months)),
        years=None,
        day_rule=rule,
    )
