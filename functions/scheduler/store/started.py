"""A started row (``started_columns`` in queries.sql) read into its job and its execution, by
position: the runner reads thousands a second."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.domain import Job, JobState, LeaseKind, StartedExecution, Trigger

# The columns of a started row (``started_columns`` in queries.sql), in their order: read by
# position, as the runner reads thousands a second (claim_and_start adds lock_token, reclaimed).
STARTED_COLUMNS = (
    "id",
    "owner",
    "name",
    "schedule",
    "run_at",
    "timezone",
    "start_at",
    "end_at",
    "created_at",
    "target",
    "retry",
    "missed_runs",
    "state",
    "version",
    "scheduled_at",
    "attempt",
    "next_run_at",
    "lease_kind",
    "after_completion",
    "schedules",
    "spread",
    "limits",
    "execution_id",
    "execution_scheduled_at",
    "execution_attempt",
    "execution_trigger",
    "execution_started_at",
    "exclude_calendars",
    "on_excluded",
    "overrides",
    "chains",
    "cause",
)
# claim_and_start's two columns after them: the lease's token, and whether it was reclaimed.
LOCK_TOKEN_COLUMN = len(STARTED_COLUMNS)
RECLAIMED_COLUMN = LOCK_TOKEN_COLUMN + 1


# The enums of a row's texts, read by a dict lookup (the runner reads thousands of rows a second).
_JOB_STATES = {state.value: state for state in JobState}
LEASE_KINDS = {kind.value: kind for kind in LeaseKind}
_TRIGGERS = {trigger.value: trigger for trigger in Trigger}


def read_started(row: Sequence[Any]) -> StartedExecution:
    """A started row (``STARTED_COLUMNS``, uuids read as text): its job and its execution.
    Every column the job takes is NOT NULL in the table or has None for its default."""
    (
        job_id,
        owner,
        name,
        schedule,
        run_at,
        timezone,
        start_at,
        end_at,
        created_at,
        target,
        retry,
        missed_runs,
        state,
        version,
        scheduled_at,
        attempt,
        next_run_at,
        lease_kind,
        after_completion,
        schedules,
        spread,
        limits,
        execution_id,
        execution_scheduled_at,
        execution_attempt,
        trigger,
        started_at,
        exclude_calendars,
        on_excluded,
        overrides,
        chains,
        cause,
    ) = row[:LOCK_TOKEN_COLUMN]
    on_success, on_failure, on_complete = map(tuple, chains) if chains else ((), (), ())
    job = Job(
        id=job_id,
        owner=owner,
        name=name,
        schedule=schedule,
        run_at=run_at,
        timezone=timezone,
        start_at=start_at,
        end_at=end_at,
        created_at=created_at,
        target=target,
        retry=retry,
        missed_runs=missed_runs,
        state=_JOB_STATES[state],
        version=version,
        scheduled_at=scheduled_at,
        attempt=attempt,
        next_run_at=next_run_at,
        lease_kind=LEASE_KINDS[lease_kind] if lease_kind else None,
        after_completion=after_completion,
        schedules=tuple(schedules) if schedules else None,
        spread=spread,
        exclude_calendars=tuple(exclude_calendars) if exclude_calendars else (),
        on_excluded=on_excluded,
        limits=limits,
        on_success=on_success,
        on_failure=on_failure,
        on_complete=on_complete,
    )
    return StartedExecution(
        job, execution_id, execution_scheduled_at, execution_attempt, _TRIGGERS[trigger], started_at, overrides, cause
    )
