"""AWS targets at write time (shapes, partitions, sizes, FIFO rules) and the classification of
AWS errors."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from pydantic import ValidationError

from scheduler.schema.aws_models import LAMBDA_EVENT_LIMIT, SQS_LIMIT, body_limit, region_of, rendered_size
from scheduler.schema.models import JobSpec, validation_details
from scheduler.targets.aws import classify

ROLE = "arn:aws:iam::123456789012:role/path/scheduler-target"
FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:worker"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/work"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:news"
BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/default"


def errors(target: dict) -> list[dict[str, str]]:
    try:
        JobSpec.model_validate({"name": "j", "schedule": "@hourly", "target": target})
    except ValidationError as exc:
        return validation_details(exc)
    return []


VALID = [
    {"type": "lambda", "role_arn": ROLE, "function_arn": FUNCTION},
    {
        "type": "lambda",
        "role_arn": ROLE,
        "function_arn": FUNCTION + ":live",
        "invocation_type": "RequestResponse",
        "payload": '{"try": {{attempt}}, "job": "{{job_id}}"}',
    },
    {"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "body": "hello {{job_id}}"},
    {"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE + ".fifo", "body": "x", "message_group_id": "g-{{job_id}}"},
    {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC, "message": "m", "subject": "Nightly run"},
    {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC + ".fifo", "message": "m", "message_group_id": "g"},
    {
        "type": "eventbridge",
        "role_arn": ROLE,
        "event_bus_arn": BUS,
        "source": "my.app",
        "detail_type": "Tick",
        "detail": '{"at": "{{scheduled_at}}"}',
    },
    {
        "type": "http",
        "url": "https://abc.execute-api.eu-west-1.amazonaws.com/prod/run",
        "auth": {"type": "sigv4", "service": "execute-api", "region": "eu-west-1", "role_arn": ROLE},
    },
    {
        "type": "sqs",
        "role_arn": "arn:aws-cn:iam::123456789012:role/r",
        "queue_url": "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
        "body": "x",
    },
]


@pytest.mark.parametrize("target", VALID, ids=lambda t: t["type"])
def test_valid_aws_targets(target):
    assert errors(target) == []


@pytest.mark.parametrize(
    "target, field, fragment",
    [
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": "arn:aws:lambda:eu-west-1:1234:function:f"},
            "target.function_arn",
            "Lambda function ARN",
        ),
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": "arn:aws:sqs:eu-west-1:123456789012:function:f"},
            "target.function_arn",
            "Lambda function ARN",
        ),
        (
            {"type": "lambda", "role_arn": "arn:aws:iam::123456789012:user/bob", "function_arn": FUNCTION},
            "target.role_arn",
            "IAM role ARN",
        ),
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": FUNCTION, "payload": "not json"},
            "target.payload",
            "JSON",
        ),
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": FUNCTION, "invocation_type": "DryRun"},
            "target.invocation_type",
            "",
        ),
        (
            {"type": "lambda", "role_arn": "arn:aws-cn:iam::123456789012:role/r", "function_arn": FUNCTION},
            "target.function_arn",
            "partition",
        ),
        (
            {"type": "sqs", "role_arn": ROLE, "queue_url": "https://evil.example.com/123456789012/q", "body": "x"},
            "target.queue_url",
            "SQS queue URL",
        ),
        (
            {"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE + ".fifo", "body": "x"},
            "target.message_group_id",
            "required for a FIFO queue",
        ),
        (
            {"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "body": "x", "message_group_id": "g"},
            "target.message_group_id",
            "only for a FIFO queue",
        ),
        ({"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "body": "x" * SQS_LIMIT}, "target.body", "at most"),
        (
            {"type": "sns", "role_arn": ROLE, "topic_arn": "arn:aws:sns:eu-west-1:123456789012:", "message": "m"},
            "target.topic_arn",
            "SNS topic ARN",
        ),
        (
            {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC, "message": "m", "subject": "two\nlines"},
            "target.subject",
            "one line",
        ),
        (
            {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC + ".fifo", "message": "m"},
            "target.message_group_id",
            "FIFO topic",
        ),
        (
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": "arn:aws:events:eu-west-1:123456789012:rule/x",
                "source": "a",
                "detail_type": "b",
            },
            "target.event_bus_arn",
            "event bus ARN",
        ),
        (
            {"type": "eventbridge", "role_arn": ROLE, "event_bus_arn": BUS, "source": "aws.ec2", "detail_type": "b"},
            "target.source",
            "aws.",
        ),
        (
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": BUS,
                "source": "a",
                "detail_type": "b",
                "detail": "[1, 2]",
            },
            "target.detail",
            "JSON object",
        ),
        (
            {
                "type": "http",
                "url": "https://example.com/",
                "auth": {"type": "sigv4", "service": "s3", "region": "eu-west-1", "role_arn": ROLE},
            },
            "target.auth.service",
            "",
        ),
        (
            {
                "type": "http",
                "url": "https://example.com/",
                "auth": {"type": "sigv4", "service": "lambda", "region": "Europe", "role_arn": ROLE},
            },
            "target.auth.region",
            "region",
        ),
        ({"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE}, "target.body", "required"),
    ],
)
def test_invalid_aws_targets_name_the_field(target, field, fragment):
    found = errors(target)
    assert [d["field"] for d in found] == [field], found
    assert fragment in found[0]["message"]


def test_lambda_payload_limits_follow_the_invocation_type():
    big = '"' + "x" * LAMBDA_EVENT_LIMIT + '"'
    event = {"type": "lambda", "role_arn": ROLE, "function_arn": FUNCTION, "payload": big}
    assert [d["field"] for d in errors(event)] == ["target.payload"]
    assert errors({**event, "invocation_type": "RequestResponse"}) == []


def test_size_counts_placeholders_at_their_longest():
    assert rendered_size("{{job_id}}") == 36 and rendered_size("{{ attempt }}") == 3
    assert rendered_size("é") == 2


def test_region_of_resources():
    assert region_of(QUEUE) == "eu-west-1" and region_of(TOPIC) == "eu-west-1"
    assert region_of("https://us-west-2.queue.amazonaws.com/123456789012/q") == "us-west-2"


def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "text"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "SendMessage"
    )


@pytest.mark.parametrize(
    "code, status, retryable",
    [
        ("ThrottlingException", 400, True),
        ("TooManyRequestsException", 429, True),
        ("AWS.SimpleQueueService.RequestThrottled", 403, True),
        ("InternalError", 500, True),
        ("SomethingNew", 503, True),
        ("AccessDenied", 403, False),
        ("AccessDeniedException", 403, False),
        ("ResourceNotFoundException", 404, False),
        ("AWS.SimpleQueueService.NonExistentQueue", 400, False),
        ("RequestEntityTooLargeException", 413, False),
        ("InvalidParameterValue", 400, False),
    ],
)
def test_classification_of_aws_errors(code, status, retryable):
    result = classify(_client_error(code, status), "sqs SendMessage", 5)
    assert result.status == "failed" and result.retryable is retryable
    assert result.error == f"sqs SendMessage: {code}: text" and result.http_status == status


def test_network_errors_are_transient_and_timeouts_timed_out():
    assert classify(EndpointConnectionError(endpoint_url="https://x"), "sns Publish", 5).retryable
    timeout = classify(ReadTimeoutError(endpoint_url="https://x"), "sns Publish", 5)
    assert timeout.status == "timed_out" and timeout.retryable


@pytest.mark.parametrize(
    "target, field",
    [
        ({"type": "sqs", "role_arn": ROLE + "\n", "queue_url": QUEUE}, "target.role_arn"),
        ({"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE + "\n"}, "target.queue_url"),
        ({"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC + "\n", "message": "m"}, "target.topic_arn"),
        ({"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "timeout_seconds": "30"}, "target.timeout_seconds"),
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": FUNCTION, "timeout_seconds": True},
            "target.timeout_seconds",
        ),
    ],
)
def test_a_final_line_break_or_a_coerced_type_is_refused_at_its_field(target, field):
    """ARNs and URLs match whole (a regex "$" also matches before a final newline), and the AWS
    target models are strict like the others: no "30" or true for a number."""
    assert field in {error["field"] for error in errors(target)}


def test_queue_urls_of_a_configured_endpoint_are_queue_urls(monkeypatch):
    from scheduler.core.aws_arns import queue_url_region

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    localstack_forms = [
        "http://127.0.0.1:4566/000000000000/q",
        "http://sqs.eu-west-1.localhost.localstack.cloud:4566/000000000000/q.fifo",
        "http://localhost.localstack.cloud:4566/000000000000/q",
    ]
    # In AWS (no endpoint configured) only SQS's own URLs are queue URLs.
    assert [queue_url_region(url) for url in localstack_forms] == [None, None, None]
    assert queue_url_region("https://sqs.eu-west-1.amazonaws.com/123456789012/q") == "eu-west-1"

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    assert [queue_url_region(url) for url in localstack_forms] == ["us-east-2", "eu-west-1", "us-east-2"]
    assert region_of(localstack_forms[1]) == "eu-west-1"
    for other in (
        "http://127.0.0.1:4567/000000000000/q",  # another port: another service
        "http://10.0.0.1:4566/000000000000/q",  # another host
        "http://127.0.0.1:4566/000000000000/q?x=1",
        "http://127.0.0.1:4566/0000/q",
        "http://u:p@127.0.0.1:4566/000000000000/q",
        "http://127.0.0.1:4566/000000000000/q\n",
        "http://sqs.eu-west-1.localhost.localstack.cloud.evil.com:4566/000000000000/q",
    ):
        assert queue_url_region(other) is None, other
    # moto answers its own address; AWS_ENDPOINT_URL_SQS wins over AWS_ENDPOINT_URL.
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:5000")
    assert queue_url_region("http://127.0.0.1:5000/123456789012/q") == "us-east-2"
    assert queue_url_region(localstack_forms[0]) is None


def test_an_sqs_target_takes_the_endpoint_s_queue_urls_and_names_them_when_refused(monkeypatch):
    from scheduler.schema.aws_models import SqsTarget

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    target = {"type": "sqs", "body": "x", "role_arn": "arn:aws:iam::000000000000:role/r"}
    SqsTarget.model_validate({**target, "queue_url": "http://127.0.0.1:4566/000000000000/q"})
    with pytest.raises(ValueError, match=r"http://127.0.0.1:4566/<account>/<queue> of the configured endpoint"):
        SqsTarget.model_validate({**target, "queue_url": "http://127.0.0.1:9/000000000000/q"})


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (VALID[0], "payload"),
        (VALID[1], "payload"),
        (VALID[2], "body"),
        (VALID[4], "message"),
        (VALID[6], "detail"),
    ],
)
def test_a_targets_body_is_held_to_body_limit_exactly(target, field):
    """One rule for a target's own body and a manual run's (``body_limit``): a body of exactly
    the limit is accepted by the target's model, a byte more refused. The manual run's check
    had its own table, which left out an SNS subject and counted attributes an event lacks."""
    limit = body_limit(target)
    assert limit is not None

    def body(size: int) -> str:  # JSON where the field must be JSON
        return '{"k": "' + "a" * (size - 9) + '"}' if field in ("payload", "detail") else "a" * size

    assert rendered_size(body(limit)) == limit
    assert errors({**target, field: body(limit)}) == []
    assert [e["field"] for e in errors({**target, field: body(limit + 1)})] == [f"target.{field}"]


# -------------------------------------------- short fields, as rendered (placeholders at their longest)

UUID = "{{execution_id}}"  # 16 characters written, 36 rendered


@pytest.mark.parametrize(
    ("target", "field", "fragment"),
    [
        (
            {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC, "message": "m", "subject": "s" * 83 + UUID},
            "target.subject",
            "may be 119 characters once rendered",
        ),
        (
            {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC, "message": "m", "subject": "Failed: {{cause.error}}"},
            "target.subject",
            "may not hold {{cause.error}}",
        ),
        (
            {
                "type": "sns",
                "role_arn": ROLE,
                "topic_arn": TOPIC,
                "message": "m",
                "subject": "{{ cause.response_excerpt }}",
            },
            "target.subject",
            "may not hold {{ cause.response_excerpt }}",
        ),
        (
            {"type": "eventbridge", "role_arn": ROLE, "event_bus_arn": BUS, "source": "s" * 240 + "{{job_id}}"},
            "target.source",
            "may be 276 characters once rendered",
        ),
        (
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": BUS,
                "source": "s",
                "detail_type": "t" * 112 + UUID,
            },
            "target.detail_type",
            "at most 128",
        ),
        (
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": BUS,
                "source": "s",
                "detail_type": "{{cause.error}}",
            },
            "target.detail_type",
            "at most 128",
        ),
        (
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": QUEUE + ".fifo",
                "body": "b",
                "message_group_id": "g" * 100 + "{{cause.job_name}}",
            },
            "target.message_group_id",
            "at most 128",
        ),
        (
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": QUEUE + ".fifo",
                "body": "b",
                "message_group_id": "{{cause.error}}",
            },
            "target.message_group_id",
            "may not hold {{cause.error}}",
        ),
        (
            {
                "type": "sns",
                "role_arn": ROLE,
                "topic_arn": TOPIC + ".fifo",
                "message": "m",
                "message_group_id": "g-{{cause.response_excerpt}}",
            },
            "target.message_group_id",
            "may not hold {{cause.response_excerpt}}",
        ),
        (
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": QUEUE + ".fifo",
                "body": "b",
                "message_group_id": "{{cause.http_status}}",
            },
            "target.message_group_id",
            "nothing",
        ),
    ],
)
def test_short_fields_are_held_to_their_limit_as_rendered(target, field, fragment):
    if target["type"] == "eventbridge":
        target = {"detail_type": "t", **target}
    found = errors(target)
    assert [d["field"] for d in found] == [field], found
    assert fragment in found[0]["message"], found


@pytest.mark.parametrize(
    "target",
    [
        {"type": "sns", "role_arn": ROLE, "topic_arn": TOPIC, "message": "m", "subject": "s" * 63 + UUID},
        {
            "type": "sns",
            "role_arn": ROLE,
            "topic_arn": TOPIC,
            "message": "m",
            "subject": "Run {{cause.status}} ({{cause.http_status}})",
        },
        {
            "type": "eventbridge",
            "role_arn": ROLE,
            "event_bus_arn": BUS,
            "source": "s" * 220 + "{{job_id}}",
            "detail_type": "t" * 92 + UUID,
        },
        {
            "type": "sqs",
            "role_arn": ROLE,
            "queue_url": QUEUE + ".fifo",
            "body": "b",
            "message_group_id": "g" * 92 + UUID,
        },
        {
            "type": "sqs",
            "role_arn": ROLE,
            "queue_url": QUEUE + ".fifo",
            "body": "b",
            "message_group_id": "{{cause.job_id}}-{{cause.status}}-{{cause.http_status}}-{{attempt}}",
        },
    ],
)
def test_short_fields_at_their_limit_as_rendered_are_accepted(target):
    assert errors(target) == []
