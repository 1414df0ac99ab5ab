"""Hints for common mistakes on the command line: a job without a target, a name or a schedule
is named by the flag that gives it (``--url``), before anything is sent, rather than by the
API's ``target: is required``; and a field the API says is missing is followed by its flag."""

from __future__ import annotations

from typing import Any

from scheduler.cli.common import UsageError

# The flag that sets each field a job needs (the API names the field, the CLI the flag).
FIELD_FLAGS = {
    "name": "--name NAME",
    "schedule": "--schedule EXPR (or --run-at TIMESTAMP)",
    "run_at": "--run-at TIMESTAMP (or --schedule EXPR)",
    "target": "--url URL (an HTTP target; or --queue-url, --function-arn, --topic-arn, --event-bus-arn, --amqp-exchange)",
    "target.url": "--url URL",
    "target.function_arn": "--function-arn ARN",
    "target.queue_url": "--queue-url URL",
    "target.topic_arn": "--topic-arn ARN",
    "target.event_bus_arn": "--event-bus-arn ARN",
    "target.role_arn": "--role-arn ARN",
    "target.source": "--source TEXT",
    "target.detail_type": "--detail-type TEXT",
    "target.body": "--body TEXT",
    "target.message": "--body TEXT",
}
_REQUIRED_URL = {"http": "url", "lambda": "function_arn", "sqs": "queue_url", "sns": "topic_arn"}


def check_complete(spec: dict[str, Any]) -> None:
    """A new job's definition names what a job needs, else a usage error naming its flag."""
    missing = []
    if not spec.get("name"):
        missing.append("name")
    if not spec.get("schedule") and not spec.get("schedules") and not spec.get("run_at"):
        missing.append("schedule")
    target = spec.get("target")
    if not isinstance(target, dict) or not target:
        missing.append("target")
    else:
        field = _REQUIRED_URL.get(str(target.get("type") or "http"))
        if field and not target.get(field):
            missing.append(f"target.{field}")
    if missing:
        needs = "; ".join(f"{field}: give {FIELD_FLAGS[field]}" for field in missing)
        raise UsageError(f"the job is incomplete: {needs} (or -f FILE with the fields)")


def flag_hints(error: Any) -> list[str]:
    """For a 400 naming a missing field: the flag that gives it (``give --url URL``)."""
    if getattr(error, "status", None) != 400:
        return []
    hints = []
    for detail in getattr(error, "details", []):
        field, message = str(detail.get("field") or ""), str(detail.get("message") or "")
        if field in FIELD_FLAGS and message == "is required":
            hints.append(f"{field}: give {FIELD_FLAGS[field]}")
    return hints


def endpoint_hint(error: Any, endpoint: str | None) -> str | None:
    """For a 404 of a path no route answers (``no such resource``, not a missing job): the
    endpoint is likely not the API's base URL (a path after the host, a ``/v1`` too many)."""
    if getattr(error, "status", None) != 404 or getattr(error, "message", None) != "no such resource":
        return None
    where = f" ({endpoint})" if endpoint else ""
    return f"no route of the API answers this path: is --endpoint{where} the API's base URL, without /v1?"
