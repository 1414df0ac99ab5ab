"""AWS targets through the API: created and answered as given, bad shapes a 400 naming the field."""

from __future__ import annotations

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
    ],
)
def test_bad_aws_target_is_a_400_naming_the_field(api, target, field):
    answer = api("POST", "/v1/jobs", job_body("bad", target=target), principal=ALICE)
    assert answer.status == 400 and field in answer.fields, answer.body
