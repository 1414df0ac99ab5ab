"""``GET /v1/alerts``: the caller's alert deliveries (what fired, where it went, how its
delivery went), newest first."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import AwareDatetime, BaseModel, Field

from scheduler.api.activity import JobFilter, _instant, _position, job_filter
from scheduler.api.cursors import scope_of
from scheduler.api.errors import documented
from scheduler.api.jobs import DEFAULT_PAGE_SIZE, Cursor, CursorsDep, Limit, Owner, StoreDep
from scheduler.api.pages import cursor_position
from scheduler.api.routes import rule
from scheduler.core.alerts import AlertDelivery
from scheduler.core.json_text import whole_if_integral
from scheduler.core.timeutil import format_time
from scheduler.secrets import mask_target_secrets

router = APIGatewayRouter()


class Alert(BaseModel):
    """An alert and its delivery."""

    id: str
    job_id: str
    job_name: str
    on: Literal["failure", "failures_in_a_row", "recovery", "missing_run", "late"]
    rule: str | None = Field(description="the rule set by tag (`/v1/alert-rules`) that fired it; null: the job's own")
    threshold: float | None
    event: Literal["fired", "recovered"] = Field(description="`recovered`: a recovery rule's alert")
    incident_id: str
    execution_id: str | None = Field(description="the execution it is about (null: a run that did not happen)")
    message: str
    target: dict[str, Any] = Field(description="where it went (secrets `***`)")
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at: AwareDatetime
    delivered_at: AwareDatetime | None
    next_attempt_at: AwareDatetime | None = Field(description="when a pending alert is tried again")
    last_error: str | None
    http_status: int | None


class AlertList(BaseModel):
    alerts: list[Alert]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


AlertStatus = Annotated[Literal["pending", "delivered", "failed"], Query(description="Only alerts in this state.")]


def alert_json(alert: AlertDelivery) -> dict[str, Any]:
    """The alert of the contract (its target's secrets masked)."""
    return {
        "id": alert.id,
        "job_id": alert.job_id,
        "job_name": alert.job_name,
        "on": alert.rule_on,
        "rule": alert.rule_name,
        "threshold": whole_if_integral(alert.threshold),
        "event": alert.event,
        "incident_id": alert.incident_id,
        "execution_id": alert.execution_id,
        "message": alert.vars.get("message", ""),
        "target": mask_target_secrets(dict(alert.target)),
        "status": alert.status,
        "attempts": alert.attempts,
        "created_at": format_time(alert.created_at),
        "delivered_at": format_time(alert.delivered_at),
        "next_attempt_at": format_time(alert.next_attempt_at) if alert.status == "pending" else None,
        "last_error": alert.last_error,
        "http_status": alert.http_status,
    }


@router.route(
    *rule("list_alerts"),
    summary="List alert deliveries",
    tags=["alerts"],
    description="The alerts the caller's jobs' rules fired (one per rule per incident, and the "
    "recoveries), newest first, with how their delivery went.",
    responses=documented(200, AlertList, "A page of alerts, newest first.", 400, 403),
)
def list_alerts(
    store: StoreDep,
    cursors: CursorsDep,
    owner: Owner,
    job_id: JobFilter = None,
    status: AlertStatus = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    job_id = job_filter(job_id)
    scope = scope_of("alerts", owner, job_id=job_id, status=status)
    position = cursor_position(cursors, cursor, scope, "before", _position)
    before = None if position is None else (_instant(position[0], "cursor"), position[1])
    found = store.list_alerts(owner, job_id=job_id, status=status, limit=limit + 1, before=before)
    page = found[:limit]
    next_cursor = None
    if len(found) > limit:
        last = page[-1]
        next_cursor = cursors.encode(scope, {"before": [last.created_at.isoformat(), last.id]})
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"alerts": [alert_json(a) for a in page], "next_cursor": next_cursor},
    )
