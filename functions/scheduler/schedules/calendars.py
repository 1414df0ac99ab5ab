"""Calendars: days and spans when a job must not fire (holidays, blackouts), and how a job's
occurrences meet them (``on_excluded``: ``skip`` or ``shift``).

A :class:`Calendar` is evaluated in its own time zone: a date excludes that local day (from the
first instant whose wall time is that day's 00:00 to the first of the next day's, under the DST
rule of :mod:`zones`). It holds merged local-day spans (``dates``, ``ranges`` of dates, all-day
iCalendar events), yearly days (``yearly``, yearly ``RRULE``\\ s) and merged spans of instants
(``ranges`` of date-times, timed iCalendar events).

The seam into the next-time computation is :func:`with_calendars`: it wraps a job's schedule in
a :class:`CalendarSchedule`, itself a :class:`Schedule`, so the window, the ``missed_runs``
policy and the preview of :mod:`planning` apply unchanged. Its occurrences are:

* ``skip``: the base schedule's occurrences that no calendar excludes;
* ``shift``: each base occurrence ``o`` moved to :func:`shift_of` ``o``: itself when no calendar
  excludes it, else the end of the excluded span containing it (spans of all the job's
  calendars chained: the first instant none excludes). Occurrences that land on one instant fire
  once there; the shift is monotonic, so the occurrences stay strictly increasing.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from scheduler.schedules.base import _ONE_US, HORIZON_YEARS, UTC, Schedule, ScheduleError, _require_aware
from scheduler.schedules.ics import parse_ics
from scheduler.schedules.planning_time import check_planning_time
from scheduler.schedules.recurrence import Recurrence, TimedRecurrence
from scheduler.schedules.zones import _resolve_wall, validate_timezone

#: The ``on_excluded`` modes.
ON_EXCLUDED_MODES = ("skip", "shift")
#: Bounds of one calendar (the API refuses more, with a 400 naming the field).
MAX_DATES = 1000
MAX_RANGES = 500
MAX_YEARLY = 366
MAX_CALENDARS_PER_JOB = 10
#: Excluded spans followed one after the other, or base occurrences looked at in a row (each in
#: another excluded span), at most: a bound on the work only. What ends a search is the horizon
#: (``HORIZON_YEARS`` from where it began: nothing allowed within it counts as never allowed), and
#: within an API request its time limit (``planning_time_limit``).
MAX_CHAIN = 1_000_000
MAX_HOPS = 1_000_000
#: Local days a look for the next excluded piece reads ahead (``Calendar.next_piece``).
LOOKAHEAD_DAYS = 400

_ONE_DAY = timedelta(days=1)
_HORIZON = timedelta(days=366 * HORIZON_YEARS)


@dataclass(frozen=True, slots=True)
class YearlyRule:
    """``days`` local days from ``month``-``day`` every year (between ``first_year`` and
    ``last_year`` when given); a year without that date (29 February) has none."""

    month: int
    day: int
    days: int = 1
    first_year: int | None = None
    last_year: int | None = None

    def start_in(self, year: int) -> date | None:
        """The first day of the rule's span in ``year`` (None: none that year)."""
        if (self.first_year is not None and year < self.first_year) or (
            self.last_year is not None and year > self.last_year
        ):
            return None
        try:
            return date(year, self.month, self.day)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class Excluded:
    """An excluded span ``[start, end)`` and the calendar that excludes its first instant looked
    at; ``end`` None: no allowed time follows within reach."""

    start: datetime
    end: datetime | None
    by: str


@dataclass(frozen=True, eq=False)
class Calendar:
    """A named calendar in its time zone: merged local-day spans ``[start, end)``, yearly
    rules, and merged instant spans ``[start, end)`` (aware UTC)."""

    name: str
    tz: ZoneInfo
    days: tuple[tuple[date, date], ...] = ()
    yearly: tuple[YearlyRule, ...] = ()
    instants: tuple[tuple[datetime, datetime], ...] = ()
    # iCalendar rules: of all-day events (with their length in days), of timed events.
    recurring: tuple[tuple[Recurrence, int], ...] = ()
    timed: tuple[TimedRecurrence, ...] = ()
    _day_starts: tuple[date, ...] = field(default=(), init=False, repr=False)
    _instant_starts: tuple[datetime, ...] = field(default=(), init=False, repr=False)
    # Yearly single days without bounds (``yearly``'s MM-DD), looked up as (month, day).
    _every_year: frozenset[tuple[int, int]] = field(default=frozenset(), init=False, repr=False)
    _other_yearly: tuple[YearlyRule, ...] = field(default=(), init=False, repr=False)
    # The recurring events that may start on a day of each month (index 1 to 12): one limited to
    # other months (BYMONTH) is not asked, a day at a time, whether it starts on this one.
    _recurring_by_month: tuple[tuple[tuple[Recurrence, int], ...], ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "days", _merge(self.days))
        object.__setattr__(self, "instants", _merge(self.instants))
        object.__setattr__(self, "_day_starts", tuple(start for start, _ in self.days))
        object.__setattr__(self, "_instant_starts", tuple(start for start, _ in self.instants))
        simple = [r for r in self.yearly if r.days == 1 and r.first_year is None and r.last_year is None]
        object.__setattr__(self, "_every_year", frozenset((r.month, r.day) for r in simple))
        object.__setattr__(self, "_other_yearly", tuple(r for r in self.yearly if r not in simple))
        by_month = [
            tuple(
                (r, n)
                for r, n in self.recurring
                if n > 1 or not r.by_month or month in r.by_month or month == r.start.month  # DTSTART is one
            )
            for month in range(13)
        ]
        object.__setattr__(self, "_recurring_by_month", tuple(by_month))

    @property
    def timezone(self) -> str:
        """The IANA name of the calendar's zone."""
        return self.tz.key

    def _day_span(self, day: date) -> tuple[date, date] | None:
        """The local days ``[start, end)`` around ``day`` that one piece excludes, if any."""
        found: tuple[date, date] | None = None
        i = bisect.bisect_right(self._day_starts, day) - 1
        if i >= 0 and self.days[i][1] > day:
            found = self.days[i]
        if (day.month, day.day) in self._every_year:
            found = (min(found[0], day), max(found[1], day + _ONE_DAY)) if found else (day, day + _ONE_DAY)
        for rule in self._other_yearly:
            for year in (day.year, day.year - 1):
                start = rule.start_in(year)
                if start is not None and start <= day < start + timedelta(days=rule.days):
                    end = start + timedelta(days=rule.days)
                    found = (min(found[0], start), max(found[1], end)) if found else (start, end)
        for recurrence, length in self._recurring_by_month[day.month]:
            for back in range(length):
                start = day - timedelta(days=back)
                if recurrence.starts_on(start):
                    end = start + timedelta(days=length)
                    found = (min(found[0], start), max(found[1], end)) if found else (start, end)
                    break
        return found

    def piece(self, at: datetime) -> tuple[datetime, datetime] | None:
        """The span ``[start, end)`` of this calendar's pieces containing the instant ``at``
        (aware UTC), or None when none excludes it."""
        found: tuple[datetime, datetime] | None = None
        local = at.astimezone(self.tz)
        # A wall time read twice (fold 1: the clocks turned back) may be past its day's end when
        # they turned back across midnight (St. John's until 2010): the span must hold ``at``.
        for day in (local.date(), local.date() + _ONE_DAY) if local.fold else (local.date(),):
            days = self._day_span(day)
            if days is not None:
                start, end = self._local_start(days[0]), self._local_start(days[1])
                if start <= at < end:
                    found = (start, end)
                    break
        i = bisect.bisect_right(self._instant_starts, at) - 1
        if i >= 0 and self.instants[i][1] > at:
            start, end = self.instants[i]
            found = (min(found[0], start), max(found[1], end)) if found else (start, end)
        for rule in self.timed:
            instance = rule.piece(at)
            if instance is not None:
                found = (min(found[0], instance[0]), max(found[1], instance[1])) if found else instance
        return found

    def next_piece(self, at: datetime) -> datetime | None:
        """The first instant ``>= at`` (aware UTC) this calendar excludes, looking at most
        ``LOOKAHEAD_DAYS`` local days ahead for its day pieces; None when none is found."""
        if self.piece(at) is not None:
            return at
        found: datetime | None = None
        i = bisect.bisect_right(self._instant_starts, at)
        if i < len(self.instants):
            found = self.instants[i][0]
        for rule in self.timed:
            start = rule.next_start(at, LOOKAHEAD_DAYS)
            found = start if found is None or (start is not None and start < found) else found
        day = at.astimezone(self.tz).date()
        for _ in range(LOOKAHEAD_DAYS if self.yearly or self.days or self.recurring else 0):
            day += _ONE_DAY
            if found is not None and self._local_start(day) > found:
                break
            if self._day_span(day) is not None:
                start = self._local_start(day)
                return start if found is None else min(found, start)
        return found

    def excludes(self, at: datetime) -> bool:
        """Whether the instant ``at`` is excluded."""
        return self.piece(_require_aware(at, "at")) is not None

    def excluded_span(self, at: datetime) -> Excluded | None:
        """The whole span this calendar excludes around ``at`` (its pieces that touch chained:
        a yearly 25 December and a dated 26 December are one span), or None."""
        return excluded_span([self], _require_aware(at, "at"))

    def _local_start(self, day: date) -> datetime:
        try:
            return _resolve_wall(datetime(day.year, day.month, day.day), self.tz)
        except (OverflowError, ValueError):
            return datetime.max.replace(tzinfo=UTC) if day.year > 2000 else datetime.min.replace(tzinfo=UTC)


def _merge(spans: Iterable[tuple[Any, Any]]) -> tuple[tuple[Any, Any], ...]:
    merged: list[tuple[Any, Any]] = []
    for start, end in sorted(s for s in spans if s[0] < s[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def excluded_span(calendars: Sequence[Calendar], at: datetime) -> Excluded | None:
    """The span excluded around ``at`` by any of ``calendars``, the spans that touch chained
    (Christmas in one calendar and Boxing Day in another make one span); None when ``at`` is
    allowed."""
    by = ""
    start = end = None
    for calendar in calendars:
        found = calendar.piece(at)
        if found is not None:
            if end is None or start is None:
                by, (start, end) = calendar.name, found
            else:
                start, end = min(start, found[0]), max(end, found[1])
    if start is None or end is None:
        return None
    end = _chain(calendars, end)
    if end is not None and end - at > _HORIZON:
        end = None  # nothing allowed within the search horizon
    return Excluded(_chain(calendars, start, backwards=True) or start, end, by)


def _chain(calendars: Sequence[Calendar], edge: datetime, *, backwards: bool = False) -> datetime | None:
    """Follow excluded pieces from ``edge`` (forwards: while ``edge`` is excluded; backwards:
    while the instant before it is); None when they go on past the horizon."""
    origin = edge
    for steps in range(MAX_CHAIN):
        moved = False
        for calendar in calendars:
            found = calendar.piece(edge - _ONE_US if backwards else edge)
            if found is not None:
                edge, moved = (found[0] if backwards else found[1]), True
        if not moved:
            return edge
        if abs(edge - origin) > _HORIZON:
            return None
        if steps % 64 == 63:
            check_planning_time()
    return None


def next_excluded(calendars: Sequence[Calendar], at: datetime) -> datetime | None:
    """The first instant ``>= at`` any of ``calendars`` excludes (within their look-ahead)."""
    found = [start for calendar in calendars if (start := calendar.next_piece(at)) is not None]
    return min(found) if found else None


def apply_calendars(calendars: Sequence[Calendar], occurrence: datetime, on_excluded: str = "skip") -> datetime | None:
    """One occurrence under ``on_excluded``: itself when allowed; when excluded, None (``skip``)
    or the end of its excluded span (``shift``, :func:`shift_of`). :class:`CalendarSchedule`
    applies this rule to a whole schedule."""
    if on_excluded == "shift":
        return shift_of(calendars, occurrence)
    return occurrence if excluded_span(calendars, occurrence) is None else None


def shift_of(calendars: Sequence[Calendar], occurrence: datetime) -> datetime | None:
    """Where ``on_excluded: shift`` moves an occurrence: itself when allowed, else the end of
    its excluded span (None when no allowed time follows within reach)."""
    span = excluded_span(calendars, occurrence)
    return occurrence if span is None else span.end


@dataclass(frozen=True, eq=False, repr=False)
class CalendarSchedule(Schedule):
    """A schedule with calendars applied (``on_excluded``: ``shift`` when ``shift``, else
    ``skip``). Answers as its base schedule does, with the excluded occurrences dropped or moved."""

    base: Schedule
    calendars: tuple[Calendar, ...]
    shift: bool = False
    # The base's occurrences at or before this instant are not the schedule's own (a job's: those
    # before it was created or before its start_at; a preview's: those not after its "after"):
    # none of them is moved to the end of a span.
    since: datetime | None = None

    def next_after(self, after: datetime) -> datetime | None:
        """First occurrence strictly after ``after`` (see the module's rule)."""
        after = _require_aware(after, "after")
        if self.shift:
            # An occurrence before ``after`` in the span holding ``after`` moves past it.
            around = excluded_span(self.calendars, after)
            if around is not None:
                earlier = self.base.next_after(floor_in_span(around.start, self.since))
                if earlier is not None and earlier <= after:
                    return around.end
        occurrence = self.base.next_after(after)
        for hops in range(MAX_HOPS):
            if occurrence is None or occurrence - after > _HORIZON:
                return None
            span = excluded_span(self.calendars, occurrence)
            if span is None:
                return occurrence
            if self.shift or span.end is None:
                return span.end
            occurrence = self.base.next_after(span.end - _ONE_US)
            if hops % 64 == 63:
                check_planning_time()
        return None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """Latest occurrence ``<= at``."""
        at = _require_aware(at, "at")
        occurrence = self.base.last_at_or_before(at)
        for hops in range(MAX_HOPS):
            if occurrence is None or at - occurrence > _HORIZON:
                return None
            span = excluded_span(self.calendars, occurrence)
            if span is None:
                return occurrence
            if self.shift and span.end is not None and span.end <= at:
                return span.end
            occurrence = self.base.last_at_or_before(span.start - _ONE_US)
            if hops % 64 == 63:
                check_planning_time()
        return None


def floor_in_span(start: datetime, since: datetime | None) -> datetime:
    """Where to look for the base's first occurrence in a span starting at ``start``: from the
    span's start, or after ``since`` when that is later."""
    return start - _ONE_US if since is None else max(start - _ONE_US, since)


def with_calendars(
    schedule: Schedule, calendars: Sequence[Calendar], on_excluded: str = "skip", *, since: datetime | None = None
) -> Schedule:
    """``schedule`` with ``calendars`` applied (itself when there are none): the seam of the
    calendars into the planning. ``since``: see :attr:`CalendarSchedule.since`."""
    if not calendars:
        return schedule
    if on_excluded not in ON_EXCLUDED_MODES:
        raise ScheduleError(f"must be one of {', '.join(ON_EXCLUDED_MODES)}", field="on_excluded")
    return CalendarSchedule(
        schedule.expression,
        schedule.tz,
        base=schedule,
        calendars=tuple(calendars),
        shift=on_excluded == "shift",
        since=since,
        kind=schedule.kind,
    )


# -- building a calendar from its definition -------------------------------------------------------


def build_calendar(name: str, definition: Mapping[str, Any]) -> Calendar:
    """The calendar of a definition: ``timezone`` and either ``ics`` (iCalendar text) or any of
    ``dates`` (``YYYY-MM-DD``), ``ranges`` (``{"start", "end"}``: dates, both days included, or
    date-times: an offset, else the calendar's wall time; end excluded) and ``yearly``
    (``MM-DD``). Raises :class:`ScheduleError` naming the field at fault."""
    try:
        tz = validate_timezone(definition.get("timezone") or "UTC")
    except ScheduleError as exc:
        raise ScheduleError(str(exc), field="timezone") from None
    if definition.get("ics") is not None:
        if any(definition.get(key) for key in ("dates", "ranges", "yearly")):
            raise ScheduleError("give either ics or dates/ranges/yearly, not both", field="ics")
        ics = parse_ics(definition["ics"], tz)
        every_year = tuple(YearlyRule(*rule) for rule in ics.yearly)
        return Calendar(name, tz, ics.days, every_year, ics.instants, ics.recurring, ics.timed)
    dates = _bounded(definition.get("dates"), MAX_DATES, "dates")
    ranges = _bounded(definition.get("ranges"), MAX_RANGES, "ranges")
    yearly = _bounded(definition.get("yearly"), MAX_YEARLY, "yearly")
    days = [(d, d + _ONE_DAY) for d in (_date(text, f"dates.{i}") for i, text in enumerate(dates))]
    instants: list[tuple[datetime, datetime]] = []
    for i, span in enumerate(ranges):
        _range(span, tz, f"ranges.{i}", days, instants)
    rules = tuple(_month_day(text, f"yearly.{i}") for i, text in enumerate(yearly))
    return Calendar(name, tz, tuple(days), rules, tuple(instants))


def _bounded(value: Any, most: int, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScheduleError("must be a list", field=name)
    if len(value) > most:
        raise ScheduleError(f"holds at most {most} items (got {len(value)})", field=name)
    return value


# The forms a calendar takes, and only those: Python's fromisoformat also reads week dates
# (2026-W53-5), a bare hour (T18) and a space for the T.
_DATE_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATE_TIME_FORM = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def _date(text: Any, where: str) -> date:
    if not isinstance(text, str) or not _DATE_FORM.fullmatch(text):
        raise ScheduleError("must be a date YYYY-MM-DD", field=where)
    try:
        value = date.fromisoformat(text)
    except ValueError:
        raise ScheduleError(f"must be a date YYYY-MM-DD (got {text[:20]!r})", field=where) from None
    if not 1970 <= value.year <= 9998:
        raise ScheduleError(f"year {value.year} is out of range 1970-9998", field=where)
    return value


def _month_day(text: Any, where: str) -> YearlyRule:
    if not isinstance(text, str) or len(text) != 5 or text[2] != "-":
        raise ScheduleError("must be a day of the year MM-DD, like 12-25", field=where)
    try:
        date(2000, int(text[:2]), int(text[3:]))  # 2000: a leap year, so 02-29 is a day
    except ValueError:
        raise ScheduleError(f"must be a day of the year MM-DD (got {text!r})", field=where) from None
    return YearlyRule(int(text[:2]), int(text[3:]))


def _range(
    span: Any, tz: ZoneInfo, where: str, days: list[tuple[date, date]], instants: list[tuple[datetime, datetime]]
) -> None:
    if not isinstance(span, Mapping) or set(span) != {"start", "end"}:
        raise ScheduleError("must be an object with start and end", field=where)
    start, end = span["start"], span["end"]
    if isinstance(start, str) and isinstance(end, str) and len(start) == 10 and len(end) == 10:
        first, last = _date(start, f"{where}.start"), _date(end, f"{where}.end")
        if last < first:
            raise ScheduleError("must not be before its start", field=f"{where}.end")
        days.append((first, last + _ONE_DAY))
        return
    begin, finish = _moment(start, tz, f"{where}.start"), _moment(end, tz, f"{where}.end")
    if finish == begin and (walls := _walls(start, end)) is not None and walls[0] < walls[1]:
        # Two wall times of a spring-forward gap: both are the instant the clocks jump.
        raise ScheduleError(
            f"the range lies wholly in a gap of {tz.key} (its wall times do not exist: the clocks jump"
            f" at {begin:%Y-%m-%dT%H:%M:%SZ}), so it would exclude nothing",
            field=f"{where}.end",
        )
    if finish <= begin:
        raise ScheduleError("must be after its start", field=f"{where}.end")
    instants.append((begin, finish))


def _walls(*texts: str) -> tuple[datetime, ...] | None:
    """A range's date-times (valid: ``_moment`` read them) as wall times, None when one has an offset."""
    values = tuple(datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00")) for text in texts)
    return None if any(value.tzinfo is not None for value in values) else values


def _moment(text: Any, tz: ZoneInfo, where: str) -> datetime:
    """A date-time of a range: with an offset, that instant; without, a wall time of ``tz``."""
    message = "must be a date YYYY-MM-DD (with the other one a date) or a date-time"
    if not isinstance(text, str) or not _DATE_TIME_FORM.fullmatch(text):
        raise ScheduleError(message, field=where)
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ScheduleError(message, field=where) from None
    if not 1970 <= value.year <= 9998:
        raise ScheduleError(f"year {value.year} is out of range 1970-9998", field=where)
    if value.tzinfo is None:
        return _resolve_wall(value, tz)
    return value.astimezone(UTC)
