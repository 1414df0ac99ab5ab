"""The typed core of the scheduler: a job as the domain reads it, a claim (lease), a started
execution, a recorded execution, how an attempt ended and how that is recorded, and the
identity of a delivery.

Frozen dataclasses, built once at the edge of the store from its rows (``Job.from_row``) and
read by attribute everywhere after: planning (``scheduler.planning.lifecycle``), the executor and its
delivery. The writable fields of a job are named once here (``SPEC_FIELDS``); their rules are
the pydantic models of ``scheduler.schema.models``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from scheduler.core.timeutil import format_time, idempotency_key

# Columns a job's owner may write (POST, PUT, PATCH): the fields of ``models.JobSpec``.
SPEC_FIELDS = (
    "name",
    "description",
    "tags",
    "schedule",
    "run_at",
    "timezone",
    "start_at",
    "end_at",
    "target",
    "retry",
    "missed_runs",
    "after_completion",
)
# Spec fields whose change means the occurrences must be computed afresh.
SCHEDULE_FIELDS = ("schedule", "run_at", "timezone", "start_at", "end_at")


@dataclass(frozen=True, slots=True)
class Job:
    """The columns of a job that the domain reads. A row may carry fewer (a started row has
    ``started_columns`` only, a draft has its spec and ``created_at``): the others keep
    their defaults."""

    id: str | None = None
    owner: str | None = None
    name: str | None = None
    description: str | None = None
    tags: tuple[str, ...] = ()
    schedule: str | None = None
    run_at: datetime | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    target: Mapping[str, Any] | None = None
    retry: Mapping[str, Any] | None = None
    missed_runs: str = "run_once"
    state: str = "active"
    version: int = 0
    scheduled_at: datetime | None = None
    attempt: int = 0
    next_run_at: datetime | None = None
    manual_run_at: datetime | None = None
    lease_kind: str | None = None
    created_at: datetime | None = None
    after_completion: str = "keep"  # keep | delete (deleted with its history once completed)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Job:
        """The job of a store row (a dict of columns); unknown columns are ignored."""
        values = {name: value for name in _JOB_FIELDS if (value := row.get(name)) is not None}
        if "id" in values:
            values["id"] = str(values["id"])
        if "tags" in values:
            values["tags"] = tuple(values["tags"])
        return cls(**values)

    @property
    def max_attempts(self) -> int:
        """Attempts allowed at one occurrence (``retry.max_attempts``, 3 by default)."""
        return int((self.retry or {}).get("max_attempts", 3))


_JOB_FIELDS = tuple(f.name for f in fields(Job))


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended, as the executor saw it."""

    status: str  # succeeded | failed | timed_out
    retryable: bool = False
    retry_after_seconds: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class StartedExecution:
    """An execution recorded as running, with the job it runs (the columns its delivery and its
    completion need: ``started_columns`` in queries.sql; the target still encrypted)."""

    job: Job
    execution_id: str
    scheduled_at: datetime
    attempt: int
    trigger: str
    started_at: datetime

    @property
    def lateness_ms(self) -> float:
        """How late the execution started after its scheduled time, by the database clock."""
        return (self.started_at - self.scheduled_at).total_seconds() * 1000


@dataclass(frozen=True, slots=True)
class Execution:
    """One attempt at delivering a job, as recorded (a row of ``executions``)."""

    id: str
    job_id: str
    seq: int
    scheduled_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempt: int
    trigger: str  # schedule | manual | retry
    status: str  # running | succeeded | failed | timed_out | lost
    http_status: int | None = None
    response_excerpt: str | None = None
    error: str | None = None
    duration_ms: int | None = None
    job_name: str | None = None  # read across jobs (``list_owner_executions``): the job's name
    due_at: datetime | None = None  # when the attempt was due (0012); None for older rows

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Execution:
        """The execution of a store row."""
        return cls(
            id=str(row["id"]),
            job_id=str(row["job_id"]),
            seq=row["seq"],
            scheduled_at=row["scheduled_at"],
            started_at=row.get("started_at"),
            finished_at=row.get("finished_at"),
            attempt=row["attempt"],
            trigger=row["trigger"],
            status=row["status"],
            http_status=row.get("http_status"),
            response_excerpt=row.get("response_excerpt"),
            error=row.get("error"),
            duration_ms=row.get("duration_ms"),
            job_name=row.get("job_name"),
            due_at=row.get("due_at"),
        )


@dataclass(frozen=True)
class Claim:
    """A job taken by the fan-out, with the lease token that fences its completion."""

    job_id: str
    lock_token: str
    lease_kind: str
    scheduled_at: datetime
    due_at: datetime | None  # claim_due's (the invoke payload); None from claim_and_start
    claimed_at: datetime
    locked_until: datetime | None  # claim_due's; None from claim_and_start (its lease is the target's)
    reclaimed: bool = False
    # Set by claim_and_start: the execution already recorded as running on this claim.
    started: StartedExecution | None = None

    def to_event(self) -> dict[str, Any]:
        """The executor's invoke payload."""
        return {
            "job_id": self.job_id,
            "lock_token": self.lock_token,
            "scheduled_at": self.scheduled_at.isoformat(),
            "due_at": self.due_at.isoformat(),
            "claimed_at": self.claimed_at.isoformat(),
        }


@dataclass(frozen=True)
class PartitionMaintenance:
    """What one retention pass over the executions' day partitions did."""

    created: int = 0
    dropped: int = 0
    default_moved: int = 0  # rows moved from the DEFAULT partition into their day's new partition
    default_purged: int = 0  # rows of the DEFAULT partition past the retention, deleted
    skipped: int = 0  # steps left to the next pass (a lock was not free at once)


@dataclass(frozen=True)
class Completion:
    """How one started execution ended, to be recorded."""

    job_id: str
    lock_token: str
    execution_id: str
    outcome: Outcome
    http_status: int | None = None
    response_excerpt: str | None = None
    # What start_execution returned and the seconds since: the plan is made from that row.
    started: StartedExecution | None = None
    elapsed_seconds: float | None = None


# Names of the delivery headers (HTTP headers, and AMQP message headers).
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_JOB_ID = "X-Scheduler-Job-Id"
HEADER_EXECUTION_ID = "X-Scheduler-Execution-Id"
HEADER_SCHEDULED_AT = "X-Scheduler-Scheduled-At"
HEADER_ATTEMPT = "X-Scheduler-Attempt"


@dataclass(frozen=True)
class Delivery:
    """The identity of one delivery attempt: which occurrence of which job, which try."""

    job_id: str
    execution_id: str
    scheduled_at: datetime  # aware, UTC
    attempt: int  # 1-based
    owner: str | None = None  # the job's owner: the ExternalId of AWS targets' role

    @property
    def idempotency_key(self) -> str:
        """``<job id>:<scheduled_at>``: the same for every attempt of one occurrence."""
        return idempotency_key(self.job_id, self.scheduled_at)

    def headers(self) -> dict[str, str]:
        """The delivery headers of the contract (HTTP headers; AMQP message headers)."""
        return {
            HEADER_IDEMPOTENCY_KEY: self.idempotency_key,
            HEADER_JOB_ID: str(self.job_id),
            HEADER_EXECUTION_ID: str(self.execution_id),
            HEADER_SCHEDULED_AT: format_time(self.scheduled_at) or "",
            HEADER_ATTEMPT: str(self.attempt),
        }
