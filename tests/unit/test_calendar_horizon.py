"""Calendars are searched up to the 50-year horizon, not a count of excluded spans, and within an
API request up to its time limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.schedules import parse_schedule
from scheduler.schedules.base import ScheduleError
from scheduler.schedules.calendars import build_calendar, with_calendars
from scheduler.schedules.planning_time import planning_time_limit

AT = datetime(2026, 12, 7, tzinfo=UTC)


def _ics(*rules: str) -> str:
    events = "".join(
        f"BEGIN:VEVENT\r\nUID:{i}\r\nDTSTART;VALUE=DATE:20261207\r\nRRULE:{rule}\r\nEND:VEVENT\r\n"
        for i, rule in enumerate(rules)
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\n{events}END:VCALENDAR\r\n"


@pytest.mark.parametrize("mode", ["skip", "shift"])
def test_a_freeze_of_fourteen_years_is_not_never(mode):
    """Every day excluded until the end of 2040 (5,139 one-day pieces in a row): a noon job runs
    on 1 January 2041. Past 4,000 pieces it used to count as never running again (a 400)."""
    freeze = build_calendar("freeze", {"timezone": "UTC", "ics": _ics("FREQ=DAILY;UNTIL=20401231")})
    schedule = with_calendars(parse_schedule("0 12 * * *", "UTC"), [freeze], mode, since=AT)
    expected = datetime(2041, 1, 1, 12 if mode == "skip" else 0, tzinfo=UTC)
    assert schedule.next_after(AT) == expected


def test_thousands_of_excluded_occurrences_in_a_row_are_hopped_over():
    """Monday, Wednesday and Friday excluded until 2055, a job on those days only: about 4,500
    occurrences in separate spans before the first that runs."""
    mwf = build_calendar("mwf", {"timezone": "UTC", "ics": _ics("FREQ=WEEKLY;BYDAY=MO,WE,FR;UNTIL=20551231")})
    schedule = with_calendars(parse_schedule("0 12 * * 1,3,5", "UTC"), [mwf], "skip", since=AT)
    assert schedule.next_after(AT) == datetime(2056, 1, 3, 12, tzinfo=UTC)  # a Monday


def test_beyond_the_horizon_is_never():
    """Excluded for 60 years: nothing within the horizon, so no next run."""
    long = build_calendar("long", {"timezone": "UTC", "ics": _ics("FREQ=DAILY;UNTIL=20861231")})
    assert with_calendars(parse_schedule("0 12 * * *", "UTC"), [long], "skip", since=AT).next_after(AT) is None


def test_a_search_past_the_requests_time_limit_is_a_400_naming_the_calendars():
    freeze = build_calendar("freeze", {"timezone": "UTC", "ics": _ics("FREQ=DAILY;UNTIL=20401231")})
    schedule = with_calendars(parse_schedule("0 12 * * *", "UTC"), [freeze], "skip", since=AT)
    with planning_time_limit(0.0), pytest.raises(ScheduleError) as refused:
        schedule.next_after(AT)
    assert refused.value.field == "exclude_calendars" and "too long" in str(refused.value)
    assert schedule.next_after(AT) is not None  # outside the block: no limit (the runner's case)
