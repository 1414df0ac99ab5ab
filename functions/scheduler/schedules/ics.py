"""iCalendar (RFC 5545) text read into a calendar's pieces, with the standard library only.

Taken: ``VEVENT``\\ s whose ``DTSTART``/``DTEND`` (or ``DURATION``) are dates (all-day: the days
from the start to the day before the end) or date-times (timed: the span from the start to the
end; ``Z``, a ``TZID`` naming an IANA zone, or floating: a wall time of the calendar's zone);
``RRULE``\\ s on either (:mod:`recurrence`: ``FREQ`` ``DAILY`` to ``YEARLY``, ``INTERVAL``,
``UNTIL``, ``COUNT``, ``BYMONTH``, ``BYMONTHDAY``, ``BYDAY`` as in every Saturday or the last Monday
of May; a timed event recurs at its wall time in its zone); ``EXDATE`` (instances left out) and
``RDATE`` (instances added, as long as the event), several values or lines each. ``VTIMEZONE``
and ``VALARM`` blocks are passed over (zones are named by ``TZID``). Anything else that changes
which times an event covers (``EXRULE``, ``RECURRENCE-ID``, ``RDATE;VALUE=PERIOD``, another
``RRULE`` part ...) is refused with a :class:`ScheduleError` on the field ``ics`` naming it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from scheduler.schedules.base import UTC, ScheduleError
from scheduler.schedules.recurrence import CountBudget, Recurrence, TimedRecurrence, parse_rrule
from scheduler.schedules.zones import _resolve_wall, validate_timezone

# Properties of a VEVENT that change which times it covers, and that are not supported.
_REFUSED = ("EXRULE", "RECURRENCE-ID")
# Properties a VEVENT may repeat (their values gathered).
_LISTED = ("EXDATE", "RDATE")
_PASSED_OVER = ("VTIMEZONE", "VALARM", "STANDARD", "DAYLIGHT")
_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")
_DATE_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)")
_MAX_EVENT_DAYS = 366
# A recurring timed event lasts at most this long (each instant looks back this many days).
_MAX_TIMED_DAYS = 7
# At most 12 digits a part: more is past the year 9999 anyway (and past 4,300, Python refuses
# to read the number at all).
_DURATION = re.compile(r"P(?:(\d{1,12})W)?(?:(\d{1,12})D)?(?:T(?:(\d{1,12})H)?(?:(\d{1,12})M)?(?:(\d{1,12})S)?)?")
#: Bounds of an iCalendar text.
MAX_ICS_CHARS = 256 * 1024
MAX_ICS_EVENTS = 2000
# The days of the recurring events (all-day: their length; timed: their days plus two), summed:
# what one instant's check looks at.
MAX_RULE_DAYS = 1000

Day = tuple[date, date]
Span = tuple[datetime, datetime]
# A yearly rule: (month, day, days, first year, last year or None).
Yearly = tuple[int, int, int, int, int | None]
Event = dict[str, tuple[dict[str, str], str]]


class Pieces(NamedTuple):
    """What an iCalendar text excludes: local-day spans, yearly rules (the simple ones), instant
    spans, rules of all-day events (with their length in days) and rules of timed events."""

    days: tuple[Day, ...]
    yearly: tuple[Yearly, ...]
    instants: tuple[Span, ...]
    recurring: tuple[tuple[Recurrence, int], ...]
    timed: tuple[TimedRecurrence, ...]


def _refuse(message: str) -> ScheduleError:
    return ScheduleError(message, field="ics")  # the message reads after its field: "ics: ..."


def _lines(text: str) -> list[str]:
    """The content lines, unfolded (a line starting with a space or a tab continues the last)."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if raw[:1] in (" ", "\t") and lines:
            lines[-1] += raw[1:]
        elif raw.strip():
            lines.append(raw)
    return lines


def _property(line: str) -> tuple[str, dict[str, str], str]:
    """``NAME;PARAM=V;...:value`` as (NAME, params, value)."""
    head, sep, value = line.partition(":")
    if not sep:
        raise _refuse(f"{line[:40]!r} is not a content line NAME:value")
    name, *params = head.split(";")
    found = {}
    for param in params:
        key, _, val = param.partition("=")
        found[key.upper()] = val.strip('"')
    return name.upper(), found, value.strip()


class _Reader:
    """The state of a read: the pieces found, the event being read, the blocks passed over."""

    def __init__(self, tz: ZoneInfo):
        self.tz = tz
        self.days: list[Day] = []
        self.yearly: list[Yearly] = []
        self.instants: list[Span] = []
        self.recurring: list[tuple[Recurrence, int]] = []
        self.timed: list[TimedRecurrence] = []
        self.event: Event | None = None
        self.listed: dict[str, list[tuple[dict[str, str], str]]] = {}
        self.budget = CountBudget()  # the days its COUNT rules may walk, all together
        self.skipping: list[str] = []
        self.count = 0

    def line(self, name: str, params: dict[str, str], value: str) -> None:
        if self.skipping:
            if name == "END" and value.upper() == self.skipping[-1]:
                self.skipping.pop()
            elif name == "BEGIN":
                self.skipping.append(value.upper())
        elif name == "BEGIN":
            self.begin(value.upper())
        elif name == "END" and value.upper() == "VEVENT" and self.event is not None:
            self.count += 1
            if self.count > MAX_ICS_EVENTS:
                raise _refuse(f"holds at most {MAX_ICS_EVENTS} events")
            _event(self.event, self.listed, self)
            self.event = None
        elif self.event is not None:
            if name in _REFUSED:
                raise _refuse(f"{name} is not supported (events are DTSTART, DTEND, RRULE, EXDATE and RDATE)")
            if name in _LISTED:
                self.listed.setdefault(name, []).append((params, value))
            else:
                self.event[name] = (params, value)

    def begin(self, kind: str) -> None:
        if kind == "VEVENT" and self.event is None:
            self.event, self.listed = {}, {}
        elif kind in _PASSED_OVER:
            self.skipping.append(kind)
        elif kind != "VCALENDAR":
            raise _refuse(f"{kind} components are not supported (only VEVENT)")


def parse_ics(text: object, tz: ZoneInfo) -> Pieces:
    """The pieces of an iCalendar text."""
    if not isinstance(text, str) or not text.strip():
        raise _refuse("must be iCalendar text (BEGIN:VCALENDAR ... END:VCALENDAR)")
    if not text.lstrip().upper().startswith("BEGIN:VCALENDAR"):
        raise _refuse("must be iCalendar text, starting with BEGIN:VCALENDAR")
    if len(text) > MAX_ICS_CHARS:
        raise _refuse(f"holds at most {MAX_ICS_CHARS} characters (got {len(text)})")
    reader = _Reader(tz)
    for line in _lines(text):
        reader.line(*_property(line))
    if reader.event is not None:  # read to its end, the event would be lost without a word
        raise _refuse("a VEVENT has no END:VEVENT")
    weight = sum(length for _, length in reader.recurring) + sum(t.duration.days + 2 for t in reader.timed)
    if weight > MAX_RULE_DAYS:
        raise _refuse(
            f"its recurring events weigh {weight:,} days (the days each lasts, summed; at most {MAX_RULE_DAYS:,}): "
            "every instant checked looks at each of their days"
        )
    return Pieces(
        tuple(reader.days), tuple(reader.yearly), tuple(reader.instants), tuple(reader.recurring), tuple(reader.timed)
    )


def _event(event: Event, listed: dict[str, list[tuple[dict[str, str], str]]], reader: _Reader) -> None:
    if "DTSTART" not in event:
        raise _refuse("a VEVENT has no DTSTART")
    start = _value(*event["DTSTART"], reader.tz)
    end = _end(event, start, reader.tz)
    if isinstance(start, datetime):
        assert isinstance(end, datetime)
        _timed(event, listed, start, end, reader)
        return
    assert isinstance(end, date) and not isinstance(end, datetime)
    length = (end - start).days
    if length > _MAX_EVENT_DAYS and ("RRULE" in event or "RDATE" in listed):
        raise _refuse(f"a recurring event spans at most {_MAX_EVENT_DAYS} days")
    exdates = frozenset(_day_of(v, reader.tz) for v in _values(listed, "EXDATE", reader.tz))
    if "RRULE" in event:
        _all_day_rule(event["RRULE"][1], start, length, exdates, reader)
    elif start not in exdates:
        reader.days.append((start, end))
    for added in _values(listed, "RDATE", reader.tz):
        if isinstance(added, datetime):
            raise _refuse("an all-day VEVENT takes RDATE;VALUE=DATE values (dates)")
        if added not in exdates:
            reader.days.append((added, added + timedelta(days=length)))


def _end(event: Event, start: date | datetime, tz: ZoneInfo) -> date | datetime:
    """The event's end: its DTEND, else its start plus its DURATION, else one day (all-day)."""
    timed = isinstance(start, datetime)
    if "DTEND" in event:
        end = _value(*event["DTEND"], tz)
    elif "DURATION" in event:
        try:
            end = start + _duration(event["DURATION"][1], timed)
        except OverflowError:  # past year 9999, or more days than a timedelta holds
            raise _refuse(f"DURATION {event['DURATION'][1][:30]!r} ends past the year 9999") from None
    elif timed:
        raise _refuse("a VEVENT with a DATE-TIME DTSTART needs a later DATE-TIME DTEND (or a DURATION)")
    else:
        end = start + timedelta(days=1)
    if timed and (not isinstance(end, datetime) or end <= start):
        raise _refuse("a VEVENT with a DATE-TIME DTSTART needs a later DATE-TIME DTEND")
    if not timed and (isinstance(end, datetime) or end <= start):
        raise _refuse("an all-day VEVENT needs a later DATE DTEND (or none: one day)")
    return end


def _duration(text: str, timed: bool) -> timedelta:
    found = _DURATION.fullmatch(text.strip().upper())
    if found is None or not any(found.groups()):
        raise _refuse(f"DURATION {text[:30]!r} is not a duration like PT2H, P1D or P1W")
    weeks, days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    value = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    if not timed and value.seconds:
        raise _refuse(f"DURATION {text[:30]!r} of an all-day VEVENT must be whole days (P1D, P1W)")
    return value


def _timed(
    event: Event, listed: dict[str, list[tuple[dict[str, str], str]]], start: datetime, end: datetime, reader: _Reader
) -> None:
    """A timed event: its span, its rule's instances, its RDATEs, less its EXDATEs."""
    zone = _zone(event["DTSTART"][0], event["DTSTART"][1], reader.tz)
    duration = end - start
    excluded = set(_values(listed, "EXDATE", reader.tz))
    if "RRULE" in event:
        if duration > timedelta(days=_MAX_TIMED_DAYS):
            raise _refuse(f"a recurring timed VEVENT lasts at most {_MAX_TIMED_DAYS} days")
        local = start.astimezone(zone)
        days = frozenset(v.astimezone(zone).date() if isinstance(v, datetime) else v for v in excluded)
        wall = local.time().replace(tzinfo=None)
        rule = parse_rrule(event["RRULE"][1], local.date(), days, reader.budget, timed=(wall, zone))
        reader.timed.append(TimedRecurrence(rule, zone, wall, duration))
    elif start not in excluded:
        reader.instants.append((start, end))
    for added in _values(listed, "RDATE", reader.tz):
        if not isinstance(added, datetime):
            raise _refuse("a timed VEVENT takes RDATE values that are DATE-TIMEs")
        if added not in excluded:
            reader.instants.append((added, added + duration))


def _all_day_rule(text: str, start: date, length: int, exdates: frozenset[date], reader: _Reader) -> None:
    """An all-day event's RRULE: a simple yearly one as a yearly day, any other as a rule."""
    if not exdates:
        try:
            reader.yearly.append(_yearly(text, start, length))
            return
        except ScheduleError:
            pass
    reader.recurring.append((parse_rrule(text, start, exdates, reader.budget), length))


def _values(listed: dict[str, list[tuple[dict[str, str], str]]], name: str, tz: ZoneInfo) -> list[date | datetime]:
    """The values of an EXDATE or RDATE (several lines, comma-separated lists)."""
    found: list[date | datetime] = []
    for params, value in listed.get(name, ()):
        if params.get("VALUE", "").upper() == "PERIOD":
            raise _refuse(f"{name};VALUE=PERIOD is not supported (DATE or DATE-TIME values)")
        found.extend(_value(params, item.strip(), tz) for item in value.split(",") if item.strip())
    return found


def _day_of(value: date | datetime, tz: ZoneInfo) -> date:
    return value.astimezone(tz).date() if isinstance(value, datetime) else value


def _zone(params: dict[str, str], value: str, tz: ZoneInfo) -> ZoneInfo:
    """The zone a DATE-TIME is read in: UTC for ``Z``, its TZID's, else the calendar's."""
    if value.upper().endswith("Z"):
        return ZoneInfo("UTC")
    if "TZID" in params:
        return validate_timezone(params["TZID"])
    return tz


def _value(params: dict[str, str], value: str, tz: ZoneInfo) -> date | datetime:
    """A DTSTART/DTEND: a date, or an instant (aware UTC)."""
    if params.get("VALUE", "").upper() == "DATE" or _DATE.fullmatch(value):
        found = _DATE.fullmatch(value)
        if not found:
            raise _refuse(f"{value[:30]!r} is not a DATE (YYYYMMDD)")
        return _checked_date(*found.groups())
    found = _DATE_TIME.fullmatch(value)
    if not found:
        raise _refuse(f"{value[:30]!r} is not a DATE-TIME (YYYYMMDDTHHMMSS, optionally Z)")
    year, month, day, hour, minute, second, utc = found.groups()
    _checked_date(year, month, day)
    try:
        wall = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError:
        raise _refuse(f"{value!r} is not a valid DATE-TIME") from None
    if utc:
        return wall.replace(tzinfo=UTC)
    zone = tz
    if "TZID" in params:
        try:
            zone = validate_timezone(params["TZID"])
        except ScheduleError:
            raise _refuse(f"TZID {params['TZID'][:40]!r} is not an IANA zone name (like Europe/London)") from None
    return _resolve_wall(wall, zone)


def _checked_date(year: str, month: str, day: str) -> date:
    try:
        value = date(int(year), int(month), int(day))
    except ValueError:
        raise _refuse(f"{year}{month}{day} is not a valid date") from None
    if not 1970 <= value.year <= 9998:
        raise _refuse(f"year {value.year} is out of range 1970-9998")
    return value


def _yearly(rule: str, start: date, length: int) -> Yearly:
    """A yearly RRULE of an all-day event starting ``start``, ``length`` days long."""
    parts = {}
    for part in rule.split(";"):
        key, _, value = part.partition("=")
        parts[key.upper()] = value.upper()
    if parts.get("FREQ") != "YEARLY":
        raise _refuse(f"RRULE FREQ={parts.get('FREQ', '')[:20]} is not supported (only FREQ=YEARLY)")
    unsupported = sorted(set(parts) - {"FREQ", "INTERVAL", "BYMONTH", "BYMONTHDAY", "COUNT", "UNTIL", "WKST"})
    if unsupported:
        raise _refuse(f"RRULE {', '.join(unsupported)} is not supported (FREQ=YEARLY, BYMONTH, BYMONTHDAY)")
    if parts.get("INTERVAL", "1") != "1":
        raise _refuse("RRULE INTERVAL other than 1 is not supported")
    month, day = start.month, start.day
    try:
        month = int(parts.get("BYMONTH", month))
        day = int(parts.get("BYMONTHDAY", day))
        date(2000, month, day)
        # Only the plain case here: DTSTART on the rule's day (DTSTART is always an instance)
        # and a COUNT or an UNTIL within bounds. Any other goes to the general rule
        # (_all_day_rule), which reads it as RFC 5545 does, or refuses it.
        if (month, day) != (start.month, start.day) or ("COUNT" in parts and "UNTIL" in parts):
            raise _refuse("not a plain yearly day")
        if "COUNT" in parts and not 1 <= int(parts["COUNT"]) <= 1000:
            raise _refuse("not a plain yearly day")
        last = start.year + int(parts["COUNT"]) - 1 if "COUNT" in parts else None
        if "UNTIL" in parts:
            until = _DATE.match(parts["UNTIL"])
            if until is None:
                raise ValueError
            year, until_month, until_day = (int(g) for g in until.groups())
            year -= (month, day) > (until_month, until_day)
            last = year if last is None else min(last, year)
    except ValueError:
        raise _refuse(f"RRULE {rule[:60]!r}: BYMONTH and BYMONTHDAY take one day (a list is not supported)") from None
    return (month, day, length, start.year, last)
