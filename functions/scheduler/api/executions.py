"""Routes of a job's executions: newest first, keyset cursors, a status filter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from scheduler.api.cursors import CursorCodec, InvalidCursor, scope_of
from scheduler.api.errors import BadRequest, documented
from scheduler.api.jobs import (
    DEFAULT_PAGE_SIZE,
    Cursor,
    CursorsDep,
    JobId,
    Limit,
    Owner,
    StoreDep,
)
from scheduler.api.routes import rule
from scheduler.api.serialize import ExecutionList, execution_json
from scheduler.core.domain import ExecutionStatus

router = APIGatewayRouter()

_MAX_SEQ = 2**63 - 1


def _before(cursors: CursorCodec, cursor: str | None, scope: str) -> tuple[int | None, datetime | None]:
    """The seq and ``started_at`` of the previous page's last row, as its cursor holds them (None
    without a cursor; the instant None in a cursor issued before cursors carried it, which still
    pages, reading every day); a 400 on ``cursor`` when it was not issued for this listing or is
    malformed."""
    if cursor is None:
        return None, None
    try:
        position = cursors.decode(cursor, scope)
    except InvalidCursor as exc:
        raise BadRequest("cursor", str(exc)) from None
    seq, started_at = position.get("before_seq"), position.get("started_at")
    if not (isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq <= _MAX_SEQ):
        raise BadRequest("cursor", "malformed cursor")
    return seq, None if started_at is None else _instant(started_at)


def _instant(value: Any) -> datetime:
    """A cursor's ``started_at`` (ISO 8601 with an offset) in UTC; a 400 on ``cursor`` else."""
    try:
        instant = datetime.fromisoformat(value) if isinstance(value, str) else None
        if instant is not None and instant.tzinfo is not None:
            return instant.astimezone(UTC)
    except (ValueError, OverflowError):
        pass
    raise BadRequest("cursor", "malformed cursor")


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
        Literal["running", "succeeded", "failed", "timed_out", "lost", "skipped"],
        Query(description="Only executions with this status."),
    ] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    scope = scope_of("executions", owner, job_id=job_id, status=status)
    before_seq, before_started_at = _before(cursors, cursor, scope)
    rows = store.list_executions(
        owner,
        job_id,
        status=ExecutionStatus(status) if status else None,
        limit=limit + 1,
        before_seq=before_seq,
        before_started_at=before_started_at,
    )
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        # The row's instant lets the next page read only its own and earlier days' partitions.
        last = page[-1]
        next_cursor = cursors.encode(scope, {"before_seq": last.seq, "started_at": last.started_at.isoformat()})
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"executions": [execution_json(r) for r in page], "next_cursor": next_cursor},
    )
