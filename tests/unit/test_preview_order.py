"""The preview's times as the runner fires them: a spread's occurrences in order; and from any
start_at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.schedules.planning import explain_occurrences
from scheduler.schedules.spread import Spread

AFTER = datetime(2027, 1, 1, tzinfo=UTC)
JOB = "66b94d6b-0d3c-4b5a-9d77-2f8f6a1c9e01"


def test_a_random_spread_wider_than_the_interval_keeps_the_occurrences_order():
    """rate(5 seconds) spread at random over 60 s: each fires no earlier than the one before."""
    found = explain_occurrences(
        "rate(5 seconds)", after=AFTER, start_at=AFTER, count=20, spread=Spread(60, "random", JOB)
    )
    times = [item.at for item in found]
    assert times == sorted(times) and len(times) == 20
    assert all(item.at >= item.occurrence for item in found)


def test_a_preview_from_the_first_instant_a_datetime_holds():
    """start_at in year 1 (with calendars too): times, not an OverflowError."""
    from scheduler.schedules.calendars import build_calendar

    calendar = build_calendar("c", {"timezone": "UTC", "dates": ["2027-06-01"]})
    first = datetime(1, 1, 1, tzinfo=UTC)
    for calendars in ((), (calendar,)):
        found = explain_occurrences("0 0 * * *", start_at=first, after=AFTER, count=2, calendars=calendars)
        assert [item.at for item in found][0] == AFTER + timedelta(days=1)
