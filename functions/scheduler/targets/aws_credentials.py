"""Credentials for AWS targets, without a confused deputy.

The executor never calls a target's AWS service with its own role. For every delivery it takes
the credentials of the job's ``role_arn``, assumed with ``ExternalId`` set to the principal that
owns the job: a role serves only the tenants its trust policy names, so one tenant cannot make
the scheduler act on another tenant's resources by naming their role.

:class:`CredentialCache` keeps those credentials per ``(role_arn, owner)`` (never shared across
owners, even for one role) until :data:`REFRESH_MARGIN_SECONDS` before they expire, and the
service clients built from them, so a warm executor neither calls STS nor builds a client per
delivery. Every client, STS's too, honours ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>`` (botocore does), which is how local mode and the tests reach
a moto server.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.core.aws_arns import partition_of_region

#: Credentials are refreshed this long before they expire.
REFRESH_MARGIN_SECONDS = 300.0
#: Lifetime asked of STS (every role allows at least one hour).
SESSION_SECONDS = 3600
#: Timeouts of the STS call itself, when the delivery has that much time left (less otherwise).
STS_CONNECT_TIMEOUT = 3.0
STS_READ_TIMEOUT = 5.0
#: The step to which an STS client's timeouts are rounded down when the delivery has less than
#: :data:`STS_READ_TIMEOUT` left (a client per step and region, not one per call).
STS_TIMEOUT_STEP = 0.25

# What STS accepts as an ExternalId.
_EXTERNAL_ID = re.compile(r"^[\w+=,.@:/-]{2,1224}\Z", re.ASCII)
_DEFAULT_REGION = {"aws": "us-east-1", "aws-cn": "cn-north-1", "aws-us-gov": "us-gov-west-1"}


class OwnerNotUsable(ValueError):
    """The job's owner cannot serve as an ExternalId (STS's character set and length)."""


class BudgetSpent(TimeoutError):
    """The delivery's time was gone before its call could be made (spent assuming the role, or
    waiting for another delivery's AssumeRole of the same role and owner)."""


@dataclass(frozen=True)
class RoleCredentials:
    """Temporary credentials of one assumed role for one owner."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    expires_at: float  # epoch seconds

    @property
    def secrets(self) -> tuple[str, str]:
        """The parts never to be logged or stored (for redaction)."""
        return self.secret_access_key, self.session_token


def session_name(owner: str) -> str:
    """The RoleSessionName: names the tenant in the role's CloudTrail records without the
    principal's text (a hash of it)."""
    return "scheduler-" + hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


def _region_for(role_arn: str) -> str:
    """The region of STS calls: the process's own when it is in the role's partition."""
    partition = role_arn.split(":", 2)[1] if role_arn.count(":") >= 2 else "aws"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region and partition_of_region(region) == partition:
        return region
    return _DEFAULT_REGION.get(partition, "us-east-1")


_botocore_session = None
_botocore_lock = threading.Lock()


def create_client(
    service: str,
    region: str,
    credentials: RoleCredentials | None = None,
    *,
    connect_timeout: float = 3.0,
    read_timeout: float = 30.0,
) -> Any:
    """A botocore client of ``service`` in ``region`` (one attempt per call: retries are the
    job's, through its backoff), signed with ``credentials`` (else the process's own)."""
    global _botocore_session
    import botocore.session
    from botocore.config import Config

    config = Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
        max_pool_connections=16,
    )
    keys: dict[str, str] = {}
    if credentials is not None:
        keys = {
            "aws_access_key_id": credentials.access_key_id,
            "aws_secret_access_key": credentials.secret_access_key,
            "aws_session_token": credentials.session_token,
        }
    # Creating clients from one session is not thread-safe; using them is.
    with _botocore_lock:
        if _botocore_session is None:
            _botocore_session = botocore.session.get_session()
        return _botocore_session.create_client(service, region_name=region, config=config, **keys)


def sts_timeouts(left: float | None) -> tuple[float, float]:
    """The connect and read timeouts of an STS call made with ``left`` seconds of the delivery
    (None: no bound): ``STS_CONNECT_TIMEOUT`` and ``STS_READ_TIMEOUT`` when they fit, else the two
    together no more than what is left (a slow connect then a silent read included), rounded down
    to steps (a client per step). urllib3 applies them per address tried and per read, so the
    call keeps to their sum with one address and an answer read at once (STS's case: one
    attempt, a short answer). ``BudgetSpent`` when too little is left to make the call."""
    if left is None or left >= STS_CONNECT_TIMEOUT + STS_READ_TIMEOUT:
        return STS_CONNECT_TIMEOUT, STS_READ_TIMEOUT
    steps = math.floor(left / STS_TIMEOUT_STEP)
    connect = min(STS_CONNECT_TIMEOUT, (steps // 2) * STS_TIMEOUT_STEP)
    if connect <= 0:
        raise BudgetSpent("the delivery's time ran out before the AssumeRole")
    return connect, steps * STS_TIMEOUT_STEP - connect


class CredentialCache:
    """Assumed-role credentials per ``(role_arn, owner)``, and clients built from them.

    ``sts_client_for(region)`` gives the STS client used to assume roles (default: clients of
    the process's own credentials whose timeouts are at most what the delivery has left);
    ``clock`` is epoch seconds (tests move it).
    """

    def __init__(
        self,
        sts_client_for: Callable[[str], Any] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        refresh_margin: float = REFRESH_MARGIN_SECONDS,
        max_entries: int = 512,
    ):
        self._sts_client_for = sts_client_for
        self._sts_clients: OrderedDict[tuple[str, float, float], Any] = OrderedDict()
        self.clock = clock
        self.refresh_margin = refresh_margin
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._credentials: OrderedDict[tuple[str, str], RoleCredentials] = OrderedDict()
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._clients: OrderedDict[tuple, tuple[str, Any]] = OrderedDict()

    def _sts(self, region: str, connect: float, read: float) -> Any:
        """The STS client of ``region`` with these connect and read timeouts; a factory given to
        the cache is used as it is."""
        if self._sts_client_for is not None:
            return self._sts_client_for(region)
        key = (region, connect, read)
        with self._lock:
            client = self._sts_clients.get(key)
        if client is None:
            client = create_client("sts", region, connect_timeout=connect, read_timeout=read)
            with self._lock:
                client = self._sts_clients.setdefault(key, client)
                while len(self._sts_clients) > 64:
                    self._sts_clients.popitem(last=False)
        return client

    def credentials(self, role_arn: str, owner: str, *, deadline: float | None = None) -> RoleCredentials:
        """Credentials of ``role_arn`` assumed for ``owner`` (``ExternalId=owner``), from the
        cache while they have more than the refresh margin left. ``deadline`` (``time.monotonic``
        seconds) bounds the wait for another delivery's AssumeRole of the same key and the STS
        call's own timeouts. Raises ``OwnerNotUsable``, ``BudgetSpent`` when the deadline passed
        before the call could be made, or botocore's errors of the STS call (``ClientError`` for
        a denial, ``ReadTimeoutError`` when STS did not answer in the time left)."""
        if not isinstance(owner, str) or not _EXTERNAL_ID.match(owner):
            raise OwnerNotUsable("the job's owner cannot serve as the ExternalId of an AssumeRole")
        key = (role_arn, owner)
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        # One STS call per key at a time: concurrent deliveries wait for it, each no longer than
        # its own deadline (a delivery behind a failed call then makes its own, in its own time).
        if not lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            raise BudgetSpent("the delivery's time ran out waiting for another delivery's AssumeRole of the role")
        try:
            with self._lock:
                found = self._credentials.get(key)
            if found is not None and found.expires_at - self.clock() > self.refresh_margin:
                return found
            try:
                fresh = self._assume(role_arn, owner, deadline)
            except BaseException:
                with self._lock:  # a refused role leaves no per-key lock behind (the keys are the tenants')
                    if key not in self._credentials:
                        self._key_locks.pop(key, None)
                raise
            with self._lock:
                self._credentials[key] = fresh
                self._credentials.move_to_end(key)
                while len(self._credentials) > self.max_entries:
                    dropped, _ = self._credentials.popitem(last=False)
                    self._key_locks.pop(dropped, None)
            return fresh
        finally:
            lock.release()

    def _assume(self, role_arn: str, owner: str, deadline: float | None) -> RoleCredentials:
        connect, read = sts_timeouts(None if deadline is None else deadline - time.monotonic())
        sts = self._sts(_region_for(role_arn), connect, read)
        answer = sts.assume_role(
            RoleArn=role_arn, ExternalId=owner, RoleSessionName=session_name(owner), DurationSeconds=SESSION_SECONDS
        )
        creds = answer["Credentials"]
        expiration = creds["Expiration"]
        expires_at = expiration.timestamp() if isinstance(expiration, datetime) else float(expiration)
        return RoleCredentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"], expires_at)

    def client(
        self, service: str, region: str, role_arn: str, owner: str, *, timeout: float
    ) -> tuple[Any, RoleCredentials]:
        """A ``service`` client in ``region`` signing as ``role_arn`` for ``owner``, and its
        credentials; rebuilt when the credentials were refreshed. The time the credentials took
        (an AssumeRole, or the wait for another delivery's) comes off ``timeout``, which bounds
        the whole delivery: ``BudgetSpent`` when nothing is left of it."""
        began = time.monotonic()
        creds = self.credentials(role_arn, owner, deadline=began + timeout)
        left = timeout - (time.monotonic() - began)
        if left <= 0:
            raise BudgetSpent("assuming the role took the delivery's whole time")
        read_timeout = max(1, math.ceil(left))
        key = (service, region, role_arn, owner, read_timeout)
        with self._lock:
            cached = self._clients.get(key)
            if cached is not None and cached[0] == creds.access_key_id:
                self._clients.move_to_end(key)
                return cached[1], creds
        client = create_client(
            service, region, creds, connect_timeout=min(3.0, float(read_timeout)), read_timeout=read_timeout
        )
        with self._lock:
            self._clients[key] = (creds.access_key_id, client)
            self._clients.move_to_end(key)
            while len(self._clients) > self.max_entries:
                self._clients.popitem(last=False)
        return client, creds

    def clear(self) -> None:
        """Forget every credential and client (tests)."""
        with self._lock:
            self._credentials.clear()
            self._key_locks.clear()
            self._clients.clear()
            self._sts_clients.clear()


_default: CredentialCache | None = None
_default_lock = threading.Lock()


def default_cache() -> CredentialCache:
    """The process's cache (one per Lambda container; kept across warm invocations)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CredentialCache()
        return _default


def set_default_cache(cache: CredentialCache | None) -> None:
    """Replace the process's cache (tests; None builds a fresh one on next use)."""
    global _default
    with _default_lock:
        _default = cache
