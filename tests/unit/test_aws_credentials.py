"""The per-(role, owner) credential cache keeps nothing for a role STS refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from scheduler.targets.aws_credentials import CredentialCache

ROLE = "arn:aws:iam::123456789012:role/target"


class RefusingSts:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def assume_role(self, **kwargs):
        self.calls.append(kwargs)
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "AssumeRole")


def test_a_refused_role_leaves_no_lock_or_credentials_behind():
    """Role ARNs are the tenants' choice: a warm executor must not grow a lock per refused role."""
    sts = RefusingSts()
    cache = CredentialCache(lambda region: sts)
    for i in range(3):
        with pytest.raises(ClientError):
            cache.credentials(f"{ROLE}-{i}", "arn:aws:iam::111111111111:user/alice")
    assert [call["ExternalId"] for call in sts.calls] == ["arn:aws:iam::111111111111:user/alice"] * 3
    assert cache._key_locks == {} and len(cache._credentials) == 0


class SlowSts:
    """An STS that answers after ``delay`` seconds of the clock the test moves."""

    def __init__(self, elapsed: list[float], delay: float) -> None:
        self.elapsed, self.delay = elapsed, delay

    def assume_role(self, **kwargs):
        self.elapsed[0] += self.delay
        return {
            "Credentials": {
                "AccessKeyId": "AKIDEXAMPLE",
                "SecretAccessKey": "secret",
                "SessionToken": "token",
                "Expiration": 4_000_000_000.0,
            }
        }


def test_the_time_assuming_the_role_took_comes_off_the_delivery(monkeypatch):
    """The delivery's budget bounds the AssumeRole and the call together: the call's read
    timeout is what is left, and no call is made once nothing is."""
    from scheduler.targets import aws_credentials

    elapsed = [0.0]
    monkeypatch.setattr(aws_credentials.time, "monotonic", lambda: elapsed[0])
    made: list[dict] = []
    monkeypatch.setattr(aws_credentials, "create_client", lambda service, region, creds, **kw: made.append(kw) or kw)
    owner = "arn:aws:iam::111111111111:user/alice"

    cache = CredentialCache(lambda region: SlowSts(elapsed, 4.0))
    client, _ = cache.client("sqs", "us-east-1", ROLE, owner, timeout=10)
    assert client["read_timeout"] == 6  # 10 s less the 4 the role took

    slow = CredentialCache(lambda region: SlowSts(elapsed, 12.0))
    with pytest.raises(aws_credentials.BudgetSpent):
        slow.client("sqs", "us-east-1", ROLE, owner, timeout=10)
    assert len(made) == 1


def test_a_delivery_whose_time_went_to_the_role_times_out(monkeypatch):
    """As an outcome: timed out (worth another attempt), the call never made."""
    from scheduler.core.domain import Delivery
    from scheduler.targets import aws, aws_credentials
    from scheduler.targets.views import view_of

    elapsed = [0.0]
    monkeypatch.setattr(aws_credentials.time, "monotonic", lambda: elapsed[0])
    cache = CredentialCache(lambda region: SlowSts(elapsed, 12.0))
    target = view_of(
        {
            "type": "sqs",
            "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
            "role_arn": ROLE,
            "body": "x",
        }
    )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    delivery = Delivery("j", "e", at, 1, owner="arn:aws:iam::111111111111:user/alice")
    outcome = aws.deliver_aws(target, delivery, None, budget=10, cache=cache)  # type: ignore[arg-type]
    assert outcome.status == "timed_out" and outcome.retryable
    assert "assuming the role" in (outcome.error or "")


def test_an_sts_call_s_timeouts_together_fit_in_what_is_left_of_the_delivery():
    """A slow connect then a silent read take the connect and the read timeouts one after the
    other: together they are no more than the time left (in steps), else the usual 3 and 5 s."""
    import pytest

    from scheduler.targets.aws_credentials import BudgetSpent, sts_timeouts

    assert sts_timeouts(None) == sts_timeouts(30.0) == (3.0, 5.0)
    for left in (7.9, 5.0, 2.0, 1.3, 0.5):
        connect, read = sts_timeouts(left)
        assert connect > 0 and read > 0 and connect + read <= left, left
    assert sts_timeouts(2.0) == (1.0, 1.0)
    with pytest.raises(BudgetSpent):
        sts_timeouts(0.3)
