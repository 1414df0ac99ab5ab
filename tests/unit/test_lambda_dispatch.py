"""LambdaDispatch's invokes: what is built once, the connection given back, the client's pool."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from scheduler.dispatch import INVOKE_THREADS, LambdaDispatch
from scheduler.domain import Claim
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
