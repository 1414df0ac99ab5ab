"""Routes of a job's change log: newest first, keyset cursors; kept after the job's delete."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from scheduler.api.cursors import scope_of
from scheduler.api.errors import documented
from scheduler.api.jobs import DEFAULT_PAGE_SIZE, Cursor, CursorsDep, JobId, Limit, Owner, StoreDep, cursor_position
from scheduler.api.routes import rule
from scheduler.api.serialize import ChangeList, change_json

router = APIGatewayRouter()

_MAX_SEQ = 2**63 - 1


@router.route(
    *rule("list_changes"),
    summary="List a job's changes",
    tags=["jobs"],
    description="Every create, update, pause, resume, run and delete of the job, newest first, with who "
    "made it, when (the database clock), the version it left and the diff (secrets masked). Kept "
    "after the job's delete for the executions' retention period.",
    responses=documented(200, ChangeList, "A page of changes, newest first.", 400, 403, 404),
)
def list_changes(
    job_id: JobId,
    store: StoreDep,
    cursors: CursorsDep,
    owner: Owner,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    scope = scope_of("changes", owner, job_id=job_id)
    before_seq = cursor_position(
        cursors,
        cursor,
        scope,
        "before_seq",
        lambda value: isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_SEQ,
    )
    rows = store.list_changes(owner, job_id, limit=limit + 1, before_seq=before_seq)
    page = rows[:limit]
    next_cursor = cursors.encode(scope, {"before_seq": page[-1].seq}) if len(rows) > limit else None
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"changes": [change_json(entry) for entry in page], "next_cursor": next_cursor},
    )
