"""What happens to a job's schedule columns on each event: creation, edit, pause, resume and the
end of an attempt. Pure functions of the job (``domain.Job``) and the database's ``now``; the
service layer (``scheduler.service``) hands them to the store, which applies their answers inside
the transaction that holds the row.

Every answer is a ``domain.Plan``: the columns ``state``, ``scheduled_at``, ``attempt`` and
``next_run_at``.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from datetime import datetime, timedelta

from scheduler.core.domain import (
    ExecutionStatus,
    Job,
    JobState,
    LeaseKind,
    Outcome,
    Plan,
    RetryPolicy,
    Skip,
    SkipReason,
)
from scheduler.core.errors import ScheduleError
from scheduler.planning.skips import skipped, skipped_at_completion
from scheduler.schedules import (
    Schedule,
    first_run,
    interval_anchor,
    next_occurrence,
    one_off,
    parse_schedule,
    plan_next,
)

# How many missed occurrences `run_all` catches up at most.
RUN_ALL_CAP = 10
# A Retry-After beyond this is not honoured in full.
MAX_RETRY_AFTER_SECONDS = 86400.0

_TINY = timedelta(microseconds=1)


def schedule_of(job: Job) -> Schedule:
    """The job's schedule; rate()/@every count from start_at, else from creation."""
    if job.run_at is not None:
        return one_off(job.run_at)
    if job.schedule is None or job.created_at is None:
        raise ValueError("a job with a schedule carries it and its creation time")
    anchor = interval_anchor(job.start_at, job.created_at)
    return _parse_schedule(job.schedule, job.timezone or "UTC", anchor)


# Schedules are immutable: a runner completing the same jobs again and again parses each once.
_parse_schedule = functools.lru_cache(maxsize=4096)(parse_schedule)


def _at(occurrence: datetime | None, state: JobState) -> Plan:
    if occurrence is None:
        return Plan(JobState.COMPLETED, None, 0, None)
    return Plan(state, occurrence, 0, occurrence)


def plan_first(job: Job, now: datetime, state: JobState = JobState.ACTIVE) -> Plan:
    """A new job, or one whose schedule was edited: its first occurrence after ``now``. A
    one-off whose time is outside its start_at/end_at window never runs: it completes at once,
    its occurrence on record as skipped (``window``)."""
    occurrence = first_run(schedule_of(job), now, start_at=job.start_at, end_at=job.end_at)
    plan = _at(occurrence, state)
    if occurrence is None and job.run_at is not None:
        return dataclasses.replace(plan, skips=(Skip(SkipReason.WINDOW, 1, job.run_at),))
    return plan


def plan_pause(job: Job) -> Plan:
    """Pausing keeps the occurrence in hand (shown as next_run_at) but nothing is due."""
    if job.state != JobState.ACTIVE:
        return Plan.of(job)
    return dataclasses.replace(Plan.of(job), state=JobState.PAUSED)


def plan_resume(job: Job, now: datetime) -> Plan:
    """Resuming applies the ``missed_runs`` policy to the occurrences missed while paused. An
    attempt whose time passed during the pause (a catch-up, a retry) is due at the resume: its
    execution's lateness (``due_at``) counts from then, not from the pause. The occurrences the
    policy does not run (those from the one in hand to the one planned) are on record as one
    skip (``paused``)."""
    if job.state != JobState.PAUSED:
        return Plan.of(job)
    pending = job.scheduled_at
    if pending is None:
        return plan_first(job, now)
    if job.attempt > 0 or pending >= now:
        return _due_by(now, dataclasses.replace(Plan.of(job), state=JobState.ACTIVE))
    occurrence = plan_next(
        schedule_of(job),
        pending - _TINY,
        now,
        job.missed_runs,
        start_at=job.start_at,
        end_at=job.end_at,
        cap=RUN_ALL_CAP,
    )
    skips = skipped(
        schedule_of(job),
        SkipReason.PAUSED,
        pending - _TINY,
        now + _TINY if occurrence is None else occurrence,
        start_at=job.start_at,
        end_at=job.end_at,
    )
    return _due_by(now, dataclasses.replace(_at(occurrence, JobState.ACTIVE), skips=skips))


def backfill_occurrences(job: Job, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The job's occurrences from ``start`` to ``end`` (both included, inside its start_at/end_at
    window), at most ``limit``: ``ScheduleError`` on ``end`` beyond that, and on ``end`` before
    ``start``."""
    if end < start:
        raise ScheduleError("must not be before start", field="end")
    schedule = schedule_of(job)
    found: list[datetime] = []
    at = next_occurrence(schedule, start - _TINY, start_at=job.start_at, end_at=job.end_at)
    while at is not None and at <= end:
        if len(found) == limit:
            raise ScheduleError(f"the range holds more than {limit:,} occurrences: backfill it in parts", field="end")
        found.append(at)
        at = next_occurrence(schedule, at, start_at=job.start_at, end_at=job.end_at)
    return found


def _due_by(now: datetime, plan: Plan) -> Plan:
    """``plan`` with a next attempt in the past moved to ``now`` (the occurrence stays as it was)."""
    if plan.next_run_at is not None and plan.next_run_at < now:
        return dataclasses.replace(plan, next_run_at=now)
    return plan


def backoff_seconds(retry: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter between ``min_backoff`` and the attempt's ceiling."""
    draw = rng.uniform if rng is not None else random.uniform
    low, high = retry.min_backoff_seconds, retry.max_backoff_seconds
    ceiling = min(high, low * (2 ** max(attempt - 1, 0))) if low > 0 else min(high, 2 ** max(attempt - 1, 0))
    return draw(low, max(low, ceiling))


def plan_completion(
    job: Job,
    outcome: Outcome,
    now: datetime,
    rng: random.Random | None = None,
    ran_occurrence: datetime | None = None,
    ran_started_at: datetime | None = None,
) -> Plan:
    """The job's columns after an attempt: a durable retry, the next occurrence, or completion.

    A manual run leaves the occurrence in hand alone (the store clears its request), and so does
    an attempt at an occurrence that an edit replaced meanwhile (``ran_occurrence`` differs from
    the job's ``scheduled_at``). Retries stop at
    ``max_attempts``, on a permanent failure, or when the next attempt would start later than
    ``max_age_seconds`` after the occurrence's scheduled time. The occurrences the next one
    planned leaves behind are on record as skips (``skipped_at_completion``: ``missed`` or
    ``overlap``, by the attempt's start ``ran_started_at``).
    """
    result = Plan.of(job)
    if job.lease_kind == LeaseKind.MANUAL:
        return result  # the store clears the request that ran
    scheduled = job.scheduled_at
    if ran_occurrence is not None and scheduled != ran_occurrence:
        # The job was edited while this attempt ran: the occurrence in hand is the new plan's
        # first one, not the one that ran. Keep it.
        return result
    retry = job.retry_policy
    attempt = int(job.attempt or 0)
    if outcome.status != ExecutionStatus.SUCCEEDED and outcome.retryable and attempt < retry.max_attempts:
        delay = backoff_seconds(retry, attempt, rng)
        if outcome.retry_after_seconds:
            delay = max(delay, min(outcome.retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
        retry_at = now + timedelta(seconds=delay)
        max_age = retry.max_age_seconds
        if not max_age or retry_at <= (scheduled or now) + timedelta(seconds=max_age):
            return dataclasses.replace(result, next_run_at=retry_at)
    schedule = schedule_of(job)
    occurrence = plan_next(
        schedule, scheduled or now, now, job.missed_runs, start_at=job.start_at, end_at=job.end_at, cap=RUN_ALL_CAP
    )
    state = job.state if job.state != JobState.COMPLETED else JobState.ACTIVE
    plan = _at(occurrence, state)
    if scheduled is None or schedule.one_off:
        return plan
    if occurrence is not None and occurrence > now and job.missed_runs != "skip":
        return plan  # run_once and run_all plan a later occurrence only when none was missed
    skips = skipped_at_completion(
        schedule,
        scheduled,
        occurrence,
        now,
        attempt=attempt,
        started_at=ran_started_at,
        start_at=job.start_at,
        end_at=job.end_at,
    )
    return dataclasses.replace(plan, skips=skips) if skips else plan
