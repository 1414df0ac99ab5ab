"""Routes for seeing the work: the caller's executions across all their jobs, and the preview
of a schedule's next occurrences (computed by the code that plans jobs)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from scheduler import service
from scheduler.api.cursors import scope_of
from scheduler.api.errors import ApiError, BadRequest, documented
from scheduler.api.jobs import DEFAULT_PAGE_SIZE, Cursor, CursorsDep, Limit, Owner, StoreDep
from scheduler.api.pages import cursor_position
from scheduler.api.routes import rule
from scheduler.api.serialize import Execution, execution_json
from scheduler.calendar_service import NEVER_BETWEEN_NOW_AND_END, calendars_leave_no_run
from scheduler.core.domain import ExecutionStatus, Job
from scheduler.core.errors import NO_SUCH_EXECUTION, NotFound
from scheduler.core.timeutil import format_time
from scheduler.schedules import Spread, explain_occurrences, schedule_for
from scheduler.schedules.calendars import Calendar
from scheduler.schedules.planning import Occurrence, When, interval_anchor
from scheduler.schedules.shifts import explain
from scheduler.schedules.union import UnionSchedule
from scheduler.schema.models import MAX_BODY_LENGTH, Instant, JobSpec, is_job_id, parse_time

router = APIGatewayRouter()

MAX_PREVIEW_COUNT = 100
# The fields a preview shares with a job: declared and checked by the job model itself.
_SCHEDULE_FIELDS = (
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
_FIELD: dict[str, Any] = dict(JobSpec.model_fields)
# A target the job model accepts, to check the schedule fields of a preview as a job's.
_ANY_TARGET = {"type": "http", "url": "https://example.com/"}


class OwnerExecution(Execution):
    """An execution in the list across jobs: with its job's name."""

    job_name: str


class OwnerExecutionList(BaseModel):
    executions: list[OwnerExecution]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


class SchedulePreview(BaseModel):
    """A schedule to preview: the schedule fields of a job, and which occurrences to show."""

    model_config = ConfigDict(extra="forbid", str_max_length=MAX_BODY_LENGTH)

    schedule: str | None = _FIELD["schedule"]
    schedules: list[Annotated[str, Field(max_length=256)]] | None = _FIELD["schedules"]
    spread: dict[str, Any] | None = Field(default=None, description=_FIELD["spread"].description)
    run_at: Instant | None = None
    timezone: str = _FIELD["timezone"]
    start_at: Instant | None = None
    end_at: Instant | None = None
    exclude_calendars: list[str] = _FIELD["exclude_calendars"]
    on_excluded: Literal["skip", "shift"] = _FIELD["on_excluded"]
    explain: bool = Field(
        default=False,
        strict=True,
        description="Answer each time as an object saying where it comes from: `at`, `expression`, "
        "`spread_seconds` and, for calendars, `shifted_from` and `excluded_by` (the occurrences a "
        "calendar leaves out listed too, with `excluded_by`).",
    )
    after: Instant | None = Field(default=None, description="Occurrences strictly after this instant (default: now).")
    count: int = Field(default=10, ge=1, le=MAX_PREVIEW_COUNT, strict=True, description="How many occurrences.")
    job_id: str | None = Field(
        default=None,
        max_length=64,
        description="The job whose id seeds the `spread` (default: none, an example offset). One of "
        "yours, without `start_at` here, also counts `rate()` and `@every` as its runs do (from its own "
        "`start_at`, else its creation), and nothing before its creation.",
    )

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is not None and not is_job_id(value):
            raise ValueError("must be a job id (a canonical UUID)")
        return None if value is None else value.lower()  # as the job's id is stored, which seeds its spread

    @field_validator("after")
    @classmethod
    def _after_in_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else value.astimezone(UTC)  # Instant: it converts


class ExplainedOccurrence(BaseModel):
    """A time of the preview with ``explain``: when it fires and why."""

    at: AwareDatetime = Field(description="when it fires (UTC): the occurrence plus `spread_seconds`")
    expression: str = Field(description="the expression that produced the occurrence")
    spread_seconds: int = Field(description="the spread's offset applied (0 without a spread)")
    excluded_by: str | None = Field(
        default=None, description="the calendar that excluded it (then it does not run) or shifted it"
    )
    shifted_from: AwareDatetime | None = Field(default=None, description="the time a calendar moved it from")


class Occurrences(BaseModel):
    occurrences: list[AwareDatetime] | list[ExplainedOccurrence] = Field(
        description="UTC, in the order of their occurrences; fewer than `count` when the schedule ends; "
        "objects with `explain` (with calendars, the occurrences they leave out are listed too)"
    )


Status = Annotated[
    Literal["running", "succeeded", "failed", "timed_out", "lost", "skipped"],
    Query(description="Only executions with this status."),
]
ExecutionId = Annotated[str, Path(description="The execution's id (a UUID).")]
JobFilter = Annotated[str, Query(max_length=64, description="Only this job's executions (its id).")]
Since = Annotated[
    str, Query(max_length=64, description="Only executions started at or after this RFC 3339 instant (with an offset).")
]


def _instant(value: str, field: str) -> datetime:
    """An RFC 3339 instant with an offset, representable in UTC; a 400 on ``field`` else."""
    try:
        return parse_time(value).astimezone(UTC)
    except ValueError:
        raise BadRequest(field, "must be an RFC 3339 instant with an offset, like 2026-12-01T00:00:00Z") from None


def job_filter(job_id: str | None) -> str | None:
    """A ``job_id`` query filter as the job routes take ids: the canonical 8-4-4-4-12 form (hex
    digits in either case, answered lower case), not the other spellings uuid.UUID takes
    (urn:uuid:, braces, no dashes); a 400 on ``job_id`` else."""
    if job_id is None:
        return None
    if not is_job_id(job_id):
        raise BadRequest("job_id", "must be a job id: a UUID in its 8-4-4-4-12 form")
    return job_id.lower()


def _position(value: Any) -> bool:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        return False
    try:
        _instant(value[0], "cursor")
        uuid.UUID(value[1])
    except (BadRequest, ValueError):
        return False
    return True


@router.route(
    *rule("list_owner_executions"),
    summary="List executions across jobs",
    tags=["executions"],
    description="The caller's executions across all their jobs, newest first by `started_at`, "
    "each with its job's name.",
    responses=documented(200, OwnerExecutionList, "A page of executions, newest first.", 400, 403),
)
def list_owner_executions(
    store: StoreDep,
    cursors: CursorsDep,
    owner: Owner,
    status: Status = None,
    job_id: JobFilter = None,
    since: Since = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    job_id = job_filter(job_id)
    since_at = None if since is None else _instant(since, "since")
    scope = scope_of(
        "owner_executions",
        owner,
        status=status,
        job_id=job_id,
        since=None if since_at is None else since_at.isoformat(),
    )
    position = cursor_position(cursors, cursor, scope, "before", _position)
    before = None if position is None else (_instant(position[0], "cursor"), position[1])
    found = store.list_owner_executions(
        owner,
        status=ExecutionStatus(status) if status else None,
        job_id=job_id,
        since=since_at,
        limit=limit + 1,
        before=before,
    )
    page = found[:limit]
    next_cursor = None
    if len(found) > limit:
        last = page[-1]
        next_cursor = cursors.encode(scope, {"before": [last.started_at.isoformat(), last.id]})
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"executions": [{**execution_json(e), "job_name": e.job_name} for e in page], "next_cursor": next_cursor},
    )


@router.route(
    *rule("get_execution"),
    summary="Get an execution",
    tags=["executions"],
    description="One of the caller's executions by its id, whole, with its job's name, whichever job "
    "and day it is of (every day kept is read: up to a few tenths of a second with millions of executions).",
    responses=documented(200, OwnerExecution, "The execution.", 403, 404),
)
def get_execution(execution_id: ExecutionId, store: StoreDep, owner: Owner) -> Response[Any]:
    found = store.find_owner_execution(owner, execution_id)
    if found is None:
        raise ApiError(NO_SUCH_EXECUTION, status=404, code="not_found")
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={**execution_json(found), "job_name": found.job_name},
    )


@router.route(
    *rule("preview_schedule"),
    summary="Preview a schedule's occurrences",
    tags=["schedules"],
    description="The next `count` occurrences strictly after `after` (default now), in UTC, "
    "computed as for a job with these fields; bad fields answer 400 as for a job.",
    responses=documented(200, Occurrences, "The occurrences.", 400, 403, 413, 415),
)
def preview_schedule(preview: Annotated[SchedulePreview, Body()], store: StoreDep, owner: Owner) -> Response[Any]:
    fields = preview.model_dump(include=set(_SCHEDULE_FIELDS), exclude_none=True)
    spec = JobSpec.model_validate({"name": "preview", "target": _ANY_TARGET, **fields})
    calendars = service.named_calendars(store, owner, spec.exclude_calendars)
    after = preview.after or store.now()
    when = spec.schedule if spec.schedule is not None else spec.schedules if spec.schedules is not None else spec.run_at
    assert when is not None, "the job schema takes exactly one of schedule, schedules and run_at"
    spread = None
    if spec.spread is not None:
        spread = Spread(spec.spread.window_seconds, spec.spread.mode, preview.job_id or "")
    job = _own_job(store, owner, preview.job_id) if spec.start_at is None else None
    if job is not None and job.created_at is not None:  # its own times: as its runs are, none before its creation
        anchor = interval_anchor(job.start_at, job.created_at)
        after = max(after, job.created_at)
    else:
        anchor = interval_anchor(spec.start_at, after)
    found = explain_occurrences(
        when,
        timezone=spec.timezone,
        start_at=spec.start_at,
        end_at=spec.end_at,
        after=after,
        count=preview.count,
        spread=spread,
        calendars=calendars,
        on_excluded=spec.on_excluded,
        anchor=anchor,
    )
    if not found:
        _refuse_an_empty_preview(spec, when, after, anchor, calendars, from_now=preview.after is None)
    if not preview.explain:
        items: list[Any] = [format_time(item.at) for item in found]
    else:
        items = _explained(found, spec, calendars, when, anchor, after)
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body={"occurrences": items})


def _refuse_an_empty_preview(
    spec: JobSpec,
    when: When,
    after: datetime,
    anchor: datetime,
    calendars: Sequence[Calendar],
    *,
    from_now: bool,
) -> None:
    """A preview with no time that a job of these fields could not be created with: the same 400
    (``service.create_job``'s checks), not an empty list. A schedule that fires without its
    calendars but that they leave with no run: on ``exclude_calendars``; from now (no ``after``),
    a window without start_at whose end_at is to come but before the first occurrence: on the
    schedule's field."""
    if isinstance(when, datetime):
        return
    alone = explain_occurrences(
        when,
        timezone=spec.timezone,
        start_at=spec.start_at,
        end_at=spec.end_at,
        after=after,
        count=1,
        anchor=anchor,
    )
    if not alone:
        if from_now and spec.start_at is None and spec.end_at is not None and spec.end_at > after:
            raise BadRequest("schedules" if spec.schedules else "schedule", NEVER_BETWEEN_NOW_AND_END)
        return
    if calendars:
        raise BadRequest("exclude_calendars", calendars_leave_no_run(spec.end_at is not None))


def _own_job(store: Any, owner: str, job_id: str | None) -> Job | None:
    """The caller's job ``job_id``, whose own times a preview with its id shows; None without
    one (another owner's job is as no job: its id still seeds the spread, and says nothing of it)."""
    if job_id is None:
        return None
    try:
        return store.get_job(owner, job_id)
    except NotFound:
        return None


def _explained(
    found: list[Occurrence],
    spec: JobSpec,
    calendars: Sequence[Calendar],
    when: When,
    anchor: datetime,
    after: datetime,
) -> list[dict[str, Any]]:
    """The preview's items with ``explain``: each time's expression and spread offset, and what
    the calendars did: a shifted time names the occurrence it was moved from, and the occurrences
    they leave out (``skip``) are listed between the others with ``excluded_by``. ``anchor``:
    what a ``rate()`` counts from (``interval_anchor``: the preview's ``start_at``, a job's own
    anchor, else ``after``)."""
    base = schedule_for(when, spec.timezone, anchor)
    entries: list[dict[str, Any]] = [{"at": item.occurrence} for item in found]
    if calendars and not isinstance(when, datetime):
        entries = explain(base, calendars, spec.on_excluded, [item.occurrence for item in found], after, spec.start_at)
    fired = {item.occurrence: item for item in found}
    items: list[dict[str, Any]] = []
    for entry in entries:
        ran = fired.get(entry["at"]) if "shifted_from" in entry or "excluded_by" not in entry else None
        origin = entry.get("shifted_from") or entry["at"]
        item: dict[str, Any] = {
            "at": format_time(ran.at if ran is not None else entry["at"]),
            "expression": base.source_of(origin) if isinstance(base, UnionSchedule) else base.expression,
            "spread_seconds": ran.spread_seconds if ran is not None else 0,
        }
        if "excluded_by" in entry:
            item["excluded_by"] = entry["excluded_by"]
        if "shifted_from" in entry:
            item["shifted_from"] = format_time(entry["shifted_from"])
        items.append(item)
    return items
