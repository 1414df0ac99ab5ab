"""Calendars built from their definitions: dates, ranges, yearly days and iCalendar text, the
refusals naming the field, and the explanation of the preview."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.schedules import ScheduleError, parse_schedule
from scheduler.schedules.calendars import MAX_DATES, apply_calendars, build_calendar, excluded_span, with_calendars

UK_ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//uk.gov//bank-holidays//EN\r
BEGIN:VEVENT\r
DTSTART;VALUE=DATE:20261225\r
DTEND;VALUE=DATE:20261226\r
SUMMARY:Christmas Day\r
UID:2026-12-25-christmas@gov.uk\r
END:VEVENT\r
BEGIN:VEVENT\r
DTSTART;VALUE=DATE:20261228\r
DTEND;VALUE=DATE:20261229\r
SUMMARY:Boxing Day (substitute day)\r
END:VEVENT\r
END:VCALENDAR\r
"""


def Z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_date_excludes_the_local_day_of_the_calendar_zone():
    calendar = build_calendar("x", {"timezone": "America/New_York", "dates": ["2026-07-03"]})
    assert calendar.excludes(Z("2026-07-03T04:00"))  # 00:00 EDT
    assert not calendar.excludes(Z("2026-07-03T03:59:59"))
    assert calendar.excludes(Z("2026-07-04T03:59:59"))
    assert not calendar.excludes(Z("2026-07-04T04:00"))


def test_ics_all_day_events_and_the_uk_example():
    calendar = build_calendar("uk", {"timezone": "Europe/London", "ics": UK_ICS})
    assert calendar.excludes(Z("2026-12-25T09:00"))
    assert not calendar.excludes(Z("2026-12-26T09:00"))
    assert calendar.excludes(Z("2026-12-28T23:59"))
    job = with_calendars(parse_schedule("0 9 * * 1-5", "Europe/London", Z("2026-01-01T00:00")), [calendar], "shift")
    assert job.next_after(Z("2026-12-24T10:00")) == Z("2026-12-26T00:00")


def test_ics_yearly_rules_timed_events_and_zones():
    ics = "\n".join(
        [
            "BEGIN:VCALENDAR",
            "BEGIN:VTIMEZONE",
            "TZID:Europe/Berlin",
            "BEGIN:STANDARD",
            "DTSTART:19701025T030000",
            "END:STANDARD",
            "END:VTIMEZONE",
            "BEGIN:VEVENT",
            "DTSTART;VALUE=DATE:20250101",
            "RRULE:FREQ=YEARLY;BYMONTH=5;BYMONTHDAY=1;UNTIL=20270430",
            "END:VEVENT",
            "BEGIN:VEVENT",
            "DTSTART:20261001T080000Z",
            "DTEND:20261001T100000Z",
            "END:VEVENT",
            "BEGIN:VEVENT",
            "DTSTART;TZID=Europe/Berlin:20261002T080000",
            "DTEND;TZID=Europe/Berlin:20261002T090000",
            "BEGIN:VALARM",
            "ACTION:DISPLAY",
            "END:VALARM",
            "END:VEVENT",
            "END:VCALENDAR",
        ]
    )
    calendar = build_calendar("x", {"timezone": "UTC", "ics": ics})
    assert calendar.excludes(Z("2025-05-01T12:00")) and calendar.excludes(Z("2026-05-01T12:00"))
    assert not calendar.excludes(Z("2027-05-01T12:00"))  # UNTIL 2027-04-30
    assert not calendar.excludes(Z("2024-05-01T12:00"))  # before DTSTART's year
    assert calendar.excludes(Z("2026-10-01T09:59")) and not calendar.excludes(Z("2026-10-01T10:00"))
    assert calendar.excludes(Z("2026-10-02T06:00")) and not calendar.excludes(Z("2026-10-02T07:00"))


def _event(*lines: str) -> str:
    return "\n".join(["BEGIN:VCALENDAR", "BEGIN:VEVENT", *lines, "END:VEVENT", "END:VCALENDAR"])


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("BEGIN:VCALENDAR\nBEGIN:VTODO\nEND:VTODO\nEND:VCALENDAR", "VTODO"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=HOURLY"), "FREQ=HOURLY"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=YEARLY;BYDAY=20MO"), "BYDAY=20MO"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=WEEKLY;BYDAY=-1MO"), "BYDAY=-1MO"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=MONTHLY;BYDAY=MO;BYSETPOS=-1"), "BYSETPOS"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=WEEKLY;COUNT=3;UNTIL=20270101"), "UNTIL or COUNT"),
        (_event("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=WEEKLY;INTERVAL=0"), "INTERVAL=0"),
        (_event("DTSTART;VALUE=DATE:20260101", "RDATE;VALUE=PERIOD:20260105T000000Z/PT1H"), "PERIOD"),
        (_event("DTSTART;VALUE=DATE:20260101", "RDATE:20260105T100000Z"), "RDATE;VALUE=DATE"),
        (_event("DTSTART;VALUE=DATE:20260101", "RECURRENCE-ID;VALUE=DATE:20260108"), "RECURRENCE-ID"),
        (_event("DTSTART;VALUE=DATE:20260101", "DURATION:PT5H"), "whole days"),
        (_event("DTSTART:20260101T100000Z", "DTEND:20260110T100000Z", "RRULE:FREQ=MONTHLY"), "at most 7 days"),
        (_event("DTSTART:20260101T100000Z", "DURATION:soon"), "DURATION"),
        (  # COUNT rules that never match: refused once their walk is too long, not read for minutes
            "BEGIN:VCALENDAR\n"
            + "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20260101\nRRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;COUNT=5\nEND:VEVENT\n"
            * 50
            + "END:VCALENDAR",
            "UNTIL",
        ),
        (
            "BEGIN:VCALENDAR\n"
            + "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20260103\nDTEND;VALUE=DATE:20260203\nRRULE:FREQ=YEARLY;BYDAY=SA\nEND:VEVENT\n"
            * 40
            + "END:VCALENDAR",
            "at most 1,000",
        ),
        ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;TZID=Mars/Olympus:20260101T000000\nEND:VEVENT\nEND:VCALENDAR", "TZID"),
        ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260101T000000Z\nEND:VEVENT\nEND:VCALENDAR", "DTEND"),
        ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:2026-01-01\nEND:VEVENT\nEND:VCALENDAR", "DATE-TIME"),
        ("hello", "iCalendar"),
    ],
)
def test_unsupported_ics_is_refused_naming_what(body, words):
    with pytest.raises(ScheduleError) as refused:
        build_calendar("x", {"timezone": "UTC", "ics": body})
    assert refused.value.field == "ics"
    assert words in str(refused.value)


@pytest.mark.parametrize(
    ("definition", "field"),
    [
        ({"dates": ["2026-13-01"]}, "dates.0"),
        ({"dates": ["2026-12-25"] * (MAX_DATES + 1)}, "dates"),
        ({"yearly": ["12/25"]}, "yearly.0"),
        ({"yearly": ["02-30"]}, "yearly.0"),
        ({"ranges": [{"start": "2026-12-25"}]}, "ranges.0"),
        ({"ranges": [{"start": "2026-12-25", "end": "2026-12-24"}]}, "ranges.0.end"),
        ({"ranges": [{"start": "2026-12-25T10:00:00Z", "end": "2026-12-25T09:00:00Z"}]}, "ranges.0.end"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"ics": UK_ICS, "dates": ["2026-12-25"]}, "ics"),
    ],
)
def test_bad_definitions_name_the_field(definition, field):
    with pytest.raises(ScheduleError) as refused:
        build_calendar("x", definition)
    assert refused.value.field == field


def test_excluded_span_names_the_calendar():
    calendar = build_calendar("uk", {"timezone": "Europe/London", "yearly": ["12-25", "12-26"]})
    span = excluded_span([calendar], Z("2026-12-25T12:00"))
    assert span is not None and span.by == "uk"
    assert (span.start, span.end) == (Z("2026-12-25T00:00"), Z("2026-12-27T00:00"))
    assert excluded_span([calendar], Z("2026-12-27T00:00")) is None


def test_a_calendar_s_own_span_and_one_occurrence_under_skip_and_shift():
    calendar = build_calendar("x", {"timezone": "UTC", "yearly": ["12-25"], "dates": ["2026-12-26"]})
    span = calendar.excluded_span(Z("2026-12-25T09:00"))
    assert span is not None and (span.start, span.end) == (Z("2026-12-25T00:00"), Z("2026-12-27T00:00"))
    assert calendar.excluded_span(Z("2026-12-24T23:59")) is None
    assert apply_calendars([calendar], Z("2026-12-25T09:00"), "skip") is None
    assert apply_calendars([calendar], Z("2026-12-25T09:00"), "shift") == Z("2026-12-27T00:00")
    assert apply_calendars([calendar], Z("2026-12-27T09:00"), "skip") == Z("2026-12-27T09:00")


def test_a_range_wholly_in_a_spring_forward_gap_is_refused_as_such():
    """Its wall times do not exist: both resolve to the instant the clocks jump, so the range
    would exclude nothing. The refusal says why (it did say the end was not after the start)."""
    gap = {"start": "2026-03-29T02:10:00", "end": "2026-03-29T02:50"}
    with pytest.raises(ScheduleError, match="wholly in a gap of Europe/Berlin") as refused:
        build_calendar("x", {"timezone": "Europe/Berlin", "ranges": [gap]})
    assert refused.value.field == "ranges.0.end"
    for same in ({"start": "2026-03-29T04:10", "end": "2026-03-29T04:10:00"}, {**gap, "end": gap["start"]}):
        with pytest.raises(ScheduleError, match="must be after its start"):
            build_calendar("x", {"timezone": "Europe/Berlin", "ranges": [same]})
    # Past the gap's end it holds, from the jump on.
    across = build_calendar("x", {"timezone": "Europe/Berlin", "ranges": [{**gap, "end": "2026-03-29T03:10"}]})
    assert across.excludes(Z("2026-03-29T01:00")) and not across.excludes(Z("2026-03-29T01:10"))
