"""The job lifecycle with several expressions (``schedules``) and a ``spread``: the missed-run
policies, the ``start_at``/``end_at`` window, pause and resume, retries, without a database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from msgspec import structs

from scheduler.core.domain import Job, JobState
from scheduler.planning.lifecycle import Outcome, plan_completion, plan_first, plan_pause, plan_resume, spread_of

JOB_ID = "0b6f6c5e-3c1a-4e8e-9d55-0f0f0f0f0f01"
CREATED = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
# Every 10 minutes on the hour's :00, :10, ... and at :05 past each hour: 7 a hour.
UNION = ("*/10 * * * *", "5 * * * *")


def at(hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(2026, 12, 1, hh, mm, ss, tzinfo=UTC)


def job(**overrides) -> Job:
    row = {
        "id": JOB_ID,
        "schedules": UNION,
        "timezone": "UTC",
        "created_at": CREATED,
        "scheduled_at": at(10, 0),
        "next_run_at": at(10, 0),
        "attempt": 1,
        "lease_kind": "schedule",
        "missed_runs": "run_once",
        "retry": {"max_attempts": 3, "min_backoff_seconds": 2, "max_backoff_seconds": 10},
    }
    row.update(overrides)
    return Job.from_row(row)


def test_a_union_runs_the_next_occurrence_of_any_expression():
    plan = plan_completion(job(), Outcome("succeeded"), at(10, 0, 3))
    assert (plan.scheduled_at, plan.next_run_at) == (at(10, 5), at(10, 5))
    plan = plan_completion(job(scheduled_at=at(10, 5), next_run_at=at(10, 5)), Outcome("succeeded"), at(10, 5, 1))
    assert plan.scheduled_at == at(10, 10)


@pytest.mark.parametrize(
    "policy,expected",
    [
        ("skip", at(10, 40)),  # the first occurrence after now
        ("run_once", at(10, 30)),  # the latest missed one
        ("run_all", at(10, 5)),  # every missed one in turn (4 missed: under the cap)
    ],
)
def test_the_missed_run_policy_applies_to_the_union(policy, expected):
    plan = plan_completion(job(missed_runs=policy), Outcome("succeeded"), at(10, 37))
    assert plan.scheduled_at == expected


def test_run_all_is_capped_over_the_union():
    plan = plan_completion(job(missed_runs="run_all"), Outcome("succeeded"), at(13, 1))
    # 10 latest missed occurrences up to 13:01 of the union: 13:00, 12:50, 12:40, 12:30, 12:20,
    # 12:10, 12:05, 12:00, 11:50, 11:40: the first of them.
    assert plan.scheduled_at == at(11, 40)


def test_the_window_bounds_the_union():
    assert plan_first(job(start_at=at(11, 2)), at(10, 0)).scheduled_at == at(11, 5)
    ended = plan_completion(job(end_at=at(10, 3)), Outcome("succeeded"), at(10, 0, 1))
    assert ended.state == JobState.COMPLETED and ended.scheduled_at is None
    last = plan_completion(job(end_at=at(10, 5)), Outcome("succeeded"), at(10, 0, 1))
    assert last.scheduled_at == at(10, 5)


def test_a_union_with_an_interval_counts_it_from_the_creation():
    union = job(
        schedules=("0 12 * * *", "rate(7 minutes)"),
        created_at=at(
            10,
            1,
            30,
        ),
    )
    first = plan_first(union, at(10, 1, 30))
    assert first.scheduled_at == at(10, 8, 30)


def test_a_stable_spread_delays_every_occurrence_by_the_job_s_offset():
    spread = {"window_seconds": 120, "mode": "stable"}
    offset = spread_of(job(spread=spread)).offset(at(10, 0))
    assert timedelta(0) <= offset < timedelta(seconds=120)
    plan = plan_first(job(spread=spread), at(9, 59))
    assert (plan.scheduled_at, plan.next_run_at) == (at(10, 0), at(10, 0) + offset)
    nxt = plan_completion(
        job(spread=spread, next_run_at=at(10, 0) + offset),
        Outcome("succeeded"),
        at(10, 0) + offset + timedelta(seconds=1),
    )
    assert (nxt.scheduled_at, nxt.next_run_at) == (at(10, 5), at(10, 5) + offset)
    assert spread_of(job(spread=spread)).offset(at(11, 0)) == offset  # one offset for the job
    offsets = {
        spread_of(job(id=f"9a0c5d3e-1111-4222-8333-{n:012d}", spread=spread)).offset(at(10, 0)) for n in range(40)
    }
    assert len(offsets) > 20  # derived from the id: jobs spread over the window


def test_a_random_spread_draws_per_occurrence_within_the_window():
    spread = {"window_seconds": 600, "mode": "random"}
    found = spread_of(job(spread=spread))
    offsets = [found.offset(at(10, 0) + timedelta(minutes=5 * i)) for i in range(50)]
    assert all(timedelta(0) <= o < timedelta(seconds=600) for o in offsets)
    assert len(set(offsets)) > 30
    assert offsets == [found.offset(at(10, 0) + timedelta(minutes=5 * i)) for i in range(50)]  # fixed


def test_a_spread_never_drops_an_occurrence_whose_fire_time_is_to_come():
    """A run of 10:00 that fires at 10:00 + d and ends after 10:05 (the next occurrence) but
    before 10:05 + d: the next run is 10:05, not missed, even under skip."""
    spread = {"window_seconds": 600, "mode": "stable"}
    offset = spread_of(job(spread=spread)).offset(at(10, 0))
    if offset < timedelta(minutes=5):  # the job's offset must reach past the next occurrence
        spread = {"window_seconds": 600, "mode": "random"}
    ran = job(spread=spread, missed_runs="skip")
    fire = at(10, 0) + spread_of(ran).offset(at(10, 0))
    plan = plan_completion(structs.replace(ran, next_run_at=fire), Outcome("succeeded"), at(10, 5, 30))
    assert plan.scheduled_at == at(10, 5)
    assert plan.next_run_at == at(10, 5) + spread_of(ran).offset(at(10, 5))


def test_a_retry_keeps_the_occurrence_and_its_key():
    spread = {"window_seconds": 120, "mode": "stable"}
    ran = job(spread=spread)
    plan = plan_completion(ran, Outcome("failed", retryable=True), at(10, 1), random.Random(3))
    assert plan.scheduled_at == at(10, 0) and plan.attempt == 1


def test_pause_and_resume_apply_the_policy_to_the_union():
    paused = job(state="paused", attempt=0, scheduled_at=at(10, 5), next_run_at=at(10, 5))
    assert plan_pause(job(attempt=0)).state == JobState.PAUSED
    resumed = plan_resume(paused, at(10, 31))
    assert resumed.state == JobState.ACTIVE and resumed.scheduled_at == at(10, 30)  # run_once: the latest
    skipped = plan_resume(structs.replace(paused, missed_runs="skip"), at(10, 31))
    assert skipped.scheduled_at == at(10, 40)
    spread = {"window_seconds": 120, "mode": "stable"}
    with_spread = plan_resume(structs.replace(paused, spread=spread, missed_runs="skip"), at(10, 31))
    offset = spread_of(job(spread=spread)).offset(at(10, 0))
    assert with_spread.scheduled_at == (at(10, 30) if at(10, 30) + offset >= at(10, 31) else at(10, 40))
