"""The typed core of the scheduler: a job as the domain reads it, a claim (lease), a started
execution, a recorded execution, how an attempt ended and how that is recorded, and the
identity of a delivery.

Frozen records, built once at the edge of the store from its rows (``Job.from_row``) and read
by attribute everywhere after: planning (``scheduler.planning.lifecycle``), the executor and its
delivery. Those the runner builds for every job (``Job``, ``StartedExecution``, ``Claim``,
``Plan``, ``Outcome``, ``Completion``, ``RetryPolicy``, ``Delivery``) are msgspec Structs, built
in C (a frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``:
a fifth of a claimed and recorded job's instructions went there); replace one with
``msgspec.structs.replace``. The others are frozen dataclasses. The writable fields of a job are
named once here (``SPEC_FIELDS``); their rules are the pydantic models of
``scheduler.schema.models``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from msgspec import Struct

from scheduler.core.enums import StoredEnum
from scheduler.core.records import (  # noqa: F401 (the domain's names, re-exported)
    BackfillRetry,
    CalendarRecord,
    ChainRun,
    Change,
    ChangeAction,
    ChangedKind,
    ChangeEntry,
    DueBacklog,
    LeasedJob,
    PartitionMaintenance,
    Pause,
    RunOverrides,
    Shift,
    Skip,
    SkipReason,
)
from scheduler.core.timeutil import format_time, idempotency_key, parse_time


class JobState(StoredEnum):
    """A job's state: its schedule fires, is held, or is over."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"  # a one-off that ran, or past end_at


class ExecutionStatus(StoredEnum):
    """Where an execution stands: running, or how it ended."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"  # its runner's lease expired before it ended (the job is delivered again)
    SKIPPED = "skipped"  # an occurrence (or a run of them: skipped_count) that did not run


class Trigger(StoredEnum):
    """What started an execution."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    RETRY = "retry"
    BACKFILL = "backfill"
    CHAIN = "chain"  # another job's execution ended so (``on_success``, ``on_failure``, ``on_complete``)


class LeaseKind(StoredEnum):
    """What a lease is for: the occurrence in hand (or its retry), or a manual run."""

    SCHEDULE = "schedule"
    MANUAL = "manual"


# Columns a job's owner may write (POST, PUT, PATCH): the fields of ``models.JobSpec``.
SPEC_FIELDS = (
    "name",
    "description",
    "tags",
    "schedule",
    "schedules",
    "spread",
    "run_at",
    "timezone",
    "start_at",
    "end_at",
    "target",
    "retry",
    "missed_runs",
    "after_completion",
    "exclude_calendars",
    "on_excluded",
    "alerts",
    "limits",
    "on_success",
    "on_failure",
    "on_complete",
)
# The chain fields: names or ids of jobs of the same owner run when an execution ends so.
CHAIN_FIELDS = ("on_success", "on_failure", "on_complete")
# Spec fields whose change means the occurrences must be computed afresh.
SCHEDULE_FIELDS = (
    "schedule",
    "schedules",
    "spread",
    "run_at",
    "timezone",
    "start_at",
    "end_at",
    "exclude_calendars",
    "on_excluded",
)
# Schedule fields that make the base occurrences (before calendars, window end and spread).
OCCURRENCE_FIELDS = ("schedule", "schedules", "run_at", "timezone", "start_at")


class Job(Struct, frozen=True):
    """The columns of a job that the domain reads. A row may carry fewer (a started row has
    ``started_columns`` only, a draft has its spec and ``created_at``): the others keep
    their defaults."""

    id: str | None = None
    owner: str | None = None
    name: str | None = None
    description: str | None = None
    tags: tuple[str, ...] = ()
    schedule: str | None = None
    schedules: tuple[str, ...] | None = None  # several expressions: their union (instead of schedule)
    spread: Mapping[str, Any] | None = None  # {"window_seconds", "mode"}: fire after the occurrence
    run_at: datetime | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    target: Mapping[str, Any] | None = None
    retry: Mapping[str, Any] | None = None
    missed_runs: str = "run_once"  # skip | run_once | run_all
    state: JobState = JobState.ACTIVE
    version: int = 0
    scheduled_at: datetime | None = None
    attempt: int = 0
    next_run_at: datetime | None = None
    manual_run_at: datetime | None = None
    lease_kind: LeaseKind | None = None
    created_at: datetime | None = None
    after_completion: str = "keep"  # keep | delete (deleted with its history once completed)
    # The owner's calendars whose days and spans the schedule leaves out (skip) or moves past (shift).
    exclude_calendars: tuple[str, ...] = ()
    on_excluded: str = "skip"  # skip | shift
    alerts: tuple[Mapping[str, Any], ...] | None = None  # alert rules (scheduler.planning.alerts)
    limits: Mapping[str, Any] | None = None  # per-target limits (scheduler.core.limits)
    on_success: tuple[str, ...] = ()
    on_failure: tuple[str, ...] = ()
    on_complete: tuple[str, ...] = ()
    # The lease (a claim's, a running execution's) and when the job is next claimable.
    due_at: datetime | None = None
    locked_until: datetime | None = None
    lock_token: str | None = None
    running_execution_id: str | None = None
    # What the API answers besides (a row of the view jobs carries them).
    last_run_at: datetime | None = None
    run_count: int = 0
    failure_count: int = 0
    last_status: str | None = None
    last_error: str | None = None
    updated_at: datetime | None = None
    # The pause's record (migration 0015): why, until when, by whom, since when.
    pause_note: str | None = None
    pause_until: datetime | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Job:
        """The job of a store row (a dict of columns); unknown columns are ignored."""
        values = {name: value for name in _JOB_FIELDS if (value := row.get(name)) is not None}
        if "id" in values:
            values["id"] = str(values["id"])
        for name in ("tags", "schedules", "exclude_calendars", *CHAIN_FIELDS):
            if name in values:
                values[name] = tuple(values[name])
        if "alerts" in values:
            values["alerts"] = tuple(values["alerts"]) or None
        if "state" in values:
            values["state"] = JobState(values["state"])
        if "lease_kind" in values:
            values["lease_kind"] = LeaseKind(values["lease_kind"])
        return cls(**values)

    def spec(self) -> dict[str, Any]:
        """The writable fields (``SPEC_FIELDS``) as they are stored."""
        return {name: getattr(self, name) for name in SPEC_FIELDS}

    def with_spec(self, spec: Mapping[str, Any]) -> Job:
        """This job with the writable fields of ``spec`` instead of its own."""
        return Job.from_row({**{name: getattr(self, name) for name in _JOB_FIELDS}, **spec})

    def chained(self, outcome: Outcome) -> tuple[str, ...]:
        """The jobs (names or ids) an execution that ended with ``outcome`` runs next."""
        if not (self.on_success or self.on_failure or self.on_complete) or outcome.status == ExecutionStatus.SKIPPED:
            return ()  # no chains, or an occurrence that did not run (missed: ended no run)
        first = self.on_success if outcome.succeeded else self.on_failure
        return tuple(dict.fromkeys((*first, *self.on_complete)))

    @property
    def retry_policy(self) -> RetryPolicy:
        """The job's retry policy (its ``retry``, defaults where it says nothing)."""
        return RetryPolicy.of(self.retry)

    @property
    def max_attempts(self) -> int:
        """Attempts allowed at one occurrence (``retry.max_attempts``, 3 by default)."""
        return self.retry_policy.max_attempts


class RetryPolicy(Struct, frozen=True):
    """When a failed attempt is tried again: at most ``max_attempts`` attempts at an occurrence,
    exponential backoff with full jitter between ``min_backoff_seconds`` and
    ``max_backoff_seconds``, and none starting later than ``max_age_seconds`` after the
    occurrence (no limit when None)."""

    max_attempts: int = 3
    min_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 300.0
    max_age_seconds: float | None = None

    @classmethod
    def of(cls, retry: Mapping[str, Any] | None) -> RetryPolicy:
        """The policy of a job's ``retry`` (a stored dict; absent keys take the defaults)."""
        retry = retry or {}
        max_age = retry.get("max_age_seconds")
        return cls(
            max_attempts=int(retry.get("max_attempts", 3)),
            min_backoff_seconds=float(retry.get("min_backoff_seconds", 1)),
            max_backoff_seconds=float(retry.get("max_backoff_seconds", 300)),
            max_age_seconds=float(max_age) if max_age else None,
        )


class Plan(Struct, frozen=True):
    """A job's schedule columns after an event (what ``scheduler.planning.lifecycle`` answers):
    its state, the occurrence in hand, the attempts made at it and when the next one runs.
    ``delete`` (a completion's plan only): the attempt completed a job whose
    ``after_completion`` is ``delete``, which the store deletes with its history."""

    state: JobState
    scheduled_at: datetime | None
    attempt: int
    next_run_at: datetime | None
    delete: bool = False
    # The occurrences this event moved past without running them, on record as skipped rows.
    skips: tuple[Skip, ...] = ()
    # A completion's plan only: the jobs its final outcome runs next, and why (written with it).
    chain: ChainRun | None = None
    # A failed backfill delivery's completion only: its retry (0019), written with it.
    backfill_retry: BackfillRetry | None = None
    # A completion's plan only: how a calendar moved the occurrence that ran (0025), on record.
    shift: Shift | None = None
    # A completion's plan only: the job paused by the runner, and why (its pause's note): its
    # next run took too long to plan (its calendars), so it waits for a resume.
    parked: str | None = None

    @classmethod
    def of(cls, job: Job) -> Plan:
        """The columns as the job has them (a plan that changes nothing)."""
        return cls(job.state, job.scheduled_at, job.attempt, job.next_run_at)


_JOB_FIELDS: tuple[str, ...] = Job.__struct_fields__


class Outcome(Struct, frozen=True):
    """How an attempt ended: the delivery's answer, recorded as the execution's end.

    ``status`` is ``succeeded``, ``failed`` or ``timed_out``; ``retryable`` says whether
    another attempt could succeed (network errors, timeouts, 5xx, 408, 429, broker down ...).
    ``error`` is human text and never contains a secret. ``retry_after_seconds`` (from an HTTP
    ``Retry-After``) is a floor for the next backoff. ``http_status`` and ``response_excerpt``:
    what the target answered, when it answered.
    """

    status: ExecutionStatus
    retryable: bool = False
    retry_after_seconds: float | None = None
    error: str | None = None
    http_status: int | None = None
    response_excerpt: str | None = None

    @property
    def succeeded(self) -> bool:
        """True when the target accepted the delivery."""
        return self.status == ExecutionStatus.SUCCEEDED


class StartedExecution(Struct, frozen=True):
    """An execution recorded as running, with the job it runs (the columns its delivery and its
    completion need: ``started_columns`` in queries.sql; the target still encrypted)."""

    job: Job
    execution_id: str
    scheduled_at: datetime
    attempt: int
    trigger: Trigger
    started_at: datetime
    overrides: Mapping[str, Any] | None = None  # a manual run's (``RunOverrides.deliver``), else None
    cause: Mapping[str, Any] | None = None  # a chained run's cause (``ChainRun.cause``), else None
    # This process's ``time.monotonic()`` by which the delivery must end: the lease, set from
    # the database's now() over the target's timeout plus a margin by a statement sent at a known
    # instant, certainly holds until that instant plus its length; half the margin is kept back
    # for recording the outcome. None when not known. A delivery that cannot end by then is not
    # made: the answer came late (a stalled connection, a paused process); another runner may own it.
    deliver_by: float | None = None
    waited_ms: int = 0  # its wait for its target's slot so far (since a hand-back, then record_wait's)
    lost_before: int = 0  # a reclaimed manual or chained run's losses with its runners (given_up)

    @property
    def lateness_ms(self) -> float:
        """How late the execution started after it was due (its ``due_at``), by the database
        clock, as the API's ``started_at - due_at`` (with any ``waited_ms``). A scheduled run
        or a retry was due at the job's ``next_run_at`` (a retry's backoff, or a pause's
        catch-up, then is not lateness); a manual or chained run at its request (its
        ``scheduled_at``). A backfill delivers a past occurrence by design: 0."""
        if self.trigger is Trigger.BACKFILL:
            return 0.0
        due = self.scheduled_at
        if self.trigger in (Trigger.SCHEDULE, Trigger.RETRY) and self.job.next_run_at is not None:
            due = self.job.next_run_at
        return (self.started_at - due).total_seconds() * 1000


@dataclass(frozen=True, slots=True)
class Execution:
    """One attempt at delivering a job, as recorded (a row of ``executions``)."""

    id: str
    job_id: str
    seq: int
    scheduled_at: datetime
    started_at: datetime
    finished_at: datetime | None
    attempt: int
    trigger: Trigger
    status: ExecutionStatus
    http_status: int | None = None
    response_excerpt: str | None = None
    error: str | None = None
    duration_ms: int | None = None
    job_name: str | None = None  # read across jobs (``list_owner_executions``): the job's name
    due_at: datetime | None = None  # when the attempt was due (0012); None for older rows
    waited_ms: int | None = None  # how long the delivery waited for its target's slot (0018)
    waited_for: str | None = None  # why: the limit and its key
    overrides: Mapping[str, Any] | None = None  # a manual run's overrides, masked (0015)
    skip_reason: SkipReason | None = None  # a skipped row's (0015)
    skipped_count: int | None = None
    caused_by: str | None = None  # a chained run's cause: the execution that ended (0016)
    caused_by_job_id: str | None = None  # and its job
    shifted_from: datetime | None = None  # the occurrence a calendar moved this one from (0025)
    excluded_by: str | None = None  # and the calendar

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Execution:
        """The execution of a store row."""
        return cls(
            id=str(row["id"]),
            job_id=str(row["job_id"]),
            seq=row["seq"],
            scheduled_at=row["scheduled_at"],
            started_at=row["started_at"],
            finished_at=row.get("finished_at"),
            attempt=row["attempt"],
            trigger=Trigger(row["trigger"]),
            status=ExecutionStatus(row["status"]),
            http_status=row.get("http_status"),
            response_excerpt=row.get("response_excerpt"),
            error=row.get("error"),
            duration_ms=row.get("duration_ms"),
            job_name=row.get("job_name"),
            due_at=row.get("due_at"),
            waited_ms=row.get("waited_ms"),
            waited_for=row.get("waited_for"),
            overrides=row.get("overrides"),
            skip_reason=SkipReason(row["skip_reason"]) if row.get("skip_reason") else None,
            skipped_count=row.get("skipped_count"),
            caused_by=str(row["caused_by"]) if row.get("caused_by") else None,
            caused_by_job_id=str(row["caused_by_job_id"]) if row.get("caused_by_job_id") else None,
            shifted_from=row.get("shifted_from"),
            excluded_by=row.get("excluded_by"),
        )


class Claim(Struct, frozen=True):
    """A job taken by the fan-out, with the lease token that fences its completion."""

    job_id: str
    lock_token: str
    lease_kind: LeaseKind
    scheduled_at: datetime
    due_at: datetime | None  # claim_due's (the invoke payload); None from claim_and_start
    claimed_at: datetime
    locked_until: datetime | None  # claim_due's; None from claim_and_start (its lease is the target's)
    reclaimed: bool = False
    # Set by claim_and_start: the execution already recorded as running on this claim.
    started: StartedExecution | None = None
    owner: str | None = None  # the job's owner (claim_due's: the fan-out keeps owners to a share)
    lost_execution_id: str | None = None  # a reclaimed lease's execution, which the claim marked lost

    def to_event(self) -> dict[str, Any]:
        """The executor's invoke payload: the lease (``from_event`` reads it back)."""
        return {
            "job_id": self.job_id,
            "lock_token": self.lock_token,
            "lease_kind": str(self.lease_kind),
            "scheduled_at": self.scheduled_at.isoformat(),
            "due_at": self.due_at and self.due_at.isoformat(),
            "claimed_at": self.claimed_at.isoformat(),
            "locked_until": self.locked_until and self.locked_until.isoformat(),
            "reclaimed": self.reclaimed,
        }

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Claim:
        """The claim an invoke payload carries (``to_event``'s inverse). Only ``job_id`` and
        ``lock_token`` are required: the start confirms the lease from the row, the rest is
        what the fan-out saw (absent from payloads of older fan-outs)."""
        try:
            job_id, lock_token = str(event["job_id"]), str(event["lock_token"])
        except (KeyError, TypeError):
            raise ValueError("an executor invoke names job_id and lock_token") from None
        return cls(
            job_id=job_id,
            lock_token=lock_token,
            lease_kind=LeaseKind(event.get("lease_kind") or LeaseKind.SCHEDULE),
            scheduled_at=_instant(event.get("scheduled_at")),
            due_at=_instant(event.get("due_at")) if event.get("due_at") else None,
            claimed_at=_instant(event.get("claimed_at")),
            locked_until=_instant(event.get("locked_until")) if event.get("locked_until") else None,
            reclaimed=bool(event.get("reclaimed", False)),
        )


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def _instant(value: Any) -> datetime:
    """An instant of an invoke payload (the epoch where an older payload has none)."""
    return parse_time(value) if value else _EPOCH


class Completion(Struct, frozen=True):
    """How one started execution ended, to be recorded."""

    job_id: str
    lock_token: str
    execution_id: str
    outcome: Outcome
    # What start_execution returned and the seconds since: the plan is made from that row.
    started: StartedExecution | None = None
    elapsed_seconds: float | None = None


# Names of the delivery headers (HTTP headers, and AMQP message headers).
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_JOB_ID = "X-Scheduler-Job-Id"
HEADER_EXECUTION_ID = "X-Scheduler-Execution-Id"
HEADER_SCHEDULED_AT = "X-Scheduler-Scheduled-At"
HEADER_ATTEMPT = "X-Scheduler-Attempt"


class Delivery(Struct, frozen=True):
    """The identity of one delivery attempt: which occurrence of which job, which try."""

    job_id: str
    execution_id: str
    scheduled_at: datetime  # aware, UTC
    attempt: int  # 1-based
    owner: str | None = None  # the job's owner: the ExternalId of AWS targets' role
    cause: Mapping[str, Any] | None = None  # a chained run's cause: the {{cause.*}} placeholders
    vars: Mapping[str, str] | None = None  # a manual run's vars: its body's {{vars.NAME}} placeholders

    @property
    def idempotency_key(self) -> str:
        """``<job id>:<scheduled_at>``: the same for every attempt of one occurrence."""
        return idempotency_key(self.job_id, self.scheduled_at)

    def headers(self) -> dict[str, str]:
        """The delivery headers of the contract (HTTP headers; AMQP message headers)."""
        scheduled_at = format_time(self.scheduled_at) or ""
        return {
            HEADER_IDEMPOTENCY_KEY: f"{self.job_id}:{scheduled_at}",  # idempotency_key, formatted once
            HEADER_JOB_ID: str(self.job_id),
            HEADER_EXECUTION_ID: str(self.execution_id),
            HEADER_SCHEDULED_AT: scheduled_at,
            HEADER_ATTEMPT: str(self.attempt),
        }
