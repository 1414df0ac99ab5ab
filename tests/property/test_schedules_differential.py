"""Differential test: a union of expressions (``schedules``) and a ``spread``, planned by the code
that plans jobs (``lifecycle.plan_first`` then ``plan_completion`` after each run, and
``UnionSchedule.next_after`` from arbitrary instants), against a brute-force reference that
steps through every minute of several years in zones with and without DST.

The reference is written from the contract, not from the implementation: a classic cron field
is a set of numbers, a day matches by the Vixie rule, and the DST rule says the occurrence of a
matching wall time ``w`` is the earliest instant whose wall time is ``>= w``. Stepping minute by
minute through UTC, an instant ``t`` therefore fires the matching wall times in ``(M, L(t)]``,
where ``L(t)`` is its wall time and ``M`` the latest wall time seen before it (in a repeated
hour ``L(t) <= M``: nothing fires; across a gap, every skipped wall time fires at the jump).
The zones' offsets come from ``zoneinfo`` once per hour, with the minute of each change found by
bisection. ``rate()``/``@every`` fire at ``anchor + k * interval``. A union fires when any
member does, once; ``explain`` names the first member listed that fires. A stable spread shifts
every occurrence by one offset below the window; a random one by an offset per occurrence below
the window, the same whoever plans it.

``SCHEDULES_DIFFERENTIAL_YEARS`` (default 2) sets how many years each zone is stepped through.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from msgspec import structs

from scheduler.core.domain import ExecutionStatus, Job, Outcome
from scheduler.planning import lifecycle
from scheduler.schedules import Spread, explain_occurrences, parse_union

YEARS = int(os.environ.get("SCHEDULES_DIFFERENTIAL_YEARS", "2"))
START = datetime(2026, 1, 1, tzinfo=UTC)
ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
# Members chosen to meet the DST rule: 02:30 falls in New York's gap, 01:15 in London's and New
# York's repeated hour, 02:10 in Lord Howe's 30-minute gap, */45 1-3 crosses all of them; the
# Vixie rule (13th or a Friday); a weekday list; and two intervals.
EXPRESSIONS = [
    "30 2 * * *",
    "15 1 * * 0",
    "10 2 * * 6,0",
    "*/45 1-3 * * 1",
    "0 12 13 * 5",
    "0 9 * * 1-5",
    "rate(7 hours)",
    "@every 50h",
]
JOB_ID = "6f1c2a9e-3d0b-4f5e-9a61-0c2b7d4e8f10"
_MIN = timedelta(minutes=1)


# -- the reference ---------------------------------------------------------------------------------


def _field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step = part.partition("/")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            first, last = (int(x) for x in body.split("-"))
        else:
            first = int(body)
            last = high if step else first
        values.update(range(first, last + 1, int(step) if step else 1))
    return values


def _cron(expression: str) -> Callable[[int], bool]:
    """A matcher of local wall minutes (minutes since 1970-01-01T00:00 wall time)."""
    minute, hour, dom, month, dow = expression.split()
    minutes, hours, doms, months = _field(minute, 0, 59), _field(hour, 0, 23), _field(dom, 1, 31), _field(month, 1, 12)
    dows = {d % 7 for d in _field(dow, 0, 7)}
    either = not dom.startswith("*") and not dow.startswith("*")
    epoch = date(1970, 1, 1).toordinal()
    days: dict[int, bool] = {}

    def day_matches(day: int) -> bool:
        if day not in days:
            d = date.fromordinal(epoch + day)
            in_dom, in_dow = d.day in doms, d.isoweekday() % 7 in dows
            days[day] = d.month in months and ((in_dom or in_dow) if either else (in_dom and in_dow))
        return days[day]

    def matches(wall: int) -> bool:
        day, rest = divmod(wall, 1440)
        return rest // 60 in hours and rest % 60 in minutes and day_matches(day)

    return matches


def _offsets(tz: ZoneInfo, first: int, last: int) -> list[tuple[int, int]]:
    """``(utc_minute, offset_minutes)`` from each change of the zone's offset in ``[first, last]``."""

    def offset(minute: int) -> int:
        at = datetime.fromtimestamp(minute * 60, UTC).astimezone(tz)
        off = at.utcoffset()
        assert off is not None
        return int(off.total_seconds()) // 60

    changes = [(first, offset(first))]
    for hour_start in range(first, last, 60):
        before, after = offset(hour_start), offset(hour_start + 60)
        if before != after:
            lo, hi = hour_start, hour_start + 60  # offset(lo) == before, offset(hi) == after
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if offset(mid) == before else (lo, mid)
            changes.append((hi, after))
    return changes


def reference(expressions: list[str], zone: str, anchor: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """Every occurrence in ``(anchor, end]`` of the union, with the first member that fires it."""
    first, last = int(anchor.timestamp()) // 60 + 1, int(end.timestamp()) // 60
    anchor_minute = int(anchor.timestamp()) // 60
    crons = [(e, _cron(e)) for e in expressions if not e.startswith(("rate", "@every"))]
    intervals = [(e, _interval_minutes(e)) for e in expressions if e.startswith(("rate", "@every"))]
    order = {e: i for i, e in enumerate(expressions)}
    changes = _offsets(ZoneInfo(zone), first - 1, last + 60)
    found: list[tuple[datetime, str]] = []
    highest = first - 1 + changes[0][1]  # the wall time of the minute before the first
    change = 0
    for minute in range(first, last + 1):
        while change + 1 < len(changes) and changes[change + 1][0] <= minute:
            change += 1
        wall = minute + changes[change][1]
        sources = [e for e, step in intervals if (minute - anchor_minute) % step == 0]
        if wall > highest:
            sources += [e for e, match in crons if any(match(w) for w in range(highest + 1, wall + 1))]
            highest = wall
        if sources:
            found.append((datetime.fromtimestamp(minute * 60, UTC), min(sources, key=order.__getitem__)))
    return found


def _interval_minutes(expression: str) -> int:
    if expression.startswith("rate"):
        number, unit = expression[5:-1].split()
        return int(number) * {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[unit]
    text = expression.split()[1]
    return int(text[:-1]) * {"m": 1, "h": 60, "d": 1440}[text[-1]]


def reference_offset(mode: str, window: int, occurrence: datetime) -> int:
    """The contract's offsets: a BLAKE2b of the job id (and the occurrence's second) mod the window."""
    text = JOB_ID if mode == "stable" else f"{JOB_ID}@{int(occurrence.timestamp())}"
    digest = hashlib.blake2b(text.encode(), digest_size=8, person=b"sched-spread").digest()
    return int.from_bytes(digest, "big") % window


# -- the planner, as a job lives -------------------------------------------------------------------


def planned(expressions: list[str], zone: str, spread: dict | None, end: datetime) -> list[tuple[datetime, datetime]]:
    """``(scheduled_at, next_run_at)`` of each run of a job created at START and run at each
    fire time, through ``end``."""
    job = Job(id=JOB_ID, schedules=tuple(expressions), spread=spread, timezone=zone, created_at=START)
    plan = lifecycle.plan_first(job, START)
    runs = []
    succeeded = Outcome(status=ExecutionStatus.SUCCEEDED)
    while plan.scheduled_at is not None and plan.scheduled_at <= end:
        assert plan.next_run_at is not None
        runs.append((plan.scheduled_at, plan.next_run_at))
        job = structs.replace(job, scheduled_at=plan.scheduled_at, next_run_at=plan.next_run_at, attempt=1)
        plan = lifecycle.plan_completion(job, succeeded, plan.next_run_at + timedelta(seconds=1))
    return runs


@pytest.fixture(scope="module")
def references() -> dict[str, list[tuple[datetime, str]]]:
    end = START.replace(year=START.year + YEARS)
    return {zone: reference(EXPRESSIONS, zone, START, end) for zone in ZONES}


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(
    "spread", [None, {"window_seconds": 900, "mode": "stable"}, {"window_seconds": 3600, "mode": "random"}]
)
def test_a_job_runs_the_union_of_its_expressions_at_their_spread_times(references, zone, spread):
    expected = references[zone]
    end = START.replace(year=START.year + YEARS)
    runs = planned(EXPRESSIONS, zone, spread, end)
    assert [occurrence for occurrence, _ in runs] == [at for at, _ in expected]
    for occurrence, fire in runs:
        offset = 0 if spread is None else reference_offset(spread["mode"], spread["window_seconds"], occurrence)
        assert fire == occurrence + timedelta(seconds=offset), occurrence
    if spread is not None and spread["mode"] == "random":
        offsets = {(fire - occurrence).total_seconds() for occurrence, fire in runs}
        assert len(offsets) > len(runs) // 2  # drawn per occurrence, not one for the job


@pytest.mark.parametrize("zone", ZONES)
def test_next_after_any_instant_is_the_reference_next(references, zone):
    expected = [at for at, _ in references[zone]]
    union = parse_union(EXPRESSIONS, zone, START)
    rng = random.Random(zone)
    span = (expected[-1] - START).total_seconds()
    instants = [START + timedelta(seconds=rng.uniform(0, span)) for _ in range(3000)]
    instants += [at - _MIN for at in expected[::7]] + expected[::11]  # just before and at an occurrence
    for instant in instants:
        index = bisect.bisect_right(expected, instant)
        if index < len(expected):
            assert union.next_after(instant) == expected[index], instant
        if index > 0:
            assert union.last_at_or_before(instant) == expected[index - 1], instant


@pytest.mark.parametrize("zone", ZONES)
def test_the_preview_explains_each_time_as_the_reference(references, zone):
    spread = Spread(600, "stable", JOB_ID)
    after = START + timedelta(days=80)  # across London's and New York's spring forward
    found = explain_occurrences(EXPRESSIONS, timezone=zone, after=after, count=100, spread=spread)
    # The preview anchors rate()/@every at `after` (a job created then): its reference does too.
    expected = reference(EXPRESSIONS, zone, after, after + timedelta(days=40))[:100]
    offset = reference_offset("stable", 600, after)
    assert [(item.occurrence, item.expression) for item in found] == expected
    assert all(
        item.spread_seconds == offset and item.at == item.occurrence + timedelta(seconds=offset) for item in found
    )
