"""The store's records -> the contract's JSON (and the answer models that document it).

Targets are always answered with their secrets masked (``"***"``); times are RFC 3339 in UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from scheduler.core.domain import CHAIN_FIELDS, ChangeEntry, JobState
from scheduler.core.domain import Execution as DomainExecution
from scheduler.core.domain import Job as DomainJob
from scheduler.core.timeutil import format_time
from scheduler.schema.models import JobSpec
from scheduler.secrets import mask_target_secrets

_TIME_FIELDS = ("run_at", "start_at", "end_at")


def _time(value: Any) -> Any:
    return format_time(value) if isinstance(value, datetime) else value


def spec_of(job: DomainJob) -> dict[str, Any]:
    """The writable fields of a job as JSON values, secrets masked: what PATCH merges into."""
    spec = job.spec()
    for k in _TIME_FIELDS:
        spec[k] = _time(spec[k])
    spec["tags"] = list(job.tags)
    spec["exclude_calendars"] = list(job.exclude_calendars)
    spec["target"] = mask_target_secrets(dict(job.target or {}))
    spec["retry"] = dict(job.retry or {})
    for name in CHAIN_FIELDS:
        spec[name] = list(spec[name])
    spec["schedules"] = None if job.schedules is None else list(job.schedules)
    spec["spread"] = None if job.spread is None else dict(job.spread)
    spec["limits"] = None if not job.limits else {k: v for k, v in dict(job.limits).items() if v is not None}
    spec["alerts"] = masked_alerts(job.alerts)
    return spec


def masked_alerts(alerts: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Alert rules as answered: their targets' secrets ``"***"``."""
    return [{**rule, "target": mask_target_secrets(dict(rule["target"]))} for rule in alerts or ()]


def job_json(job: DomainJob) -> dict[str, Any]:
    """The job of the contract; a paused job's has its ``pause``."""
    answer = {
        "id": str(job.id),
        **spec_of(job),
        "owner": job.owner,
        "state": str(job.state),
        "version": job.version,
        "next_run_at": _time(job.next_run_at),
        "last_run_at": _time(job.last_run_at),
        "created_at": _time(job.created_at),
        "updated_at": _time(job.updated_at),
        "stats": {
            "run_count": job.run_count,
            "failure_count": job.failure_count,
            "last_status": job.last_status,
            "last_error": job.last_error,
        },
    }
    if job.state == JobState.PAUSED:
        answer["pause"] = pause_json(job)
    return answer


def pause_json(job: DomainJob) -> dict[str, Any]:
    """A paused job's pause: its note, its end, who paused it and when (each null when not known:
    a job paused before the field, or without a note or an end)."""
    return {
        "note": job.pause_note,
        "until": _time(job.pause_until),
        "by": job.paused_by,
        "at": _time(job.paused_at),
    }


def execution_json(execution: DomainExecution) -> dict[str, Any]:
    """The execution of the contract; a manual run with overrides has its ``overrides``, a
    skipped row its ``skip_reason`` and ``skipped_count``."""
    answer = {
        "id": execution.id,
        "job_id": execution.job_id,
        "scheduled_at": _time(execution.scheduled_at),
        "due_at": _time(execution.due_at),
        "started_at": _time(execution.started_at),
        "finished_at": _time(execution.finished_at),
        "attempt": execution.attempt,
        "trigger": str(execution.trigger),
        "status": str(execution.status),
        "http_status": execution.http_status,
        "response_excerpt": execution.response_excerpt,
        "error": execution.error,
        "duration_ms": execution.duration_ms,
        "waited_ms": execution.waited_ms,
        "waited_for": execution.waited_for,
        "caused_by": execution.caused_by,
        "caused_by_job_id": execution.caused_by_job_id,
        "shifted_from": _time(execution.shifted_from),
        "excluded_by": execution.excluded_by,
    }
    if execution.overrides is not None:
        answer["overrides"] = dict(execution.overrides)
    if execution.skip_reason is not None:
        answer["skip_reason"] = str(execution.skip_reason)
        answer["skipped_count"] = execution.skipped_count
    return answer


def change_json(entry: ChangeEntry) -> dict[str, Any]:
    """An entry of a change log (its diff's secrets were masked before it was stored)."""
    return {
        "at": _time(entry.at),
        "by": entry.by,
        "action": str(entry.action),
        "version": entry.version,
        "diff": dict(entry.diff),
    }


# -- answer models (OpenAPI documentation of the answers) ----------------------------------------


class JobStats(BaseModel):
    run_count: int
    failure_count: int
    last_status: str | None
    last_error: str | None


class PauseInfo(BaseModel):
    """Why and until when a job is paused, who paused it and when."""

    note: str | None
    until: AwareDatetime | None = Field(description="when the runner resumes the job by itself (null: when resumed)")
    by: str | None = Field(description="the principal that paused the job")
    at: AwareDatetime | None


class Job(JobSpec):
    """A job as answered: the request fields (secrets shown as ``"***"``) and the read-only ones."""

    id: str = Field(description="UUID")
    owner: str = Field(description="the IAM principal that created the job")
    state: Literal["active", "paused", "completed"]
    version: int = Field(description="incremented by every change; send it back in If-Match")
    next_run_at: AwareDatetime | None
    last_run_at: AwareDatetime | None
    created_at: AwareDatetime
    updated_at: AwareDatetime
    stats: JobStats
    pause: PauseInfo | None = Field(default=None, description="a paused job's pause (absent otherwise)")


class JobList(BaseModel):
    jobs: list[Job]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


class Execution(BaseModel):
    """One attempt at delivering a job."""

    id: str
    job_id: str
    scheduled_at: AwareDatetime
    due_at: AwareDatetime | None = Field(
        description="when this attempt was due: the occurrence, a retry's time, the resume of a catch-up, or "
        "the request of a manual run (null for executions recorded before the field); lateness is "
        "started_at - due_at"
    )
    started_at: AwareDatetime | None
    finished_at: AwareDatetime | None
    attempt: int
    trigger: Literal["schedule", "manual", "retry", "backfill", "chain"]
    status: Literal["running", "succeeded", "failed", "timed_out", "lost", "skipped"]
    http_status: int | None
    response_excerpt: str | None
    error: str | None
    duration_ms: int | None
    waited_ms: int | None = Field(
        default=None, description="how long the delivery waited for a slot of its target's limits (null: it did not)"
    )
    waited_for: str | None = Field(default=None, description="the limits it waited for, and their key")
    overrides: dict[str, Any] | None = Field(
        default=None,
        description="a manual run's overrides (body, headers, vars), credential-like header values as *** "
        "(absent for other runs)",
    )
    skip_reason: Literal["paused", "overlap", "window", "calendar", "missed"] | None = Field(
        default=None, description="why a skipped row's occurrences did not run (skipped rows only)"
    )
    skipped_count: int | None = Field(
        default=None, description="how many occurrences a skipped row stands for (scheduled_at is the first)"
    )
    caused_by: str | None = Field(
        default=None, description="trigger `chain`: the id of the execution whose end ran this one"
    )
    caused_by_job_id: str | None = Field(default=None, description="trigger `chain`: the job of `caused_by`")
    shifted_from: AwareDatetime | None = Field(
        default=None,
        description="the occurrence a calendar moved this one from (`on_excluded: shift`; recorded when it ends)",
    )
    excluded_by: str | None = Field(default=None, description="the calendar that moved it (with `shifted_from`)")


class BackfillPlan(BaseModel):
    """A backfill's occurrences (a dry run), or how many were queued."""

    occurrences: list[AwareDatetime] | None = Field(default=None, description="a dry run's occurrences, in order")
    count: int


class BulkResult(BaseModel):
    """The jobs a bulk pause or resume changed."""

    jobs: list[str] = Field(description="their ids")
    count: int
    more: bool = Field(description="more jobs are selected than one request changes: send it again for the next ones")


class ExecutionList(BaseModel):
    executions: list[Execution]
    next_cursor: str | None


class Change(BaseModel):
    """An entry of a change log: a job's, a calendar's or an alert rule set's (these three:
    create, update and delete only)."""

    at: AwareDatetime = Field(description="when, by the database clock")
    by: str = Field(description="the caller's identity (its IAM principal)")
    action: Literal["create", "update", "pause", "resume", "run", "delete", "replan", "backfill"]
    version: int = Field(description="the version after the change (of the job, calendar or rule set)")
    diff: dict[str, Any] = Field(
        description='`{"field.path": {"from": old, "to": new}}`; a secret shows as `"***"` with `"secret": true`'
    )


class ChangeList(BaseModel):
    changes: list[Change]
    next_cursor: str | None


class RunAccepted(BaseModel):
    """A manual run was queued: the runner's next claim takes it, paused or not."""

    job_id: str
    status: Literal["queued"]
    requested_at: AwareDatetime
    job: Job


class Health(BaseModel):
    status: Literal["ok"]
