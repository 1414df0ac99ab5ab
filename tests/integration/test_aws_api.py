"""AWS targets through the API: created and answered as given, bad shapes a 400 naming the field."""

from __future__ import annotations

import json

import pytest

from scheduler.api.app import make_app
from scheduler.secrets import LocalSecretBox
from scheduler.settings import Settings
from tests.integration.test_api import ALICE, Client, job_body

ROLE = "arn:aws:iam::123456789012:role/scheduler-target"


@pytest.fixture
def api(store, tmp_path):
    box = LocalSecretBox(tmp_path / "secret.key")
    return Client(make_app(lambda: store, lambda: box, Settings()).resolve)


def test_sqs_job_is_created_and_answered(api):
    target = {
        "type": "sqs",
        "role_arn": ROLE,
        "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo",
        "body": "{{job_id}}",
        "message_group_id": "g",
    }
    answer = api("POST", "/v1/jobs", job_body("sqs", target=target), principal=ALICE)
    assert answer.status == 201, answer.body
    got = api("GET", f"/v1/jobs/{answer.body['id']}", principal=ALICE)
    assert {k: got.body["target"][k] for k in target} == target


def test_sigv4_http_job_round_trips(api):
    auth = {"type": "sigv4", "service": "lambda", "region": "eu-west-1", "role_arn": ROLE}
    target = {"type": "http", "url": "https://abc.lambda-url.eu-west-1.on.aws/", "auth": auth}
    answer = api("POST", "/v1/jobs", job_body("signed", target=target), principal=ALICE)
    assert answer.status == 201, answer.body
    assert answer.body["target"]["auth"] == auth


@pytest.mark.parametrize(
    "target, field",
    [
        (
            {"type": "lambda", "role_arn": ROLE, "function_arn": "arn:aws:lambda:eu-west-1:1:function:f"},
            "target.function_arn",
        ),
        (
            {
                "type": "sns",
                "role_arn": "arn:aws:iam::123456789012:root",
                "topic_arn": "arn:aws:sns:eu-west-1:123456789012:t",
                "message": "m",
            },
            "target.role_arn",
        ),
        (
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/b",
                "source": "s",
                "detail_type": "d",
                "detail": "x" * (300 * 1024),
            },
            "target.detail",
        ),
        (
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo",
                "body": "b",
            },
            "target.message_group_id",
        ),
        (  # 100 characters as written, 120 once {{execution_id}} is rendered
            {
                "type": "sns",
                "role_arn": ROLE,
                "topic_arn": "arn:aws:sns:eu-west-1:123456789012:t",
                "message": "m",
                "subject": "s" * 84 + "{{execution_id}}",
            },
            "target.subject",
        ),
        (  # may render blanks and characters a group id may not hold
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo",
                "body": "b",
                "message_group_id": "{{cause.error}}",
            },
            "target.message_group_id",
        ),
    ],
)
def test_bad_aws_target_is_a_400_naming_the_field(api, target, field):
    answer = api("POST", "/v1/jobs", job_body("bad", target=target), principal=ALICE)
    assert answer.status == 400 and field in answer.fields, answer.body


# -- a deployment whose executor cannot reach AWS (nat_gateways=0) ---------------------------------

QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/q"
AWS_TARGETS = [
    {"type": "lambda", "role_arn": ROLE, "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"},
    {"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "body": "b"},
    {"type": "sns", "role_arn": ROLE, "topic_arn": "arn:aws:sns:eu-west-1:123456789012:t", "message": "m"},
    {
        "type": "eventbridge",
        "role_arn": ROLE,
        "event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/b",
        "source": "s",
        "detail_type": "d",
        "detail": "{}",
    },
]
SIGV4_HTTP = {
    "type": "http",
    "url": "https://abc.lambda-url.eu-west-1.on.aws/",
    "auth": {"type": "sigv4", "service": "lambda", "region": "eu-west-1", "role_arn": ROLE},
}


@pytest.fixture
def api_without_aws(store, tmp_path):
    """The API of a deployment without a route to AWS (SCHEDULER_AWS_TARGETS=false)."""
    box = LocalSecretBox(tmp_path / "secret.key")
    settings = Settings.from_env({"SCHEDULER_AWS_TARGETS": "false"})
    assert settings.aws_targets is False and Settings.from_env({}).aws_targets is True
    return Client(make_app(lambda: store, lambda: box, settings).resolve)


@pytest.mark.parametrize("target", AWS_TARGETS, ids=lambda t: t["type"])
def test_without_a_route_to_aws_an_aws_target_is_a_400_at_write_time(api_without_aws, api, target):
    answer = api_without_aws("POST", "/v1/jobs", job_body("aws", target=target), principal=ALICE)
    assert answer.status == 400 and answer.fields == ["target.type"], answer.body
    assert "no route to AWS" in answer.error["message"] + json.dumps(answer.error["details"])
    assert api_without_aws("GET", "/v1/jobs", principal=ALICE).body["jobs"] == []
    # ... which a deployment with a route out accepts.
    assert api("POST", "/v1/jobs", job_body("aws", target=target), principal=ALICE).status == 201


def test_without_a_route_to_aws_a_sigv4_target_is_a_400_and_plain_targets_pass(api_without_aws):
    answer = api_without_aws("POST", "/v1/jobs", job_body("signed", target=SIGV4_HTTP), principal=ALICE)
    assert answer.status == 400 and answer.fields == ["target.auth.type"], answer.body
    plain = api_without_aws("POST", "/v1/jobs", job_body("plain"), principal=ALICE)
    assert plain.status == 201, plain.body
    job = f"/v1/jobs/{plain.body['id']}"
    # Neither a replacement nor a merge patch turns a job into one the executor cannot deliver.
    replaced = api_without_aws("PUT", job, job_body("plain", target=AWS_TARGETS[1]), principal=ALICE)
    assert replaced.status == 400 and replaced.fields == ["target.type"], replaced.body
    to_sigv4 = {"auth": {**SIGV4_HTTP["auth"], "username": None, "password": None}}  # a merge patch
    patched = api_without_aws("PATCH", job, {"target": to_sigv4}, principal=ALICE)
    assert patched.status == 400 and patched.fields == ["target.auth.type"], patched.body
    assert api_without_aws("GET", job, principal=ALICE).body["target"]["type"] == "http"


def test_an_alert_s_aws_target_is_not_held_to_a_job_s_rendered_lengths(api):
    """An alert renders placeholders of its own (its message, its error) and fits its short
    fields once rendered, so a subject or detail-type that a job's placeholders would render too
    long is a job target's 400 only: an alert rule (of a job, or of a rule set) takes it."""
    topic = "arn:aws:sns:eu-west-1:123456789012:alerts"
    long_subject = "Failure of {{job_id}} at {{scheduled_at}} attempt {{attempt}} {{execution_id}}"
    sns = {"type": "sns", "role_arn": ROLE, "topic_arn": topic, "message": "{{message}}", "subject": long_subject}
    assert api("POST", "/v1/jobs", job_body("sns-job", target=sns)).fields == ["target.subject"]
    answer = api("POST", "/v1/jobs", job_body("alerting", alerts=[{"on": "failure", "target": sns}]))
    assert answer.status == 201, answer.body
    answer = api("PUT", "/v1/alert-rules/ops", {"tag": "ops", "alerts": [{"on": "failure", "target": sns}]})
    assert answer.status in (200, 201), answer.body
    # The rest of a target's rules hold for an alert's too.
    bad = {**sns, "topic_arn": "not-an-arn"}
    answer = api("POST", "/v1/jobs", job_body("alerting-bad", alerts=[{"on": "failure", "target": bad}]))
    assert answer.status == 400 and answer.fields == ["alerts.0.target.topic_arn"], answer.body
