"""Calendars against a brute-force reference: ``on_excluded`` skip and shift over years of
instants in several time zones, DST transitions included.

The reference knows nothing of spans, merging or bisecting: an instant is excluded when its
local date (in the calendar's zone) is a listed date, a yearly day or in a range of days, or when
it lies in a range of instants; ``shift`` moves an excluded occurrence minute by minute to the
first allowed minute (every boundary of these calendars is a whole minute), and the occurrences
of a job are the sorted set of the moved ones. The planning (``CalendarSchedule`` and the
preview's ``occurrences``, the code that plans jobs) must answer the same, and so must its
``next_after`` and ``last_at_or_before`` at random instants.
"""

from __future__ import annotations

import bisect
import random
import zlib
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduler.schedules import first_run, parse_schedule, plan_next
from scheduler.schedules.calendars import build_calendar, with_calendars

START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2028, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)

# (calendar zone, job zone, expression): zones with DST (an hour, half an hour), without, an odd
# offset, and DST at midnight (Santiago: the local day itself starts at 01:00 on its spring day).
CASES = [
    ("Europe/London", "Europe/London", "30 1 * * *"),
    ("Europe/London", "UTC", "0 */5 * * *"),
    ("America/New_York", "America/New_York", "0 9 * * 1-5"),
    ("America/New_York", "Europe/Berlin", "15 2 * * *"),
    ("Australia/Lord_Howe", "Australia/Lord_Howe", "0 2 * * *"),
    ("Asia/Kathmandu", "UTC", "rate(7 hours)"),
    ("America/Santiago", "America/Santiago", "0 0 * * *"),
    ("America/Santiago", "UTC", "45 3 */2 * *"),
]


def _transition_days(zone: ZoneInfo) -> list[date]:
    """The local days on which the zone's offset changes, 2025-2027."""
    days = []
    at = START
    offset = at.astimezone(zone).utcoffset()
    while at < END:
        at += timedelta(hours=1)
        now = at.astimezone(zone).utcoffset()
        if now != offset:
            days.append(at.astimezone(zone).date())
            offset = now
    return days


def _definition(zone_name: str, seed: int) -> dict:
    """A calendar exercising every piece: random dates (and every DST day), yearly days (29
    February among them), ranges of days and ranges of wall times across a DST change."""
    rng = random.Random(seed)
    zone = ZoneInfo(zone_name)
    days = [START.date() + timedelta(days=rng.randrange(3 * 365)) for _ in range(40)]
    days += _transition_days(zone)
    ranges: list[dict] = []
    for _ in range(6):
        first = START.date() + timedelta(days=rng.randrange(3 * 365))
        ranges.append({"start": first.isoformat(), "end": (first + timedelta(days=rng.randrange(1, 9))).isoformat()})
    for _ in range(6):
        begin = datetime(2025, 1, 1) + timedelta(minutes=15 * rng.randrange(3 * 365 * 96))
        finish = begin + timedelta(minutes=15 * rng.randrange(1, 200))
        ranges.append({"start": begin.isoformat(), "end": finish.isoformat()})
    transitions = _transition_days(zone)
    if transitions:  # a wall-time range across the first DST change
        day = transitions[0]
        ranges.append({"start": f"{day - timedelta(days=1)}T22:00:00", "end": f"{day}T04:30:00"})
    ranges.append({"start": "2026-06-01T10:00:00Z", "end": "2026-06-03T10:00:00+02:00"})
    return {
        "timezone": zone_name,
        "dates": sorted({d.isoformat() for d in days}),
        "ranges": ranges,
        "yearly": ["12-25", "12-26", "01-01", "02-29", "07-04"],
    }


class Reference:
    """The definition read naively."""

    def __init__(self, definition: dict):
        self.zone = ZoneInfo(definition["timezone"])
        self.days = {date.fromisoformat(d) for d in definition["dates"]}
        self.yearly = {(int(md[:2]), int(md[3:])) for md in definition["yearly"]}
        self.instants = []
        for span in definition["ranges"]:
            if len(span["start"]) == 10:
                first, last = date.fromisoformat(span["start"]), date.fromisoformat(span["end"])
                while first <= last:
                    self.days.add(first)
                    first += timedelta(days=1)
            else:
                self.instants.append((self._instant(span["start"]), self._instant(span["end"])))

    def _instant(self, text: str) -> datetime:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if value.tzinfo is None:
            # The earliest instant whose wall time is >= value, by walking minutes.
            guess = value.replace(tzinfo=self.zone).astimezone(UTC) - timedelta(hours=3)
            while guess.astimezone(self.zone).replace(tzinfo=None) < value:
                guess += MINUTE
            return guess
        return value.astimezone(UTC)

    def excluded(self, at: datetime) -> bool:
        local = at.astimezone(self.zone).date()
        if local in self.days or (local.month, local.day) in self.yearly:
            return True
        return any(start <= at < end for start, end in self.instants)

    def shifted(self, at: datetime) -> datetime:
        moved = at.replace(second=0, microsecond=0)
        if moved < at:
            moved += MINUTE
        while self.excluded(moved):
            moved += MINUTE
        return moved


def _raw(expression: str, zone: str, since: datetime, until: datetime) -> list[datetime]:
    schedule = parse_schedule(expression, zone, datetime(2024, 1, 1, 0, 0, 7, tzinfo=UTC))
    found, at = [], schedule.next_after(since)
    while at is not None and at < until:
        found.append(at)
        at = schedule.next_after(at)
    return found


@pytest.mark.parametrize("mode", ["skip", "shift"])
@pytest.mark.parametrize(("calendar_zone", "job_zone", "expression"), CASES)
def test_calendars_match_the_brute_force_reference(calendar_zone, job_zone, expression, mode):
    definition = _definition(calendar_zone, seed=zlib.crc32(f"{calendar_zone} {expression}".encode()))
    reference = Reference(definition)
    raw = _raw(expression, job_zone, START - timedelta(days=40), END + timedelta(days=40))
    if mode == "skip":
        expected = sorted(at for at in raw if not reference.excluded(at))
    else:
        expected = sorted({at if not reference.excluded(at) else reference.shifted(at) for at in raw})
    expected = [at for at in expected if START <= at < END]
    assert len(expected) > 100

    calendar = build_calendar("holidays", definition)
    base = parse_schedule(expression, job_zone, datetime(2024, 1, 1, 0, 0, 7, tzinfo=UTC))
    schedule = with_calendars(base, [calendar], mode)
    # The occurrences the planning gives a job that is never late: first_run, then plan_next.
    planned = []
    at = first_run(schedule, START - timedelta(microseconds=1))
    while at is not None and at < END:
        planned.append(at)
        at = plan_next(schedule, at, at, "skip")
    assert planned == expected

    # next_after and last_at_or_before at random instants, in excluded spans and outside them.
    rng = random.Random(7)
    for _ in range(300):
        probe = START + timedelta(seconds=rng.randrange(int((END - START).total_seconds()) - 86400 * 40))
        i = bisect.bisect_right(expected, probe)
        assert schedule.next_after(probe) == expected[i], probe
        if i > 0:
            assert schedule.last_at_or_before(probe) == expected[i - 1], probe


def test_two_calendars_chain_their_spans():
    """Christmas in one calendar and Boxing Day in another: a shifted occurrence lands after both."""
    christmas = build_calendar("a", {"timezone": "Europe/London", "yearly": ["12-25"]})
    boxing = build_calendar("b", {"timezone": "Europe/London", "yearly": ["12-26"]})
    base = parse_schedule("0 9 * * *", "Europe/London", START)
    shifted = with_calendars(base, [christmas, boxing], "shift")
    assert shifted.next_after(datetime(2026, 12, 24, 12, tzinfo=UTC)) == datetime(2026, 12, 27, tzinfo=UTC)
    assert shifted.next_after(datetime(2026, 12, 27, tzinfo=UTC)) == datetime(2026, 12, 27, 9, tzinfo=UTC)
    skipped = with_calendars(base, [christmas, boxing], "skip")
    assert skipped.next_after(datetime(2026, 12, 24, 12, tzinfo=UTC)) == datetime(2026, 12, 27, 9, tzinfo=UTC)


def test_a_calendar_that_excludes_everything_ends_the_schedule():
    forever = build_calendar("all", {"ranges": [{"start": "1970-01-01", "end": "9998-12-31"}]})
    base = parse_schedule("0 9 * * *", "UTC", START)
    assert with_calendars(base, [forever], "skip").next_after(START) is None
    assert with_calendars(base, [forever], "shift").next_after(START) is None
