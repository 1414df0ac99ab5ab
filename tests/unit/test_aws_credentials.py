"""The per-(role, owner) credential cache keeps nothing for a role STS refused."""

from __future__ import annotations

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
