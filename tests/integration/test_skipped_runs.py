"""Occurrences that did not run, on record (issue 33, item 7): a skipped execution with its
``skip_reason`` and ``skipped_count``, one row per event however many occurrences it stands for,
filterable with ``status=skipped`` and counted in the ``SkippedOccurrences`` metric. Real
Postgres; a job that skips nothing records nothing."""

from __future__ import annotations

from datetime import timedelta

from scheduler import service
from scheduler.core.domain import Completion, Outcome
from scheduler.core.timeutil import format_time
from scheduler.runner.executor import Executor, Finished
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import api, box, create, job_body  # noqa: F401 - fixtures
from tests.support import http_spec

OWNER = "arn:aws:iam::111111111111:user/alice"


def _shift(pool, job_id: str, seconds: int) -> None:
    """Move the occurrence in hand ``seconds`` into the past (as if the job had been due since)."""
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('second', now()) - make_interval(secs => %s), "
            "next_run_at = date_trunc('second', now()) - make_interval(secs => %s) WHERE job_id = %s",
            (seconds, seconds, job_id),
        )


def _record(store, claim, elapsed: float, metrics: MemoryMetrics):
    """Record a claim's success as the runner does, as if its delivery took ``elapsed`` seconds."""
    executor = Executor(store, lambda t: t, TargetPolicy(), metrics)
    finished = Finished(claim.job_id, claim.lock_token, claim.started, Outcome("succeeded", http_status=200), elapsed)
    return executor.record([finished])


def _skipped(store, job_id: str):
    return [e for e in store.list_executions(OWNER, job_id) if e.status == "skipped"]


def test_a_long_pause_of_an_every_second_job_is_one_skipped_row_with_its_count(store, pool):
    since = store.now() - timedelta(hours=2)  # @every counts from start_at: its occurrences go back that far
    spec = http_spec("tick", "@every 1s", missed_runs="skip", start_at=since)
    job_id = str(service.create_job(store, OWNER, spec).id)
    service.pause_job(store, OWNER, job_id)
    _shift(pool, job_id, 3600)  # paused an hour ago
    resumed = service.resume_job(store, OWNER, job_id)
    [row] = _skipped(store, job_id)
    assert row.skip_reason == "paused" and 3600 <= row.skipped_count <= 3602
    assert row.scheduled_at < resumed.next_run_at - timedelta(minutes=59)  # the first one skipped
    assert row.finished_at is not None and row.attempt == 0 and row.trigger == "schedule"


def test_occurrences_that_fell_while_the_job_ran_are_overlap(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("slow", "@every 1s", missed_runs="skip")).id)
    _shift(pool, job_id, 0)
    [claim] = store.claim_and_start(10)
    metrics = MemoryMetrics()
    [report] = _record(store, claim, 5.0, metrics)  # the delivery took five seconds
    assert report.outcome == "completed"
    [row] = _skipped(store, job_id)
    assert row.skip_reason == "overlap" and row.skipped_count in (4, 5)
    assert metrics.total("SkippedOccurrences", reason="overlap") == row.skipped_count


def test_occurrences_due_before_a_late_start_are_missed(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("late", "* * * * *", missed_runs="run_once")).id)
    with pool.connection() as conn:  # the runner was down for ten minutes
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('minute', now()) - interval '10 minutes', "
            "next_run_at = date_trunc('minute', now()) - interval '10 minutes' WHERE job_id = %s",
            (job_id,),
        )
    [claim] = store.claim_and_start(10)
    _record(store, claim, 0.01, MemoryMetrics())
    [row] = _skipped(store, job_id)
    # Ran: the occurrence in hand; caught up: the latest (run_once); between them, nine missed.
    assert row.skip_reason == "missed" and row.skipped_count == 9


def test_a_job_that_skips_nothing_records_nothing(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("fine", "@every 1h")).id)
    _shift(pool, job_id, 0)
    [claim] = store.claim_and_start(10)
    metrics = MemoryMetrics()
    _record(store, claim, 0.01, metrics)
    assert _skipped(store, job_id) == [] and not any(name == "SkippedOccurrences" for name, _ in metrics.values)
    service.pause_job(store, OWNER, job_id)
    service.resume_job(store, OWNER, job_id)  # a pause within the hour: nothing fell in it
    assert _skipped(store, job_id) == []


def test_the_locking_path_records_the_skips_too(store, pool):
    spec = http_spec("locked", "@every 1s", missed_runs="skip", start_at=store.now() - timedelta(hours=1))
    job_id = str(service.create_job(store, OWNER, spec).id)
    _shift(pool, job_id, 3)  # claimed three seconds late
    [claim] = store.claim_and_start(10)
    # Without its started row, the completion is planned from the job as it is (the locking path).
    done = Completion(claim.job_id, claim.lock_token, claim.started.execution_id, Outcome("succeeded"))
    assert service.complete_executions(store, [done]) == [True]
    [row] = _skipped(store, job_id)
    assert row.skip_reason == "missed" and row.skipped_count in (2, 3)


def test_a_one_off_outside_its_window_is_skipped_window(api, store):
    now = store.now()
    body = job_body(
        "too-early",
        schedule=None,
        run_at=format_time(now + timedelta(hours=1)),
        start_at=format_time(now + timedelta(hours=2)),
    )
    job = create(api, body)
    assert job["state"] == "completed"
    [row] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert (row["status"], row["skip_reason"], row["skipped_count"]) == ("skipped", "window", 1)
    assert row["scheduled_at"] == body["run_at"]


def test_skipped_rows_are_filtered_with_status_skipped_across_jobs(api, store, pool):
    job = create(api, job_body("filtered", schedule="* * * * *", missed_runs="skip"))
    api("POST", f"/v1/jobs/{job['id']}/pause")
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('minute', now()) - interval '5 minutes' WHERE job_id = %s",
            (job["id"],),
        )
    api("POST", f"/v1/jobs/{job['id']}/resume")
    listed = api("GET", "/v1/executions", query={"status": "skipped"}).body["executions"]
    assert [(e["job_name"], e["skip_reason"]) for e in listed] == [("filtered", "paused")]
    assert listed[0]["skipped_count"] in (5, 6)
    assert api("GET", "/v1/executions", query={"status": "succeeded"}).body["executions"] == []
