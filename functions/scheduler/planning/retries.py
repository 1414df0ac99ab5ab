"""When a job's attempts are retried: the backoff between them (exponential, with full jitter, or
the target's ``Retry-After`` when longer), the time ``max_age_seconds`` counts from, and a failed
backfill delivery's retry."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from msgspec.structs import replace

from scheduler.core.domain import BackfillRetry, ExecutionStatus, Job, JobState, LeaseKind, Outcome, Plan, RetryPolicy

# A Retry-After beyond this is not honoured in full.
MAX_RETRY_AFTER_SECONDS = 86400.0


def backoff_seconds(retry: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter between ``min_backoff`` and the attempt's ceiling."""
    draw = rng.uniform if rng is not None else random.uniform
    low, high = retry.min_backoff_seconds, retry.max_backoff_seconds
    ceiling = min(high, low * (2 ** max(attempt - 1, 0))) if low > 0 else min(high, 2 ** max(attempt - 1, 0))
    return draw(low, max(low, ceiling))


def retry_delay(retry: RetryPolicy, attempt: int, outcome: Outcome, rng: random.Random | None) -> timedelta:
    """How long after a failed ``attempt`` the next one runs: the backoff, or the target's
    Retry-After when longer (up to ``MAX_RETRY_AFTER_SECONDS``)."""
    delay = backoff_seconds(retry, attempt, rng)
    if outcome.retry_after_seconds:
        delay = max(delay, min(outcome.retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
    return timedelta(seconds=delay)


def retries_since(job: Job, occurrence: datetime) -> datetime:
    """When ``max_age_seconds`` starts counting for the attempts at ``occurrence``: the
    occurrence, or the job's creation when that came later (a one-off created after its time
    was due from then: the time that passed before it existed does not cut its retries short)."""
    if job.created_at is not None and job.created_at > occurrence:
        return job.created_at
    return occurrence


def retry_backfill(
    job: Job, outcome: Outcome, now: datetime, rng: random.Random | None, ran: tuple[datetime, int, datetime]
) -> Plan:
    """A backfill delivery's completion (``ran``: its occurrence, attempt and start): when it
    failed and the job's retry policy allows another attempt, that attempt (the store records it
    with its backfill, whose next hand-over it is); the job's columns stay as they are."""
    plan = Plan.of(job)
    occurrence, attempt, started_at = ran
    retry = job.retry_policy
    if outcome.status == ExecutionStatus.SUCCEEDED or not outcome.retryable or attempt >= retry.max_attempts:
        return plan
    at = now + retry_delay(retry, attempt, outcome, rng)
    again = BackfillRetry(occurrence, attempt + 1, at, started_at, retry.max_age_seconds or None)
    return replace(plan, backfill_retry=again)


def retries_in_hand(job: Job, plan: Plan) -> bool:
    """Whether ``plan`` (a completion's) retries the occurrence in hand, or a backfill's (no
    final outcome yet)."""
    return plan.backfill_retry is not None or (
        job.lease_kind != LeaseKind.MANUAL
        and plan.state != JobState.COMPLETED
        and plan.scheduled_at == job.scheduled_at
        and plan.attempt == job.attempt
        and plan.next_run_at != job.next_run_at
    )
