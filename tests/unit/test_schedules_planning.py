"""The anchor of ``rate()``/``@every`` and the preview ``occurrences``: the job's own planning.

Europe/Berlin in 2026: spring forward 03-29 01:00Z (02:00 -> 03:00 CEST), fall back 10-25 01:00Z
(03:00 CEST -> 02:00 CET).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from msgspec import structs

from scheduler.core.domain import Job
from scheduler.planning import lifecycle
from scheduler.planning.lifecycle import Outcome
from scheduler.schedules import ScheduleError, interval_anchor, occurrences

UTC = UTC


def Z(text: str) -> datetime:
    """``"2026-03-29T01:00"`` -> aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- the anchor ----------------------------------------------------------------------------------


def test_interval_anchor_rounds_start_at_up_and_creation_down():
    assert interval_anchor(Z("2026-12-01T10:00:00.5"), Z("2026-11-01T08:00:00.7")) == Z("2026-12-01T10:00:01")
    assert interval_anchor(Z("2026-12-01T10:00:00"), Z("2026-11-01T08:00:00.7")) == Z("2026-12-01T10:00:00")
    assert interval_anchor(None, Z("2026-11-01T08:00:00.7")) == Z("2026-11-01T08:00:00")
    last = datetime.max.replace(tzinfo=UTC)
    assert interval_anchor(last, last) == last.replace(microsecond=0)  # no overflow


@pytest.mark.parametrize("schedule", ["@every 1m", "rate(5 minutes)"])
def test_a_fractional_start_at_does_not_delay_the_first_run(schedule):
    """The first occurrence is the first whole second at or after ``start_at``: it used to be
    one interval late, as the anchor was rounded down below ``start_at``."""
    start_at = Z("2026-12-01T10:00:00.5")
    job = {
        "state": "active",
        "schedule": schedule,
        "run_at": None,
        "timezone": "UTC",
        "start_at": start_at,
        "end_at": None,
        "created_at": Z("2026-11-30T09:00:00.25"),
        "scheduled_at": None,
        "attempt": 0,
        "next_run_at": None,
        "manual_run_at": None,
        "lease_kind": None,
        "missed_runs": "skip",
        "retry": {},
    }
    first = lifecycle.plan_first(Job.from_row(job), Z("2026-12-01T09:00:00")).scheduled_at
    assert first == Z("2026-12-01T10:00:01")
    ran = {**job, "scheduled_at": first, "lease_kind": "schedule"}
    interval = timedelta(minutes=1 if schedule.startswith("@") else 5)
    assert lifecycle.plan_completion(Job.from_row(ran), Outcome("succeeded"), first).scheduled_at == first + interval


# -- occurrences ---------------------------------------------------------------------------------


def test_a_dst_night_in_berlin():
    # 02:30 does not exist on 03-29: it fires once, at the jump (03:00 CEST = 01:00Z)
    assert occurrences("30 2 * * *", timezone="Europe/Berlin", after=Z("2026-03-28T12:00"), count=3) == [
        Z("2026-03-29T01:00"),
        Z("2026-03-30T00:30"),
        Z("2026-03-31T00:30"),
    ]
    # 02:00-03:00 happens twice on 10-25: the hours fire at the first pass only
    assert occurrences("0 * * * *", timezone="Europe/Berlin", after=Z("2026-10-24T23:30"), count=3) == [
        Z("2026-10-25T00:00"),
        Z("2026-10-25T02:00"),
        Z("2026-10-25T03:00"),
    ]


def test_the_window_ends_the_list():
    found = occurrences(
        "@every 1h", start_at=Z("2026-12-01T10:00"), end_at=Z("2026-12-01T12:30"), after=Z("2026-12-01T09:00"), count=10
    )
    assert found == [Z("2026-12-01T10:00"), Z("2026-12-01T11:00"), Z("2026-12-01T12:00")]
    # end_at is inclusive; start_at bounds a wall-time schedule too
    assert occurrences(
        "*/15 * * * *", start_at=Z("2026-12-01T10:07"), end_at=Z("2026-12-01T10:45"), after=Z("2026-12-01T09:00")
    ) == [Z("2026-12-01T10:15"), Z("2026-12-01T10:30"), Z("2026-12-01T10:45")]
    assert occurrences("@daily", end_at=Z("2026-12-01T00:00"), after=Z("2026-12-01T00:00")) == []


def test_strictly_after_and_count():
    assert occurrences("*/5 * * * *", after=Z("2026-12-01T10:05"), count=2) == [
        Z("2026-12-01T10:10"),
        Z("2026-12-01T10:15"),
    ]
    assert len(occurrences("* * * * *", after=Z("2026-12-01T10:05"), count=100)) == 100


def test_one_offs():
    run_at = datetime.fromisoformat("2026-12-24T18:00:00+01:00")
    assert occurrences(run_at, after=Z("2026-12-01T00:00"), count=5) == [Z("2026-12-24T17:00")]
    assert occurrences(run_at, after=Z("2026-12-24T17:00")) == []  # at or before after: none
    assert occurrences(run_at, after=Z("2026-12-01T00:00"), end_at=Z("2026-12-24T16:59")) == []
    assert occurrences("at(2026-03-29T02:30:00)", timezone="Europe/Berlin", after=Z("2026-03-01T00:00")) == [
        Z("2026-03-29T01:00")
    ]


def test_rate_counts_from_start_at_else_from_after():
    assert occurrences(
        "rate(5 minutes)", start_at=Z("2026-12-01T10:02:30.25"), after=Z("2026-12-01T09:00"), count=3
    ) == [Z("2026-12-01T10:02:31"), Z("2026-12-01T10:07:31"), Z("2026-12-01T10:12:31")]
    # a start_at already past still anchors the grid
    assert occurrences("rate(5 minutes)", start_at=Z("2026-12-01T10:02:30"), after=Z("2026-12-01T11:00"), count=2) == [
        Z("2026-12-01T11:02:30"),
        Z("2026-12-01T11:07:30"),
    ]
    # without start_at, as a job created at `after` (whole seconds)
    assert occurrences("rate(5 minutes)", after=Z("2026-12-01T10:00:07.9"), count=2) == [
        Z("2026-12-01T10:05:07"),
        Z("2026-12-01T10:10:07"),
    ]


def test_the_preview_is_the_jobs_plan():
    """Walking a job through plan_first and plan_completion (each run on time) gives the same
    instants, on a DST night, with a window and a fractional start_at."""
    cases = [
        ("*/20 1-3 * * *", "Europe/Berlin", None, None),
        ("@every 7m", "UTC", Z("2026-10-25T00:03:00.5"), Z("2026-10-25T02:00")),
        ("cron(0 12 ? * 6L *)", "America/New_York", None, Z("2027-02-28T00:00")),
    ]
    after = Z("2026-10-24T23:10:11.5")
    for schedule, zone, start_at, end_at in cases:
        job = {
            "state": "active",
            "schedule": schedule,
            "run_at": None,
            "timezone": zone,
            "start_at": start_at,
            "end_at": end_at,
            "created_at": after,
            "scheduled_at": None,
            "attempt": 0,
            "next_run_at": None,
            "manual_run_at": None,
            "lease_kind": None,
            "missed_runs": "run_once",
            "retry": {},
        }
        planned, plan = [], lifecycle.plan_first(Job.from_row(job), after)
        while plan.scheduled_at is not None and len(planned) < 12:
            planned.append(plan.scheduled_at)
            job = {**job, **structs.asdict(plan), "lease_kind": "schedule"}
            plan = lifecycle.plan_completion(Job.from_row(job), Outcome("succeeded"), plan.scheduled_at)
        assert planned, schedule
        assert (
            occurrences(schedule, timezone=zone, start_at=start_at, end_at=end_at, after=after, count=12) == planned
        ), schedule


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: occurrences("61 * * * *", after=Z("2026-12-01T00:00")), "schedule"),
        (lambda: occurrences("@daily", timezone="Mars/Olympus", after=Z("2026-12-01T00:00")), "timezone"),
        (lambda: occurrences(datetime(2026, 12, 1), after=Z("2026-12-01T00:00")), "run_at"),
        (lambda: occurrences("@daily", start_at=datetime(2026, 12, 1), after=Z("2026-12-01T00:00")), "start_at"),
        (lambda: occurrences("@daily", end_at=datetime(2026, 12, 1), after=Z("2026-12-01T00:00")), "end_at"),
        (lambda: occurrences("@daily", after=datetime(2026, 12, 1)), "after"),
        (lambda: occurrences("@daily", after=Z("2026-12-01T00:00"), count=0), "count"),
        (lambda: occurrences("@daily", after=Z("2026-12-01T00:00"), count=True), "count"),
    ],
)
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ScheduleError) as caught:
        call()
    assert caught.value.field == field and str(caught.value)


def test_the_memoized_next_occurrence_is_per_schedule_and_instant():
    """Completing many jobs of one schedule at one occurrence searches once; every answer is
    still that schedule's own, whichever schedule or instant asked before."""
    from scheduler.schedules import parse_schedule
    from scheduler.schedules.planning import next_occurrence

    hourly, berlin = parse_schedule("0 * * * *", "UTC"), parse_schedule("0 * * * *", "Europe/Berlin")
    daily = parse_schedule("30 2 * * *", "Europe/Berlin")
    after = Z("2024-03-31T00:30:00Z")
    for _ in range(3):
        assert next_occurrence(hourly, after) == Z("2024-03-31T01:00:00Z") == hourly.next_after(after)
        assert next_occurrence(berlin, after) == berlin.next_after(after)
        assert next_occurrence(daily, after) == daily.next_after(after)  # 02:30 does not exist that night
        assert next_occurrence(hourly, after, end_at=Z("2024-03-31T00:59:00Z")) is None
        assert next_occurrence(hourly, after, start_at=Z("2024-03-31T05:10:00Z")) == Z("2024-03-31T06:00:00Z")
