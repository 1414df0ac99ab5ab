"""What happens to a job's schedule columns on each event: creation, edit, pause, resume and the
end of an attempt. Pure functions of the job (``domain.Job``) and the database's ``now``; the
service layer (``scheduler.service``) hands them to the store, which applies their answers inside
the transaction that holds the row.

Every answer is a dict of the columns ``state``, ``scheduled_at``, ``attempt`` and ``next_run_at``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.domain import Job, Outcome  # noqa: F401 (Outcome re-exported)
from scheduler.schedules import Schedule, first_run, interval_anchor, one_off, parse_schedule, plan_next

# How many missed occurrences `run_all` catches up at most.
RUN_ALL_CAP = 10
# A Retry-After beyond this is not honoured in full.
MAX_RETRY_AFTER_SECONDS = 86400.0

_TINY = timedelta(microseconds=1)


def schedule_of(job: Job) -> Schedule:
    """The job's schedule; rate()/@every count from start_at, else from creation."""
    if job.run_at is not None:
        return one_off(job.run_at)
    anchor = interval_anchor(job.start_at, job.created_at)
    return _parse_schedule(job.schedule, job.timezone or "UTC", anchor)


# Schedules are immutable: a runner completing the same jobs again and again parses each once.
_parse_schedule = functools.lru_cache(maxsize=4096)(parse_schedule)


def _at(occurrence: datetime | None, state: str) -> dict[str, Any]:
    if occurrence is None:
        return {"state": "completed", "scheduled_at": None, "attempt": 0, "next_run_at": None}
    return {"state": state, "scheduled_at": occurrence, "attempt": 0, "next_run_at": occurrence}


def plan_first(job: Job, now: datetime, state: str = "active") -> dict[str, Any]:
    """A new job, or one whose schedule was edited: its first occurrence after ``now``."""
    occurrence = first_run(schedule_of(job), now, start_at=job.start_at, end_at=job.end_at)
    return _at(occurrence, state)


def plan_pause(job: Job) -> dict[str, Any]:
    """Pausing keeps the occurrence in hand (shown as next_run_at) but nothing is due."""
    if job.state != "active":
        return _same(job)
    return {**_same(job), "state": "paused"}


def plan_resume(job: Job, now: datetime) -> dict[str, Any]:
    """Resuming applies the ``missed_runs`` policy to the occurrences missed while paused. An
    attempt whose time passed during the pause (a catch-up, a retry) is due at the resume: its
    execution's lateness (``due_at``) counts from then, not from the pause."""
    if job.state != "paused":
        return _same(job)
    pending = job.scheduled_at
    if pending is None:
        return plan_first(job, now)
    if job.attempt > 0 or pending >= now:
        return _due_by(now, {**_same(job), "state": "active"})
    occurrence = plan_next(
        schedule_of(job),
        pending - _TINY,
        now,
        job.missed_runs,
        start_at=job.start_at,
        end_at=job.end_at,
        cap=RUN_ALL_CAP,
    )
    return _due_by(now, _at(occurrence, "active"))


def _due_by(now: datetime, plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` with a next attempt in the past moved to ``now`` (the occurrence stays as it was)."""
    if plan["next_run_at"] is not None and plan["next_run_at"] < now:
        return {**plan, "next_run_at": now}
    return plan


def backoff_seconds(retry: Mapping[str, Any], attempt: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter between ``min_backoff`` and the attempt's ceiling."""
    rng = rng or random
    low = float(retry.get("min_backoff_seconds", 1))
    high = float(retry.get("max_backoff_seconds", 300))
    ceiling = min(high, low * (2 ** max(attempt - 1, 0))) if low > 0 else min(high, 2 ** max(attempt - 1, 0))
    return rng.uniform(low, max(low, ceiling))


def plan_completion(
    job: Job, outcome: Outcome, now: datetime, rng: random.Random | None = None, ran_occurrence: datetime | None = None
) -> dict[str, Any]:
    """The job's columns after an attempt: a durable retry, the next occurrence, or completion.

    A manual run leaves the occurrence in hand alone (the store clears its request), and so does
    an attempt at an occurrence that an edit replaced meanwhile (``ran_occurrence`` differs from
    the job's ``scheduled_at``). Retries stop at
    ``max_attempts``, on a permanent failure, or when the next attempt would start later than
    ``max_age_seconds`` after the occurrence's scheduled time.
    """
    result = _same(job)
    if job.lease_kind == "manual":
        return result  # the store clears the request that ran
    scheduled = job.scheduled_at
    if ran_occurrence is not None and scheduled != ran_occurrence:
        # The job was edited while this attempt ran: the occurrence in hand is the new plan's
        # first one, not the one that ran. Keep it.
        return result
    retry = job.retry or {}
    attempt = int(job.attempt or 0)
    if outcome.status != "succeeded" and outcome.retryable and attempt < job.max_attempts:
        delay = backoff_seconds(retry, attempt, rng)
        if outcome.retry_after_seconds:
            delay = max(delay, min(outcome.retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
        retry_at = now + timedelta(seconds=delay)
        max_age = retry.get("max_age_seconds")
        if not max_age or retry_at <= (scheduled or now) + timedelta(seconds=max_age):
            return {**result, "next_run_at": retry_at}
    occurrence = plan_next(
        schedule_of(job),
        scheduled or now,
        now,
        job.missed_runs,
        start_at=job.start_at,
        end_at=job.end_at,
        cap=RUN_ALL_CAP,
    )
    state = job.state if job.state != "completed" else "active"
    return {**result, **_at(occurrence, state)}


def _same(job: Job) -> dict[str, Any]:
    return {
        "state": job.state,
        "scheduled_at": job.scheduled_at,
        "attempt": job.attempt,
        "next_run_at": job.next_run_at,
    }
