"""`scheduler local` against moto's server: an SQS job created over the API is delivered through
AWS_ENDPOINT_URL, as the role assumed for the local principal."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from tests.support import LocalScheduler, moto_server

ACCOUNT = "123456789012"


@pytest.fixture
def moto(monkeypatch):
    with moto_server() as url:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        yield url


def test_local_mode_delivers_an_sqs_job_to_moto(moto, db_url, tmp_path):
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="local-jobs")["QueueUrl"]
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    try:
        run_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        job = scheduler.post(
            "/v1/jobs",
            {
                "name": "to-sqs",
                "run_at": run_at,
                "target": {
                    "type": "sqs",
                    "role_arn": f"arn:aws:iam::{ACCOUNT}:role/local-target",
                    "queue_url": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/local-jobs",
                    "body": "{{job_id}}",
                },
            },
        )
        deadline = time.monotonic() + 30
        messages: list = []
        while not messages and time.monotonic() < deadline:
            messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1, MessageAttributeNames=["All"]).get(
                "Messages", []
            )
        assert messages, "".join(scheduler.lines)
        assert messages[0]["Body"] == job["id"]
        assert messages[0]["MessageAttributes"]["X-Scheduler-Job-Id"]["StringValue"] == job["id"]
        while True:  # the outcome is recorded just after the delivery
            [execution] = scheduler.get(f"/v1/jobs/{job['id']}/executions")["executions"]
            if execution["status"] != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert execution["status"] == "succeeded" and json.loads(execution["response_excerpt"])["MessageId"]
    finally:
        assert scheduler.stop() == 0
