"""Routes of the alert rule sets: an owner's named rules for every job of theirs that carries a
tag (``PUT``, list, get, delete). The rules are a job's ``alerts`` (same model, same checks, same
sealing of secrets and ``"***"`` answers); the alert sweep applies them to the tagged jobs."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import AwareDatetime, BaseModel, Field

from scheduler.api.conditions import IfMatch, IfNoneMatch, create_only, parse_if_match
from scheduler.api.cursors import scope_of
from scheduler.api.errors import BadRequest, documented
from scheduler.api.jobs import (
    DEFAULT_PAGE_SIZE,
    BoxDep,
    Caller,
    Cursor,
    CursorsDep,
    Limit,
    Owner,
    SettingsDep,
    check_text,
)
from scheduler.api.pages import name_ordered_page
from scheduler.api.providers import get_store
from scheduler.api.routes import rule
from scheduler.api.serialize import masked_alerts
from scheduler.api.target_rules import require_alert_targets, seal_alerts
from scheduler.core.alerts import AlertRuleRecord
from scheduler.core.errors import AlertRuleExists, AlertRuleNotFound, VersionMismatch
from scheduler.core.timeutil import format_time
from scheduler.ports import AlertRuleStore
from scheduler.schema.alert_rules import AlertRuleSetSpec
from scheduler.schema.models import _NAME_RE, MAX_NAME_LENGTH

logger = logging.getLogger(__name__)
router = APIGatewayRouter()

AlertRuleStoreDep = Annotated[AlertRuleStore, Depends(get_store)]
RuleName = Annotated[str, Path(description="The rule set's name.")]
_LOCATION = {"Location": {"description": "The rule set's path.", "schema": {"type": "string"}}}


class AlertRuleSet(AlertRuleSetSpec):
    """A rule set as answered: its rules (secrets `***`), version and times."""

    name: str
    version: int
    created_at: AwareDatetime
    updated_at: AwareDatetime


class AlertRuleSetList(BaseModel):
    alert_rules: list[AlertRuleSet]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


def alert_rule_json(record: AlertRuleRecord) -> dict[str, Any]:
    """The rule set of the contract (its targets' secrets masked)."""
    return {
        "name": record.name,
        "tag": record.tag,
        "alerts": masked_alerts(record.alerts),
        "version": record.version,
        "created_at": format_time(record.created_at),
        "updated_at": format_time(record.updated_at),
    }


def _answer(record: AlertRuleRecord, status: int = 200, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=alert_rule_json(record),
        headers={"ETag": f'"{record.version}"', **(headers or {})},
    )


def _valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME_LENGTH and bool(_NAME_RE.match(name))


def existing_rule_set_name(name: str) -> str:
    """A name no rule set can have is absent (404), as an odd job id is."""
    if not _valid_name(name):
        raise AlertRuleNotFound(name)
    return name


@router.route(
    *rule("put_alert_rule"),
    summary="Create or replace an alert rule set",
    tags=["alerts"],
    description="Alert rules (as a job's `alerts`) for every job of yours that carries `tag`, "
    'now or tagged later. A secret sent as `"***"` keeps the one stored for the rule at the same '
    "place. 201 when created, 200 when replaced. With `If-Match`, only the version named is "
    "replaced, and nothing is created (412 otherwise); with `If-None-Match: *`, the set is only "
    "created, and one of that name is left as it is (412).",
    responses={
        **documented(200, AlertRuleSet, "The rule set, replaced.", 400, 403, 404, 412, 413, 415),
        **documented(201, AlertRuleSet, "The rule set, created.", headers=_LOCATION),
    },
)
def put_alert_rule(
    name: RuleName,
    spec: Annotated[AlertRuleSetSpec, Body()],
    store: AlertRuleStoreDep,
    box: BoxDep,
    owner: Owner,
    settings: SettingsDep,
    caller: Caller,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response[Any]:
    expected = parse_if_match(if_match)
    only_create = create_only(if_none_match, if_match)
    if not _valid_name(name):
        raise BadRequest("name", "use letters, digits and . _ : - (starting with a letter or digit), at most 128")
    if spec.name is not None and spec.name != name:
        raise BadRequest("name", "must be the path's name when given")
    data = spec.model_dump(mode="python", exclude={"name"})
    check_text(data, "body")
    require_alert_targets(data, settings, owner)
    try:
        found = store.get_alert_rule(owner, name)
    except AlertRuleNotFound:
        if if_match is not None:  # "*" too: it matches a rule set that exists, so never creates one
            raise VersionMismatch(None, "alert rule set") from None
        found = None
    # A stale version is said before the secrets are read: a set changed meanwhile may have no
    # secret where the edit sends "***" (a 400 would hide the 412). The write checks it again.
    if found is not None and expected is not None and found.version != expected:
        raise VersionMismatch(found.version, "alert rule set")
    stored = found.alerts if found is not None else None
    if only_create and stored is not None:
        raise AlertRuleExists(name)
    alerts = seal_alerts(data["alerts"], box, stored) or []
    record, created = store.put_alert_rule(
        owner, name, data["tag"], alerts, expected, by=caller, create_only=only_create
    )
    logger.info("alert rules written", extra={"alert_rule": name, "version": record.version})
    if created:
        return _answer(record, 201, {"Location": f"/v1/alert-rules/{name}"})
    return _answer(record)


@router.route(
    *rule("list_alert_rules"),
    summary="List alert rule sets",
    tags=["alerts"],
    responses=documented(200, AlertRuleSetList, "A page of rule sets in name order.", 400, 403),
)
def list_alert_rules(
    store: AlertRuleStoreDep, cursors: CursorsDep, owner: Owner, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> Response[Any]:
    return name_ordered_page(
        cursors,
        cursor,
        scope_of("alert_rules", owner),
        "alert_rules",
        limit,
        lambda after_name, count: store.list_alert_rules(owner, limit=count, after_name=after_name),
        alert_rule_json,
    )


@router.route(
    *rule("get_alert_rule"),
    summary="Get an alert rule set",
    tags=["alerts"],
    responses=documented(200, AlertRuleSet, "The rule set.", 403, 404),
)
def get_alert_rule(name: RuleName, store: AlertRuleStoreDep, owner: Owner) -> Response[Any]:
    return _answer(store.get_alert_rule(owner, existing_rule_set_name(name)))


@router.route(
    *rule("delete_alert_rule"),
    status_code=204,
    summary="Delete an alert rule set",
    tags=["alerts"],
    description="Its jobs no longer have its rules; the alerts it fired stay listed. With `If-Match`, only the "
    "version named is deleted (412 otherwise).",
    responses=documented(204, None, "Deleted.", 400, 403, 404, 412),
)
def delete_alert_rule(
    name: RuleName, store: AlertRuleStoreDep, owner: Owner, caller: Caller, if_match: IfMatch = None
) -> Response[Any]:
    expected = parse_if_match(if_match)
    store.delete_alert_rule(owner, existing_rule_set_name(name), by=caller, expected_version=expected)
    logger.info("alert rules deleted", extra={"alert_rule": name})
    return Response(status_code=204, content_type=None, body=None)
