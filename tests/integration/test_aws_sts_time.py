"""The delivery's time limit bounds the AssumeRole: an STS that accepts connections and never
answers (a real loopback listener given as ``AWS_ENDPOINT_URL_STS``, the real botocore client)
cannot hold a delivery past its ``timeout_seconds``, nor can the wait for another delivery's
AssumeRole of the same role and owner, nor can it take an HTTP target's with ``sigv4`` auth
beyond its own.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from scheduler.targets import aws_credentials
from scheduler.targets.aws_credentials import CredentialCache
from scheduler.targets.results import Delivery, Outcome, TargetPolicy
from scheduler.targets.router import deliver

OWNER = "arn:aws:iam::123456789012:user/alice"
ROLE = "arn:aws:iam::123456789012:role/scheduler-target"
TIMEOUT = 2
# Loose enough for a slow, shared two-core machine; far below the 5 s STS read timeout alone.
BOUND = TIMEOUT + 1.5


class SilentSts:
    """A TCP listener that accepts every connection and never answers (nor closes)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.accepted: list[socket.socket] = []
        self.closing = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.closing:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.closing = True
        self.thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.listener.close()


@pytest.fixture
def silent_sts(monkeypatch):
    server = SilentSts()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # never reached: STS never answers
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    aws_credentials.set_default_cache(CredentialCache())  # the default STS clients, the real ones
    yield server
    aws_credentials.set_default_cache(None)
    server.close()


def sqs_target() -> dict:
    return {
        "type": "sqs",
        "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        "role_arn": ROLE,
        "body": "x",
        "timeout_seconds": TIMEOUT,
    }


def timed(target: dict) -> tuple[Outcome, float]:
    delivery = Delivery(str(uuid.uuid4()), str(uuid.uuid4()), datetime.now(UTC), 1, owner=OWNER)
    began = time.monotonic()
    outcome = deliver(target, delivery, TargetPolicy(allow_private=True))
    return outcome, time.monotonic() - began


def test_a_silent_sts_holds_a_delivery_no_longer_than_its_time_limit(silent_sts):
    outcome, took = timed(sqs_target())
    assert took < BOUND, f"took {took:.1f}s with a time limit of {TIMEOUT}s"
    assert outcome.status == "timed_out" and outcome.retryable
    assert outcome.error == f"sts AssumeRole: no answer within {TIMEOUT}s"
    assert silent_sts.accepted  # STS was asked (and never answered)


def test_concurrent_deliveries_of_one_role_and_owner_all_end_within_the_time_limit(silent_sts):
    """They wait on one AssumeRole, each no longer than its own time: not one after another."""
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: timed(sqs_target()), range(4)))
    for outcome, took in results:
        assert took < BOUND, f"took {took:.1f}s with a time limit of {TIMEOUT}s: {outcome.error}"
        assert outcome.status == "timed_out" and outcome.retryable
        assert (outcome.error or "").startswith("sts AssumeRole: "), outcome.error


def test_a_sigv4_http_delivery_spends_its_time_limit_once(silent_sts):
    """The AssumeRole's time comes off the HTTP request's; the error names the delivery's limit."""
    target = {
        "type": "http",
        "url": "http://127.0.0.1:1/hook",
        "auth": {"type": "sigv4", "service": "execute-api", "region": "us-east-1", "role_arn": ROLE},
        "timeout_seconds": TIMEOUT,
    }
    outcome, took = timed(target)
    assert took < BOUND, f"took {took:.1f}s with a time limit of {TIMEOUT}s"
    assert outcome.status == "timed_out" and outcome.retryable
    assert outcome.error == f"sts AssumeRole: no answer within {TIMEOUT}s"
