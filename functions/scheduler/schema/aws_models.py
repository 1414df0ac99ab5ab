"""The AWS targets of the contract (``lambda``, ``sqs``, ``sns``, ``eventbridge``) and the
``sigv4`` auth of HTTP targets, as pydantic models; :mod:`scheduler.schema.models` puts them into its
target and auth unions.

Write-time checks (each a 400 naming its field): ARNs and queue URLs have the shape AWS gives
them (partition, region, account, resource), the role and the resource are in one partition,
and each payload fits its service's limit once its placeholders are rendered (Lambda 256 KiB
for an ``Event`` invoke and 6 MB for ``RequestResponse``; SQS, SNS and EventBridge 256 KiB,
counting the identity attributes the delivery adds). So do the short fields, in characters with
each placeholder at its longest: an SNS ``subject`` 99, an EventBridge ``source`` 256 and
``detail_type`` 128, a FIFO ``message_group_id`` 128; and a subject or a group id may not hold
a placeholder of a target's free text (``{{cause.error}}``, ``{{cause.response_excerpt}}``),
which may render characters SNS or SQS refuse there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scheduler.core.aws_arns import (
    EVENT_BUS_ARN,
    FUNCTION_ARN,
    REGION,
    ROLE_ARN,
    TOPIC_ARN,
    partition_of,
    partition_of_region,
    queue_url_region,
    region_of,
    sqs_endpoint,
)
from scheduler.core.constants import AWS_SHORT_FIELD_LIMITS
from scheduler.core.json_text import load_strict_json
from scheduler.schema.messages import FieldError, single_line

KIB = 1024
#: Payload limits per service, in bytes.
LAMBDA_EVENT_LIMIT = 256 * KIB
LAMBDA_SYNC_LIMIT = 6 * 1000 * 1000
SQS_LIMIT = 256 * KIB
SNS_LIMIT = 256 * KIB
EVENTBRIDGE_LIMIT = 256 * KIB
#: Bytes the delivery's identity attributes take at most (names, types and values).
IDENTITY_ATTRIBUTES_BYTES = 400
#: The longest text each placeholder renders to (a UUID, an RFC 3339 instant, an attempt; a
#: chained run's cause: a job's name, a status, an answer's excerpt of 4,096 bytes and an error of
#: 500, each escaped for JSON, where a control character takes 6 bytes).
_PLACEHOLDER_WIDTH = {
    "job_id": 36,
    "execution_id": 36,
    "scheduled_at": 32,
    "attempt": 3,
    "cause.execution_id": 36,
    "cause.job_id": 36,
    "cause.job_name": 128,
    "cause.status": 9,
    "cause.http_status": 3,
    "cause.response_excerpt": 6 * 4096,
    "cause.error": 6 * 500,
}
_PLACEHOLDER = re.compile(r"\{\{\s*(job_id|execution_id|scheduled_at|attempt)\s*\}\}")
_SIZED_PLACEHOLDER = re.compile(r"\{\{\s*(" + "|".join(re.escape(name) for name in _PLACEHOLDER_WIDTH) + r")\s*\}\}")
_SAMPLE = {
    "job_id": "00000000-0000-0000-0000-000000000000",
    "execution_id": "00000000-0000-0000-0000-000000000000",
    "scheduled_at": "2026-01-01T00:00:00Z",
    "attempt": "1",
}

_GROUP_ID = re.compile(r"^[\x21-\x7e]{1,128}\Z")
#: Characters of the short AWS fields (checked once rendered, each placeholder at its longest).
GROUP_ID_LIMIT = AWS_SHORT_FIELD_LIMITS["message_group_id"]
SUBJECT_LIMIT = AWS_SHORT_FIELD_LIMITS["subject"]
SOURCE_LIMIT = AWS_SHORT_FIELD_LIMITS["source"]
DETAIL_TYPE_LIMIT = AWS_SHORT_FIELD_LIMITS["detail_type"]
#: The placeholders whose text comes from a target (an answer's excerpt, an error): any
#: character but a line break (escaped), non-ASCII and blanks included, or nothing. Refused in an
#: SNS subject (printable ASCII) and in a FIFO message group id (printable ASCII, no blank); the
#: others render to printable ASCII without blanks (UUIDs, an instant, numbers, a job's name, a
#: status), and only ``cause.http_status`` may render to nothing.
_FREE_TEXT_PLACEHOLDERS = ("cause.response_excerpt", "cause.error")
_MAY_BE_EMPTY = ("cause.http_status",)
_SIGV4_SERVICES = ("execute-api", "lambda")


class AwsFieldError(FieldError):
    """A model-level error naming its field (``validation_details`` keeps the field)."""


def _max_rendered(text: str) -> str:
    return _SIZED_PLACEHOLDER.sub(lambda m: "x" * _PLACEHOLDER_WIDTH[m.group(1)], text)


def body_limit(target: Mapping[str, Any]) -> int | None:
    """The UTF-8 bytes an AWS target's body (``payload``, ``body``, ``message`` or ``detail``)
    may come to once rendered: the service's limit less what the delivery sends beside it (the
    identity attributes; an SNS subject; an event's source, detail-type and bus). One rule for
    the target's own body and a manual run's; None for a target that is not an AWS one."""
    kind = target.get("type")
    if kind == "lambda":
        return LAMBDA_SYNC_LIMIT if target.get("invocation_type") == "RequestResponse" else LAMBDA_EVENT_LIMIT
    if kind == "sqs":
        return SQS_LIMIT - IDENTITY_ATTRIBUTES_BYTES
    if kind == "sns":
        return SNS_LIMIT - IDENTITY_ATTRIBUTES_BYTES - rendered_size(target.get("subject"))
    if kind == "eventbridge":
        beside = (target.get("source"), target.get("detail_type"), target.get("event_bus_arn"))
        return EVENTBRIDGE_LIMIT - rendered_size(*beside)
    return None


def rendered_size(*texts: str | None) -> int:
    """UTF-8 bytes of ``texts`` once their placeholders are rendered, at the longest."""
    return sum(len(_max_rendered(t).encode("utf-8", "surrogatepass")) for t in texts if t)


def longest_rendered(text: str) -> int:
    """Characters of ``text`` once rendered, each placeholder at its longest (or as written, when
    longer: a cause's placeholder outside a chained run is left so)."""
    return len(text) + sum(
        max(0, _PLACEHOLDER_WIDTH[m.group(1)] - len(m.group(0))) for m in _SIZED_PLACEHOLDER.finditer(text)
    )


#: Set while an alert rule's target is validated: an alert renders placeholders of its own (its
#: message, its error: of any length) and fits its short fields once rendered
#: (``core.alerts.render_alert_target``), so they are not held to a job's rendered lengths.
FITTED_AT_RENDER: ContextVar[bool] = ContextVar("fitted_at_render", default=False)


def as_alert_target(handler: Any, value: Any) -> Any:
    """``handler(value)`` (pydantic's validation of a target) as an alert rule's target, whose
    short fields are fitted once rendered (``FITTED_AT_RENDER``)."""
    token = FITTED_AT_RENDER.set(True)
    try:
        return handler(value)
    finally:
        FITTED_AT_RENDER.reset(token)


def _check_rendered_length(field: str, text: str | None, limit: int) -> None:
    """``text`` (a short field: AWS counts characters) within ``limit`` once rendered."""
    if FITTED_AT_RENDER.get():
        return
    if text is not None and (longest := longest_rendered(text)) > limit:
        raise AwsFieldError(
            field,
            f"may be {longest} characters once rendered (each placeholder at its longest: a UUID 36, "
            f"scheduled_at 32, a chained run's cause.job_name 128); at most {limit}",
        )


def _check_no_free_text(field: str, text: str | None, why: str) -> None:
    """No placeholder of a target's free text in ``text`` (see ``_FREE_TEXT_PLACEHOLDERS``)."""
    if FITTED_AT_RENDER.get():
        return
    found = next((m for m in _SIZED_PLACEHOLDER.finditer(text or "") if m.group(1) in _FREE_TEXT_PLACEHOLDERS), None)
    if found is not None:
        raise AwsFieldError(field, f"may not hold {found.group(0)}: it may render {why}")


def _sample_rendered(text: str) -> str:
    return _PLACEHOLDER.sub(lambda m: _SAMPLE[m.group(1)], text)


def _check_size(field: str, target: Any, text: str) -> None:
    """``text``, the body of the model ``target``, within its :func:`body_limit`."""
    limit = body_limit(vars(target))
    size = rendered_size(text)
    if limit is not None and size > limit:
        raise AwsFieldError(
            field, f"is {size} bytes once rendered; at most {limit} fit beside what the delivery sends with it"
        )


def _check_json(field: str, text: str, *, object_only: bool = False) -> None:
    try:
        value = load_strict_json(_sample_rendered(text))
    except ValueError:
        raise AwsFieldError(field, "must be JSON (once its placeholders are rendered)") from None
    if object_only and not isinstance(value, dict):
        raise AwsFieldError(field, "must be a JSON object")


# The characters an SQS message may hold (SendMessage refuses any other): tab, line feed,
# carriage return, and U+0020 to U+10FFFF less the surrogates, U+FFFE and U+FFFF.
_SQS_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_character_problem(text: str) -> str | None:
    """Why SQS would refuse ``text`` as a message body (a character it does not take), or None."""
    bad = _SQS_FORBIDDEN.search(text)
    return f"holds U+{ord(bad.group()):04X}, which SQS does not take in a message" if bad else None


def _shape(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.fullmatch(value):  # not .match: "$" would let a final line break through
        raise ValueError(f"is not {what}")
    return value


class _AwsStrict(BaseModel):
    # Strict as the other target models: no "30" or true for a number.
    model_config = ConfigDict(extra="forbid", strict=True, str_max_length=LAMBDA_SYNC_LIMIT)


class _RoleTarget(_AwsStrict):
    role_arn: str = Field(min_length=1, max_length=2048)
    timeout_seconds: int = Field(default=30, ge=1, le=900)

    @field_validator("role_arn")
    @classmethod
    def _role(cls, v: str) -> str:
        return _shape(ROLE_ARN, v, "an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")

    def _same_partition(self, field: str, resource_partition: str) -> None:
        if partition_of(self.role_arn) != resource_partition:
            raise AwsFieldError(
                field, f"is in partition {resource_partition!r} but role_arn is in {partition_of(self.role_arn)!r}"
            )


class LambdaTarget(_RoleTarget):
    """An invoke of a Lambda function (``Event``: asynchronous; ``RequestResponse``: waits for
    the function's answer, whose excerpt is kept)."""

    type: Literal["lambda"]
    function_arn: str = Field(min_length=1, max_length=2048)
    payload: str = Field(default="{}", max_length=LAMBDA_SYNC_LIMIT)
    invocation_type: Literal["Event", "RequestResponse"] = "Event"

    @field_validator("function_arn")
    @classmethod
    def _arn(cls, v: str) -> str:
        return _shape(
            FUNCTION_ARN,
            v,
            "a Lambda function ARN (arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>])",
        )

    @model_validator(mode="after")
    def _payload(self) -> LambdaTarget:
        self._same_partition("function_arn", partition_of(self.function_arn))
        _check_json("payload", self.payload)
        _check_size("payload", self, self.payload)
        return self


class SqsTarget(_RoleTarget):
    """A message sent to an SQS queue (``message_group_id`` is required for a FIFO queue)."""

    type: Literal["sqs"]
    queue_url: str = Field(min_length=1, max_length=2048)
    body: str = Field(min_length=1, max_length=SQS_LIMIT)
    message_group_id: str | None = Field(default=None, min_length=1, max_length=GROUP_ID_LIMIT)

    @field_validator("queue_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if queue_url_region(v) is None:
            endpoint = sqs_endpoint()
            also = f", or {endpoint.rstrip('/')}/<account>/<queue> of the configured endpoint" if endpoint else ""
            raise ValueError(f"is not an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<queue>{also})")
        return v

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        if problem := sqs_character_problem(v):
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _fifo(self) -> SqsTarget:
        self._same_partition("queue_url", partition_of_region(region_of(self.queue_url)))
        _check_group(self.queue_url.endswith(".fifo"), self.message_group_id, "queue")
        _check_size("body", self, self.body)
        return self


class SnsTarget(_RoleTarget):
    """A message published to an SNS topic (``message_group_id`` is required for a FIFO topic)."""

    type: Literal["sns"]
    topic_arn: str = Field(min_length=1, max_length=2048)
    message: str = Field(min_length=1, max_length=SNS_LIMIT)
    subject: str | None = Field(default=None, min_length=1, max_length=SUBJECT_LIMIT)
    message_group_id: str | None = Field(default=None, min_length=1, max_length=GROUP_ID_LIMIT)

    @field_validator("topic_arn")
    @classmethod
    def _arn(cls, v: str) -> str:
        return _shape(TOPIC_ARN, v, "an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<topic>)")

    @field_validator("subject")
    @classmethod
    def _subject(cls, v: str | None) -> str | None:
        if v is not None and not all(" " <= ch <= "~" for ch in v):
            raise ValueError("must be printable ASCII on one line")
        return v

    @model_validator(mode="after")
    def _checks(self) -> SnsTarget:
        self._same_partition("topic_arn", partition_of(self.topic_arn))
        _check_no_free_text("subject", self.subject, "characters SNS does not take in a subject (printable ASCII only)")
        _check_rendered_length("subject", self.subject, SUBJECT_LIMIT)
        _check_group(self.topic_arn.endswith(".fifo"), self.message_group_id, "topic")
        _check_size("message", self, self.message)
        return self


class EventBridgeTarget(_RoleTarget):
    """An event put on an EventBridge bus (``detail`` is a JSON object)."""

    type: Literal["eventbridge"]
    event_bus_arn: str = Field(min_length=1, max_length=2048)
    source: str = Field(min_length=1, max_length=SOURCE_LIMIT)
    detail_type: str = Field(min_length=1, max_length=DETAIL_TYPE_LIMIT)
    detail: str = Field(default="{}", max_length=EVENTBRIDGE_LIMIT)

    @field_validator("event_bus_arn")
    @classmethod
    def _arn(cls, v: str) -> str:
        return _shape(EVENT_BUS_ARN, v, "an event bus ARN (arn:<partition>:events:<region>:<account>:event-bus/<name>)")

    @field_validator("source", "detail_type")
    @classmethod
    def _one_line(cls, v: str) -> str:
        return single_line(v)

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if v.lower().startswith("aws."):
            raise ValueError("must not start with 'aws.' (reserved for AWS services)")
        return v

    @model_validator(mode="after")
    def _checks(self) -> EventBridgeTarget:
        self._same_partition("event_bus_arn", partition_of(self.event_bus_arn))
        _check_rendered_length("source", self.source, SOURCE_LIMIT)
        _check_rendered_length("detail_type", self.detail_type, DETAIL_TYPE_LIMIT)
        _check_json("detail", self.detail, object_only=True)
        _check_size("detail", self, self.detail)
        return self


class SigV4Auth(_AwsStrict):
    """Sign an HTTP target's request with SigV4, as the role ``role_arn`` (assumed with the job
    owner as ``ExternalId``): API Gateway with IAM auth, Lambda function URLs."""

    type: Literal["sigv4"]
    service: Literal["execute-api", "lambda"]
    region: str = Field(min_length=1, max_length=32)
    role_arn: str = Field(min_length=1, max_length=2048)

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        return _shape(REGION, v, "an AWS region name (such as eu-west-1)")

    @field_validator("role_arn")
    @classmethod
    def _role(cls, v: str) -> str:
        return _shape(ROLE_ARN, v, "an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")


def _check_group(fifo: bool, group: str | None, what: str) -> None:
    if fifo and group is None:
        raise AwsFieldError("message_group_id", f"is required for a FIFO {what}")
    if not fifo and group is not None:
        raise AwsFieldError("message_group_id", f"is only for a FIFO {what} (a name ending in .fifo)")
    if group is None:
        return
    _check_no_free_text("message_group_id", group, "blanks or characters a group id may not hold, or nothing")
    if not _GROUP_ID.fullmatch(_sample_rendered(group)):
        raise AwsFieldError("message_group_id", "must be 1 to 128 printable ASCII characters without blanks")
    _check_rendered_length("message_group_id", group, GROUP_ID_LIMIT)
    shortest = _SIZED_PLACEHOLDER.sub(lambda m: "" if m.group(1) in _MAY_BE_EMPTY else "x", group)
    if not shortest:
        raise AwsFieldError("message_group_id", "may render to nothing (an empty cause.http_status)")


#: The ``type`` of each AWS target.
AWS_TARGET_TYPES = ("lambda", "sqs", "sns", "eventbridge")
