"""Routes of the job resource: create, list, get, replace, merge-patch, delete, pause, resume and
run now. Every store call is scoped to the caller; another principal's job answers 404."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from scheduler import bulk_service, service
from scheduler.api.conditions import IfMatch, IfNoneMatch, parse_if_match, refuse_over_existing
from scheduler.api.cursors import MAX_CURSOR_LENGTH, CursorCodec, scope_of
from scheduler.api.errors import BadRequest, documented
from scheduler.api.overrides import run_overrides
from scheduler.api.pages import name_ordered_page
from scheduler.api.providers import get_caller, get_cursors, get_owner, get_secret_box, get_settings, get_store
from scheduler.api.routes import rule
from scheduler.api.serialize import BackfillPlan, BulkResult, Job, JobList, RunAccepted, job_json, spec_of
from scheduler.api.target_rules import require_alert_targets, require_broker, require_reachable_target, seal_alerts
from scheduler.core.domain import Job as DomainJob
from scheduler.core.domain import JobState, Pause
from scheduler.core.timeutil import format_time
from scheduler.ports import JobStore
from scheduler.schema.actions import BackfillRequest, BulkPauseRequest, BulkResumeRequest, PauseRequest, RunRequest
from scheduler.schema.models import MAX_NAME_LENGTH, MAX_TAG_LENGTH, JobSpec
from scheduler.secrets import SecretBox, seal_target_secrets

logger = logging.getLogger(__name__)
router = APIGatewayRouter()

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_PATCH_DEPTH = 16

StoreDep = Annotated[JobStore, Depends(get_store)]
BoxDep = Annotated[SecretBox, Depends(get_secret_box)]
CursorsDep = Annotated[CursorCodec, Depends(get_cursors)]
Owner = Annotated[str, Depends(get_owner)]
Caller = Annotated[str, Depends(get_caller)]
SettingsDep = Annotated[Any, Depends(get_settings)]
JobId = Annotated[str, Path(description="The job's id (a UUID).")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size.")]
Cursor = Annotated[str, Query(max_length=MAX_CURSOR_LENGTH, description="`next_cursor` of the previous page (opaque).")]
State = Annotated[Literal["active", "paused", "completed"], Query(description="Only jobs in this state.")]
Tag = Annotated[str, Query(min_length=1, max_length=MAX_TAG_LENGTH, description="Only jobs with this tag.")]
NamePrefix = Annotated[
    str, Query(min_length=1, max_length=MAX_NAME_LENGTH, description="Only jobs whose name starts with this.")
]
_LOCATION = {"Location": {"description": "The job's path.", "schema": {"type": "string"}}}


# -- helpers -----------------------------------------------------------------------------------


def check_text(value: Any, field: str) -> None:
    """Refuse strings Postgres cannot store (NUL) or UTF-8 cannot encode (lone surrogates),
    anywhere in a JSON value."""
    if isinstance(value, str):
        if "\x00" in value:
            raise BadRequest(field, "must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(field, "must be valid Unicode text") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(k, field)
            check_text(v, f"{field}.{k}" if field != "body" else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_text(v, f"{field}.{i}")


def merge_patch(target: Any, patch: Any, depth: int = 0) -> Any:
    """RFC 7396 JSON merge patch: objects merge, ``null`` removes, anything else replaces."""
    if depth > MAX_PATCH_DEPTH:
        raise BadRequest("body", "is nested too deeply")
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, depth + 1)
    return result


def spec_data(spec: JobSpec) -> dict[str, Any]:
    """The spec as the store takes it (python values), its text checked."""
    data = spec.model_dump(mode="python")
    check_text(data, "body")
    return data


def job_response(job: DomainJob, status: int = 200, headers: dict[str, str] | None = None) -> Response[Any]:
    """A job answer with its ``ETag``."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=job_json(job),
        headers={"ETag": f'"{job.version}"', **(headers or {})},
    )


def _text_param(value: str | None, field: str) -> str | None:
    check_text(value, field)
    return value


# -- routes ------------------------------------------------------------------------------------


@router.route(
    *rule("create_job"),
    status_code=201,
    summary="Create a job",
    tags=["jobs"],
    responses=documented(201, Job, "The job.", 400, 403, 409, 413, 415, headers=_LOCATION),
)
def create_job(
    spec: Annotated[JobSpec, Body()],
    store: StoreDep,
    box: BoxDep,
    owner: Owner,
    settings: SettingsDep,
    caller: Caller,
) -> Response[Any]:
    data = spec_data(spec)
    require_broker(data, settings, owner)
    require_reachable_target(data, settings)
    require_alert_targets(data, settings, owner)
    data["target"] = seal_target_secrets(data["target"], box, None)
    data["alerts"] = seal_alerts(data.get("alerts"), box, None)
    job = service.create_job(store, owner, data, by=caller)
    logger.info("job created", extra={"job_id": job.id})
    return job_response(job, 201, {"Location": f"/v1/jobs/{job.id}"})


@router.route(
    *rule("list_jobs"),
    summary="List jobs",
    tags=["jobs"],
    responses=documented(200, JobList, "A page of jobs in name order.", 400, 403),
)
def list_jobs(
    store: StoreDep,
    cursors: CursorsDep,
    owner: Owner,
    state: State = None,
    tag: Tag = None,
    name_prefix: NamePrefix = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    tag, name_prefix = _text_param(tag, "tag"), _text_param(name_prefix, "name_prefix")
    scope = scope_of("jobs", owner, state=state, tag=tag, name_prefix=name_prefix)
    chosen = JobState(state) if state else None

    def fetch(after_name: str | None, count: int) -> list[DomainJob]:
        return store.list_jobs(
            owner, state=chosen, tag=tag, name_prefix=name_prefix, limit=count, after_name=after_name
        )

    return name_ordered_page(cursors, cursor, scope, "jobs", limit, fetch, job_json)


@router.route(
    *rule("get_job"), summary="Get a job", tags=["jobs"], responses=documented(200, Job, "The job.", 403, 404)
)
def get_job(job_id: JobId, store: StoreDep, owner: Owner) -> Response[Any]:
    return job_response(store.get_job(owner, job_id))


@router.route(
    *rule("replace_job"),
    summary="Replace a job",
    tags=["jobs"],
    description='A full job spec. A secret sent as `"***"` keeps the stored one.',
    responses=documented(200, Job, "The job.", 400, 403, 404, 409, 412, 413, 415),
)
def replace_job(
    job_id: JobId,
    spec: Annotated[JobSpec, Body()],
    store: StoreDep,
    box: BoxDep,
    owner: Owner,
    settings: SettingsDep,
    caller: Caller,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response[Any]:
    expected = parse_if_match(if_match)
    refuse_over_existing(if_none_match, if_match, lambda: store.get_job(owner, job_id), "job")
    data = spec_data(spec)
    require_broker(data, settings, owner)
    require_reachable_target(data, settings)
    require_alert_targets(data, settings, owner)

    def build(current: DomainJob) -> dict[str, Any]:
        return {
            **data,
            "target": seal_target_secrets(data["target"], box, dict(current.target or {})),
            "alerts": seal_alerts(data.get("alerts"), box, current.alerts),
        }

    job = service.update_job(store, owner, job_id, build, expected, by=caller)
    logger.info("job replaced", extra={"job_id": job_id, "version": job.version})
    return job_response(job)


@router.route(
    *rule("patch_job"),
    summary="Change a job (JSON merge patch)",
    tags=["jobs"],
    description="An RFC 7396 merge patch over the job's spec (secrets stay as they are unless "
    "given); the result must be a valid job spec.",
    responses=documented(200, Job, "The job.", 400, 403, 404, 409, 412, 413, 415),
)
def patch_job(
    job_id: JobId,
    patch: Annotated[dict[str, Any], Body(description="A JSON merge patch of a job spec.")],
    store: StoreDep,
    box: BoxDep,
    owner: Owner,
    settings: SettingsDep,
    caller: Caller,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response[Any]:
    expected = parse_if_match(if_match)
    refuse_over_existing(if_none_match, if_match, lambda: store.get_job(owner, job_id), "job")
    check_text(patch, "body")
    merge_patch({}, patch)  # depth check before anything is read

    def build(current: DomainJob) -> dict[str, Any]:
        data = spec_data(JobSpec.model_validate(merge_patch(spec_of(current), patch)))
        require_broker(data, settings, owner)
        require_reachable_target(data, settings)
        require_alert_targets(data, settings, owner)
        return {
            **data,
            "target": seal_target_secrets(data["target"], box, dict(current.target or {})),
            "alerts": seal_alerts(data.get("alerts"), box, current.alerts),
        }

    job = service.update_job(store, owner, job_id, build, expected, by=caller)
    logger.info("job patched", extra={"job_id": job_id, "version": job.version})
    return job_response(job)


@router.route(
    *rule("delete_job"),
    status_code=204,
    summary="Delete a job and its executions",
    tags=["jobs"],
    description="With `If-Match`, only the version named is deleted (412 otherwise, nothing deleted).",
    responses=documented(204, None, "Deleted, with its executions.", 400, 403, 404, 412),
)
def delete_job(job_id: JobId, store: StoreDep, owner: Owner, caller: Caller, if_match: IfMatch = None) -> Response[Any]:
    service.delete_job(store, owner, job_id, by=caller, expected_version=parse_if_match(if_match))
    logger.info("job deleted", extra={"job_id": job_id})
    return Response(status_code=204, content_type=None, body=None)


@router.route(
    *rule("pause_job"),
    summary="Pause a job's schedule",
    tags=["jobs"],
    description="An optional body gives the pause a `note` and an end (`until`), at which the runner resumes "
    "the job under its missed-run policy; the job then shows `pause`.",
    responses=documented(200, Job, "The job.", 400, 403, 404, 409, 412, 413, 415),
)
def pause_job(
    job_id: JobId,
    store: StoreDep,
    owner: Owner,
    caller: Caller,
    request: Annotated[PauseRequest | None, Body()] = None,
    if_match: IfMatch = None,
) -> Response[Any]:
    expected = parse_if_match(if_match)
    pause = pause_record(request, store, caller)
    return job_response(service.pause_job(store, owner, job_id, pause, by=caller, expected_version=expected))


def pause_record(request: PauseRequest | None, store: JobStore, caller: str) -> Pause:
    """The pause's record of a pause request, by the caller (the principal, a session of a role
    included, as the change log names it): 400 on ``until`` when it is not in the future (by the
    database clock), on ``note`` for text that cannot be stored."""
    request = request or PauseRequest()
    check_text(request.note, "note")
    if request.until is not None and request.until <= store.now():
        raise BadRequest("until", "must be in the future (the job would resume at once)")
    return Pause(note=request.note, until=request.until, by=caller)


@router.route(
    *rule("backfill_job"),
    summary="Run a job's occurrences of a past range",
    tags=["jobs"],
    description="Every occurrence of the job from `start` to `end` (both included), each delivered as itself "
    "(its own `X-Scheduler-Scheduled-At` and `Idempotency-Key`, trigger `backfill`), one at a time through the "
    f"job's lease (never beside a live run), at most one a second; at most {service.MAX_BACKFILL:,} a request. "
    "A dry run answers the occurrences and writes nothing.",
    responses={
        **documented(200, BackfillPlan, "A dry run's occurrences.", 400, 403, 404, 413, 415),
        **documented(202, BackfillPlan, "Queued: how many occurrences will run."),
    },
)
def backfill_job(
    job_id: JobId, request: Annotated[BackfillRequest, Body()], store: StoreDep, owner: Owner, caller: Caller
) -> Response[Any]:
    start, end = request.start, request.end
    found = service.backfill_job(store, owner, job_id, start, end, dry_run=request.dry_run, by=caller)
    if request.dry_run:
        body: dict[str, Any] = {"occurrences": [format_time(at) for at in found], "count": len(found)}
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)
    logger.info("backfill queued", extra={"job_id": job_id, "count": len(found)})
    return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body={"count": len(found)})


def bulk_response(done: bulk_service.BulkChange) -> Response[Any]:
    """A bulk action's answer: the ids of the jobs it changed, how many, and whether more are
    selected (the same request changes the next ones)."""
    ids = [str(job.id) for job in done.jobs]
    body = {"jobs": ids, "count": len(ids), "more": done.more}
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


@router.route(
    *rule("pause_jobs"),
    summary="Pause the caller's jobs with a tag or a name prefix",
    tags=["jobs"],
    description="Each active job selected is paused as by `POST /v1/jobs/{job_id}/pause` (at most "
    f"{bulk_service.BULK_LIMIT} a request: `more` says that the same request changes more); only the "
    "caller's jobs.",
    responses=documented(200, BulkResult, "The jobs paused.", 400, 403, 413, 415),
)
def pause_jobs(
    request: Annotated[BulkPauseRequest, Body()], store: StoreDep, owner: Owner, caller: Caller
) -> Response[Any]:
    check_text(request.model_dump(exclude={"until"}), "body")
    pause = pause_record(PauseRequest(note=request.note, until=request.until), store, caller)
    done = bulk_service.pause_jobs(
        store, owner, tag=request.tag, name_prefix=request.name_prefix, pause=pause, by=caller
    )
    logger.info("jobs paused", extra={"count": len(done.jobs), "more": done.more})
    return bulk_response(done)


@router.route(
    *rule("resume_jobs"),
    summary="Resume the caller's jobs with a tag or a name prefix",
    tags=["jobs"],
    description="Each paused job selected is resumed as by `POST /v1/jobs/{job_id}/resume` (at most "
    f"{bulk_service.BULK_LIMIT} a request: `more` says that the same request changes more); only the "
    "caller's jobs.",
    responses=documented(200, BulkResult, "The jobs resumed.", 400, 403, 413, 415),
)
def resume_jobs(
    request: Annotated[BulkResumeRequest, Body()], store: StoreDep, owner: Owner, caller: Caller
) -> Response[Any]:
    check_text(request.model_dump(), "body")
    done = bulk_service.resume_jobs(store, owner, tag=request.tag, name_prefix=request.name_prefix, by=caller)
    logger.info("jobs resumed", extra={"count": len(done.jobs), "more": done.more})
    return bulk_response(done)


@router.route(
    *rule("resume_job"),
    summary="Resume a job's schedule",
    tags=["jobs"],
    responses=documented(200, Job, "The job.", 400, 403, 404, 409, 412),
)
def resume_job(job_id: JobId, store: StoreDep, owner: Owner, caller: Caller, if_match: IfMatch = None) -> Response[Any]:
    expected = parse_if_match(if_match)
    return job_response(service.resume_job(store, owner, job_id, by=caller, expected_version=expected))


@router.route(
    *rule("run_job"),
    status_code=202,
    summary="Run a job now",
    tags=["jobs"],
    description="One attempt outside the schedule, taken by the runner's next claim, even when the job is paused. "
    "An optional body overrides the body, headers and `{{vars.NAME}}` of that run only; its execution records "
    "them as `overrides` (credential-like header values as `***`).",
    responses=documented(202, RunAccepted, "Queued.", 400, 403, 404, 413, 415),
)
def run_job(
    job_id: JobId,
    store: StoreDep,
    box: BoxDep,
    owner: Owner,
    caller: Caller,
    request: Annotated[RunRequest | None, Body()] = None,
) -> Response[Any]:
    overrides = None
    if request is not None and request.given():
        check_text(request.model_dump(), "body")
        overrides = run_overrides(request, store.get_job(owner, job_id), box)
    job = service.request_run(store, owner, job_id, overrides, by=caller)
    logger.info("manual run requested", extra={"job_id": job_id})
    return Response(
        status_code=202,
        content_type=content_types.APPLICATION_JSON,
        body={
            "job_id": str(job.id),
            "status": "queued",
            "requested_at": format_time(job.manual_run_at),
            "job": job_json(job),
        },
    )
