"""Routes of the calendar resource: an owner's named calendars (create, list, get, replace,
delete). A job names them in ``exclude_calendars``; replacing one replans those jobs, deleting
one that a job names answers 409 naming the jobs."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import AwareDatetime, BaseModel, Field

from scheduler import service
from scheduler.api.conditions import IfMatch, IfNoneMatch, parse_if_match, refuse_over_existing
from scheduler.api.cursors import scope_of
from scheduler.api.errors import documented
from scheduler.api.jobs import (
    DEFAULT_PAGE_SIZE,
    Caller,
    Cursor,
    CursorsDep,
    Limit,
    Owner,
    check_text,
)
from scheduler.api.pages import name_ordered_page
from scheduler.api.providers import get_store
from scheduler.api.routes import rule
from scheduler.core.domain import CalendarRecord
from scheduler.core.errors import CalendarNotFound
from scheduler.core.timeutil import format_time
from scheduler.ports import CalendarJobStore, CalendarStore
from scheduler.schema.calendars import CalendarDefinition, CalendarSpec
from scheduler.schema.models import _NAME_RE, MAX_NAME_LENGTH

logger = logging.getLogger(__name__)
router = APIGatewayRouter()

CalendarStoreDep = Annotated[CalendarStore, Depends(get_store)]
CalendarJobStoreDep = Annotated[CalendarJobStore, Depends(get_store)]
CalendarName = Annotated[str, Path(description="The calendar's name.")]


class Calendar(CalendarSpec):
    """A calendar as answered: its definition, version and times."""

    version: int
    created_at: AwareDatetime
    updated_at: AwareDatetime


class CalendarList(BaseModel):
    calendars: list[Calendar]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


def calendar_json(record: CalendarRecord) -> dict[str, Any]:
    """The calendar of the contract."""
    return {
        "name": record.name,
        "timezone": record.timezone,
        **{key: value for key, value in record.definition.items() if value is not None},
        "version": record.version,
        "created_at": format_time(record.created_at),
        "updated_at": format_time(record.updated_at),
    }


def _answer(record: CalendarRecord, status: int = 200, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=calendar_json(record),
        headers={"ETag": f'"{record.version}"', **(headers or {})},
    )


def existing_calendar_name(name: str) -> str:
    """A name no calendar can have is absent (404), as an odd job id is."""
    if len(name) > MAX_NAME_LENGTH or not _NAME_RE.match(name):
        raise CalendarNotFound(name)
    return name


def _definition(model: CalendarDefinition) -> dict[str, Any]:
    data = model.model_dump(mode="python", exclude={"name"}, exclude_none=True)
    check_text(data, "body")
    return data


@router.route(
    *rule("create_calendar"),
    status_code=201,
    summary="Create a calendar",
    tags=["calendars"],
    description="Days and spans jobs leave out (`exclude_calendars`): `dates`, `ranges`, `yearly`, or `ics`.",
    responses=documented(201, Calendar, "The calendar.", 400, 403, 409, 413, 415),
)
def create_calendar(
    spec: Annotated[CalendarSpec, Body()], store: CalendarStoreDep, owner: Owner, caller: Caller
) -> Response[Any]:
    record = service.create_calendar(store, owner, spec.name, _definition(spec), by=caller)
    logger.info("calendar created", extra={"calendar": record.name})
    return _answer(record, 201, {"Location": f"/v1/calendars/{record.name}"})


@router.route(
    *rule("list_calendars"),
    summary="List calendars",
    tags=["calendars"],
    responses=documented(200, CalendarList, "A page of calendars in name order.", 400, 403),
)
def list_calendars(
    store: CalendarStoreDep, cursors: CursorsDep, owner: Owner, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> Response[Any]:
    return name_ordered_page(
        cursors,
        cursor,
        scope_of("calendars", owner),
        "calendars",
        limit,
        lambda after_name, count: store.list_calendars(owner, limit=count, after_name=after_name),
        calendar_json,
    )


@router.route(
    *rule("get_calendar"),
    summary="Get a calendar",
    tags=["calendars"],
    responses=documented(200, Calendar, "The calendar.", 403, 404),
)
def get_calendar(name: CalendarName, store: CalendarStoreDep, owner: Owner) -> Response[Any]:
    return _answer(store.get_calendar(owner, existing_calendar_name(name)))


@router.route(
    *rule("replace_calendar"),
    summary="Replace a calendar",
    tags=["calendars"],
    description="A full definition. The jobs that name the calendar are replanned: their next "
    "occurrence still to come is computed again (one already due runs as planned). With "
    "`If-Match`, only the version named is replaced (412 otherwise).",
    responses=documented(200, Calendar, "The calendar.", 400, 403, 404, 412, 413, 415),
)
def replace_calendar(
    name: CalendarName,
    definition: Annotated[CalendarDefinition, Body()],
    store: CalendarJobStoreDep,
    owner: Owner,
    caller: Caller,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response[Any]:
    expected = parse_if_match(if_match)
    refuse_over_existing(
        if_none_match, if_match, lambda: store.get_calendar(owner, existing_calendar_name(name)), "calendar"
    )
    record = service.replace_calendar(
        store, owner, existing_calendar_name(name), _definition(definition), expected, by=caller
    )
    logger.info("calendar replaced", extra={"calendar": record.name, "version": record.version})
    return _answer(record)


@router.route(
    *rule("delete_calendar"),
    status_code=204,
    summary="Delete a calendar",
    tags=["calendars"],
    description="409 naming the jobs while any job names it in `exclude_calendars`. With `If-Match`, only the "
    "version named is deleted (412 otherwise).",
    responses=documented(204, None, "Deleted.", 400, 403, 404, 409, 412),
)
def delete_calendar(
    name: CalendarName, store: CalendarStoreDep, owner: Owner, caller: Caller, if_match: IfMatch = None
) -> Response[Any]:
    expected = parse_if_match(if_match)
    store.delete_calendar(owner, existing_calendar_name(name), by=caller, expected_version=expected)
    logger.info("calendar deleted", extra={"calendar": name})
    return Response(status_code=204, content_type=None, body=None)
