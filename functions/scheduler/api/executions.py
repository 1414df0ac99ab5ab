"""Routes of a job's executions: newest first, keyset cursors, a status filter."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from scheduler.api.cursors import scope_of
from scheduler.api.errors import documented
from scheduler.api.jobs import (
    DEFAULT_PAGE_SIZE,
    Cursor,
    CursorsDep,
    JobId,
    Limit,
    Owner,
    StoreDep,
    cursor_position,
)
from scheduler.api.routes import rule
from scheduler.api.serialize import ExecutionList, execution_json

router = APIGatewayRouter()

_MAX_SEQ = 2**63 - 1


@router.route(
    *rule("list_executions"),
    summary="List a job's executions",
    tags=["executions"],
    responses=documented(200, ExecutionList, "A page of executions, newest first.", 400, 403, 404),
)
def list_executions(
    job_id: JobId,
    store: StoreDep,
    cursors: CursorsDep,
    owner: Owner,
    status: Annotated[
        Literal["running", "succeeded", "failed", "timed_out", "lost"],
        Query(description="Only executions with this status."),
    ] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
):
    scope = scope_of("executions", owner, job_id=job_id, status=status)
    before_seq = cursor_position(
        cursors,
        cursor,
        scope,
        "before_seq",
        lambda value: isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_SEQ,
    )
    rows = store.list_executions(owner, job_id, status=status, limit=limit + 1, before_seq=before_seq)
    page = rows[:limit]
    next_cursor = cursors.encode(scope, {"before_seq": page[-1].seq}) if len(rows) > limit else None
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"executions": [execution_json(r) for r in page], "next_cursor": next_cursor},
    )
