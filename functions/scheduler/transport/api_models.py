"""The API's answers as typed, frozen records: what ``SchedulerClient``'s typed methods return
(``client.jobs.get(...)`` is a ``Job``, ``client.executions.list(...)`` yields ``Execution``s).

Times are timezone-aware ``datetime``s (UTC), lists are tuples, and each record keeps the answer
it was read from in ``raw`` (the API's JSON as is: what ``-o json`` prints). Fields the client
does not know yet (a newer server) stay in ``raw``; fields an older server does not send are
None. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# The fields of a job answer that are not part of its definition (what a PUT may not send).
READ_ONLY_FIELDS = (
    "id",
    "owner",
    "state",
    "version",
    "next_run_at",
    "last_run_at",
    "created_at",
    "updated_at",
    "stats",
    "pause",  # a paused job's pause (issue 33): set by POST .../pause, not by a definition
)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 instant of the API (``2026-12-01T02:00:00Z``) as an aware ``datetime``; None as is."""
    if value is None or value == "":
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00").replace("z", "+00:00"))


def _frozen(value: Any) -> Any:
    """A read-only view of JSON: mappings as ``MappingProxyType``, lists as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON again (dicts and lists) of a value read through ``_frozen``."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Retry:
    """A job's retry policy (the API fills in the defaults)."""

    max_attempts: int = 3
    min_backoff_seconds: float = 1
    max_backoff_seconds: float = 300
    max_age_seconds: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Retry:
        """The policy of a job answer's ``retry`` object."""
        data = data or {}
        return cls(
            max_attempts=int(data.get("max_attempts", 3)),
            min_backoff_seconds=data.get("min_backoff_seconds", 1),
            max_backoff_seconds=data.get("max_backoff_seconds", 300),
            max_age_seconds=data.get("max_age_seconds"),
        )


@dataclass(frozen=True)
class JobStats:
    """How a job has fared: its runs, failures, and last outcome."""

    run_count: int = 0
    failure_count: int = 0
    last_status: str | None = None
    last_error: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> JobStats:
        """The stats of a job answer's ``stats`` object."""
        data = data or {}
        return cls(
            run_count=int(data.get("run_count") or 0),
            failure_count=int(data.get("failure_count") or 0),
            last_status=data.get("last_status"),
            last_error=data.get("last_error"),
        )


@dataclass(frozen=True)
class Job:
    """A job as the API answers it. ``target`` is the target's JSON, read-only, secrets as ``***``."""

    id: str
    name: str
    owner: str
    state: str
    version: int
    target: Mapping[str, Any]
    schedule: str | None = None
    run_at: datetime | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    description: str | None = None
    schedules: tuple[str, ...] | None = None
    spread: Mapping[str, Any] | None = None
    tags: tuple[str, ...] = ()
    retry: Retry = field(default_factory=Retry)
    missed_runs: str = "run_once"
    after_completion: str = "keep"
    exclude_calendars: tuple[str, ...] = ()
    on_excluded: str = "skip"
    on_success: tuple[str, ...] = ()
    on_failure: tuple[str, ...] = ()
    on_complete: tuple[str, ...] = ()
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    stats: JobStats = field(default_factory=JobStats)
    # A paused job's pause: {"note", "until", "by", "at"} (None when not paused).
    pause: Mapping[str, Any] | None = None
    # Its own alert rules ({"on", "threshold", "target"}, secrets as ***) and its target's limits
    # ({"max_in_flight", "per_second", "key"}; None: none).
    alerts: tuple[Mapping[str, Any], ...] = ()
    limits: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __hash__(self) -> int:
        # By what names one version of one job (its mappings are read-only views, unhashable).
        return hash((self.id, self.version))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        """The job of an answer (``GET /v1/jobs/{id}``, an item of ``GET /v1/jobs``)."""
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            owner=str(data.get("owner") or ""),
            state=str(data.get("state") or ""),
            version=int(data.get("version") or 0),
            target=_frozen(dict(data.get("target") or {})),
            schedule=data.get("schedule"),
            run_at=parse_time(data.get("run_at")),
            timezone=data.get("timezone") or "UTC",
            start_at=parse_time(data.get("start_at")),
            end_at=parse_time(data.get("end_at")),
            description=data.get("description"),
            schedules=tuple(data["schedules"]) if data.get("schedules") else None,
            spread=_frozen(dict(data["spread"])) if data.get("spread") else None,
            tags=tuple(data.get("tags") or ()),
            retry=Retry.from_json(data.get("retry")),
            missed_runs=data.get("missed_runs") or "run_once",
            after_completion=data.get("after_completion") or "keep",
            exclude_calendars=tuple(data.get("exclude_calendars") or ()),
            on_excluded=data.get("on_excluded") or "skip",
            on_success=tuple(data.get("on_success") or ()),
            on_failure=tuple(data.get("on_failure") or ()),
            on_complete=tuple(data.get("on_complete") or ()),
            next_run_at=parse_time(data.get("next_run_at")),
            last_run_at=parse_time(data.get("last_run_at")),
            created_at=parse_time(data.get("created_at")),
            updated_at=parse_time(data.get("updated_at")),
            stats=JobStats.from_json(data.get("stats")),
            pause=_frozen(dict(data["pause"])) if isinstance(data.get("pause"), dict) else None,
            alerts=tuple(_frozen(dict(rule)) for rule in data.get("alerts") or () if isinstance(rule, dict)),
            limits=_frozen(dict(data["limits"])) if isinstance(data.get("limits"), dict) else None,
            raw=_frozen(dict(data)),
        )

    @property
    def paused(self) -> bool:
        """Whether the job is paused (its ``next_run_at`` is then the occurrence it resumes at, not a run)."""
        return self.state == "paused"

    @property
    def next_run(self) -> datetime | None:
        """When it runs next: ``next_run_at`` of an active job; None when paused or completed."""
        return self.next_run_at if self.state == "active" else None

    def definition(self) -> dict[str, Any]:
        """The job's definition as plain JSON (the answer without its read-only fields; secrets
        as ``***``, which a PUT keeps): what ``client.jobs.replace`` takes."""
        return {k: thaw(v) for k, v in self.raw.items() if k not in READ_ONLY_FIELDS}


@dataclass(frozen=True)
class Execution:
    """One attempt at delivering a job.

    ``due_at`` is when the attempt was due: the occurrence for a first attempt, the retry's time
    after a backoff, the resume for a catch-up, the request for a manual run (None from a
    server older than the field). ``lateness`` is the start against it; ``backoff`` how long
    after the occurrence the attempt was due (a retry's backoff, a catch-up's pause)."""

    id: str
    job_id: str
    scheduled_at: datetime | None
    attempt: int
    trigger: str
    status: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    due_at: datetime | None = None
    http_status: int | None = None
    response_excerpt: str | None = None
    error: str | None = None
    duration_ms: int | None = None
    job_name: str | None = None
    # A manual run's overrides (masked); a skipped row's reason and how many occurrences it stands for.
    overrides: Mapping[str, Any] | None = None
    skip_reason: str | None = None
    skipped_count: int | None = None
    caused_by: str | None = None  # trigger "chain": the execution whose end ran this one
    caused_by_job_id: str | None = None  # and its job
    shifted_from: datetime | None = None  # the occurrence a calendar moved this one from
    excluded_by: str | None = None  # and the calendar
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Execution:
        """The execution of an answer (an item of ``GET /v1/executions``, or of a job's)."""
        return cls(
            id=str(data["id"]),
            job_id=str(data.get("job_id") or ""),
            scheduled_at=parse_time(data.get("scheduled_at")),
            attempt=int(data.get("attempt") or 0),
            trigger=str(data.get("trigger") or ""),
            status=str(data.get("status") or ""),
            started_at=parse_time(data.get("started_at")),
            finished_at=parse_time(data.get("finished_at")),
            due_at=parse_time(data.get("due_at")),
            http_status=data.get("http_status"),
            response_excerpt=data.get("response_excerpt"),
            error=data.get("error"),
            duration_ms=data.get("duration_ms"),
            job_name=data.get("job_name"),
            overrides=_frozen(dict(data["overrides"])) if isinstance(data.get("overrides"), dict) else None,
            skip_reason=data.get("skip_reason"),
            skipped_count=data.get("skipped_count"),
            caused_by=data.get("caused_by"),
            caused_by_job_id=data.get("caused_by_job_id"),
            shifted_from=parse_time(data.get("shifted_from")),
            excluded_by=data.get("excluded_by"),
            raw=_frozen(dict(data)),
        )

    @property
    def lateness(self) -> timedelta | None:
        """How long after it was due the attempt started (see ``lateness`` of ``execution_timing``)."""
        return execution_timing(self.raw)[0]

    @property
    def backoff(self) -> timedelta | None:
        """How long after its occurrence the attempt was due (retries and catch-ups; else zero)."""
        return execution_timing(self.raw)[1]


@dataclass(frozen=True)
class Change:
    """An entry of a job's change log: when (the database clock), who, what, the version it
    left and the diff (``{"field.path": {"from", "to"}}``, a secret as ``***`` with ``secret``)."""

    at: datetime | None
    by: str
    action: str
    version: int
    diff: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        """The entry of an answer (an item of ``GET /v1/jobs/{id}/changes``)."""
        return cls(
            at=parse_time(data.get("at")),
            by=str(data.get("by") or ""),
            action=str(data.get("action") or ""),
            version=int(data.get("version") or 0),
            diff=_frozen(dict(data.get("diff") or {})),
        )


def execution_timing(execution: Mapping[str, Any]) -> tuple[timedelta | None, timedelta | None]:
    """``(lateness, backoff)`` of an execution's JSON.

    Lateness is ``started_at - due_at``. An execution without ``due_at`` (recorded before the
    field existed) has a lateness only when it is a first attempt of its occurrence
    (``started_at - scheduled_at``): a retry's or a catch-up's start would count the backoff.
    Backoff is ``due_at - scheduled_at``, None when ``due_at`` is unknown."""
    try:
        started = parse_time(execution.get("started_at"))
        scheduled = parse_time(execution.get("scheduled_at"))
        due = parse_time(execution.get("due_at"))
    except (TypeError, ValueError):
        return None, None
    if started is None:
        return None, (due - scheduled if due and scheduled else None)
    if due is not None:
        return started - due, (due - scheduled if scheduled else None)
    first = execution.get("trigger") == "schedule" and execution.get("attempt") in (1, None)
    return (started - scheduled if first and scheduled else None), None


@dataclass(frozen=True)
class RunRequest:
    """A manual run was queued (``POST /v1/jobs/{id}/run``)."""

    job_id: str
    status: str
    requested_at: datetime | None
    job: Job | None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRequest:
        """The answer of a run-now."""
        job = data.get("job")
        return cls(
            job_id=str(data.get("job_id") or ""),
            status=str(data.get("status") or ""),
            requested_at=parse_time(data.get("requested_at")),
            job=Job.from_json(job) if isinstance(job, Mapping) and job.get("id") else None,
            raw=_frozen(dict(data)),
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing: its items and the cursor of the next page (None on the last)."""

    items: tuple[T, ...]
    next_cursor: str | None

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)
