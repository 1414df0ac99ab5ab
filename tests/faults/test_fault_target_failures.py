"""Targets that fail, end to end through ``run_fanout`` and the executor on real Postgres: what
each execution records and when the next attempt is planned (in the row, lease released).

Complements tests/integration/test_runner.py (500 then 200, a 429 with Retry-After in seconds):
here a timeout, a Retry-After as an HTTP date, a Retry-After past ``max_age_seconds``, an
absurd Retry-After, the last attempt failing, and a permanent 4xx.
"""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime, timedelta

import pytest

from scheduler import service
from scheduler.planning.lifecycle import MAX_RETRY_AFTER_SECONDS
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.schedules import parse_schedule
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TargetServer
from tests.support import http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/target-faults"
YEARLY = "0 0 1 1 *"
SLACK = 0.25  # seconds: the completion plans from start time + elapsed, a few ms before its now()


@pytest.fixture
def target():
    server = TargetServer()
    yield server
    server.close()


def drain(store) -> float:
    """One fan-out round; returns once every execution finished, with the seconds it took."""
    began = time.monotonic()
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(allow_private=True)), max_workers=4)
    try:
        run_fanout(store, invoker, budget_seconds=0)
    finally:
        invoker.close()
    return time.monotonic() - began


def make_job(store, pool, name: str, url: str, *, timeout: int = 5, **retry) -> str:
    spec = http_spec(
        name,
        YEARLY,
        target={**http_spec("x")["target"], "url": url, "timeout_seconds": timeout},
        retry={
            "max_attempts": 3,
            "min_backoff_seconds": 1,
            "max_backoff_seconds": 60,
            "max_age_seconds": None,
            **retry,
        },
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    return job_id


def delay_after(job, execution) -> float:
    return (job.next_run_at - execution.finished_at).total_seconds()


def test_timeout_is_recorded_as_timed_out_and_a_retry_is_planned(store, pool, target):
    target.behaviour["/slow"] = [("hold", 15.0)]
    job_id = make_job(store, pool, "slow", target.url + "/slow", timeout=1)
    took = drain(store)
    assert took < 5  # the 1 s budget bounds the delivery, not the target
    [execution] = store.list_executions(OWNER, job_id)
    assert execution.status == "timed_out" and execution.http_status is None
    assert "timed out" in execution.error or "within 1s" in execution.error, execution.error
    assert 900 <= execution.duration_ms <= 3000
    # The target saw the client give up: nothing is left hanging.
    target.wait_for(lambda s: s.requests[0]["end"] == "client closed", timeout=5, what="the cut-off")
    job = store.get_job(OWNER, job_id)
    assert (job.attempt, job.last_status, job.lock_token, job.running_execution_id) == (
        1,
        "timed_out",
        None,
        None,
    )
    # Attempt 1: the backoff's ceiling is min_backoff_seconds itself.
    assert 1 - SLACK <= delay_after(job, execution) <= 1 + SLACK
    # The retry is delivered with the same key, as attempt 2.
    target.behaviour["/slow"] = [("answer", 200, {}, b"fast now")]
    make_due(pool, job_id)
    drain(store)
    newest, _ = store.list_executions(OWNER, job_id)
    assert (newest.status, newest.attempt, newest.trigger) == ("succeeded", 2, "retry")
    first, second = target.snapshot()
    assert first["headers"]["Idempotency-Key"] == second["headers"]["Idempotency-Key"]


def test_retry_after_as_an_http_date_is_a_floor_for_the_backoff(store, pool, target):
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    target.behaviour["/busy"] = [("answer", 429, {"Retry-After": when}, b"later")]
    job_id = make_job(store, pool, "busy-date", target.url + "/busy")
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    assert (execution.status, execution.http_status, execution.response_excerpt) == ("failed", 429, "later")
    job = store.get_job(OWNER, job_id)
    assert job.attempt == 1 and job.lock_token is None
    assert 85 <= delay_after(job, execution) <= 91  # the date (whole seconds), not the 1 s backoff


def test_absurd_retry_after_is_capped_at_a_day(store, pool, target):
    target.behaviour["/busy"] = [("answer", 503, {"Retry-After": "999999999999"}, b"")]
    job_id = make_job(store, pool, "busy-forever", target.url + "/busy")
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    job = store.get_job(OWNER, job_id)
    assert execution.status == "failed" and job.attempt == 1
    assert abs(delay_after(job, execution) - MAX_RETRY_AFTER_SECONDS) <= 1


def test_retry_after_past_max_age_ends_the_retries(store, pool, target):
    target.behaviour["/busy"] = [("answer", 429, {"Retry-After": "600"}, b"")]
    job_id = make_job(store, pool, "busy-too-long", target.url + "/busy", max_age_seconds=60)
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    job = store.get_job(OWNER, job_id)
    assert execution.status == "failed"
    # No retry within the occurrence's max age: the job moves on to its next occurrence.
    assert job.attempt == 0 and job.last_status == "failed" and job.failure_count == 1
    assert job.next_run_at == job.scheduled_at == parse_schedule(YEARLY).next_after(execution.finished_at)
    assert store.claim_due(10, 60) == []


def test_last_attempt_failing_moves_on_to_the_next_occurrence(store, pool, target):
    target.behaviour["/down"] = [("answer", 503, {}, b"down")]
    job_id = make_job(store, pool, "down", target.url + "/down", max_attempts=2)
    drain(store)
    job = store.get_job(OWNER, job_id)
    assert job.attempt == 1 and job.next_run_at < job.scheduled_at + timedelta(seconds=10)
    make_due(pool, job_id)
    drain(store)
    newest, oldest = store.list_executions(OWNER, job_id)
    assert [e.status for e in (oldest, newest)] == ["failed", "failed"]
    assert [e.attempt for e in (oldest, newest)] == [1, 2]
    job = store.get_job(OWNER, job_id)
    assert (job.attempt, job.failure_count, job.run_count, job.state) == (0, 2, 2, "active")
    assert job.next_run_at == parse_schedule(YEARLY).next_after(newest.finished_at)


def test_permanent_client_error_is_not_retried(store, pool, target):
    target.behaviour["/gone"] = [("answer", 404, {"Retry-After": "1"}, b"no such hook")]
    job_id = make_job(store, pool, "gone", target.url + "/gone", max_attempts=5)
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    job = store.get_job(OWNER, job_id)
    assert (execution.status, execution.http_status) == ("failed", 404)
    assert job.attempt == 0 and job.next_run_at > store.now() + timedelta(days=1)
    assert len(target.requests) == 1
