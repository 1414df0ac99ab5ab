"""The occurrences a plan moves past (``planning.skips``): counted by arithmetic for an interval,
one by one (bounded) for a calendar expression, the two agreeing with a brute-force walk; the
reasons a completion gives them; and nothing at all when nothing was skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.domain import Job, JobState, Outcome, SkipReason
from scheduler.planning import lifecycle
from scheduler.planning.skips import COUNT_LIMIT, count_between, skipped_at_completion
from scheduler.schedules import next_occurrence, parse_schedule

T0 = datetime(2026, 3, 28, 23, 0, 7, tzinfo=UTC)


def _brute(schedule, after, before, **window):
    found, at = [], after
    while (at := next_occurrence(schedule, at, **window)) is not None and at < before:
        found.append(at)
    return len(found), found[0] if found else None


@pytest.mark.parametrize(
    ("expression", "zone", "span"),
    [
        ("@every 7s", "UTC", timedelta(hours=1)),
        ("rate(5 minutes)", "UTC", timedelta(days=1)),
        ("*/10 * * * *", "Europe/Berlin", timedelta(days=2)),  # across the spring-forward night
        ("30 2 * * *", "Europe/Berlin", timedelta(days=5)),
    ],
)
def test_counts_agree_with_a_brute_force_walk(expression, zone, span):
    schedule = parse_schedule(expression, zone, T0 - timedelta(days=1))
    for offset in (timedelta(0), timedelta(seconds=3), timedelta(minutes=17)):
        after, before = T0 + offset, T0 + offset + span
        assert count_between(schedule, after, before) == _brute(schedule, after, before)
    end = T0 + span / 2
    assert count_between(schedule, T0, T0 + span, end_at=end) == _brute(schedule, T0, T0 + span, end_at=end)


def test_an_interval_counts_years_at_once_and_a_cron_stops_at_the_limit():
    every = parse_schedule("@every 1s", "UTC", T0)
    assert count_between(every, T0, T0 + timedelta(days=365))[0] == 365 * 86400 - 1
    minutely = parse_schedule("* * * * *", "UTC", T0)
    assert count_between(minutely, T0, T0 + timedelta(days=365))[0] == COUNT_LIMIT


def test_a_completion_splits_missed_from_overlap_at_the_attempts_start():
    schedule = parse_schedule("@every 10s", "UTC", T0)
    ran = T0  # due at T0, started 35 s late, ran 40 s: 3 missed (10, 20, 30), 4 overlapping (40 .. 70)
    started, now = T0 + timedelta(seconds=35), T0 + timedelta(seconds=75)
    chosen = T0 + timedelta(seconds=80)  # skip: the first after now
    skips = skipped_at_completion(schedule, ran, chosen, now, attempt=1, started_at=started)
    assert [(s.reason, s.count, s.first - T0) for s in skips] == [
        (SkipReason.MISSED, 3, timedelta(seconds=10)),
        (SkipReason.OVERLAP, 4, timedelta(seconds=40)),
    ]
    retried = skipped_at_completion(schedule, ran, chosen, now, attempt=2, started_at=started)
    assert [(s.reason, s.count) for s in retried] == [(SkipReason.OVERLAP, 7)]


def test_a_completion_that_skips_nothing_has_no_skips():
    job = Job(
        id="j",
        schedule="@every 1h",
        created_at=T0,
        state=JobState.ACTIVE,
        scheduled_at=T0 + timedelta(hours=1),
        next_run_at=T0 + timedelta(hours=1),
        attempt=1,
    )
    now = T0 + timedelta(hours=1, seconds=2)
    plan = lifecycle.plan_completion(job, Outcome("succeeded"), now, None, job.scheduled_at, now)
    assert plan.skips == () and plan.scheduled_at == T0 + timedelta(hours=2)
