"""The stack as deployed by ``cdk deploy -c localstack=true``, driven from outside.

Every call goes through the deployed API Gateway URL, signed with SigV4 (the CLI with
``--sigv4``, and botocore's signer through ``SchedulerClient``); the jobs are delivered by the
deployed runner (the EventBridge tick's fan-out invoking the executor asynchronously) to targets
on this machine (HTTP on loopback, the host's RabbitMQ) and in LocalStack (SQS, SNS, EventBridge).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import botocore.credentials
import psycopg
import pytest

from scheduler.client import ApiCallFailed, SchedulerClient
from tests.localstack.environment import REGION, TIMINGS
from tests.support import RecordingServer, poll

pytestmark = [pytest.mark.slow, pytest.mark.amqp]

MIGRATIONS = Path(__file__).resolve().parents[2] / "functions" / "scheduler" / "sql" / "migrations"
# The event the tick's rule sends the fan-out (an EventBridge "Scheduled Event").
SCHEDULED_EVENT = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
DELIVERY_TIMEOUT = 90.0  # the next tick's fan-out starts within a minute


def _soon(seconds: float = 3.0) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).isoformat(timespec="seconds")


@pytest.fixture(scope="module")
def api(deployment):
    """``api(key, secret)``: the deployed API as that access key's caller (botocore's signer)."""

    def client(key: str = "test", secret: str = "test") -> SchedulerClient:
        credentials = botocore.credentials.Credentials(key, secret)
        return SchedulerClient(deployment.api_url, sigv4=True, region=REGION, credentials=credentials)

    return client


@pytest.fixture(scope="module", autouse=True)
def ticking(deployment, aws):
    """A fan-out started now, as the minute's rule starts one, so no test waits for the next tick."""
    aws("lambda").invoke(
        FunctionName=deployment.outputs["FanoutFunctionName"],
        InvocationType="Event",
        Payload=json.dumps(SCHEDULED_EVENT).encode(),
    )


@pytest.fixture
def target():
    server = RecordingServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def role_arn(aws):
    """A role the executor assumes for AWS targets (with the owner as ExternalId)."""
    name = f"scheduler-target-{uuid.uuid4().hex[:8]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    return aws("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]


def _cli(
    deployment, *arguments: str, key: str = "test", secret: str = "test", extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": REGION,
            "SCHEDULER_AUTH_SECRET": "t0ken-xyz",
            **(extra_env or {}),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "--endpoint", deployment.api_url, "--sigv4", *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_the_deploy_applied_the_migrations(deployment):
    with psycopg.connect(deployment.database_url) as conn:
        applied = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert applied == len(list(MIGRATIONS.glob("*.sql")))


def test_the_cli_creates_a_job_the_deployed_runner_delivers(deployment, target):
    created_at = time.monotonic()
    done = _cli(
        deployment,
        "jobs", "create", "--name", "cli-once", "--run-at", _soon(), "--url", f"{target.url}/once",
        "--body", "at {{scheduled_at}}", "--auth", "bearer", "-o", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["target"]["auth"]["token"] == "***"  # sealed with the stack's KMS key, never answered

    request = target.wait_for(1, timeout=DELIVERY_TIMEOUT)[0]
    TIMINGS["job created -> delivered (one-off due 3 s after creation)"] = time.monotonic() - created_at
    headers = request["headers"]
    assert headers["Authorization"] == "Bearer t0ken-xyz"  # opened by the executor through KMS
    assert headers["X-Scheduler-Job-Id"] == job["id"]
    assert headers["Idempotency-Key"] == f"{job['id']}:{headers['X-Scheduler-Scheduled-At']}"
    assert request["body"] == f"at {headers['X-Scheduler-Scheduled-At']}".encode()

    def recorded():
        shown = _cli(deployment, "executions", "cli-once", "-o", "json")
        executions = json.loads(shown.stdout or "{}").get("executions") or []
        return executions if executions and executions[0]["status"] != "running" else None

    [execution] = poll(recorded, timeout=30, interval=1, what="the execution recorded")
    assert execution["status"] == "succeeded" and execution["http_status"] == 200
    assert execution["id"] == headers["X-Scheduler-Execution-Id"]


def test_apply_resend_secrets_keeps_an_unrotated_secret_and_delivers_a_rotated_one(deployment, target, tmp_path):
    """The deployed API cannot open a stored secret; it compares one sent again by its HMAC
    (the stack's KMS HMAC key): an unrotated token changes nothing, a rotated one is an update,
    and the executor delivers the rotated one."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "name: resent-secret\n"
        f'run_at: "{_soon(3600)}"\n'
        "target:\n"
        "  type: http\n"
        f'  url: "{target.url}/resent"\n'
        '  auth: {type: bearer, token: "${RESENT_TOKEN}"}\n'
    )

    def apply(token: str) -> list[str]:
        done = _cli(deployment, "apply", "-f", str(jobs), "--resend-secrets", extra_env={"RESENT_TOKEN": token})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert apply("first-t0ken")[-1] == "1 changed (1 created), 0 unchanged"
    assert apply("first-t0ken") == ["0 changed, 1 unchanged"]
    assert apply("second-t0ken")[-1] == "1 changed (1 updated), 0 unchanged"
    shown = json.loads(_cli(deployment, "jobs", "get", "resent-secret", "-o", "json").stdout)
    assert shown["version"] == 2 and shown["target"]["auth"]["token"] == "***"

    assert _cli(deployment, "jobs", "run", "resent-secret").returncode == 0
    request = target.wait_for(1, timeout=DELIVERY_TIMEOUT)[0]
    assert request["headers"]["Authorization"] == "Bearer second-t0ken"


def test_an_every_job_is_delivered_on_its_interval(api, target):
    job = api().create_job(
        {"name": "every-2s", "schedule": "@every 2s", "target": {"type": "http", "url": f"{target.url}/every"}}
    )
    try:
        requests = target.wait_for(3, timeout=DELIVERY_TIMEOUT)
    finally:
        api().pause_job(job["id"])
    times = sorted({dt.datetime.fromisoformat(r["headers"]["X-Scheduler-Scheduled-At"]) for r in requests})
    assert len(times) >= 3 and all((b - a) == dt.timedelta(seconds=2) for a, b in zip(times, times[1:]))


def test_an_amqp_job_goes_to_the_deployment_s_broker(api, amqp_admin, amqp_queue):
    exchange, queue, routing_key = amqp_queue
    job = api().create_job(
        {
            "name": "amqp-once",
            "run_at": _soon(),
            # No url: the stack's BrokerUrl, the host's RabbitMQ.
            "target": {"type": "amqp", "exchange": exchange, "routing_key": routing_key, "body": "{{job_id}}"},
        }
    )

    def received():
        method, properties, body = amqp_admin.basic_get(queue, auto_ack=True)
        return (properties, body) if method else None

    properties, body = poll(received, timeout=DELIVERY_TIMEOUT, interval=0.5, what="the AMQP message")
    assert body == job["id"].encode()
    assert properties.message_id == f"{job['id']}:{properties.headers['X-Scheduler-Scheduled-At']}"
    assert properties.headers["X-Scheduler-Job-Id"] == job["id"]


def _receive(aws, queue_url: str, timeout: float = DELIVERY_TIMEOUT) -> dict:
    sqs = aws("sqs")

    def one():
        answer = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["All"], WaitTimeSeconds=1)
        return (answer.get("Messages") or [None])[0]

    return poll(one, timeout=timeout, interval=0.1, what=f"a message in {queue_url}")


def test_sqs_sns_and_eventbridge_targets_in_localstack(api, aws, role_arn):
    sqs, sns, events = aws("sqs"), aws("sns"), aws("events")
    suffix = uuid.uuid4().hex[:8]
    # The queue URL exactly as LocalStack's CreateQueue answers it.
    direct = sqs.create_queue(QueueName=f"direct-{suffix}")["QueueUrl"]
    via_sns = sqs.create_queue(QueueName=f"via-sns-{suffix}")["QueueUrl"]
    via_bus = sqs.create_queue(QueueName=f"via-bus-{suffix}")["QueueUrl"]
    arn = {
        url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for url in (via_sns, via_bus)
    }
    topic = sns.create_topic(Name=f"topic-{suffix}")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn[via_sns], Attributes={"RawMessageDelivery": "true"})
    bus = events.create_event_bus(Name=f"bus-{suffix}")["EventBusArn"]
    events.put_rule(Name=f"rule-{suffix}", EventBusName=bus, EventPattern=json.dumps({"source": ["scheduler.test"]}))
    events.put_targets(Rule=f"rule-{suffix}", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn[via_bus]}])

    jobs = {
        kind: api().create_job(
            {"name": f"{kind}-{suffix}", "run_at": _soon(), "target": {**target, "role_arn": role_arn}}
        )
        for kind, target in {
            "sqs": {"type": "sqs", "queue_url": direct, "body": "sqs {{job_id}}"},
            "sns": {"type": "sns", "topic_arn": topic, "message": "sns {{job_id}}"},
            "eventbridge": {
                "type": "eventbridge",
                "event_bus_arn": bus,
                "source": "scheduler.test",
                "detail_type": "tick",
                "detail": '{"job": "{{job_id}}"}',
            },
        }.items()
    }

    message = _receive(aws, direct)
    assert message["Body"] == f"sqs {jobs['sqs']['id']}"
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert attributes["X-Scheduler-Job-Id"] == jobs["sqs"]["id"]
    assert attributes["Idempotency-Key"].startswith(f"{jobs['sqs']['id']}:")

    published = _receive(aws, via_sns)
    assert published["Body"] == f"sns {jobs['sns']['id']}"
    assert published["MessageAttributes"]["X-Scheduler-Job-Id"]["StringValue"] == jobs["sns"]["id"]

    event = json.loads(_receive(aws, via_bus)["Body"])
    assert event["source"] == "scheduler.test" and event["detail-type"] == "tick"
    assert event["detail"] == {"job": jobs["eventbridge"]["id"]}

    for job in jobs.values():
        page = poll(
            lambda job=job: (lambda p: p if p["executions"] and p["executions"][0]["status"] != "running" else None)(
                api().list_executions(job["id"])
            ),
            timeout=30,
            interval=0.5,
            what="the execution recorded",
        )
        assert page["executions"][0]["status"] == "succeeded", page["executions"][0]


def test_a_failing_target_is_retried_then_given_up(api, target):
    target.responses["/down"] = [(500, {}, b"down for maintenance")]
    job = api().create_job(
        {
            "name": "failing",
            "run_at": _soon(),
            "target": {"type": "http", "url": f"{target.url}/down"},
            "retry": {"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 1},
        }
    )
    target.wait_for(3, timeout=DELIVERY_TIMEOUT)

    def finished():
        executions = api().list_executions(job["id"])["executions"]
        return executions if len(executions) == 3 and all(e["status"] != "running" for e in executions) else None

    executions = sorted(
        poll(finished, timeout=30, interval=0.5, what="three attempts recorded"), key=lambda e: e["attempt"]
    )
    assert [(e["attempt"], e["trigger"], e["status"], e["http_status"]) for e in executions] == [
        (1, "schedule", "failed", 500),
        (2, "retry", "failed", 500),
        (3, "retry", "failed", 500),
    ]
    assert "down for maintenance" in executions[0]["response_excerpt"]
    shown = api().get_job(job["id"])
    assert shown["state"] == "completed" and shown["stats"]["last_status"] == "failed"


def test_a_full_key_is_handed_back_by_the_deployed_executor_not_waited_for(api, deployment, target):
    """A job whose target key is held full: the deployed executor hands it back (no execution
    kept, no attempt counted) instead of sleeping; once the key frees it is delivered, once, and
    its execution says how long it waited from its first hand-back."""
    from scheduler.core.limits import TargetLimit
    from scheduler.store.db import make_pool
    from scheduler.store.postgres import Store

    pool = make_pool(deployment.database_url, min_size=1, max_size=1)
    try:
        store = Store(pool)
        job = api().create_job(  # due in an hour: its owner's key is held first (keys are per owner)
            {
                "name": "limited",
                "run_at": _soon(3600),
                "target": {"type": "http", "url": f"{target.url}/limited"},
                "limits": {"key": "ls-held", "max_in_flight": 1},
            }
        )
        blocker = store.take_target_slot(TargetLimit("ls-held", 1, None, job["owner"]), str(uuid.uuid4()), 300)
        assert blocker is not None
        api().patch_job(job["id"], {"run_at": _soon()})

        def handed_back():
            with pool.connection() as conn:  # between two claims: no execution running
                row = conn.execute(
                    "SELECT slot_wait_since FROM job_runs WHERE job_id = %s AND running_execution_id IS NULL",
                    (job["id"],),
                ).fetchone()
            return row and row["slot_wait_since"]

        since = poll(handed_back, timeout=DELIVERY_TIMEOUT, interval=0.5, what="the job handed back")
        handed_back_at = time.monotonic()
        assert target.requests == [] and api().list_executions(job["id"])["executions"] == []
        store.release_target_slot(blocker)
    finally:
        pool.close()
    target.wait_for(1, timeout=DELIVERY_TIMEOUT)
    TIMINGS["a handed-back job delivered after its key freed"] = time.monotonic() - handed_back_at

    def recorded():
        executions = api().list_executions(job["id"])["executions"]
        return executions if executions and executions[0]["status"] != "running" else None

    [execution] = poll(recorded, timeout=30, interval=0.5, what="the execution recorded")
    assert (execution["status"], execution["attempt"], execution["trigger"]) == ("succeeded", 1, "schedule")
    assert execution["waited_for"] == "limits of ls-held (max_in_flight 1)"
    started = dt.datetime.fromisoformat(execution["started_at"].replace("Z", "+00:00"))
    assert execution["waited_ms"] >= (started - since).total_seconds() * 1000 - 5  # from the first hand-back
    assert len(target.requests) == 1


def test_a_failed_executor_invocation_reaches_the_dead_letter_queue(deployment, aws):
    # An invoke the executor refuses (an empty group of claims) fails; the executor is not retried
    # by Lambda, so the invocation goes to its on-failure destination, the dead-letter queue.
    aws("lambda").invoke(
        FunctionName=deployment.outputs["ExecutorFunctionName"],
        InvocationType="Event",
        Payload=json.dumps({"claims": []}).encode(),
    )
    record = json.loads(_receive(aws, deployment.outputs["DeadLetterQueueUrl"], timeout=60)["Body"])
    assert record["requestPayload"] == {"claims": []}
    assert record["responseContext"]["functionError"] == "Unhandled"


def test_each_access_key_is_a_tenant(api, deployment):
    mine = api().create_job(
        {"name": "private", "schedule": "0 3 * * *", "target": {"type": "http", "url": "http://127.0.0.1:9/x"}}
    )
    theirs = api("test2", "test2")
    assert "private" not in [job["name"] for job in theirs.list_jobs()["jobs"]]
    with pytest.raises(ApiCallFailed) as absent:
        theirs.get_job(mine["id"])
    assert absent.value.status == 404
    with pytest.raises(ApiCallFailed) as wrong:
        api("test2", "not-the-secret").list_jobs()
    assert wrong.value.status == 403 and "signature" in wrong.value.message
    # Unsigned: refused, but for the health check.
    unsigned = SchedulerClient(deployment.api_url, sigv4=False)
    with pytest.raises(ApiCallFailed) as anonymous:
        unsigned.list_jobs()
    assert anonymous.value.status == 403
    assert unsigned.request("GET", "/v1/health") == {"status": "ok"}
