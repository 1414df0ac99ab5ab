"""Routes of the change logs: a job's, a calendar's and an alert rule set's, newest first, keyset
cursors; each kept after its subject's delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from scheduler.api.alert_rules import RuleName, existing_rule_set_name
from scheduler.api.calendars import CalendarName, existing_calendar_name
from scheduler.api.cursors import CursorCodec, scope_of
from scheduler.api.errors import documented
from scheduler.api.jobs import DEFAULT_PAGE_SIZE, Cursor, CursorsDep, JobId, Limit, Owner, StoreDep
from scheduler.api.pages import cursor_position
from scheduler.api.providers import get_store
from scheduler.api.routes import rule
from scheduler.api.serialize import ChangeList, change_json
from scheduler.core.domain import ChangedKind, ChangeEntry
from scheduler.ports import AlertRuleStore, CalendarStore

router = APIGatewayRouter()

_MAX_SEQ = 2**63 - 1

CalendarStoreDep = Annotated[CalendarStore, Depends(get_store)]
AlertRuleStoreDep = Annotated[AlertRuleStore, Depends(get_store)]


def _changes_page(
    cursors: CursorCodec,
    cursor: str | None,
    scope: str,
    limit: int,
    read: Callable[[int, int | None], list[ChangeEntry]],
) -> Response[Any]:
    """A page of a change log: ``read(count, before_seq)`` answers the entries, newest first."""
    before_seq = cursor_position(
        cursors,
        cursor,
        scope,
        "before_seq",
        lambda value: isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_SEQ,
    )
    rows = read(limit + 1, before_seq)
    page = rows[:limit]
    next_cursor = cursors.encode(scope, {"before_seq": page[-1].seq}) if len(rows) > limit else None
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body={"changes": [change_json(entry) for entry in page], "next_cursor": next_cursor},
    )


def _named_changes(
    store: CalendarStore | AlertRuleStore,
    owner: str,
    kind: ChangedKind,
    name: str,
    exists: Callable[[str, str], object],
    cursors: CursorCodec,
    cursor: str | None,
    limit: int,
) -> Response[Any]:
    """A page of a calendar's or a rule set's change log; 404 (``exists``' error) when the name
    has neither a log nor a calendar or set."""

    def read(count: int, before_seq: int | None) -> list[ChangeEntry]:
        rows = store.list_resource_changes(owner, kind, name, limit=count, before_seq=before_seq)
        if not rows and before_seq is None:
            exists(owner, name)  # raises its NotFound when there is none either
        return rows

    return _changes_page(cursors, cursor, scope_of(f"{kind}_changes", owner, name=name), limit, read)


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
    return _changes_page(
        cursors,
        cursor,
        scope_of("changes", owner, job_id=job_id),
        limit,
        lambda count, before_seq: store.list_changes(owner, job_id, limit=count, before_seq=before_seq),
    )


@router.route(
    *rule("list_calendar_changes"),
    summary="List a calendar's changes",
    tags=["calendars"],
    description="Every create, update and delete of the calendar, newest first, with who made it, when "
    "(the database clock), the version it left and the diff of its fields (a delete's shows what it "
    "excluded). Kept after the calendar's delete for the executions' retention period; a name made "
    "again reads on after its delete.",
    responses=documented(200, ChangeList, "A page of changes, newest first.", 400, 403, 404),
)
def list_calendar_changes(
    name: CalendarName,
    store: CalendarStoreDep,
    cursors: CursorsDep,
    owner: Owner,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    found = existing_calendar_name(name)
    return _named_changes(store, owner, ChangedKind.CALENDAR, found, store.get_calendar, cursors, cursor, limit)


@router.route(
    *rule("list_alert_rule_changes"),
    summary="List an alert rule set's changes",
    tags=["alerts"],
    description="Every create, update and delete of the rule set, newest first, with who made it, when "
    "(the database clock), the version it left and the diff of its fields by rule (`alerts.0.threshold`; "
    "secrets masked). Kept after the set's delete for the executions' retention period.",
    responses=documented(200, ChangeList, "A page of changes, newest first.", 400, 403, 404),
)
def list_alert_rule_changes(
    name: RuleName,
    store: AlertRuleStoreDep,
    cursors: CursorsDep,
    owner: Owner,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> Response[Any]:
    found = existing_rule_set_name(name)
    return _named_changes(store, owner, ChangedKind.ALERT_RULES, found, store.get_alert_rule, cursors, cursor, limit)
