"""iCalendar (RFC 5545) text read into a calendar's pieces, with the standard library only.

Taken: ``VEVENT``\\ s whose ``DTSTART``/``DTEND`` are dates (all-day: the days from the start to
the day before the end) or date-times (``Z``, a ``TZID`` naming an IANA zone, or floating: a
wall time of the calendar's zone), and yearly ``RRULE``\\ s of all-day events (``FREQ=YEARLY``,
optionally ``INTERVAL=1``, ``BYMONTH``, ``BYMONTHDAY``, ``COUNT``, ``UNTIL``). ``VTIMEZONE`` and
``VALARM`` blocks are passed over (zones are named by ``TZID``). Anything else that changes which
times an event covers (another ``FREQ``, ``RDATE``, ``EXDATE``, ``DURATION`` ...) is refused with a
:class:`ScheduleError` on the field ``ics`` naming it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from scheduler.schedules.base import UTC, ScheduleError
from scheduler.schedules.zones import _resolve_wall, validate_timezone

# Properties of a VEVENT that change which times it covers, and that are not supported.
_REFUSED = ("RDATE", "EXDATE", "EXRULE", "DURATION", "RECURRENCE-ID")
_PASSED_OVER = ("VTIMEZONE", "VALARM", "STANDARD", "DAYLIGHT")
_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")
_DATE_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)")
_MAX_EVENT_DAYS = 366
#: Bounds of an iCalendar text.
MAX_ICS_CHARS = 256 * 1024
MAX_ICS_EVENTS = 2000

Day = tuple[date, date]
Span = tuple[datetime, datetime]
# A yearly rule: (month, day, days, first year, last year or None).
Yearly = tuple[int, int, int, int, int | None]


def _refuse(message: str) -> ScheduleError:
    return ScheduleError(f"ics: {message}", field="ics")


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
        self.event: dict[str, tuple[dict[str, str], str]] | None = None
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
            _event(self.event, self.tz, self.days, self.yearly, self.instants)
            self.event = None
        elif self.event is not None:
            if name in _REFUSED:
                raise _refuse(f"{name} is not supported (events are DTSTART/DTEND and a yearly RRULE)")
            self.event[name] = (params, value)

    def begin(self, kind: str) -> None:
        if kind == "VEVENT" and self.event is None:
            self.event = {}
        elif kind in _PASSED_OVER:
            self.skipping.append(kind)
        elif kind != "VCALENDAR":
            raise _refuse(f"{kind} components are not supported (only VEVENT)")


def parse_ics(text: object, tz: ZoneInfo) -> tuple[tuple[Day, ...], tuple[Yearly, ...], tuple[Span, ...]]:
    """The pieces of an iCalendar text: (local-day spans, yearly rules, instant spans)."""
    if not isinstance(text, str) or not text.strip():
        raise _refuse("must be iCalendar text (BEGIN:VCALENDAR ... END:VCALENDAR)")
    if not text.lstrip().upper().startswith("BEGIN:VCALENDAR"):
        raise _refuse("must be iCalendar text, starting with BEGIN:VCALENDAR")
    if len(text) > MAX_ICS_CHARS:
        raise _refuse(f"holds at most {MAX_ICS_CHARS} characters (got {len(text)})")
    reader = _Reader(tz)
    for line in _lines(text):
        reader.line(*_property(line))
    return tuple(reader.days), tuple(reader.yearly), tuple(reader.instants)


def _event(
    event: dict[str, tuple[dict[str, str], str]],
    tz: ZoneInfo,
    days: list[Day],
    yearly: list[Yearly],
    instants: list[Span],
) -> None:
    if "DTSTART" not in event:
        raise _refuse("a VEVENT has no DTSTART")
    start = _value(*event["DTSTART"], tz)
    end = _value(*event["DTEND"], tz) if "DTEND" in event else None
    if isinstance(start, datetime):
        if "RRULE" in event:
            raise _refuse("an RRULE is supported on all-day events only (DTSTART;VALUE=DATE)")
        if not isinstance(end, datetime) or end <= start:
            raise _refuse("a VEVENT with a DATE-TIME DTSTART needs a later DATE-TIME DTEND")
        instants.append((start, end))
        return
    if end is None:
        end = start + timedelta(days=1)
    if isinstance(end, datetime) or end <= start:
        raise _refuse("an all-day VEVENT needs a later DATE DTEND (or none: one day)")
    if (end - start).days > _MAX_EVENT_DAYS and "RRULE" in event:
        raise _refuse(f"a yearly event spans at most {_MAX_EVENT_DAYS} days")
    if "RRULE" in event:
        yearly.append(_yearly(event["RRULE"][1], start, (end - start).days))
    else:
        days.append((start, end))


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
