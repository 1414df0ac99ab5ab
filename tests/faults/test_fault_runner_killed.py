"""A runner killed with SIGKILL in the middle of a delivery.

A `scheduler local` process delivers a one-off job to a loopback target that holds the request
open; the process is SIGKILLed while the target holds it. The lease then keeps every other
runner off the job until it expires (here: made to expire at once with ``expire_lease``, the
stand-in for waiting out timeout + 30 s); a second `scheduler local` reclaims the job, marks the
killed execution ``lost`` and delivers again, with the same idempotency key. The target tracks
the deliveries in flight per job: never two at once.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta

import pytest
import requests

from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TargetServer, poll
from tests.support import LocalScheduler, expire_lease

LOCAL_OWNER = "arn:aws:iam::000000000000:user/local"


@pytest.fixture
def processes():
    started: list[LocalScheduler] = []
    yield started
    for proc in started:
        if proc.process.poll() is None:
            proc.process.kill()
            proc.process.wait(timeout=10)


@pytest.fixture
def target():
    server = TargetServer()
    yield server
    server.close()


def test_sigkill_mid_delivery_is_reclaimed_once_the_lease_expires(db_url, pool, store, target, processes, tmp_path):
    # The first request is held open (up to 20 s); later ones answer at once.
    target.behaviour["/held"] = [("hold", 20.0), ("answer", 200, {}, b"second time lucky")]
    first = LocalScheduler(db_url, str(tmp_path / "runner1"))
    processes.append(first)
    run_at = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    answer = requests.post(
        first.url + "/v1/jobs",
        json={
            "name": "killed-mid-delivery",
            "run_at": run_at,
            "target": {"type": "http", "url": target.url + "/held", "timeout_seconds": 5},
        },
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]

    # The delivery is held by the target: kill the runner now.
    target.wait_for(lambda s: len(s.requests) == 1, timeout=15, what="the first delivery")
    first.process.send_signal(signal.SIGKILL)
    assert first.process.wait(timeout=10) == -signal.SIGKILL
    # The kernel closed the killed runner's connection: the target sees the delivery end.
    target.wait_for(lambda s: s.requests[0]["end"] == "client closed", timeout=5, what="the client going away")
    assert target.inflight[job_id] == 0

    # The dead runner's lease still holds the job: a second runner claims nothing.
    row = store.get_job(LOCAL_OWNER, job_id)
    [running] = store.list_executions(LOCAL_OWNER, job_id)
    assert running.status == "running" and str(row.running_execution_id) == running.id
    assert row.locked_until > store.now() + timedelta(seconds=20)  # timeout 5 s + 30 s margin
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(allow_private=True)), max_workers=2)
    try:
        assert run_fanout(store, invoker, budget_seconds=0).claimed == 0
    finally:
        invoker.close()
    assert len(target.requests) == 1

    # The lease expires; a second runner takes the job over and delivers it again.
    expire_lease(pool, job_id)
    second = LocalScheduler(db_url, str(tmp_path / "runner2"))
    processes.append(second)
    target.wait_for(lambda s: len(s.requests) == 2 and s.requests[1]["end"], timeout=15, what="the redelivery")
    executions = poll(
        lambda: (lambda es: es if es[0].status != "running" else None)(store.list_executions(LOCAL_OWNER, job_id)),
        timeout=10,
        what="the redelivery recorded",
    )
    assert second.stop() == 0, "".join(second.lines)

    newest, oldest = executions
    assert oldest.id == running.id and oldest.status == "lost"
    assert "lease expired" in oldest.error and oldest.finished_at is not None
    assert newest.status == "succeeded" and newest.response_excerpt == "second time lucky"
    assert (newest.attempt, newest.trigger) == (2, "retry")
    job = store.get_job(LOCAL_OWNER, job_id)
    assert job.state == "completed" and job.lock_token is None and job.last_status == "succeeded"

    held, redelivered = target.snapshot()
    # Same occurrence (same idempotency key), two executions, never both in flight.
    assert held["headers"]["Idempotency-Key"] == redelivered["headers"]["Idempotency-Key"]
    assert held["headers"]["X-Scheduler-Execution-Id"] == oldest.id
    assert redelivered["headers"]["X-Scheduler-Execution-Id"] == newest.id
    assert (held["headers"]["X-Scheduler-Attempt"], redelivered["headers"]["X-Scheduler-Attempt"]) == ("1", "2")
    assert redelivered["arrived"] > held["ended"]
    assert target.max_inflight[job_id] == 1
