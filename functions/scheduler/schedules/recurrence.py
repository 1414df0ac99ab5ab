"""The recurrence rules of iCalendar events (RFC 5545 ``RRULE``, with ``EXDATE``), answered day by
day: :meth:`Recurrence.starts_on` says whether an instance of the event starts on a local day.

Taken: ``FREQ`` ``DAILY``, ``WEEKLY``, ``MONTHLY`` or ``YEARLY``; ``INTERVAL``; ``UNTIL`` or
``COUNT``; ``BYMONTH``; ``BYMONTHDAY`` (negative counts from the month's end); ``BYDAY``
(``SA``, ``MO,WE``; with an ordinal, ``-1MO`` or ``2TU``, under ``MONTHLY``, or ``YEARLY`` with
``BYMONTH``: within the month) and ``WKST``. The event's own start is always an instance
(RFC 5545: it counts as the first). Any other part (``BYSETPOS``, ``BYWEEKNO``, ``BYYEARDAY``,
``BYHOUR`` ...) and any other ``FREQ`` are refused, naming them.

A rule is never expanded: a day is checked against it (O(1) a day), so an endless weekly rule
costs nothing ahead of time. ``COUNT`` is turned into the last day once, by walking the days
from the start (at most ``MAX_COUNT`` instances, ``MAX_COUNT_YEARS`` years, and ``COUNT_DAYS``
days walked for all the rules of one calendar: a text of many ``COUNT`` rules that never match
is refused rather than read for minutes).
"""

from __future__ import annotations

import calendar as _months
import dataclasses
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from scheduler.schedules.base import ScheduleError
from scheduler.schedules.zones import _resolve_wall

FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_PARTS = {"FREQ", "INTERVAL", "UNTIL", "COUNT", "BYMONTH", "BYMONTHDAY", "BYDAY", "WKST"}
_BYDAY = re.compile(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL = re.compile(r"(\d{4})(\d{2})(\d{2})(T\d{6}Z?)?")
#: Bounds of a rule.
MAX_COUNT = 1000
MAX_COUNT_YEARS = 200
COUNT_DAYS = 200_000


class CountBudget:
    """The days the ``COUNT`` rules of one calendar may still walk (``COUNT_DAYS`` in all)."""

    def __init__(self, days: int = COUNT_DAYS) -> None:
        self.days = days

    def spend(self, days: int) -> None:
        """Take ``days`` from what is left; ``ScheduleError`` on ``ics`` once it is spent."""
        self.days -= days
        if self.days < 0:
            raise _refuse("its COUNT rules take too long to resolve (give their last day with UNTIL)")


MAX_INTERVAL = 1000


def _refuse(message: str) -> ScheduleError:
    return ScheduleError(message, field="ics")  # the message reads after its field: "ics: ..."


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A rule's starts, as local days: from ``start`` to ``until`` (inclusive; None: no end),
    every ``interval`` periods of ``freq``, on the days its ``BY`` parts select (``by_day``:
    (ordinal, weekday Monday=0), ordinal 0 for every such weekday), less ``exdates``."""

    freq: str
    start: date
    interval: int = 1
    until: date | None = None
    by_month: tuple[int, ...] = ()
    by_month_day: tuple[int, ...] = ()
    by_day: tuple[tuple[int, int], ...] = ()
    week_start: int = 0
    exdates: frozenset[date] = frozenset()

    def starts_on(self, day: date) -> bool:
        """Whether an instance starts on the local day ``day``."""
        if day < self.start or (self.until is not None and day > self.until) or day in self.exdates:
            return False
        if day == self.start:
            return True
        if self.by_month and day.month not in self.by_month:
            return False
        if self.interval > 1 and self._period(day) % self.interval:
            return False
        return self._selects(day)

    def _period(self, day: date) -> int:
        """How many periods of ``freq`` lie between the start's and ``day``'s."""
        if self.freq == "DAILY":
            return (day - self.start).days
        if self.freq == "WEEKLY":
            return (_week_of(day, self.week_start) - _week_of(self.start, self.week_start)).days // 7
        if self.freq == "MONTHLY":
            return (day.year - self.start.year) * 12 + day.month - self.start.month
        return day.year - self.start.year

    def _selects(self, day: date) -> bool:
        """Whether ``day`` is one of its period's days (the ``BY`` parts, else the start's)."""
        if self.by_month_day:
            last = _months.monthrange(day.year, day.month)[1]
            if not any(d == day.day or d == day.day - last - 1 for d in self.by_month_day):
                return False
        if self.by_day:
            return any(_weekday_matches(day, ordinal, weekday) for ordinal, weekday in self.by_day)
        if self.by_month_day:
            return True
        if self.freq == "WEEKLY":
            return day.weekday() == self.start.weekday()
        if self.freq == "MONTHLY" or (self.freq == "YEARLY" and self.by_month):
            return day.day == self.start.day
        if self.freq == "YEARLY":
            return (day.month, day.day) == (self.start.month, self.start.day)
        return True

    def next_start(self, day: date, days: int) -> date | None:
        """The first day ``>= day`` an instance starts on, looking ``days`` days ahead at most."""
        for _ in range(days):
            if self.until is not None and day > self.until:
                return None
            if self.starts_on(day):
                return day
            day += timedelta(days=1)
        return None


def _week_of(day: date, week_start: int) -> date:
    return day - timedelta(days=(day.weekday() - week_start) % 7)


def _weekday_matches(day: date, ordinal: int, weekday: int) -> bool:
    if day.weekday() != weekday:
        return False
    if ordinal > 0:
        return (day.day - 1) // 7 + 1 == ordinal
    if ordinal < 0:
        return (_months.monthrange(day.year, day.month)[1] - day.day) // 7 + 1 == -ordinal
    return True


def parse_rrule(
    text: str,
    start: date,
    exdates: frozenset[date] = frozenset(),
    budget: CountBudget | None = None,
    timed: tuple[time, ZoneInfo] | None = None,
) -> Recurrence:
    """The rule of an ``RRULE`` value for an event starting on the local day ``start``;
    ``ScheduleError`` on ``ics`` naming what is not supported. ``budget``: the days its
    ``COUNT`` may walk (shared by a calendar's rules). ``UNTIL`` is the last day an instance
    starts on: for a timed event (``timed``: its wall time and zone), the last whose start is at
    or before ``UNTIL``'s instant (RFC 5545: a UTC one with a ``Z``, else a time of the event's
    zone); for an all-day event, its date."""
    parts: dict[str, str] = {}
    for part in text.split(";"):
        key, _, value = part.partition("=")
        parts[key.strip().upper()] = value.strip().upper()
    freq = parts.get("FREQ", "")
    if freq not in FREQUENCIES:
        raise _refuse(f"RRULE FREQ={freq[:20]} is not supported (FREQ=DAILY, WEEKLY, MONTHLY or YEARLY)")
    unsupported = sorted(set(parts) - _PARTS)
    if unsupported:
        raise _refuse(
            f"RRULE {', '.join(unsupported)} is not supported (INTERVAL, UNTIL, COUNT, BYMONTH, BYMONTHDAY, BYDAY, WKST)"
        )
    if "UNTIL" in parts and "COUNT" in parts:
        raise _refuse("RRULE takes UNTIL or COUNT, not both")
    rule = Recurrence(
        freq,
        start,
        interval=_number(parts.get("INTERVAL", "1"), "INTERVAL", 1, MAX_INTERVAL),
        until=_until(parts["UNTIL"], timed) if "UNTIL" in parts else None,
        by_month=tuple(_number(m, "BYMONTH", 1, 12) for m in _list(parts, "BYMONTH")),
        by_month_day=tuple(_month_day(d) for d in _list(parts, "BYMONTHDAY")),
        by_day=tuple(_by_day(d, freq, "BYMONTH" in parts) for d in _list(parts, "BYDAY")),
        week_start=_weekday(parts.get("WKST", "MO"), "WKST"),
        exdates=exdates,
    )
    if "COUNT" in parts:
        return _with_count(rule, _number(parts["COUNT"], "COUNT", 1, MAX_COUNT), budget or CountBudget())
    return rule


def _list(parts: dict[str, str], key: str) -> list[str]:
    return [item for item in parts.get(key, "").split(",") if item] if key in parts else []


def _number(text: str, name: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _refuse(f"RRULE {name}={text[:20]} must be a whole number") from None
    if not low <= value <= high:
        raise _refuse(f"RRULE {name}={value} must be between {low} and {high}")
    return value


def _month_day(text: str) -> int:
    value = _number(text, "BYMONTHDAY", -31, 31)
    if value == 0:
        raise _refuse("RRULE BYMONTHDAY=0 is not a day of the month")
    return value


def _weekday(text: str, name: str) -> int:
    if text not in WEEKDAYS:
        raise _refuse(f"RRULE {name}={text[:20]} is not a weekday (MO, TU, WE, TH, FR, SA, SU)")
    return WEEKDAYS.index(text)


def _by_day(text: str, freq: str, by_month: bool) -> tuple[int, int]:
    found = _BYDAY.fullmatch(text)
    if found is None:
        raise _refuse(f"RRULE BYDAY={text[:20]} is not a weekday, optionally with an ordinal (SA, -1MO, 2TU)")
    ordinal = int(found.group(1) or 0)
    if ordinal and not (freq == "MONTHLY" or (freq == "YEARLY" and by_month)):
        raise _refuse(
            f"RRULE BYDAY={text} with an ordinal is supported under FREQ=MONTHLY or FREQ=YEARLY with BYMONTH only"
        )
    if not -5 <= ordinal <= 5:
        raise _refuse(f"RRULE BYDAY={text}: a month holds at most 5 of a weekday")
    return ordinal, WEEKDAYS.index(found.group(2))


def _until(text: str, timed: tuple[time, ZoneInfo] | None = None) -> date:
    """The last local day an instance may start on (see ``parse_rrule``)."""
    found = _UNTIL.fullmatch(text)
    if found is None:
        raise _refuse(f"RRULE UNTIL={text[:30]} is not a DATE or DATE-TIME")
    clock = found.group(4)
    try:
        day = date(int(found.group(1)), int(found.group(2)), int(found.group(3)))
        at = time(int(clock[1:3]), int(clock[3:5]), int(clock[5:7])) if clock else None
    except ValueError:
        raise _refuse(f"RRULE UNTIL={text[:30]} is not a valid date") from None
    if timed is None or at is None:
        return day
    wall, zone = timed
    if clock.endswith("Z"):  # a UTC instant: the day it is in the event's zone
        end = datetime.combine(day, at, tzinfo=UTC).astimezone(zone)
    else:  # a time of the event's own zone
        end = _resolve_wall(datetime.combine(day, at), zone)
    last = end.astimezone(zone).date()
    # That day's instance starts after UNTIL: the day before is the last
    return last if _resolve_wall(datetime.combine(last, wall), zone) <= end else last - timedelta(days=1)


def _with_count(rule: Recurrence, count: int, budget: CountBudget) -> Recurrence:
    """``rule`` ending on its ``count``-th instance (EXDATE'd ones count: RFC 5545)."""
    counting = dataclasses.replace(rule, exdates=frozenset())
    day, found = rule.start, 0
    last = date(min(rule.start.year + MAX_COUNT_YEARS, 9998), 12, 31)
    while day <= last:
        budget.spend(1)
        if counting.starts_on(day):
            found += 1
            if found == count:
                return dataclasses.replace(rule, until=day)
        day += timedelta(days=1)
    return rule


@dataclass(frozen=True, slots=True)
class TimedRecurrence:
    """A timed event's rule: an instance at the wall time ``at`` of ``zone`` on each day
    ``rule`` starts on, lasting ``duration``."""

    rule: Recurrence
    zone: ZoneInfo
    at: time
    duration: timedelta

    def _instance(self, day: date) -> datetime:
        return _resolve_wall(datetime.combine(day, self.at), self.zone)

    def piece(self, at: datetime) -> tuple[datetime, datetime] | None:
        """The instance ``[start, end)`` holding the instant ``at`` (aware UTC), if any."""
        day = at.astimezone(self.zone).date()
        for back in range(self.duration.days + 2):
            start_day = day - timedelta(days=back)
            if self.rule.starts_on(start_day):
                start = self._instance(start_day)
                if start <= at < start + self.duration:
                    return start, start + self.duration
        return None

    def next_start(self, at: datetime, days: int) -> datetime | None:
        """The first instance's start ``>= at``, looking ``days`` local days ahead at most."""
        day: date | None = at.astimezone(self.zone).date()
        for _ in range(2):
            day = self.rule.next_start(day, days) if day is not None else None
            if day is None:
                return None
            start = self._instance(day)
            if start >= at:
                return start
            day += timedelta(days=1)
        return None
