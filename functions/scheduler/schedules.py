"""Schedule expressions: parsing, validation and next-fire-time computation.

One expression string per job (the API's ``schedule`` field), or an instant (``run_at``).

Forms
-----
``m h dom mon dow``
    Classic 5-field cron, matched against LOCAL WALL TIME in the job's IANA time zone.
    Lists (``1,5``), ranges (``1-5``), steps (``*/15``, ``1-10/2``, ``5/15`` = ``5-59/15``),
    month names ``JAN``-``DEC`` and day names ``SUN``-``SAT`` (case-insensitive); day of week
    0-7 where 0 and 7 are both Sunday. Vixie rule for the day fields: when BOTH are restricted
    a day matches if EITHER matches, otherwise both must match. As in Vixie cron a field that
    begins with ``*`` (``*``, ``*/2``) counts as unrestricted for that rule.
``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight`` ``@hourly``
    Shorthands for ``0 0 1 1 *``, ``0 0 1 * *``, ``0 0 * * 0``, ``0 0 * * *``, ``0 * * * *``.
``@every <duration>``
    Go-style duration made of ``<number><unit>`` parts, units ``d`` (24 h), ``h``, ``m``, ``s``
    (e.g. ``90s``, ``5m``, ``1h30m``, ``1.5h``, ``1d``); the total must be a whole number of
    seconds, at least 1 s and at most 36500 days. Fires at ``anchor + k * interval`` (k >= 0)
    in absolute time: no drift, independent of the time zone and of DST.
``cron(min hr dom mon dow year)``
    EventBridge cron: 6 fields, day-of-week 1-7 with 1 = Sunday (``SUN``-``SAT``), exactly one
    of day-of-month / day-of-week is ``?``. Day-of-month also takes ``L`` (last day), ``LW``
    (last weekday), ``nW`` (weekday nearest to day n, within the month); day-of-week also takes
    ``L`` (Saturday, the last day of the week), ``nL`` (last weekday n of the month, e.g.
    ``6L`` = last Friday) and ``n#k`` (k-th weekday n of the month, k 1-5). Year 1970-2199.
    Matched against local wall time like 5-field cron.
``rate(N unit)``
    ``minute(s)``, ``hour(s)``, ``day(s)`` and, as our extension, ``second(s)``; N a whole
    number >= 1 (singular/plural not enforced). Counts from the anchor like ``@every``.
``at(yyyy-mm-ddThh:mm:ss)``
    A one-off at that wall time in the job's time zone.
``one_off(run_at)``
    The API's ``run_at``: a one-off at that instant.

The anchor of ``rate()``/``@every`` is the job's ``start_at``, else its creation time (the
caller passes it to :func:`parse_schedule`); without one the Unix epoch is used, which aligns
the occurrences on a fixed grid (``rate(5 minutes)`` at :00, :05, ...).

DST rule (contract)
-------------------
Wall-time forms (5-field cron, macros, ``cron()``, ``at()``) match local wall time:

* a wall time that does not exist (spring-forward gap) fires once, at the instant the clocks
  jump (02:30 on a spring-forward night in Europe/Berlin fires at 03:00 CEST = 01:00Z); when
  several matching wall times fall in one gap (``*/15 2 * * *``) they all map to that instant
  and it fires once;
* a repeated wall time (fall back) fires once, at its first occurrence (``fold=0``). A
  consequence: the instants whose wall time is the second occurrence never fire, so
  ``0 * * * *`` in America/New_York fires at 05:00Z (01:00 EDT) and then 07:00Z (02:00 EST)
  on the fall-back night -- 06:00Z (01:00 EST) is not an occurrence.

Equivalently, the occurrence of a matching wall time ``w`` is the earliest instant whose local
wall time is ``>= w``. That map is monotonic, so occurrences are strictly increasing instants.

Search cost
-----------
Next/previous occurrences are found by walking matching *days* (skipping whole months and
years that cannot match) and bisecting the matching times of a day, never minute by minute.
The search stops at a horizon: :data:`HORIZON_YEARS` years from the starting point for
expressions without a year field, and past the last (before the first) listed year for
``cron()`` expressions with one; ``None`` is answered when nothing matches within it.
"""

from __future__ import annotations

import calendar
import re
from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Iterator
from zoneinfo import ZoneInfo

from scheduler.errors import ScheduleError  # noqa: F401 (re-exported)

__all__ = [
    "HORIZON_YEARS",
    "MISSED_RUN_POLICIES",
    "CronSchedule",
    "IntervalSchedule",
    "OneOffSchedule",
    "Schedule",
    "ScheduleError",
    "first_run",
    "next_occurrence",
    "one_off",
    "parse_schedule",
    "plan_next",
    "validate_timezone",
]

UTC = timezone.utc

#: Search horizon, in years, for wall-time expressions without a year field. 50 years covers
#: every expression that fires at all in practice (``0 0 29 2 *`` may wait 8 years across 2100,
#: "the 5th Monday of February" up to 40).
HORIZON_YEARS = 50

#: The ``missed_runs`` policies understood by :func:`plan_next`.
MISSED_RUN_POLICIES = ("skip", "run_once", "run_all")

MAX_EXPRESSION_LENGTH = 256
MAX_INTERVAL = timedelta(days=36500)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
# Wall-time searches never touch the last year datetime can hold (conversions would overflow).
_LAST_DATE = date(9998, 12, 31)
_FIRST_DATE = date(1, 1, 2)
_LAST_WALL = datetime(9998, 12, 30)
# UTC offsets lie within -12h..+14h, so an instant's wall time is never more than 26 h past
# the wall time of a later instant.
_MAX_OFFSET_SPREAD = timedelta(hours=26)


# --------------------------------------------------------------------------------------------
# Time zones and wall-time resolution
# --------------------------------------------------------------------------------------------

# Files of the zone database that are not zones a job should name: the host's own setting,
# and the "posix/" and "right/" (leap-second) copies.
_HOST_SPECIFIC_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def validate_timezone(name: str) -> ZoneInfo:
    """Return the ``ZoneInfo`` for an IANA name such as ``"Europe/Berlin"``.

    Raises :class:`ScheduleError` (``field="timezone"``) for anything that is not a known zone
    name: unknown names, empty strings, paths, non-strings, and host-specific entries of the
    zone database (``localtime``, ``posixrules``, ``Factory``, ``posix/...``, ``right/...``).
    Names are case-sensitive and must not carry surrounding whitespace.
    """
    if not isinstance(name, str):
        raise ScheduleError("timezone must be a string (an IANA name such as Europe/Berlin)",
                            field="timezone")
    if not name.strip():
        raise ScheduleError("timezone must not be empty (an IANA name such as Europe/Berlin)",
                            field="timezone")
    shown = name if len(name) <= 64 else name[:61] + "..."
    if (name != name.strip() or len(name) > 255 or "\x00" in name or "\\" in name
            or name.startswith("/") or ".." in name.split("/")
            or name in _HOST_SPECIFIC_ZONES or name.startswith(("posix/", "right/"))):
        raise ScheduleError(f"unknown time zone {shown!r} (expected an IANA name such as "
                            "Europe/Berlin)", field="timezone")
    try:
        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, ValueError, OSError, UnicodeError, ...
        raise ScheduleError(f"unknown time zone {shown!r} (expected an IANA name such as "
                            "Europe/Berlin)", field="timezone") from None


def _require_aware(value: datetime, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")
    return value.astimezone(UTC)


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    """Local wall time (naive) of an aware instant."""
    return instant.astimezone(tz).replace(tzinfo=None)


def _resolve_wall(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant (aware UTC) at which wall time ``wall`` fires under the DST rule.

    Existing wall times: the instant itself, the first one (``fold=0``) when repeated.
    Wall times in a gap: the instant the clocks jump, i.e. the earliest instant whose wall time
    is ``>= wall``.
    """
    first = wall.replace(tzinfo=tz).astimezone(UTC)  # fold=0: first occurrence when repeated
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # In a gap. fold=1 uses the offset after the transition (an instant before the jump whose
    # wall time is < wall); fold=0 the offset before it (an instant after the jump).
    lo = int(wall.replace(tzinfo=tz, fold=1).astimezone(UTC).timestamp())
    hi = int(first.timestamp()) + 1
    if lo > hi:
        lo, hi = hi, lo
    while lo < hi:  # smallest whole second whose wall time is >= wall (transitions are whole)
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid + 1
    return datetime.fromtimestamp(lo, UTC)


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------

class Schedule(ABC):
    """A parsed schedule. Immutable.

    Attributes: ``expression`` (the source text, stripped), ``timezone`` (IANA name),
    ``tz`` (its ``ZoneInfo``), ``kind`` (``"cron"``, ``"eventbridge_cron"``, ``"interval"``,
    ``"at"`` or ``"one_off"``) and ``one_off`` (True for ``at(...)`` and ``run_at``).
    """

    one_off: bool = False
    kind: str = ""

    def __init__(self, expression: str, tz: ZoneInfo):
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "tz", tz)
        object.__setattr__(self, "timezone", tz.key)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.expression!r} tz={self.timezone}>"

    @abstractmethod
    def next_after(self, after: datetime) -> datetime | None:
        """First fire instant strictly after ``after`` (an aware datetime), as an aware UTC
        datetime; ``None`` when there is none (a one-off already past, or nothing within the
        search horizon)."""

    @abstractmethod
    def last_at_or_before(self, at: datetime) -> datetime | None:
        """Latest fire instant ``<= at`` (aware), as an aware UTC datetime; ``None`` when there
        is none (within the search horizon)."""


class OneOffSchedule(Schedule):
    """Fires once, at ``run_at`` (aware UTC). From ``at(...)`` or the API's ``run_at``."""

    one_off = True

    def __init__(self, expression: str, tz: ZoneInfo, run_at: datetime, kind: str):
        super().__init__(expression, tz)
        object.__setattr__(self, "run_at", run_at.astimezone(UTC))
        object.__setattr__(self, "kind", kind)

    def next_after(self, after: datetime) -> datetime | None:
        after = _require_aware(after, "after")
        return self.run_at if self.run_at > after else None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        at = _require_aware(at, "at")
        return self.run_at if self.run_at <= at else None


class IntervalSchedule(Schedule):
    """Fires at ``anchor + k * interval`` for k >= 0 (``rate()`` and ``@every``)."""

    kind = "interval"

    def __init__(self, expression: str, tz: ZoneInfo, interval: timedelta, anchor: datetime):
        super().__init__(expression, tz)
        object.__setattr__(self, "interval", interval)
        object.__setattr__(self, "anchor", anchor.astimezone(UTC))

    def next_after(self, after: datetime) -> datetime | None:
        after = _require_aware(after, "after")
        if after < self.anchor:
            return self.anchor
        k = (after - self.anchor) // self.interval + 1
        try:
            return self.anchor + k * self.interval
        except OverflowError:
            return None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        at = _require_aware(at, "at")
        if at < self.anchor:
            return None
        k = (at - self.anchor) // self.interval
        return self.anchor + k * self.interval


# Day rules: given (year, month) answer the sorted matching days. Weekdays are Python's
# (Monday = 0 ... Sunday = 6) internally.

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


class CronSchedule(Schedule):
    """A wall-time schedule: 5-field cron, macros or EventBridge ``cron()``.

    ``minutes``/``hours``/``months`` are sorted tuples, ``years`` a sorted tuple or ``None``
    (any year). Fires at second 0 of each matching minute, under the DST rule.
    """

    def __init__(self, expression: str, tz: ZoneInfo, *, kind: str, minutes, hours, months,
                 years, day_rule):
        super().__init__(expression, tz)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "minutes", tuple(sorted(minutes)))
        object.__setattr__(self, "hours", tuple(sorted(hours)))
        object.__setattr__(self, "months", tuple(sorted(months)))
        object.__setattr__(self, "years", tuple(sorted(years)) if years is not None else None)
        object.__setattr__(self, "_day_rule", day_rule)
        object.__setattr__(self, "_cache", {})

    # -- days ----------------------------------------------------------------------------

    def _month_days(self, year: int, month: int) -> tuple[int, ...]:
        key = (year, month)
        days = self._cache.get(key)
        if days is None:
            if len(self._cache) > 1024:
                self._cache.clear()
            days = self._cache[key] = self._day_rule.days(year, month)
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
            return min(start.replace(year=start.year + HORIZON_YEARS, day=min(start.day, 28)),
                       _LAST_DATE)
        except ValueError:
            return _LAST_DATE

    def _stop_backward(self, start: date) -> date:
        if self.years is not None:
            return date(self.years[0], 1, 1)
        if start.year - HORIZON_YEARS < 1:
            return _FIRST_DATE
        return max(start.replace(year=start.year - HORIZON_YEARS, day=min(start.day, 28)),
                   _FIRST_DATE)


# --------------------------------------------------------------------------------------------
# Field parsing
# --------------------------------------------------------------------------------------------

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
        v = spec.names.get(token.upper())
        if v is None:
            names = "JAN-DEC" if spec is _MONTH else "SUN-SAT"
            raise spec.error(f"unknown name {_show(token)} (use {names} or {spec.lo}-{spec.hi})",
                             prefix)
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
            raise spec.error(f"step {_show(step_text)} in {_show(item)} is not a whole number",
                             prefix)
        step = int(step_text)
        if step < 1:
            raise spec.error(f"step must be at least 1 in {_show(item)}", prefix)
        if step > spec.hi - spec.lo + 1:
            raise spec.error(f"step {step} in {_show(item)} is larger than the range "
                             f"{spec.lo}-{spec.hi}", prefix)
    if base == "*":
        lo, hi = spec.lo, spec.hi
    elif "-" in base:
        a, _, b = base.partition("-")
        if "-" in b:
            raise spec.error(f"{_show(item)} is not a valid range", prefix)
        if a == "":
            raise spec.error(f"{_show(item)} is not a valid value (negative numbers are not "
                             "allowed)", prefix)
        lo, hi = _value(a, spec, prefix), _value(b, spec, prefix)
        if lo > hi:
            raise spec.error(f"range {_show(base)} is backwards ({lo} > {hi}); write the "
                             "smaller value first", prefix)
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
            raise spec.error("'?' is only allowed (alone) in the day-of-month or day-of-week "
                             "field", prefix)
        raise spec.error("'?' is not supported in 5-field cron (use '*')", prefix)
    values: set[int] = set()
    for item in text.split(","):
        values |= _item(item, spec, prefix)
    return values


# --------------------------------------------------------------------------------------------
# Forms
# --------------------------------------------------------------------------------------------

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_FORM_RE = re.compile(r"(?is)(cron|rate|at)\s*\((.*)\)")
_AT_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)([A-Za-zµ]+)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE_UNITS = {
    "second": 1, "seconds": 1,
    "minute": 60, "minutes": 60,
    "hour": 3600, "hours": 3600,
    "day": 86400, "days": 86400,
}


def _parse_classic(text: str, tz: ZoneInfo, expression: str, kind: str = "cron") -> CronSchedule:
    fields = text.split()
    if len(fields) != 5:
        hint = ""
        if len(fields) == 6:
            hint = "; for a 6-field expression with a year use cron(min hr dom mon dow year)"
        raise ScheduleError(
            f"expected 5 cron fields (minute hour day-of-month month day-of-week), got "
            f"{len(fields)}{hint}")
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
    return CronSchedule(expression, tz, kind=kind, minutes=minutes, hours=hours, months=months,
                        years=None, day_rule=rule)


def _parse_eventbridge(body: str, tz: ZoneInfo, expression: str) -> CronSchedule:
    fields = body.split()
    if len(fields) != 6:
        raise ScheduleError(
            f"cron() needs exactly 6 fields (minutes hours day-of-month month day-of-week "
            f"year), got {len(fields)}")
    p = _EB_PREFIX
    minute_t, hour_t, dom_t, month_t, dow_t, year_t = fields
    for text_, spec in ((minute_t, _MINUTE), (hour_t, _HOUR), (month_t, _MONTH),
                        (year_t, _YEAR)):
        _reject_chars(text_.upper(), spec, p, "#", "the day-of-week field")
        if spec is not _MONTH:  # (the month names JUL, NOV... contain these letters)
            _reject_chars(text_.upper(), spec, p, "LW", "the day fields")
    minutes = _plain_field(minute_t, _MINUTE, p)
    hours = _plain_field(hour_t, _HOUR, p)
    months = _plain_field(month_t, _MONTH, p)
    years = None if year_t == "*" else _plain_field(year_t, _YEAR, p)

    dom_q, dow_q = dom_t == "?", dow_t == "?"
    if dom_q and dow_q:
        raise ScheduleError("cron(): day-of-month and day-of-week are both '?'; exactly one of "
                            "them must be '?'")
    if not dom_q and not dow_q:
        raise ScheduleError("cron(): exactly one of day-of-month and day-of-week must be '?' "
                            "(e.g. cron(0 12 * * ? *) or cron(0 12 ? * MON-FRI *))")
    if dow_q:
        rule = _parse_eb_dom(dom_t, p)
    else:
        rule = _parse_eb_dow(dow_t, p)
    return CronSchedule(expression, tz, kind="eventbridge_cron", minutes=minutes, hours=hours,
                        months=months, years=years, day_rule=rule)


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
                raise _DOM.error(f"{_show(item)}: 'W' needs a single day before it (e.g. 15W) "
                                 "or 'LW'", p)
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
                raise _DOW_EB.error(f"{_show(item)}: '#' needs a single day before it "
                                    "(e.g. 2#1 = first Monday)", p)
            day = _value(day_text, _DOW_EB, p)
            if not (k_text.isascii() and k_text.isdigit()) or not 1 <= int(k_text) <= 5:
                raise _DOW_EB.error(f"{_show(item)}: the number after '#' must be 1-5", p)
            nth.add((py(day), int(k_text)))
        elif re.fullmatch(r"(?:\d+|[A-Z]{3})L", up):
            last_of.add(py(_value(item[:-1], _DOW_EB, p)))
        elif up.endswith("L"):
            raise _DOW_EB.error(f"{_show(item)}: 'L' needs a single day before it "
                                "(e.g. 6L = last Friday) or stands alone", p)
        else:
            weekdays |= {py(v) for v in _item(item, _DOW_EB, p)}
    return _EventBridgeDowDays(frozenset(weekdays), frozenset(last_of), frozenset(nth))


def _parse_duration(text: str) -> timedelta:
    if not text:
        raise ScheduleError("@every needs a duration, e.g. @every 90s, @every 1h30m")
    pos, total = 0, Decimal(0)
    while pos < len(text):
        m = _DURATION_PART_RE.match(text, pos)
        if m is None:
            if re.fullmatch(r"\d+(?:\.\d+)?", text):
                raise ScheduleError(f"@every: {_show(text)} has no unit (use d, h, m or s, "
                                    "e.g. 90s)")
            raise ScheduleError(f"@every: {_show(text)} is not a duration (expected e.g. 90s, "
                                "5m, 1h30m, 1d)")
        unit = _DURATION_UNITS.get(m.group(2).lower())
        if unit is None:
            raise ScheduleError(f"@every: unknown unit {_show(m.group(2))} in {_show(text)} "
                                "(use d, h, m or s)")
        total += Decimal(m.group(1)) * unit
        pos = m.end()
    if total != total.to_integral_value():
        raise ScheduleError(f"@every: {_show(text)} is not a whole number of seconds")
    if total < 1:
        raise ScheduleError("@every: the interval must be at least 1 second")
    if total > Decimal(int(MAX_INTERVAL.total_seconds())):
        raise ScheduleError("@every: the interval must be at most 36500 days")
    return timedelta(seconds=int(total))


def _parse_rate(body: str) -> timedelta:
    parts = body.split()
    if len(parts) != 2:
        raise ScheduleError("rate() takes a value and a unit, e.g. rate(5 minutes)")
    value_text, unit_text = parts
    if not (value_text.isascii() and value_text.isdigit()):
        raise ScheduleError(f"rate(): the value {_show(value_text)} must be a whole number >= 1")
    value = int(value_text)
    if value < 1:
        raise ScheduleError("rate(): the value must be at least 1")
    unit = _RATE_UNITS.get(unit_text.lower())
    if unit is None:
        raise ScheduleError(f"rate(): unknown unit {_show(unit_text)} (use minute(s), "
                            "hour(s), day(s) or second(s))")
    if value * unit > MAX_INTERVAL.total_seconds():
        raise ScheduleError("rate(): the interval must be at most 36500 days")
    return timedelta(seconds=value * unit)


def _parse_at(body: str, tz: ZoneInfo, expression: str) -> OneOffSchedule:
    body = body.strip()
    m = _AT_RE.fullmatch(body)
    if not m:
        raise ScheduleError(f"at(): {_show(body)} is not a date-time in the form "
                            "yyyy-mm-ddThh:mm:ss (e.g. at(2026-12-01T10:00:00))")
    try:
        wall = datetime(*(int(g) for g in m.groups()))
    except ValueError as exc:
        raise ScheduleError(f"at(): {body} is not a valid date-time ({exc})") from None
    if not 1970 <= wall.year <= 9998:
        raise ScheduleError(f"at(): year {wall.year} is out of range 1970-9998")
    return OneOffSchedule(expression, tz, _resolve_wall(wall, tz), kind="at")


def parse_schedule(expression: str, timezone: str = "UTC",
                   anchor: datetime | None = None) -> Schedule:
    """Parse a schedule expression (any form listed in the module docstring).

    ``timezone`` is the job's IANA zone (wall-time forms are matched in it). ``anchor`` (aware)
    is what ``rate()``/``@every`` count from: the job's ``start_at``, else its creation time;
    without one the Unix epoch is used. Raises :class:`ScheduleError` with a precise message
    (which field is wrong and why); ``field`` is ``"timezone"`` for a bad zone, ``"start_at"``
    for a naive anchor, ``"schedule"`` otherwise.
    """
    tz = validate_timezone(timezone)
    if not isinstance(expression, str):
        raise ScheduleError("schedule must be a string")
    text = expression.strip()
    if not text:
        raise ScheduleError("schedule is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ScheduleError(f"schedule is too long (at most {MAX_EXPRESSION_LENGTH} characters)")
    if anchor is not None:
        if not isinstance(anchor, datetime) or anchor.tzinfo is None or anchor.utcoffset() is None:
            raise ScheduleError("start_at must include a time-zone offset", field="start_at")
        try:
            anchor = anchor.astimezone(UTC)
        except OverflowError:
            raise ScheduleError("start_at is out of range", field="start_at") from None

    if text.startswith("@"):
        word, *rest_parts = text.split(None, 1)
        word_l, rest = word.lower(), (rest_parts[0].strip() if rest_parts else "")
        if word_l == "@every":
            interval = _parse_duration(rest)
            return IntervalSchedule(text, tz, interval, anchor or _EPOCH)
        if word_l in _MACROS:
            if rest:
                raise ScheduleError(f"{word} takes no arguments")
            return _parse_classic(_MACROS[word_l], tz, text, kind="cron")
        raise ScheduleError(f"unknown macro {_show(word)} (supported: @yearly, @annually, "
                            "@monthly, @weekly, @daily, @midnight, @hourly, @every <duration>)")

    form = _FORM_RE.fullmatch(text)
    if form:
        name, body = form.group(1).lower(), form.group(2)
        if name == "cron":
            return _parse_eventbridge(body, tz, text)
        if name == "rate":
            return IntervalSchedule(text, tz, _parse_rate(body), anchor or _EPOCH)
        return _parse_at(body, tz, text)
    head = re.match(r"(?i)(cron|rate|at)\s*\(", text)
    if head:
        raise ScheduleError(f"{head.group(1).lower()}(...): missing closing ')'")
    if "(" in text or ")" in text:
        raise ScheduleError("unknown schedule form (expected 5-field cron, a macro such as "
                            "@daily, @every <duration>, cron(...), rate(...) or at(...))")
    return _parse_classic(text, tz, text)


def one_off(run_at: datetime) -> Schedule:
    """A schedule that fires once, at the instant ``run_at`` (aware; the API's ``run_at``).

    Raises :class:`ScheduleError` (``field="run_at"``) when ``run_at`` has no offset.
    """
    if not isinstance(run_at, datetime) or run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ScheduleError("run_at must be an RFC 3339 timestamp with an offset",
                            field="run_at")
    try:
        instant = run_at.astimezone(UTC)
    except OverflowError:
        raise ScheduleError("run_at is out of range", field="run_at") from None
    return OneOffSchedule(instant.isoformat(), ZoneInfo("UTC"), instant, kind="one_off")


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------

def next_occurrence(schedule: Schedule, after: datetime, *, start_at: datetime | None = None,
                    end_at: datetime | None = None) -> datetime | None:
    """``schedule.next_after(after)`` bounded by the job's window.

    Never before ``start_at`` (when ``start_at`` is later than ``after`` the answer is the
    first occurrence ``>= start_at``), and ``None`` when the occurrence is after ``end_at``
    (``end_at`` is inclusive).
    """
    after = _require_aware(after, "after")
    if start_at is not None:
        start_at = _require_aware(start_at, "start_at")
        if start_at > after:
            after = start_at - _ONE_US
    nxt = schedule.next_after(after)
    if nxt is not None and end_at is not None and nxt > _require_aware(end_at, "end_at"):
        return None
    return nxt


def first_run(schedule: Schedule, now: datetime, *, start_at: datetime | None = None,
              end_at: datetime | None = None) -> datetime | None:
    """The first occurrence of a new, resumed or edited job.

    The first occurrence strictly after ``now`` (and ``>= start_at``, ``<= end_at``). Exception:
    a one-off (``run_at``/``at()``) whose time is already past -- or exactly ``now`` -- answers
    its own time, meaning "fire at once" (it is still ``None`` if that time is outside
    ``start_at``..``end_at``).
    """
    now = _require_aware(now, "now")
    if isinstance(schedule, OneOffSchedule) and schedule.run_at <= now:
        run_at = schedule.run_at
        if start_at is not None and run_at < _require_aware(start_at, "start_at"):
            return None
        if end_at is not None and run_at > _require_aware(end_at, "end_at"):
            return None
        return run_at
    return next_occurrence(schedule, now, start_at=start_at, end_at=end_at)


def plan_next(schedule: Schedule, previous: datetime, now: datetime, policy: str, *,
              start_at: datetime | None = None, end_at: datetime | None = None,
              cap: int = 10) -> datetime | None:
    """The occurrence to run after occurrence ``previous`` finished.

    ``now`` is the database's clock; ``policy`` is the job's ``missed_runs``:

    * first ``nxt = next_occurrence(after=previous)``; if it is ``None`` or ``>= now`` nothing
      was missed and it is the answer;
    * ``"skip"``: the first occurrence ``>= now`` (the missed ones are dropped);
    * ``"run_once"``: the latest missed occurrence (``<= now``): one catch-up run at once, then
      the schedule resumes normally;
    * ``"run_all"``: ``nxt`` (the missed ones run one after the other), unless more than
      ``cap`` occurrences were missed, in which case the first of the last ``cap`` missed ones.

    ``start_at``/``end_at`` bound every answer as in :func:`next_occurrence`. The cost is
    bounded whatever the gap: it walks back from ``now`` at most ``cap`` occurrences.
    """
    if policy not in MISSED_RUN_POLICIES:
        raise ValueError(f"unknown missed_runs policy {policy!r} (expected one of "
                         f"{', '.join(MISSED_RUN_POLICIES)})")
    if cap < 1:
        raise ValueError("cap must be at least 1")
    now = _require_aware(now, "now")
    nxt = next_occurrence(schedule, previous, start_at=start_at, end_at=end_at)
    if nxt is None or nxt >= now:
        return nxt
    if policy == "skip":
        return next_occurrence(schedule, now - _ONE_US, start_at=start_at, end_at=end_at)
    horizon = now
    if end_at is not None:
        horizon = min(horizon, _require_aware(end_at, "end_at"))
    last = schedule.last_at_or_before(horizon)
    if last is None or last <= nxt:
        return nxt
    if policy == "run_once":
        return last
    # run_all: walk back from the latest missed one; stop on reaching nxt (few missed).
    candidate = last
    for _ in range(cap - 1):
        earlier = schedule.last_at_or_before(candidate - _ONE_US)
        if earlier is None or earlier <= nxt:
            return nxt
        candidate = earlier
    return candidate
