"""LambdaDispatch's invokes: what is built once, the connection given back, the client's pool,
claims grouped under a backlog."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from scheduler.core import constants as c
from scheduler.core.domain import Claim
from scheduler.runner.dispatch import INVOKE_THREADS, LambdaDispatch, group_claims, invoke_payload
from scheduler.settings import Settings
from scheduler.wiring import lambda_client_config

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def claim(n: int) -> Claim:
    return Claim(
        job_id=f"job-{n}",
        lock_token=f"token-{n}",
        lease_kind="schedule",
        scheduled_at=NOW,
        due_at=NOW,
        claimed_at=NOW,
        locked_until=NOW,
    )


class Body(io.BytesIO):
    reads = 0

    def read(self, *args):
        Body.reads += 1
        return super().read(*args)


class BrokenBody:
    def read(self, *args):
        raise ConnectionResetError("reset after the 202")


class Client:
    def __init__(self, broken: bool = False) -> None:
        self.calls: list[dict] = []
        self.broken = broken

    def invoke(self, **kwargs):
        self.calls.append(kwargs)
        return {"StatusCode": 202, "Payload": BrokenBody() if self.broken else Body(b"")}


def test_each_invoke_reads_its_answer_so_the_connection_goes_back_to_the_pool():
    client, Body.reads = Client(), 0
    dispatch = LambdaDispatch(client, "executor", max_workers=4)
    try:
        assert dispatch.dispatch([claim(i) for i in range(20)]) == []
    finally:
        dispatch.close()
    assert Body.reads == 20
    assert {(c["FunctionName"], c["InvocationType"]) for c in client.calls} == {("executor", "Event")}
    assert len({c["Payload"] for c in client.calls}) == 20


def test_an_accepted_invoke_whose_answer_cannot_be_read_is_still_dispatched_once():
    client = Client(broken=True)
    dispatch = LambdaDispatch(client, "executor", max_workers=1)
    try:
        assert dispatch.dispatch([claim(1)]) == []
    finally:
        dispatch.close()
    assert len(client.calls) == 1  # not invoked again: the executor would run twice


def test_the_client_pool_holds_a_connection_per_invoking_thread_and_skips_validation():
    config = lambda_client_config()
    assert config.max_pool_connections == INVOKE_THREADS == LambdaDispatch(Client(), "x").pool._max_workers
    assert config.parameter_validation is False
    assert lambda_client_config(32).max_pool_connections == 32


def test_claims_go_one_per_invoke_until_there_are_more_than_threads_then_in_groups():
    few, many = [claim(i) for i in range(16)], [claim(i) for i in range(100)]
    assert [len(g) for g in group_claims(few, 10, threads=16)] == [1] * 16
    assert [len(g) for g in group_claims(many, 10, threads=16)] == [7] * 14 + [2]
    assert [len(g) for g in group_claims(many, 3, threads=16)] == [3] * 33 + [1]  # never more than asked
    assert [len(g) for g in group_claims(many, 1, threads=16)] == [1] * 100
    assert group_claims([], 10, threads=16) == []
    grouped = group_claims(many, 10, threads=16)
    assert [c.job_id for g in grouped for c in g] == [c.job_id for c in many]  # each once, in order


def test_a_group_travels_in_one_invoke_and_a_single_claim_keeps_its_payload():
    assert invoke_payload([claim(1)]) == claim(1).to_event()
    assert invoke_payload([claim(1), claim(2)]) == {"claims": [claim(1).to_event(), claim(2).to_event()]}
    client = Client()
    dispatch = LambdaDispatch(client, "executor", max_workers=4, claims_per_invoke=10)
    try:
        assert dispatch.dispatch([claim(i) for i in range(40)]) == []
    finally:
        dispatch.close()
    events = [json.loads(c["Payload"]) for c in client.calls]
    assert len(events) == 4 and all(len(event["claims"]) == 10 for event in events)
    assert sorted(e["job_id"] for event in events for e in event["claims"]) == sorted(f"job-{i}" for i in range(40))


class RefusingClient(Client):
    """Refuses (for good) every invoke carrying job-0."""

    def invoke(self, **kwargs):
        if b'"job-0"' in kwargs["Payload"]:
            self.calls.append(kwargs)
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "Invoke")
        return super().invoke(**kwargs)


def test_a_group_not_invoked_is_given_back_whole():
    client = RefusingClient()
    dispatch = LambdaDispatch(client, "executor", max_workers=2, claims_per_invoke=10, sleep=lambda s: None)
    try:
        refused = dispatch.dispatch([claim(i) for i in range(6)])
    finally:
        dispatch.close()
    assert [c.job_id for c in refused] == ["job-0", "job-1", "job-2"]  # the group of job-0, for release
    assert len(client.calls) == 2


def test_settings_read_the_claims_an_invoke_may_carry():
    assert Settings.from_env({}).claims_per_invoke == c.DEFAULT_CLAIMS_PER_INVOKE == 25
    assert Settings.from_env({c.ENV_CLAIMS_PER_INVOKE: "1"}).claims_per_invoke == 1
    for bad in ("0", "51", "ten"):
        with pytest.raises(ValueError, match=c.ENV_CLAIMS_PER_INVOKE):
            Settings.from_env({c.ENV_CLAIMS_PER_INVOKE: bad})


def test_busy_executors_get_full_groups_however_few_are_claimed():
    """Many live leases: the backlog waits in Lambda's queue, where no claim sees it."""
    few = [claim(i) for i in range(12)]
    assert [len(g) for g in group_claims(few, 10, threads=16, busy=True)] == [10, 2]
    leases = [3]
    client = Client()
    dispatch = LambdaDispatch(
        client, "executor", max_workers=4, claims_per_invoke=5, max_in_flight=100, in_flight=lambda: leases[0]
    )
    try:
        assert dispatch.capacity() == 97
        dispatch.dispatch(few[:4])  # 3 leases, fewer than the 4 threads: one claim an invoke
        leases[0] = 4
        assert dispatch.capacity() == 96
        dispatch.dispatch(few[4:])  # 4 leases: busy, groups of 5
    finally:
        dispatch.close()
    sizes = sorted(len(json.loads(c["Payload"]).get("claims", [None])) for c in client.calls)
    assert sizes == [1, 1, 1, 1, 3, 5]
