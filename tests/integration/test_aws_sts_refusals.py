"""STS refusing the executor's OWN credentials (a key rotated or mistyped, a skewed clock, an
expired session) is the scheduler's fault, not the job's: the delivery is retryable, its error
says whose credentials were refused. STS refusing the role (``AccessDenied``: its trust policy)
stays permanent. A real botocore STS client talks to a loopback server answering STS's errors.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from scheduler.targets import aws_credentials
from scheduler.targets.aws_credentials import CredentialCache
from scheduler.targets.results import Delivery, TargetPolicy
from scheduler.targets.router import deliver
from tests.support import RecordingServer

OWNER = "arn:aws:iam::123456789012:user/alice"
ROLE = "arn:aws:iam::123456789012:role/scheduler-target"


def sts_error(code: str, message: str, status: int = 403) -> tuple[int, dict, bytes]:
    body = (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
        f"<Code>{code}</Code><Message>{message}</Message></Error><RequestId>r</RequestId></ErrorResponse>"
    )
    return status, {"Content-Type": "text/xml"}, body.encode()


@pytest.fixture
def sts(monkeypatch):
    server = RecordingServer()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # only STS is reached
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    aws_credentials.set_default_cache(CredentialCache())
    yield server
    aws_credentials.set_default_cache(None)
    server.close()


TARGETS = {
    "sqs": {
        "type": "sqs",
        "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        "role_arn": ROLE,
        "body": "x",
        "timeout_seconds": 5,
    },
    "http+sigv4": {
        "type": "http",
        "url": "http://127.0.0.1:1/hook",
        "auth": {"type": "sigv4", "service": "lambda", "region": "us-east-1", "role_arn": ROLE},
        "timeout_seconds": 5,
    },
}


def delivered(kind: str):
    delivery = Delivery(str(uuid.uuid4()), str(uuid.uuid4()), datetime.now(UTC), 1, owner=OWNER)
    return deliver(TARGETS[kind], delivery, TargetPolicy(allow_private=True))


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("InvalidClientTokenId", 403),
        ("SignatureDoesNotMatch", 403),
        ("RequestExpired", 400),
        ("ExpiredToken", 400),
        ("UnrecognizedClientException", 400),
    ],
)
def test_sts_refusing_the_executor_s_own_credentials_is_retryable(sts, kind, code, status):
    sts.responses["/"] = [sts_error(code, "The security token included in the request is invalid.", status)]
    outcome = delivered(kind)
    assert sts.requests, "STS was not asked"
    assert outcome.status == "failed" and outcome.retryable, outcome
    assert outcome.error is not None
    assert outcome.error.startswith("sts AssumeRole: STS refused the executor's own AWS credentials"), outcome.error
    assert code in outcome.error


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_sts_refusing_the_role_stays_permanent(sts, kind):
    sts.responses["/"] = [sts_error("AccessDenied", "not authorized to perform: sts:AssumeRole")]
    outcome = delivered(kind)
    assert outcome.status == "failed" and not outcome.retryable
    assert (outcome.error or "").startswith("sts AssumeRole: AccessDenied: not authorized"), outcome.error


def test_a_role_of_another_partition_is_the_job_s_fault_and_permanent(sts, monkeypatch):
    """A role in aws-cn on a commercial deployment: that partition's STS knows none of the
    executor's credentials (InvalidClientTokenId), which says nothing of the executor's own:
    a permanent failure naming the partition, not a retry blamed on the scheduler."""
    cn_role = "arn:aws-cn:iam::123456789012:role/scheduler-target"
    target = {
        **TARGETS["sqs"],
        "role_arn": cn_role,
        "queue_url": "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
    }
    sts.responses["/"] = [sts_error("InvalidClientTokenId", "The security token included in the request is invalid.")]
    delivery = Delivery(str(uuid.uuid4()), str(uuid.uuid4()), datetime.now(UTC), 1, owner=OWNER)
    outcome = deliver(target, delivery, TargetPolicy(allow_private=True))
    assert outcome.status == "failed" and not outcome.retryable, outcome
    assert "aws-cn partition" in (outcome.error or ""), outcome.error
