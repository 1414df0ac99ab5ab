"""A started row (``started_columns`` in queries.sql) read into its job and its execution, by
position: the runner reads thousands a second."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.domain import Claim, Job, JobState, LeaseKind, StartedExecution, Trigger
from scheduler.store.rows import json_value

# The columns of a started row (``started_columns`` in queries.sql), in their order: read by
# position, as the runner reads thousands a second (claim_and_start adds lock_token, lost).
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
    "waited_ms",
)
# claim_and_start's two columns after them: the lease's token, and the execution of the expired
# lease it reclaimed, marked lost (NULL when it reclaimed none).
LOCK_TOKEN_COLUMN = len(STARTED_COLUMNS)
LOST_COLUMN = LOCK_TOKEN_COLUMN + 1


# The enums of a row's texts, read by a dict lookup (the runner reads thousands of rows a second).
_JOB_STATES = {state.value: state for state in JobState}
LEASE_KINDS = {kind.value: kind for kind in LeaseKind}
_TRIGGERS = {trigger.value: trigger for trigger in Trigger}


def read_started(
    row: Sequence[Any], sent_at: float | None = None, lease_margin_seconds: float = 0.0
) -> StartedExecution:
    """A started row (``STARTED_COLUMNS``, uuids, the target and the retry read as text): its
    job and its execution, to be delivered by ``_deliver_by`` its lease's statement ``sent_at``.
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
        waited_ms,
    ) = row[:LOCK_TOKEN_COLUMN]
    on_success, on_failure, on_complete = map(tuple, chains) if chains else ((), (), ())
    # Positional, in Job's field order (held to the keyword form by test_started_rows.py): 0.6 us a row less.
    job = Job(
        job_id,
        owner,
        name,
        None,  # description
        (),  # tags
        schedule,
        tuple(schedules) if schedules else None,
        spread,
        run_at,
        timezone,
        start_at,
        end_at,
        target_value := json_value(target),  # NOT NULL, read as text (started_columns)
        json_value(retry),
        missed_runs,
        _JOB_STATES[state],
        version,
        scheduled_at,
        attempt,
        next_run_at,
        None,  # manual_run_at
        LEASE_KINDS[lease_kind] if lease_kind else None,
        created_at,
        after_completion,
        tuple(exclude_calendars) if exclude_calendars else (),
        on_excluded,
        None,  # alerts
        limits,
        on_success,
        on_failure,
        on_complete,
    )
    by, trigger, waited = _deliver_by(sent_at, target_value, lease_margin_seconds), _TRIGGERS[trigger], waited_ms or 0
    return StartedExecution(
        job, execution_id, execution_scheduled_at, execution_attempt, trigger, started_at, overrides, cause, by, waited
    )


def _deliver_by(sent_at: float | None, target: dict[str, Any], lease_margin_seconds: float) -> float | None:
    """The ``time.monotonic()`` by which a delivery ends (``StartedExecution.deliver_by``): the
    lease's certain end (its statement sent at ``sent_at``), half its margin kept for the record."""
    if sent_at is None:
        return None
    return sent_at + float(target.get("timeout_seconds") or 30) + lease_margin_seconds / 2


def claims_of(rows: Sequence[Sequence[Any]], sent_at: float, lease_margin_seconds: float) -> list[Claim]:
    """The claims of ``claim_and_start``'s rows (and ``started_by_lease``'s, read back): each
    with its started execution, its statement sent at ``sent_at``."""
    claims = []
    for row in rows:
        started = read_started(row, sent_at, lease_margin_seconds)
        job, lost = started.job, row[LOST_COLUMN]
        # Claimed and started by one now(); due_at and locked_until are claim_due's only.
        # By position (Claim's field order), as read_started builds the job: thousands a second.
        claims.append(
            Claim(
                job.id,  # type: ignore[arg-type]  # a started row's id, read as text
                row[LOCK_TOKEN_COLUMN],
                job.lease_kind or LeaseKind.SCHEDULE,
                started.scheduled_at,
                None,
                started.started_at,
                None,
                lost is not None,
                started,
                None,
                None if lost is None else str(lost),
            )
        )
    return claims
