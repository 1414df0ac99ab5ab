"""AWS targets end to end: real Postgres, the real executor path, moto's server on loopback for
STS, SQS, SNS and EventBridge (reached through ``AWS_ENDPOINT_URL``), and a loopback Lambda
Invoke endpoint (``AWS_ENDPOINT_URL_LAMBDA``).

moto does not evaluate trust policies, so the confused-deputy rule is checked at the STS call:
every AssumeRole carries the job owner's principal as ExternalId, a denial fails the execution
for good, and credentials assumed for one owner are never used for another's job.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from urllib.parse import quote

import boto3
import pytest
from botocore.stub import Stubber

from scheduler import service
from scheduler.core.domain import Execution, Job
from scheduler.runner.executor import Executor
from scheduler.schema.models import JobSpec
from scheduler.targets import aws_credentials
from scheduler.targets.aws_credentials import CredentialCache, create_client
from scheduler.targets.results import TargetPolicy
from scheduler.transport import sigv4
from tests.support import RecordingServer, moto_server

ACCOUNT = "123456789012"  # moto's default account: assumed roles of it see the same resources
REGION = "us-east-1"
ALICE = f"arn:aws:iam::{ACCOUNT}:user/alice"
BOB = f"arn:aws:iam::{ACCOUNT}:user/bob"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/scheduler-target"
LOCAL = TargetPolicy(allow_private=True)


@pytest.fixture(scope="module")
def moto_url():
    with moto_server() as url:
        yield url


@pytest.fixture
def lambda_endpoint():
    server = RecordingServer()
    yield server
    server.close()


class StsCalls:
    """A real STS client (moto) whose AssumeRole parameters are recorded."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.clients: list = []

    def __call__(self, region: str):
        client = create_client("sts", region)
        client.meta.events.register(
            "provide-client-params.sts.AssumeRole", lambda params, **kw: self.calls.append(dict(params))
        )
        self.clients.append(client)
        return client


@pytest.fixture
def aws(moto_url, lambda_endpoint, monkeypatch):
    """The environment of an executor whose AWS is moto (and the loopback Lambda endpoint);
    yields the STS call recorder of a fresh credential cache."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", lambda_endpoint.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    calls = StsCalls()
    aws_credentials.set_default_cache(CredentialCache(calls))
    yield calls
    aws_credentials.set_default_cache(None)


def admin(service: str):
    """A client of the test itself (the resource owner's side), straight to moto."""
    return boto3.client(service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


def spec(name: str, target: dict, **extra) -> dict:
    """A job spec validated by the API's model, as the API hands it to the store."""
    body = {
        "name": name,
        "run_at": "2026-01-01T00:00:00Z",
        "target": target,
        "retry": {"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 5},
        **extra,
    }
    return JobSpec.model_validate(body).model_dump(mode="python")


def run_due(store) -> list:
    """Claim the due jobs and run each through the executor (start, deliver, record)."""
    executor = Executor(store, lambda target: target, LOCAL)
    claims = store.claim_and_start(10, executor.lease_margin_seconds)
    return executor.record([executor.deliver(claim.started, claim.lock_token) for claim in claims])


def only_execution(store, owner: str, job: Job) -> Execution:
    [execution] = store.list_executions(owner, str(job.id))
    return execution


def make_queue(name: str, **attributes: str) -> str:
    url = admin("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


def canonical_queue_url(name: str) -> str:
    return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"


def receive(queue_name: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
    sqs = admin("sqs")
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    found: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        answer = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        )
        found.extend(answer.get("Messages", []))
    return found


def attributes(message: dict) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in (message.get("MessageAttributes") or {}).items()}


# ---------------------------------------------------------------------------------------- SQS


def test_sqs_message_carries_rendered_body_and_identity(store, aws):
    make_queue("work")
    job = service.create_job(
        store,
        ALICE,
        spec(
            "sqs-job",
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": canonical_queue_url("work"),
                "body": '{"job": "{{job_id}}", "try": {{attempt}}}',
            },
        ),
    )
    [report] = run_due(store)
    execution = only_execution(store, ALICE, job)
    assert report.status == "succeeded", execution.error
    [message] = receive("work")
    job_id = str(job.id)
    assert json.loads(message["Body"]) == {"job": job_id, "try": 1}
    attrs = attributes(message)
    assert attrs["X-Scheduler-Job-Id"] == job_id
    assert attrs["X-Scheduler-Execution-Id"] == str(execution.id)
    assert attrs["X-Scheduler-Attempt"] == "1"
    assert attrs["Idempotency-Key"] == f"{job_id}:{attrs['X-Scheduler-Scheduled-At']}"
    assert json.loads(execution.response_excerpt)["MessageId"] == message["MessageId"]
    # The call was made as the role assumed for the job's owner, nothing else.
    assert aws.calls == [
        {
            "RoleArn": ROLE,
            "ExternalId": ALICE,
            "RoleSessionName": aws_credentials.session_name(ALICE),
            "DurationSeconds": aws_credentials.SESSION_SECONDS,
        }
    ]


def test_fifo_queue_gets_group_and_idempotency_key_as_deduplication_id(store, aws):
    make_queue("orders.fifo", FifoQueue="true")
    job = service.create_job(
        store,
        ALICE,
        spec(
            "fifo-job",
            {
                "type": "sqs",
                "role_arn": ROLE,
                "queue_url": canonical_queue_url("orders.fifo"),
                "body": "tick",
                "message_group_id": "group-{{attempt}}",
            },
        ),
    )
    [report] = run_due(store)
    assert report.status == "succeeded", only_execution(store, ALICE, job).error
    [message] = receive("orders.fifo")
    assert message["Attributes"]["MessageGroupId"] == "group-1"
    assert message["Attributes"]["MessageDeduplicationId"] == attributes(message)["Idempotency-Key"]


def test_missing_queue_is_a_permanent_failure_naming_the_aws_error_code(store, aws):
    job = service.create_job(
        store,
        ALICE,
        spec("no-queue", {"type": "sqs", "role_arn": ROLE, "queue_url": canonical_queue_url("absent"), "body": "x"}),
    )
    [report] = run_due(store)
    execution = only_execution(store, ALICE, job)
    assert report.status == "failed"
    assert "sqs SendMessage" in execution.error and "NonExistentQueue" in execution.error
    row = store.get_job(ALICE, str(job.id))
    assert row.state == "completed"  # permanent: no retry planned
    assert store.claim_due(10, 60) == []


# ---------------------------------------------------------------------------------------- SNS


def test_sns_publish_reaches_a_subscribed_queue_with_identity_attributes(store, aws):
    make_queue("fan")
    topic = admin("sns").create_topic(Name="news")["TopicArn"]
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:fan"
    admin("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    job = service.create_job(
        store,
        ALICE,
        spec(
            "sns-job",
            {
                "type": "sns",
                "role_arn": ROLE,
                "topic_arn": topic,
                "message": "run {{job_id}}",
                "subject": "attempt {{attempt}}",
            },
        ),
    )
    [report] = run_due(store)
    assert report.status == "succeeded", only_execution(store, ALICE, job).error
    [message] = receive("fan")
    envelope = json.loads(message["Body"])
    job_id = str(job.id)
    assert envelope["Message"] == f"run {job_id}" and envelope["Subject"] == "attempt 1"
    attrs = {k: v["Value"] for k, v in envelope["MessageAttributes"].items()}
    assert attrs["X-Scheduler-Job-Id"] == job_id and attrs["Idempotency-Key"].startswith(job_id + ":")


# -------------------------------------------------------------------------------- EventBridge


def test_eventbridge_event_reaches_a_queue_through_a_rule(store, aws):
    make_queue("events-in")
    events = admin("events")
    bus_arn = events.create_event_bus(Name="jobs")["EventBusArn"]
    events.put_rule(Name="from-scheduler", EventBusName="jobs", EventPattern=json.dumps({"source": ["my.scheduler"]}))
    events.put_targets(
        Rule="from-scheduler",
        EventBusName="jobs",
        Targets=[{"Id": "q", "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:events-in"}],
    )
    job = service.create_job(
        store,
        ALICE,
        spec(
            "eb-job",
            {
                "type": "eventbridge",
                "role_arn": ROLE,
                "event_bus_arn": bus_arn,
                "source": "my.scheduler",
                "detail_type": "tick",
                "detail": '{"job": "{{job_id}}", "at": "{{scheduled_at}}"}',
            },
        ),
    )
    [report] = run_due(store)
    execution = only_execution(store, ALICE, job)
    assert report.status == "succeeded", execution.error
    [message] = receive("events-in")
    event = json.loads(message["Body"])
    assert event["source"] == "my.scheduler" and event["detail-type"] == "tick"
    assert event["detail"]["job"] == str(job.id) and event["detail"]["at"].endswith("Z")
    assert json.loads(execution.response_excerpt)["EventId"] == event["id"]


# ------------------------------------------------------------------------------------- Lambda


def invoke_path(function_arn: str) -> str:
    return f"/2015-03-31/functions/{quote(function_arn, safe='')}/invocations"


def test_lambda_event_invoke_is_signed_with_the_assumed_role(store, aws, lambda_endpoint):
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:worker"
    lambda_endpoint.responses[invoke_path(arn)] = [(202, {}, b"")]
    job = service.create_job(
        store,
        ALICE,
        spec(
            "lambda-event",
            {"type": "lambda", "role_arn": ROLE, "function_arn": arn, "payload": '{"job": "{{job_id}}"}'},
        ),
    )
    [report] = run_due(store)
    assert report.status == "succeeded", only_execution(store, ALICE, job).error
    [request] = lambda_endpoint.wait_for(1)
    assert request["headers"]["X-Amz-Invocation-Type"] == "Event"
    assert json.loads(request["body"]) == {"job": str(job.id)}
    creds = aws_credentials.default_cache().credentials(ROLE, ALICE)
    assert f"Credential={creds.access_key_id}/" in request["headers"]["Authorization"]
    assert request["headers"]["X-Amz-Security-Token"] == creds.session_token
    assert only_execution(store, ALICE, job).http_status == 202


def test_lambda_request_response_function_error_fails_with_redacted_excerpt(store, aws, lambda_endpoint):
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:broken"
    job_spec = spec(
        "lambda-sync", {"type": "lambda", "role_arn": ROLE, "function_arn": arn, "invocation_type": "RequestResponse"}
    )
    job = service.create_job(store, ALICE, job_spec)
    creds = aws_credentials.default_cache().credentials(ROLE, ALICE)  # what the delivery will use
    answer = json.dumps({"errorMessage": f"leaked {creds.session_token}", "errorType": "Boom"}).encode()
    lambda_endpoint.responses[invoke_path(arn)] = [(200, {"X-Amz-Function-Error": "Unhandled"}, answer)]
    [report] = run_due(store)
    execution = only_execution(store, ALICE, job)
    assert report.status == "failed"
    assert execution.error == "lambda Invoke: the function failed (Unhandled)"
    assert "Boom" in execution.response_excerpt and creds.session_token not in execution.response_excerpt
    assert "***" in execution.response_excerpt
    row = store.get_job(ALICE, str(job.id))
    assert row.state == "active" and row.attempt == 1  # a function error is retried


def test_lambda_throttling_is_retried_and_access_denied_is_permanent(store, aws, lambda_endpoint):
    throttled = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:busy"
    denied = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:private"
    lambda_endpoint.responses[invoke_path(throttled)] = [
        (429, {"x-amzn-ErrorType": "TooManyRequestsException"}, b'{"message": "Rate exceeded"}')
    ]
    lambda_endpoint.responses[invoke_path(denied)] = [
        (403, {"x-amzn-ErrorType": "AccessDeniedException"}, b'{"Message": "not authorized"}')
    ]
    busy = service.create_job(
        store, ALICE, spec("busy", {"type": "lambda", "role_arn": ROLE, "function_arn": throttled})
    )
    private = service.create_job(
        store, ALICE, spec("private", {"type": "lambda", "role_arn": ROLE, "function_arn": denied})
    )
    run_due(store)
    busy_row, private_row = (store.get_job(ALICE, str(j.id)) for j in (busy, private))
    assert "TooManyRequestsException" in only_execution(store, ALICE, busy).error
    assert busy_row.state == "active" and busy_row.next_run_at is not None  # retry planned
    assert "lambda Invoke: AccessDeniedException" in only_execution(store, ALICE, private).error
    assert private_row.state == "completed"


# ---------------------------------------------------------------------------- confused deputy


def denying(role: str, owner: str):
    """An STS client factory whose AssumeRole of ``role`` for ``owner`` is refused."""

    def factory(region: str):
        client = create_client("sts", region)
        stub = Stubber(client)
        stub.add_client_error(
            "assume_role",
            service_error_code="AccessDenied",
            http_status_code=403,
            service_message="not authorized to perform sts:AssumeRole",
            expected_params={
                "RoleArn": role,
                "ExternalId": owner,
                "RoleSessionName": aws_credentials.session_name(owner),
                "DurationSeconds": aws_credentials.SESSION_SECONDS,
            },
        )
        stub.activate()
        return client

    return factory


def test_credentials_of_one_owner_are_never_used_for_another(store, aws, lambda_endpoint):
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:shared"
    lambda_endpoint.responses[invoke_path(arn)] = [(202, {}, b"")]
    target = {"type": "lambda", "role_arn": ROLE, "function_arn": arn}
    alice_jobs = [service.create_job(store, ALICE, spec(f"a{i}", target)) for i in range(2)]
    bob_job = service.create_job(store, BOB, spec("b", target))
    run_due(store)
    requests_ = lambda_endpoint.wait_for(3)
    by_job = {}
    for request in requests_:
        by_job[request["headers"]["Authorization"].split("Credential=")[1].split("/")[0]] = True
    cache = aws_credentials.default_cache()
    alice_key = cache.credentials(ROLE, ALICE).access_key_id
    bob_key = cache.credentials(ROLE, BOB).access_key_id
    assert alice_key != bob_key and set(by_job) == {alice_key, bob_key}
    # One AssumeRole per owner (Alice's two jobs share her cached credentials), each with its
    # owner as ExternalId.
    assert sorted(call["ExternalId"] for call in aws.calls) == [ALICE, BOB]
    assert all(call["RoleArn"] == ROLE for call in aws.calls)
    assert len(alice_jobs) == 2 and bob_job


def test_sts_denial_fails_the_execution_permanently(store, aws):
    aws_credentials.set_default_cache(CredentialCache(denying(ROLE, BOB)))
    job = service.create_job(
        store,
        BOB,
        spec("denied", {"type": "sqs", "role_arn": ROLE, "queue_url": canonical_queue_url("anything"), "body": "x"}),
    )
    [report] = run_due(store)
    execution = only_execution(store, BOB, job)
    assert report.status == "failed"
    assert execution.error.startswith("sts AssumeRole: AccessDenied")
    assert store.get_job(BOB, str(job.id)).state == "completed"  # not retried


def test_credentials_are_refreshed_shortly_before_they_expire(aws):
    now = [time.time()]
    cache = CredentialCache(aws, clock=lambda: now[0])
    first = cache.credentials(ROLE, ALICE)
    assert cache.credentials(ROLE, ALICE) is first and len(aws.calls) == 1
    now[0] = first.expires_at - aws_credentials.REFRESH_MARGIN_SECONDS + 1
    assert cache.credentials(ROLE, ALICE) is not first and len(aws.calls) == 2


# ----------------------------------------------------------------------------- SigV4 for HTTP


def test_http_target_with_sigv4_auth_is_signed_as_the_assumed_role(store, aws):
    server = RecordingServer()
    try:
        job = service.create_job(
            store,
            ALICE,
            spec(
                "signed",
                {
                    "type": "http",
                    "url": server.url + "/prod/hook?b=2&a=1",
                    "body": '{"try": {{attempt}}}',
                    "auth": {"type": "sigv4", "service": "execute-api", "region": "eu-west-1", "role_arn": ROLE},
                },
            ),
        )
        [report] = run_due(store)
        assert report.status == "succeeded", only_execution(store, ALICE, job).error
        [request] = server.wait_for(1)
    finally:
        server.close()
    creds = aws_credentials.default_cache().credentials(ROLE, ALICE)
    path, _, query = request["path"].partition("?")
    principal = sigv4.verify_request(
        request["method"],
        path,
        query,
        request["headers"],
        request["body"],
        {creds.access_key_id: (creds.secret_access_key, "the role")},
        region="eu-west-1",
        service="execute-api",
    )
    assert principal == "the role"
    assert request["headers"]["X-Amz-Security-Token"] == creds.session_token
    assert aws.calls[0]["ExternalId"] == ALICE


def test_sigv4_http_target_whose_role_is_refused_sends_nothing(store, aws):
    aws_credentials.set_default_cache(CredentialCache(denying(ROLE, BOB)))
    server = RecordingServer()
    try:
        job = service.create_job(
            store,
            BOB,
            spec(
                "signed-denied",
                {
                    "type": "http",
                    "url": server.url + "/hook",
                    "auth": {"type": "sigv4", "service": "lambda", "region": REGION, "role_arn": ROLE},
                },
            ),
        )
        [report] = run_due(store)
        assert server.requests == []
    finally:
        server.close()
    execution = only_execution(store, BOB, job)
    assert report.status == "failed" and execution.error.startswith("sts AssumeRole: AccessDenied")
    assert store.get_job(BOB, str(job.id)).state == "completed"


def test_a_delivery_without_an_owner_or_with_an_unusable_one_is_refused(aws):
    from datetime import datetime

    from scheduler.targets.results import Delivery
    from scheduler.targets.router import deliver

    target = {
        "type": "sns",
        "role_arn": ROLE,
        "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:t",
        "message": "m",
        "timeout_seconds": 5,
    }
    at = datetime(2026, 1, 1, tzinfo=UTC)
    anonymous = deliver(target, Delivery("j", "e", at, 1), LOCAL)
    odd = deliver(target, Delivery("j", "e", at, 1, owner="user with spaces"), LOCAL)
    for result in (anonymous, odd):
        assert result.status == "failed" and not result.retryable
    assert "owner" in anonymous.error and "ExternalId" in odd.error
    assert aws.calls == []  # STS was never asked
