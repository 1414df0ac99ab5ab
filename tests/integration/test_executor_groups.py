"""An executor invoke carrying a group of claims (as the fan-out sends them under a backlog), on
real Postgres and a real HTTP server on loopback: started in one statement, delivered at once,
each outcome recorded as its delivery ends."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from scheduler import service
from scheduler.core import constants as c
from scheduler.runner.dispatch import invoke_payload
from scheduler.runner.executor import execute_invoke, invoke_claims
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.support import http_spec, run_at_once

OWNER = "arn:aws:iam::111111111111:user/alice"
LOCAL = TargetPolicy(allow_private=True)


def due_one_offs(store, url: str, count: int, *, path: str = "/hook", prefix: str = "job") -> list[str]:
    """``count`` one-off jobs due now, their target ``url + path``; their ids."""
    run_at = store.now() - timedelta(seconds=1)
    target = {**http_spec("x")["target"], "url": url + path}
    return [
        str(service.create_job(store, OWNER, http_spec(f"{prefix}-{n}", None, run_at=run_at, target=target)).id)
        for n in range(count)
    ]


def run(store, event, metrics=None) -> dict:
    return execute_invoke(event, store=store, decrypt_target=lambda t: t, policy=LOCAL, metrics=metrics)


def test_a_group_is_started_delivered_and_recorded_together(store, target_server):
    job_ids = due_one_offs(store, target_server.url, 5)
    claims = store.claim_due(10, 60)
    metrics = MemoryMetrics()
    answer = run(store, invoke_payload(claims), metrics)
    reports = answer["executions"]
    assert sorted(r["job_id"] for r in reports) == sorted(job_ids)
    assert {(r["outcome"], r["status"]) for r in reports} == {("completed", "succeeded")}
    requests = target_server.wait_for(5)
    # Each delivery carries its own job's identity, and its execution is the one recorded.
    assert sorted(r["headers"]["X-Scheduler-Job-Id"] for r in requests) == sorted(job_ids)
    for job_id in job_ids:
        [execution] = store.list_executions(OWNER, job_id)
        assert execution.status == "succeeded" and execution.http_status == 200
        job = store.get_job(OWNER, job_id)
        assert job.state == "completed" and job.lock_token is None and job.running_execution_id is None
    assert metrics.total("Executions", status="succeeded") == 5
    assert len(metrics.values[("LatenessMs", (("trigger", "schedule"),))]) == 5


def test_claims_whose_lease_was_lost_do_nothing_and_a_duplicate_invoke_runs_none_again(store, pool, target_server):
    job_ids = due_one_offs(store, target_server.url, 3)
    claims = store.claim_due(10, 60)
    stale = claims[0].job_id
    with pool.connection() as conn:  # its lease expired and another fan-out took the job
        conn.execute("UPDATE job_runs SET locked_until = now() - interval '1 second' WHERE job_id = %s", (stale,))
    [newer] = store.claim_due(10, 60)
    assert newer.job_id == stale
    event = invoke_payload(claims)
    reports = {r["job_id"]: r for r in run(store, event)["executions"]}
    assert reports[stale]["outcome"] == "lease_lost"
    assert {reports[j]["status"] for j in job_ids if j != stale} == {"succeeded"}
    assert len(target_server.wait_for(2)) == 2
    # Lambda may deliver an async event twice: the second finds every claim started already.
    again = run(store, event)["executions"]
    assert {r["outcome"] for r in again} == {"lease_lost"} and len(again) == 3
    assert len(target_server.requests) == 2
    assert run(store, newer.to_event())["status"] == "succeeded"  # the newer claim still runs it


def test_a_slow_target_holds_back_no_other_jobs_completion(store, target_server):
    slow_gate = threading.Event()
    target_server.gates["/slow"] = slow_gate
    [slow] = due_one_offs(store, target_server.url, 1, path="/slow", prefix="slow")
    fast = due_one_offs(store, target_server.url, 3, prefix="fast")
    claims = store.claim_due(10, 60)
    answer: dict = {}
    worker = threading.Thread(target=lambda: answer.update(run(store, invoke_payload(claims))))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if all(store.get_job(OWNER, job_id).state == "completed" for job_id in fast):
                break
            time.sleep(0.02)
        # The fast jobs are recorded while the slow delivery is still under way.
        assert all(store.list_executions(OWNER, job_id)[0].status == "succeeded" for job_id in fast)
        assert store.list_executions(OWNER, slow)[0].status == "running"
    finally:
        slow_gate.set()
        worker.join(30)
    assert {r["status"] for r in answer["executions"]} == {"succeeded"} and len(answer["executions"]) == 4
    assert store.list_executions(OWNER, slow)[0].status == "succeeded"


def test_a_group_of_one_claim_or_more_than_allowed_is_refused_before_anything_runs(store, target_server):
    due_one_offs(store, target_server.url, 1)
    [claim] = store.claim_due(1, 60)
    too_many = {"claims": [claim.to_event()] * (c.MAX_CLAIMS_PER_INVOKE + 1)}
    for event in (too_many, {"claims": []}, {"claims": "x"}):
        with pytest.raises(ValueError, match="carries 1 to 50 claims"):
            run(store, event)
    assert target_server.requests == []
    assert invoke_claims(claim.to_event()) == [claim.to_event()]
    assert run(store, {"claims": [claim.to_event()]})["executions"][0]["status"] == "succeeded"


def test_a_group_delivered_twice_at_once_runs_each_job_once(store, target_server):
    """Lambda may hand the same async event to two executors at once: their starts lock the
    group's rows in the same order, so one waits for the other (no deadlock), and every job is
    started, delivered and recorded by one of them only."""
    job_ids = due_one_offs(store, target_server.url, 20)
    event = invoke_payload(store.claim_due(50, 60))
    answers, errors = run_at_once(lambda: run(store, event), 2)
    assert not errors, errors
    reports = [r for answer in answers for r in answer["executions"]]
    completed = sorted(r["job_id"] for r in reports if r["outcome"] == "completed")
    assert completed == sorted(job_ids)  # each once, by one executor or the other
    assert sum(r["outcome"] == "lease_lost" for r in reports) == len(job_ids)
    assert sorted(r["headers"]["X-Scheduler-Job-Id"] for r in target_server.requests) == sorted(job_ids)
    assert all(len(store.list_executions(OWNER, job_id)) == 1 for job_id in job_ids)
