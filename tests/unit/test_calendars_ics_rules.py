"""iCalendar rules in calendars (``schedules.recurrence``, read by ``schedules.ics``): BYDAY
(every Saturday, the last Monday of May), EXDATE, RDATE and recurring timed events, against an
independent expansion: python-dateutil's ``rrule`` (a test-only reference, never imported by the
scheduler) turned into the days and spans excluded, compared instant by instant over years, in
zones with DST."""

from __future__ import annotations

import bisect
import random
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from scheduler.schedules import parse_schedule
from scheduler.schedules.calendars import build_calendar, next_excluded, with_calendars

FIRST, LAST = date(2025, 1, 1), date(2031, 12, 31)


def _ics(*lines: str) -> str:
    return "\n".join(["BEGIN:VCALENDAR", "BEGIN:VEVENT", *lines, "END:VEVENT", "END:VCALENDAR"])


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_every_saturday_and_the_last_monday_of_may():
    saturdays = build_calendar(
        "sat", {"timezone": "Europe/London", "ics": _ics("DTSTART;VALUE=DATE:20260103", "RRULE:FREQ=WEEKLY;BYDAY=SA")}
    )
    assert saturdays.excludes(_at("2026-12-26T12:00")) and saturdays.excludes(_at("2030-06-01T00:00"))
    assert not saturdays.excludes(_at("2026-12-25T12:00")) and not saturdays.excludes(_at("2026-12-27T00:00"))
    assert not saturdays.excludes(_at("2025-12-27T12:00"))  # before its start
    spring = build_calendar(
        "spring",
        {
            "timezone": "Europe/London",
            "ics": _ics("DTSTART;VALUE=DATE:20260525", "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO"),
        },
    )
    assert [d for d in range(20, 32) if spring.excludes(_at(f"2027-05-{d:02d}T12:00"))] == [31]
    assert spring.excludes(_at("2026-05-25T12:00")) and not spring.excludes(_at("2026-05-18T12:00"))
    # A job at 09:00 on weekdays and Saturdays skips the bank holiday.
    job = with_calendars(parse_schedule("0 9 * * 1-6", "Europe/London", _at("2026-01-01T00:00")), [spring], "skip")
    assert job.next_after(_at("2027-05-29T09:00")) == _at("2027-06-01T08:00")


def test_exdate_and_rdate_on_all_day_and_timed_events():
    closed = build_calendar(
        "closed",
        {
            "timezone": "Europe/Berlin",
            "ics": _ics(
                "DTSTART;VALUE=DATE:20260103",
                "RRULE:FREQ=WEEKLY;BYDAY=SA,SU",
                "EXDATE;VALUE=DATE:20260110,20260111",
                "EXDATE;VALUE=DATE:20260117",
                "RDATE;VALUE=DATE:20260106",
            ),
        },
    )
    berlin_noon = lambda day: datetime.combine(day, time(12), ZoneInfo("Europe/Berlin"))  # noqa: E731
    excluded = [d for d in range(3, 20) if closed.excludes(berlin_noon(date(2026, 1, d)))]
    assert excluded == [3, 4, 6, 18]
    maintenance = build_calendar(
        "maintenance",
        {
            "timezone": "UTC",
            "ics": _ics(
                "DTSTART;TZID=Europe/Berlin:20260103T220000",
                "DURATION:PT5H",
                "RRULE:FREQ=WEEKLY;BYDAY=SA",
                "EXDATE;TZID=Europe/Berlin:20260110T220000",
                "RDATE;TZID=Europe/Berlin:20260107T230000",
            ),
        },
    )
    assert maintenance.excludes(_at("2026-01-03T21:00")) and maintenance.excludes(_at("2026-01-04T01:59"))
    assert not maintenance.excludes(_at("2026-01-04T02:00")) and not maintenance.excludes(_at("2026-01-10T22:00"))
    assert maintenance.excludes(_at("2026-01-07T23:00")) and not maintenance.excludes(_at("2026-01-08T04:00"))
    # Summer time: 22:00 in Berlin is 20:00Z.
    assert maintenance.excludes(_at("2026-07-04T20:00")) and not maintenance.excludes(_at("2026-07-04T19:59"))
    assert next_excluded([maintenance], _at("2026-01-12T00:00")) == _at("2026-01-17T21:00")


def _random_rule(rng: random.Random) -> str:
    """An RRULE of the supported grammar (DTSTART is chosen after, on its first instance)."""
    freq = rng.choice(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"])
    parts = [f"FREQ={freq}"]
    if rng.random() < 0.4:
        parts.append(f"INTERVAL={rng.choice([2, 3, 5]) if freq != 'DAILY' else rng.choice([3, 10, 17])}")
    days = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
    if freq in ("MONTHLY", "YEARLY") and rng.random() < 0.6:
        if freq == "YEARLY":
            parts.append(f"BYMONTH={','.join(str(m) for m in sorted(rng.sample(range(1, 13), rng.randint(1, 3))))}")
        if rng.random() < 0.6:
            parts.append(f"BYDAY={rng.choice([-1, -2, 1, 2, 4, 5])}{rng.choice(days)}")
        else:
            parts.append(f"BYMONTHDAY={','.join(str(d) for d in rng.sample([1, 15, 29, 30, 31, -1, -3], 2))}")
    elif freq in ("WEEKLY", "DAILY") and rng.random() < 0.8:
        parts.append(f"BYDAY={','.join(rng.sample(days, rng.randint(1, 3)))}")
        if freq == "WEEKLY" and rng.random() < 0.3:
            parts.append(f"WKST={rng.choice(days)}")
    if rng.random() < 0.3:
        parts.append(f"COUNT={rng.randint(1, 40)}")
    elif rng.random() < 0.3:
        parts.append(f"UNTIL={(FIRST + timedelta(days=rng.randrange(2000))).strftime('%Y%m%d')}")
    return ";".join(parts)


def _rule_and_instances(rng: random.Random) -> tuple[str, list[datetime]]:
    """A random rule and dateutil's instances of it from its first on or after a random day
    of 2025 (naive, local days), up to ``LAST``; one with instances."""
    while True:
        rule = _random_rule(rng)
        seed_day = datetime.combine(FIRST + timedelta(days=rng.randrange(400)), time())
        first = rrulestr(rule.split(";COUNT")[0].split(";UNTIL")[0], dtstart=seed_day)[0]
        found = list(rrulestr(rule, dtstart=first).between(first, datetime.combine(LAST, time()), inc=True))
        if found:
            return rule, found


@pytest.mark.parametrize("seed", range(60))
def test_all_day_rules_agree_with_dateutil_day_by_day(seed):
    rng = random.Random(seed)
    zone = rng.choice(["Europe/London", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"])
    rule, starts = _rule_and_instances(rng)
    length = rng.choice([1, 1, 1, 2, 3])
    exdates = {s.date() for s in starts if rng.random() < 0.1}
    rdates = {FIRST + timedelta(days=rng.randrange(2500)) for _ in range(3)}
    lines = [f"DTSTART;VALUE=DATE:{starts[0]:%Y%m%d}", f"DTEND;VALUE=DATE:{starts[0] + timedelta(days=length):%Y%m%d}"]
    lines += [f"RRULE:{rule}", *(f"EXDATE;VALUE=DATE:{d:%Y%m%d}" for d in sorted(exdates))]
    lines.append(f"RDATE;VALUE=DATE:{','.join(f'{d:%Y%m%d}' for d in sorted(rdates))}")
    calendar = build_calendar("c", {"timezone": zone, "ics": _ics(*lines)})
    expected: set[date] = set()
    for start in [s.date() for s in starts if s.date() not in exdates] + [d for d in rdates if d not in exdates]:
        expected.update(start + timedelta(days=i) for i in range(length))
    tz = ZoneInfo(zone)
    day = FIRST
    while day <= LAST:
        noon = datetime.combine(day, time(12), tz)
        assert calendar.excludes(noon) == (day in expected), (rule, day, zone)
        day += timedelta(days=1)
    # The next excluded instant (how skipped rows step over allowed stretches): that day's start.
    ordered = sorted(expected)
    for _ in range(5):
        day = FIRST + timedelta(days=rng.randrange(2400))
        i = bisect.bisect_left(ordered, day)
        ahead = ordered[i] if i < len(ordered) and (ordered[i] - day).days < 399 else None
        found = next_excluded([calendar], datetime.combine(day, time(12), tz))
        assert (found and found.astimezone(tz).date()) == ahead, (rule, day)


@pytest.mark.parametrize("seed", range(12))
def test_timed_rules_agree_with_dateutil_instant_by_instant(seed):
    rng = random.Random(1000 + seed)
    zone_name = rng.choice(["Europe/Berlin", "America/New_York", "Asia/Kolkata"])
    zone = ZoneInfo(zone_name)
    rule, days = _rule_and_instances(rng)
    wall = time(rng.choice([0, 6, 18, 22, 23]), rng.choice([0, 30]))  # none in a DST gap of these zones
    duration = timedelta(minutes=rng.choice([30, 90, 300, 1440, 2000]))
    starts = [datetime.combine(s.date(), wall) for s in days]
    excluded = {s for s in starts if rng.random() < 0.1}
    lines = [
        f"DTSTART;TZID={zone_name}:{starts[0]:%Y%m%dT%H%M%S}",
        f"DURATION:PT{int(duration.total_seconds()) // 60}M",
    ]
    lines += [f"RRULE:{rule}", *(f"EXDATE;TZID={zone_name}:{s:%Y%m%dT%H%M%S}" for s in sorted(excluded))]
    calendar = build_calendar("c", {"timezone": "UTC", "ics": _ics(*lines)})
    spans = sorted(
        (s.replace(tzinfo=zone).astimezone(UTC), s.replace(tzinfo=zone).astimezone(UTC) + duration)
        for s in starts
        if s not in excluded
    )
    begins = [b for b, _ in spans]
    at = datetime.combine(FIRST, time(), UTC)
    end = datetime.combine(LAST, time(), UTC) - timedelta(days=3)
    while at < end:
        i = bisect.bisect_right(begins, at)
        inside = any(b <= at < e for b, e in spans[max(0, i - 3) : i])
        assert calendar.excludes(at) == inside, (rule, at, zone_name)
        at += timedelta(minutes=rng.choice([17, 59, 113]))


@pytest.mark.parametrize(
    ("zone", "start", "until", "last"),
    [
        # Google's and Outlook's exports: the local end of a day, written in UTC.
        ("America/Los_Angeles", "20261228T200000", "20261231T050000Z", date(2026, 12, 30)),
        ("Asia/Tokyo", "20261228T080000", "20261230T235900Z", date(2026, 12, 31)),
        ("Europe/Berlin", "20261228T090000", "20261230T080000Z", date(2026, 12, 30)),  # exactly the last start
        ("Europe/Berlin", "20261228T090000", "20261230T075959Z", date(2026, 12, 29)),
        ("Europe/Berlin", "20261228T090000", "20261230T090000", date(2026, 12, 30)),  # a time of its own zone
    ],
)
def test_a_timed_rules_until_is_an_instant_not_a_day(zone, start, until, last):
    """RFC 5545: a DATE-TIME UNTIL with a Z is a UTC instant, and bounds the instances' starts;
    it was cut to its UTC date, which gained or lost an instance in zones off UTC."""
    rule = f"FREQ=DAILY;UNTIL={until}"
    calendar = build_calendar(
        "c", {"timezone": zone, "ics": _ics(f"DTSTART;TZID={zone}:{start}", "DURATION:PT1H", f"RRULE:{rule}")}
    )
    tz = ZoneInfo(zone)
    first = datetime.strptime(start, "%Y%m%dT%H%M%S").replace(tzinfo=tz)
    days = {first.date() + timedelta(days=n) for n in range(6)}
    excluded = {d for d in days if calendar.excludes(datetime.combine(d, first.time(), tzinfo=tz).astimezone(UTC))}
    assert excluded == {d for d in days if d <= last}
    if until.endswith("Z"):  # the reference takes a UTC UNTIL only with a zoned start
        assert excluded == {d.date() for d in rrulestr(rule, dtstart=first)}
