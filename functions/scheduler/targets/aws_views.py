"""The typed views of the AWS targets (``LambdaView``, ``SqsView``, ``SnsView``,
``EventBridgeView``) and of the ``sigv4`` auth of an HTTP target (``SigV4View``).

Like :mod:`scheduler.targets.views` (which routes to :func:`aws_view_of` and reads an HTTP
target's ``sigv4`` auth with :func:`sigv4_of`): the fields and defaults of the pydantic models
of ``scheduler.schema.aws_models`` (``tests/unit/test_target_views.py`` holds them to each other),
built without pydantic; what no model would have stored raises ``InvalidAwsTarget``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.core.aws_arns import (
    EVENT_BUS_ARN,
    FUNCTION_ARN,
    REGION,
    ROLE_ARN,
    TOPIC_ARN,
    queue_url_region,
    region_of,
)

#: The ``type`` of each AWS target.
AWS_TYPES = ("lambda", "sqs", "sns", "eventbridge")
_DEFAULT_TIMEOUT = 30.0  # the models' default of timeout_seconds


class InvalidAwsTarget(ValueError):
    """An AWS target (or sigv4 auth) the delivery cannot read."""


@dataclass(frozen=True)
class LambdaView:
    """A lambda target (``aws_models.LambdaTarget``)."""

    function_arn: str
    role_arn: str
    payload: str = "{}"
    invocation_type: str = "Event"
    timeout_seconds: float = _DEFAULT_TIMEOUT
    type: str = "lambda"

    @property
    def resource(self) -> str:
        """The ARN or URL the call is made to."""
        return self.function_arn


@dataclass(frozen=True)
class SqsView:
    """An sqs target (``aws_models.SqsTarget``)."""

    queue_url: str
    role_arn: str
    body: str
    message_group_id: str | None = None
    timeout_seconds: float = _DEFAULT_TIMEOUT
    type: str = "sqs"

    @property
    def resource(self) -> str:
        """The ARN or URL the call is made to."""
        return self.queue_url


@dataclass(frozen=True)
class SnsView:
    """An sns target (``aws_models.SnsTarget``)."""

    topic_arn: str
    role_arn: str
    message: str
    subject: str | None = None
    message_group_id: str | None = None
    timeout_seconds: float = _DEFAULT_TIMEOUT
    type: str = "sns"

    @property
    def resource(self) -> str:
        """The ARN or URL the call is made to."""
        return self.topic_arn


@dataclass(frozen=True)
class EventBridgeView:
    """An eventbridge target (``aws_models.EventBridgeTarget``)."""

    event_bus_arn: str
    role_arn: str
    source: str
    detail_type: str
    detail: str = "{}"
    timeout_seconds: float = _DEFAULT_TIMEOUT
    type: str = "eventbridge"

    @property
    def resource(self) -> str:
        """The ARN or URL the call is made to."""
        return self.event_bus_arn


@dataclass(frozen=True)
class SigV4View:
    """The sigv4 auth of an http target (``aws_models.SigV4Auth``)."""

    service: str
    region: str
    role_arn: str
    type: str = "sigv4"


AwsView = LambdaView | SqsView | SnsView | EventBridgeView

#: The text fields of each AWS view in which placeholders render.
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "lambda": ("payload",),
    "sqs": ("body", "message_group_id"),
    "sns": ("message", "subject", "message_group_id"),
    "eventbridge": ("source", "detail_type", "detail"),
}


def region(view: AwsView) -> str:
    """The region of the target's resource."""
    return region_of(view.resource)


def aws_view_of(target: Mapping[str, Any], timeout: float) -> AwsView:
    """The view of an AWS target dict whose ``timeout_seconds`` was read as ``timeout``."""
    kind = target.get("type")
    role_arn = _shaped(target, "role_arn", ROLE_ARN)
    if kind == "lambda":
        invocation = target.get("invocation_type") or "Event"
        if invocation not in ("Event", "RequestResponse"):
            raise InvalidAwsTarget("invocation_type must be Event or RequestResponse")
        return LambdaView(
            function_arn=_shaped(target, "function_arn", FUNCTION_ARN),
            role_arn=role_arn,
            payload=_text(target, "payload", "{}"),
            invocation_type=invocation,
            timeout_seconds=timeout,
        )
    if kind == "sqs":
        return SqsView(
            queue_url=_queue_url(target),
            role_arn=role_arn,
            body=_text(target, "body", None),
            message_group_id=_optional(target, "message_group_id"),
            timeout_seconds=timeout,
        )
    if kind == "sns":
        return SnsView(
            topic_arn=_shaped(target, "topic_arn", TOPIC_ARN),
            role_arn=role_arn,
            message=_text(target, "message", None),
            subject=_optional(target, "subject"),
            message_group_id=_optional(target, "message_group_id"),
            timeout_seconds=timeout,
        )
    if kind == "eventbridge":
        return EventBridgeView(
            event_bus_arn=_shaped(target, "event_bus_arn", EVENT_BUS_ARN),
            role_arn=role_arn,
            source=_text(target, "source", None),
            detail_type=_text(target, "detail_type", None),
            detail=_text(target, "detail", "{}"),
            timeout_seconds=timeout,
        )
    raise InvalidAwsTarget(f"unknown type {kind!r}")


def sigv4_of(auth: Mapping[str, Any]) -> SigV4View:
    """The view of an HTTP target's ``sigv4`` auth."""
    service = auth.get("service")
    if service not in ("execute-api", "lambda"):
        raise InvalidAwsTarget("sigv4 auth needs service (execute-api or lambda), region and role_arn")
    return SigV4View(
        service=service, region=_shaped(auth, "region", REGION), role_arn=_shaped(auth, "role_arn", ROLE_ARN)
    )


def _shaped(target: Mapping[str, Any], name: str, pattern: Any) -> str:
    value = target.get(name)
    if not isinstance(value, str) or not pattern.match(value):
        raise InvalidAwsTarget(f"{name} is missing or malformed")
    return value


def _queue_url(target: Mapping[str, Any]) -> str:
    value = target.get("queue_url")
    if not isinstance(value, str) or queue_url_region(value) is None:
        raise InvalidAwsTarget("queue_url is missing or malformed")
    return value


def _text(target: Mapping[str, Any], name: str, default: str | None) -> str:
    value = target.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or (default is None and not value):
        raise InvalidAwsTarget(f"{name} must be text")
    return value


def _optional(target: Mapping[str, Any], name: str) -> str | None:
    value = target.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidAwsTarget(f"{name} must be text")
    return value
