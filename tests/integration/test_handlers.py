"""The fan-out and executor Lambda handlers, end to end on real Postgres and a loopback target:
the handler modules are imported as Lambda would (settings from the environment)."""

from __future__ import annotations

import importlib
import io
import json
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber

from scheduler import service
from scheduler.core import constants as c
from scheduler.runner.executor import invoke_claims
from scheduler.secrets import LocalSecretBox, encrypt_target_secrets
from scheduler.settings import get_settings
from tests.support import http_spec

OWNER = "arn:aws:iam::111111111111:user/alice"


@dataclass
class FakeContext:
    """The parts of a Lambda context the handlers and Powertools read."""

    remaining_ms: int = 30_000
    function_name: str = "test"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:111111111111:function:test"
    aws_request_id: str = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def lambda_env(monkeypatch, db_url, tmp_path):
    key_file = tmp_path / "secret.key"
    for key, value in {
        c.ENV_DATABASE_URL: db_url,
        c.ENV_ALLOW_PRIVATE_TARGETS: "true",
        c.ENV_LOCAL_KEY_FILE: str(key_file),
        c.ENV_EXECUTOR_FUNCTION: "executor",
        c.ENV_PRECISION: "minute",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    yield LocalSecretBox(str(key_file))
    get_settings.cache_clear()


def load(module: str):
    sys.modules.pop(module, None)
    return importlib.import_module(module)


def test_fanout_invokes_the_executor_which_delivers(lambda_env, store, target_server, capsys):
    box = lambda_env
    target = {
        **http_spec("x")["target"],
        "url": target_server.url + "/h",
        "auth": {"type": "bearer", "token": "s3cret-token"},
    }
    job = service.create_job(
        store,
        OWNER,
        http_spec("h", None, run_at=store.now() - timedelta(seconds=1), target=encrypt_target_secrets(target, box)),
    )
    fanout = load("fanout_handler")
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_response(
        "invoke",
        {"StatusCode": 202, "Payload": io.BytesIO(b"")},
        {"FunctionName": "executor", "InvocationType": "Event", "Payload": ANY},
    )
    fanout.deps.lambda_client = client
    try:
        with stubber:
            report = fanout.handler({"source": "aws.events"}, FakeContext())
        assert report["claimed"] == 1 and report["dispatched"] == 1
        stubber.assert_no_pending_responses()
    finally:
        fanout.deps.pool.close()
    [claim_row] = store.list_jobs(OWNER)
    event = {"job_id": str(job.id), "lock_token": str(claim_row.lock_token)}
    executor = load("executor_handler")
    try:
        answer = executor.handler(event, FakeContext())
    finally:
        executor.deps.pool.close()
    assert answer["outcome"] == "completed" and answer["status"] == "succeeded"
    [request] = target_server.wait_for(1)
    assert request["headers"]["Authorization"] == "Bearer s3cret-token"
    [execution] = store.list_executions(OWNER, str(job.id))
    assert execution.status == "succeeded"
    logs = capsys.readouterr()
    assert "s3cret-token" not in logs.out + logs.err
    assert "s3cret-token" not in str(store.get_job(OWNER, str(job.id)).target)


class RecordingLambda:
    """A Lambda client accepting every async invoke, keeping the executor's events."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.lock = threading.Lock()

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict:
        with self.lock:
            self.events.append(json.loads(Payload))
        return {"StatusCode": 202, "Payload": io.BytesIO(b"")}


def test_fanout_handler_sends_a_backlog_in_groups_of_claims(lambda_env, pool, monkeypatch):
    from tests.support import insert_due_jobs

    monkeypatch.setenv(c.ENV_CLAIMS_PER_INVOKE, "5")
    get_settings.cache_clear()
    insert_due_jobs(pool, 200)
    fanout = load("fanout_handler")
    fanout.deps.lambda_client = client = RecordingLambda()
    try:
        report = fanout.handler({"source": "aws.events"}, FakeContext())
    finally:
        fanout.deps.pool.close()
    assert report["dispatched"] == 200
    carried = [len(invoke_claims(event)) for event in client.events]
    # Claims of 100 over 16 invoking threads: groups of up to 5 (the setting), each job once.
    assert sum(carried) == 200 and max(carried) == 5
    assert len({e["job_id"] for event in client.events for e in invoke_claims(event)}) == 200


def test_fanout_handler_primary_starts_helpers_and_a_helper_drains_without_growing(lambda_env, pool, monkeypatch):
    from scheduler.runner.growth import FANOUT_DISPATCH_RATE, GROWTH_WINDOW_SECONDS
    from tests.support import insert_due_jobs

    monkeypatch.setenv(c.ENV_FANOUT_FUNCTION, "Stack-fanout")
    monkeypatch.setenv(c.ENV_MAX_FANOUTS, "2")
    monkeypatch.setenv(c.ENV_CLAIMS_PER_INVOKE, "1")  # an invoke per job, one stubbed answer each
    get_settings.cache_clear()
    backlog = int(FANOUT_DISPATCH_RATE * GROWTH_WINDOW_SECONDS) + 1  # one helper's worth more than one
    insert_due_jobs(pool, backlog)
    fanout = load("fanout_handler")
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_response(
        "invoke",
        {"StatusCode": 202, "Payload": io.BytesIO(b"")},
        # The payload ({"helper": true, "seconds": ..., "until": <epoch>}) is tests/unit/test_growth.py's.
        {"FunctionName": "Stack-fanout", "InvocationType": "Event", "Payload": ANY},
    )
    for _ in range(backlog):
        stubber.add_response(
            "invoke",
            {"StatusCode": 202, "Payload": io.BytesIO(b"")},
            {"FunctionName": "executor", "InvocationType": "Event", "Payload": ANY},
        )
    fanout.deps.lambda_client = client
    try:
        with stubber:
            primary = fanout.handler({"source": "aws.events"}, FakeContext())
            assert primary["helpers"] == 1 and primary["dispatched"] == backlog
            helper = fanout.handler({"helper": True, "seconds": 10.0}, FakeContext())  # nothing left: one empty claim
        assert helper == {**helper, "helpers": 0, "claimed": 0, "rounds": 1}
        stubber.assert_no_pending_responses()
    finally:
        fanout.deps.pool.close()


def test_the_tick_has_an_executor_sweep_the_alerts_when_a_job_has_rules(lambda_env, store, target_server):
    """No rules: the fan-out invokes nothing for alerts. A job with a failure rule: the tick's
    fan-out invokes the executor with {"alerts": true}, which sweeps and sends the alert."""
    fanout = load("fanout_handler")
    recording = RecordingLambda()
    fanout.deps.lambda_client = recording
    executor = load("executor_handler")
    try:
        fanout.handler({"source": "aws.events"}, FakeContext())
        assert recording.events == []
        hook = {**http_spec("x")["target"], "url": target_server.url + "/alert"}
        job = service.create_job(
            store, OWNER, http_spec("watched", "@daily", alerts=[{"on": "failure", "target": hook}])
        )
        assert executor.handler({"alerts": True}, FakeContext()) == {"alerts_queued": 0, "alerts_sent": 0}
        with fanout.deps.pool.connection() as conn:
            conn.execute(
                """INSERT INTO executions (id, job_id, scheduled_at, started_at, finished_at, attempt, trigger, status,
                                           error)
                   VALUES (gen_random_uuid(), %s, now(), clock_timestamp(), clock_timestamp(), 1, 'schedule', 'failed',
                           'HTTP 500')""",
                (str(job.id),),
            )
        fanout.handler({"source": "aws.events"}, FakeContext())
        fanout.handler({"helper": True, "seconds": 1}, FakeContext())  # a helper never does
        assert recording.events == [{"alerts": True}]
        assert executor.handler({"alerts": True}, FakeContext()) == {"alerts_queued": 1, "alerts_sent": 1}
        [request] = target_server.wait_for(1)
        assert "job watched failed (failed): HTTP 500" in json.loads(request["body"])["text"]
    finally:
        fanout.deps.pool.close()
        executor.deps.pool.close()
