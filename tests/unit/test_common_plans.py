"""A batch's completions share the plans that are not a job's own (``plan_completion``'s
``common``): the answer is always the one planned alone, and a batch of jobs on one schedule and
occurrence is planned once."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from scheduler.core.domain import ExecutionStatus, Job, JobState, LeaseKind, Outcome
from scheduler.planning.lifecycle import plan_completion, plan_first, schedule_of

BASE = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # a weekend with a DST change in London
SCHEDULES = [
    {"schedule": "*/5 * * * *"},
    {"schedule": "30 1 * * *"},
    {"schedule": "0 9 * * 1-5"},
    {"schedule": "rate(7 minutes)"},
    {"schedule": "@every 1s"},
    {"schedules": ("*/15 * * * *", "rate(20 minutes)")},
    {"schedules": ("*/10 * * * *", "rate(20 minutes)")},
    {"run_at": BASE + timedelta(minutes=3)},
    {"run_at": BASE + timedelta(minutes=33)},
]
OUTCOMES = [
    Outcome(ExecutionStatus.SUCCEEDED, http_status=200),
    Outcome(ExecutionStatus.FAILED, retryable=True, error="503"),
    Outcome(ExecutionStatus.FAILED, retryable=False, error="404"),
    Outcome(ExecutionStatus.TIMED_OUT, retryable=True),
]


@st.composite
def completions(draw):
    """A claimed job (its occurrence in hand a real one, usually) and how its attempt ended. Each
    field takes one of a few values, so that a batch's jobs often share a schedule, an occurrence
    and all but one field."""
    instants = st.sampled_from([None, BASE - timedelta(minutes=10), BASE + timedelta(minutes=20)])
    job = Job(
        id=f"job-{draw(st.integers(0, 3))}",
        owner="o",
        created_at=BASE - timedelta(hours=draw(st.integers(1, 2)), seconds=draw(st.sampled_from([0, 17]))),
        timezone=draw(st.sampled_from(["UTC", "Europe/London", "America/New_York"])),
        start_at=draw(instants),
        end_at=draw(instants),
        missed_runs=draw(st.sampled_from(["skip", "run_once", "run_all"])),
        spread=draw(st.sampled_from([None, None, {"window_seconds": 60, "mode": "stable"}])),
        lease_kind=draw(st.sampled_from([LeaseKind.SCHEDULE, LeaseKind.SCHEDULE, LeaseKind.MANUAL])),
        attempt=draw(st.integers(1, 4)),
        **draw(st.sampled_from(SCHEDULES)),
    )
    first = plan_first(job, BASE + timedelta(minutes=draw(st.sampled_from([-30, 0, 30]))))
    scheduled_at = first.scheduled_at or BASE
    if not draw(st.integers(0, 5)):
        scheduled_at += timedelta(seconds=draw(st.integers(1, 7200)))  # not an occurrence (an edit came between)
    job = structs.replace(job, scheduled_at=scheduled_at)
    ran = scheduled_at if draw(st.integers(0, 5)) else scheduled_at - timedelta(minutes=1)
    after = draw(st.sampled_from([-30, 0, 0.4, 1, 30, 200, 4000, 3 * 86400]))
    return job, draw(st.sampled_from(OUTCOMES)), scheduled_at + timedelta(seconds=after), ran


@settings(max_examples=400, deadline=None)
@given(st.lists(completions(), min_size=1, max_size=16))
def test_a_shared_plan_is_the_plan_made_alone(batch):
    common: dict = {}
    for job, outcome, now, ran in batch:
        alone = plan_completion(job, outcome, now, random.Random(7), ran, ran_started_at=now)
        shared = plan_completion(job, outcome, now, random.Random(7), ran, ran_started_at=now, common=common)
        assert shared == alone


def _claimed(schedule: str, occurrence: datetime, count: int) -> list[Job]:
    """``count`` jobs on ``schedule``, created a second apart, claimed at ``occurrence``."""
    return [
        Job(
            id=f"j{n}",
            schedule=schedule,
            created_at=occurrence - timedelta(hours=1, seconds=n),
            scheduled_at=occurrence,
            next_run_at=occurrence,
            attempt=1,
            lease_kind=LeaseKind.SCHEDULE,
        )
        for n in range(count)
    ]


def test_a_batch_on_one_schedule_and_occurrence_is_planned_once():
    occurrence = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    jobs = _claimed("* * * * *", occurrence, 50)
    common: dict = {}
    done = Outcome(ExecutionStatus.SUCCEEDED, http_status=200)
    plans = [
        plan_completion(job, done, occurrence + timedelta(seconds=0.2), None, occurrence, common=common) for job in jobs
    ]
    assert len(common) == 1 and all(plan is plans[0] for plan in plans)
    assert (plans[0].state, plans[0].scheduled_at, plans[0].attempt) == (
        JobState.ACTIVE,
        occurrence + timedelta(minutes=1),
        0,
    )


def test_intervals_counting_from_their_creation_are_planned_by_creation():
    occurrence = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
    jobs = _claimed("rate(1 minute)", occurrence, 3)
    common: dict = {}
    done = Outcome(ExecutionStatus.SUCCEEDED)
    plans = [plan_completion(job, done, occurrence, None, occurrence, common=common) for job in jobs]
    assert plans == [plan_completion(job, done, occurrence, None, occurrence) for job in jobs]
    assert len({plan.scheduled_at for plan in plans}) == 3
    assert schedule_of(jobs[0]).next_after(occurrence) == plans[0].scheduled_at


def test_a_missed_occurrence_is_planned_by_the_jobs_own_now_and_policy():
    occurrence = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    job = Job(
        id="j",
        schedule="* * * * *",
        created_at=occurrence - timedelta(days=1),
        scheduled_at=occurrence,
        attempt=1,
        lease_kind=LeaseKind.SCHEDULE,
        missed_runs="skip",
    )
    done = Outcome(ExecutionStatus.SUCCEEDED)
    common: dict = {}
    on_time = plan_completion(job, done, occurrence + timedelta(seconds=5), None, occurrence, common=common)
    late = plan_completion(job, done, occurrence + timedelta(minutes=3, seconds=5), None, occurrence, common=common)
    assert on_time.scheduled_at == occurrence + timedelta(minutes=1)
    assert late.scheduled_at == occurrence + timedelta(minutes=4) and late.skips


def test_every_field_a_shared_plan_depends_on_tells_the_plans_apart():
    """One batch of every combination of the fields a plan may depend on, around occurrences
    that the combinations share: each shared answer is the one planned alone."""
    instants = [None, BASE - timedelta(minutes=10), BASE + timedelta(minutes=20), BASE + timedelta(hours=5)]
    batch = []
    for fields in SCHEDULES:
        for timezone in ("UTC", "America/New_York"):
            for start_at in instants:
                for end_at in instants:
                    for created in (0, 17):
                        job = Job(
                            id="j",
                            created_at=BASE - timedelta(hours=1, seconds=created),
                            timezone=timezone,
                            start_at=start_at,
                            end_at=end_at,
                            lease_kind=LeaseKind.SCHEDULE,
                            attempt=1,
                            **fields,
                        )
                        for state in (JobState.ACTIVE, JobState.COMPLETED, JobState.PAUSED):
                            for scheduled_at in (BASE, BASE + timedelta(minutes=30)):
                                batch.append(structs.replace(job, state=state, scheduled_at=scheduled_at))
    random.Random(3).shuffle(batch)
    done = Outcome(ExecutionStatus.SUCCEEDED)
    for after in (timedelta(seconds=0.5), timedelta(minutes=40)):
        common: dict = {}
        for job in batch:
            now = job.scheduled_at + after
            alone = plan_completion(job, done, now, None, job.scheduled_at)
            assert plan_completion(job, done, now, None, job.scheduled_at, common=common) == alone, job
        assert 1 < len(common) < len(batch)
