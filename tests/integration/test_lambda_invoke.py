"""The fan-out's asynchronous invokes, signed by ``scheduler.transport.lambda_invoke``: a loopback Invoke
API checks every signature as AWS would (``scheduler.transport.sigv4.verify_request``, service ``lambda``),
takes the payloads, and refuses some the way Lambda does."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import boto3
import pytest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from scheduler.core.domain import Claim
from scheduler.runner.dispatch import LambdaDispatch
from scheduler.transport import sigv4
from scheduler.transport.lambda_invoke import EventInvokeClient
from scheduler.wiring import event_invoke_client, lambda_client_config

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEYS = {"AKIDTEST": ("secret/with+chars", "arn:aws:iam::000000000000:user/fanout")}


class InvokeApi(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.accepted: list[tuple[str, bytes]] = []
        self.refusals: list[str] = []  # what the next invokes are answered with (popped in order)
        self.problems: list[str] = []
        self.tokens: list[str | None] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: InvokeApi

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        try:
            sigv4.verify_request(
                "POST", path, query, list(self.headers.items()), body, KEYS, region="us-east-1", service="lambda"
            )
        except sigv4.SignatureError as exc:
            with self.server.lock:
                self.server.problems.append(str(exc))
            return self._answer(403, {"message": str(exc)}, "InvalidSignatureException")
        with self.server.lock:
            self.server.tokens.append(self.headers.get("X-Amz-Security-Token"))
            refusal = self.server.refusals.pop(0) if self.server.refusals else None
            if refusal is None:
                self.server.accepted.append((path, body))
        if refusal is not None:
            return self._answer(429, {"Type": "User", "message": "Rate Exceeded."}, refusal)
        if self.headers.get("X-Amz-Invocation-Type") != "Event":
            return self._answer(400, {"message": "not an async invoke"}, "InvalidParameterValueException")
        self._answer(202, None, None)

    def _answer(self, status: int, document: dict | None, error_type: str | None) -> None:
        data = json.dumps(document).encode() if document is not None else b""
        self.send_response(status)
        if error_type:
            self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def invoke_api() -> Iterator[InvokeApi]:
    server = InvokeApi()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def boto_client(url: str, token: str | None = None):
    return boto3.client(
        "lambda",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key=KEYS["AKIDTEST"][0],
        aws_session_token=token,
        config=lambda_client_config(),
    )


def test_async_invokes_are_signed_as_aws_checks_them():
    with invoke_api() as api:
        client = event_invoke_client(boto_client(api.url))
        assert isinstance(client, EventInvokeClient)
        for n in range(3):
            answer = client.invoke(FunctionName="stack-executor", InvocationType="Event", Payload=b'{"n": %d}' % n)
            assert answer["StatusCode"] == 202 and answer["Payload"].read() == b""
        client.close()
    assert api.problems == []
    assert api.accepted == [("/2015-03-31/functions/stack-executor/invocations", b'{"n": %d}' % n) for n in range(3)]


def test_temporary_credentials_sign_their_token_and_an_arn_names_the_function():
    arn = "arn:aws:lambda:us-east-1:000000000000:function:stack-executor"
    with invoke_api() as api:
        client = event_invoke_client(boto_client(api.url, token="session-token/xyz="))
        client.invoke(FunctionName=arn, InvocationType="Event", Payload="{}")
    assert api.problems == [] and api.tokens == ["session-token/xyz="]
    assert api.accepted == [(f"/2015-03-31/functions/{arn.replace(':', '%3A')}/invocations", b"{}")]


def test_a_wrong_secret_is_refused_by_the_endpoint_and_raised_as_boto3_raises_it():
    with invoke_api() as api:
        client = EventInvokeClient(boto_client(api.url), Credentials("AKIDTEST", "not-the-secret"), pool_size=2)
        with pytest.raises(ClientError) as raised:
            client.invoke(FunctionName="f", InvocationType="Event", Payload=b"{}")
    assert raised.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert api.problems and api.accepted == []


def test_throttled_invokes_are_retried_by_the_dispatch_and_none_is_lost():
    claims = [Claim(f"job-{n}", f"token-{n}", "schedule", NOW, NOW, NOW, NOW) for n in range(10)]
    with invoke_api() as api:
        api.refusals = ["TooManyRequestsException"] * 4
        dispatch = LambdaDispatch(event_invoke_client(boto_client(api.url)), "executor", sleep=lambda s: None)
        try:
            assert dispatch.dispatch(claims) == []
        finally:
            dispatch.close()
    assert api.problems == [] and api.refusals == []
    assert sorted(json.loads(body)["job_id"] for _, body in api.accepted) == sorted(c.job_id for c in claims)


def test_other_invocation_types_go_through_boto3():
    calls = []

    class Boto:
        meta = boto_client("http://127.0.0.1:9").meta

        def invoke(self, **kwargs):
            calls.append(kwargs)
            return {"StatusCode": 200}

    client = EventInvokeClient(Boto(), Credentials("AKIDTEST", "x"), pool_size=1)
    assert client.invoke(FunctionName="f", InvocationType="RequestResponse", Payload=b"{}") == {"StatusCode": 200}
    assert calls == [{"FunctionName": "f", "InvocationType": "RequestResponse", "Payload": b"{}"}]


def test_a_proxy_from_the_environment_keeps_botocore(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = boto_client("https://lambda.us-east-1.amazonaws.com")
    assert event_invoke_client(client) is client
    monkeypatch.delenv("HTTPS_PROXY")
    assert isinstance(event_invoke_client(client), EventInvokeClient)
