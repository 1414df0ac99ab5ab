"""The LocalStack plugins of ``tests/localstack/plugin``, through LocalStack's own APIs: the
host-process Lambda executor (answers, errors, logs, timeouts, a handler that cannot load) and
the provider of Lambda-backed custom resources (create with attributes, a failure with its
reason, update and delete events)."""

from __future__ import annotations

import base64
import io
import json
import uuid
import zipfile

import pytest

pytestmark = pytest.mark.slow

HANDLERS = '''
import json, os, time, urllib.request

def ok(event, context):
    print("event", json.dumps(event))
    return {
        "echo": event,
        "request_id": context.aws_request_id,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "function": context.function_name,
        "task_root": os.environ["LAMBDA_TASK_ROOT"],
        "endpoint": os.environ.get("AWS_ENDPOINT_URL"),
        "region": os.environ.get("AWS_REGION"),
    }

def fails(event, context):
    raise ValueError("the handler refused " + event.get("what", ""))

def slow(event, context):
    time.sleep(5)
    return "too late"

def resource(event, context):
    """A custom resource: answers at the ResponseURL, as CloudFormation expects."""
    props = event["ResourceProperties"]
    answer = {
        "Status": "FAILED" if props.get("Fail") == "yes" else "SUCCESS",
        "Reason": "asked to fail",
        "PhysicalResourceId": event.get("PhysicalResourceId") or "thing-" + props["Name"],
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {"Seen": event["RequestType"] + ":" + props["Name"]},
    }
    log = os.environ.get("EVENTS_QUEUE")
    if log:
        import boto3
        boto3.client("sqs").send_message(QueueUrl=log, MessageBody=json.dumps(
            {"type": event["RequestType"], "old": event.get("OldResourceProperties"), "id": event.get("PhysicalResourceId")}))
    request = urllib.request.Request(event["ResponseURL"], data=json.dumps(answer).encode(), method="PUT")
    urllib.request.urlopen(request, timeout=10).read()
'''


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def function(aws, localstack):
    """``function(handler, timeout=10, env=None)``: a function of HANDLERS, created and active."""
    client = aws("lambda")
    created = []

    def make(handler: str, *, timeout: int = 10, env: dict[str, str] | None = None, files: dict | None = None) -> str:
        name = f"plugin-{handler.replace('.', '-')}-{uuid.uuid4().hex[:8]}"
        client.create_function(
            FunctionName=name,
            Runtime=localstack.lambda_runtime,
            Role=f"arn:aws:iam::000000000000:role/{name}",
            Handler=f"handlers.{handler}" if files is None else handler,
            Code={"ZipFile": _zip(files or {"handlers.py": HANDLERS})},
            Timeout=timeout,
            Environment={"Variables": env or {}},
        )
        client.get_waiter("function_active_v2").wait(FunctionName=name)
        created.append(name)
        return name

    yield make
    for name in created:
        client.delete_function(FunctionName=name)


def test_a_function_answers_with_its_context_and_logs(aws, function, localstack):
    name = function("ok")
    answer = aws("lambda").invoke(FunctionName=name, Payload=json.dumps({"n": 1}), LogType="Tail")
    body = json.loads(answer["Payload"].read())
    assert "FunctionError" not in answer
    assert body["echo"] == {"n": 1} and body["function"] == name and body["region"] == "us-east-1"
    assert 0 < body["remaining_ms"] <= 10_000
    # The function reaches LocalStack at the gateway it listens on, and runs its own unzipped code.
    assert body["endpoint"] == localstack.endpoint
    assert body["task_root"].startswith(str(localstack.state))
    logs = base64.b64decode(answer["LogResult"]).decode()
    assert 'event {"n": 1}' in logs and f"START RequestId: {body['request_id']}" in logs
    # A second invoke reuses the environment (a warm start) and logs only its own lines.
    again = aws("lambda").invoke(FunctionName=name, Payload=json.dumps({"n": 2}), LogType="Tail")
    assert json.loads(again["Payload"].read())["echo"] == {"n": 2}
    assert 'event {"n": 1}' not in base64.b64decode(again["LogResult"]).decode()


def test_an_error_is_the_invoke_s_function_error(aws, function):
    name = function("fails")
    answer = aws("lambda").invoke(FunctionName=name, Payload=json.dumps({"what": "this"}))
    assert answer["FunctionError"] == "Unhandled"
    error = json.loads(answer["Payload"].read())
    assert error["errorType"] == "ValueError" and error["errorMessage"] == "the handler refused this"
    assert any("raise ValueError" in line for line in error["stackTrace"])


def test_a_handler_past_its_timeout_gets_lambda_s_timeout_error(aws, function):
    name = function("slow", timeout=1)
    answer = aws("lambda").invoke(FunctionName=name, Payload=b"{}")
    assert answer["FunctionError"] == "Unhandled"
    assert "Task timed out after 1.00 seconds" in answer["Payload"].read().decode()


def test_a_handler_that_cannot_load_fails_the_invoke(aws, function):
    name = function("broken.handler", files={"broken.py": "import no_such_module\n"})
    answer = aws("lambda").invoke(FunctionName=name, Payload=b"{}")
    assert answer.get("FunctionError") or answer["StatusCode"] >= 400


def _stack(aws, name: str, service_token: str, properties: dict) -> dict:
    template = {
        "Resources": {
            "Thing": {"Type": "Custom::Thing", "Properties": {"ServiceToken": service_token, **properties}},
        },
        "Outputs": {"Seen": {"Value": {"Fn::GetAtt": ["Thing", "Seen"]}}, "Id": {"Value": {"Ref": "Thing"}}},
    }
    cloudformation = aws("cloudformation")
    if any(s["StackStatus"] != "DELETE_COMPLETE" for s in _stacks(cloudformation, name)):
        cloudformation.update_stack(StackName=name, TemplateBody=json.dumps(template))
        waiter = "stack_update_complete"
    else:
        cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
        waiter = "stack_create_complete"
    try:
        cloudformation.get_waiter(waiter).wait(StackName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    except Exception:  # the stack failed: its status and reason are the test's subject
        pass
    return cloudformation.describe_stacks(StackName=name)["Stacks"][0]


def _stacks(cloudformation, name: str) -> list[dict]:
    try:
        return cloudformation.describe_stacks(StackName=name)["Stacks"]
    except Exception:
        return []


def test_a_custom_resource_runs_its_function_on_create_update_and_delete(aws, function):
    queue_url = aws("sqs").create_queue(QueueName=f"cr-events-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    token = aws("lambda").get_function(FunctionName=function("resource", env={"EVENTS_QUEUE": queue_url}))[
        "Configuration"
    ]["FunctionArn"]
    name = f"cr-{uuid.uuid4().hex[:8]}"

    created = _stack(aws, name, token, {"Name": "a"})
    assert created["StackStatus"] == "CREATE_COMPLETE", created.get("StackStatusReason")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in created["Outputs"]}
    assert outputs == {"Seen": "Create:a", "Id": "thing-a"}

    updated = _stack(aws, name, token, {"Name": "b"})
    assert updated["StackStatus"] == "UPDATE_COMPLETE", updated.get("StackStatusReason")
    assert {o["OutputKey"]: o["OutputValue"] for o in updated["Outputs"]}["Seen"] == "Update:b"

    cloudformation = aws("cloudformation")
    cloudformation.delete_stack(StackName=name)
    cloudformation.get_waiter("stack_delete_complete").wait(
        StackName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )

    events = []
    while len(events) < 3:
        messages = aws("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
        assert messages.get("Messages"), f"only {events} arrived"
        events += [json.loads(m["Body"]) for m in messages["Messages"]]
    assert [e["type"] for e in events] == ["Create", "Update", "Delete"]
    assert events[1]["old"]["Name"] == "a" and events[1]["id"] == "thing-a" and events[2]["id"] == "thing-a"


def test_a_failing_custom_resource_fails_the_stack_with_its_reason(aws, function):
    token = aws("lambda").get_function(FunctionName=function("resource"))["Configuration"]["FunctionArn"]
    name = f"cr-fail-{uuid.uuid4().hex[:8]}"
    stack = _stack(aws, name, token, {"Name": "x", "Fail": "yes"})
    assert stack["StackStatus"] in ("CREATE_FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED")
    events = aws("cloudformation").describe_stack_events(StackName=name)["StackEvents"]
    assert any("asked to fail" in (event.get("ResourceStatusReason") or "") for event in events)
    aws("cloudformation").delete_stack(StackName=name)
