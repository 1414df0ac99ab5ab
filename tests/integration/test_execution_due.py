"""Each execution records when its attempt was due (``due_at``, migration 0012), so that its
lateness is its start against that time: the occurrence for a first attempt, the retry's time
after a backoff, the resume for a catch-up, the request for a manual run. Real Postgres."""

from __future__ import annotations

from datetime import UTC, timedelta

from scheduler import service
from scheduler.api.serialize import execution_json
from scheduler.planning.lifecycle import Outcome
from scheduler.store.postgres import Completion
from tests.support import http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/alice"
RETRY = {"max_attempts": 3, "min_backoff_seconds": 5, "max_backoff_seconds": 5, "max_age_seconds": None}


def _run(store, outcome: Outcome):
    [claim] = store.claim_and_start(10)
    service.complete_executions(
        store, [Completion(claim.job_id, claim.lock_token, claim.started.execution_id, outcome)]
    )
    return claim


def _now(pool):
    with pool.connection() as conn:
        return conn.execute("SELECT now() AS now").fetchone()["now"]


def test_a_first_attempt_is_due_at_its_occurrence_and_a_retry_at_its_backoff(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("r", "0 0 1 1 *", retry=RETRY)).id)
    make_due(pool, job_id)
    _run(store, Outcome("failed", retryable=True))
    [first] = store.list_executions(OWNER, job_id)
    assert first.due_at == first.scheduled_at and first.started_at - first.due_at < timedelta(seconds=5)
    retry_at = store.get_job(OWNER, job_id).next_run_at
    assert retry_at > first.scheduled_at + timedelta(seconds=4)  # the backoff
    with pool.connection() as conn:  # the retry's time has come
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 second' WHERE job_id = %s", (job_id,))
        retry_at = conn.execute("SELECT next_run_at FROM job_runs WHERE job_id = %s", (job_id,)).fetchone()[
            "next_run_at"
        ]
    _run(store, Outcome("succeeded"))
    second, _ = store.list_executions(OWNER, job_id)
    assert (second.trigger, second.attempt) == ("retry", 2)
    assert second.due_at == retry_at and second.scheduled_at == first.scheduled_at
    answer = execution_json(second)
    assert answer["due_at"].endswith("Z") and answer["due_at"] != answer["scheduled_at"]


def test_a_manual_run_is_due_at_its_request(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("m", "0 0 1 1 *")).id)
    requested = store.request_run(OWNER, job_id).manual_run_at
    _run(store, Outcome("succeeded"))
    [manual] = store.list_executions(OWNER, job_id)
    assert manual.trigger == "manual" and manual.due_at == requested == manual.scheduled_at


def test_a_catch_up_after_a_resume_is_due_at_the_resume_not_the_missed_occurrence(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("c", "* * * * *")).id)
    service.pause_job(store, OWNER, job_id)
    with pool.connection() as conn:  # paused an hour ago: sixty occurrences missed
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('minute', now() - interval '1 hour'), "
            "next_run_at = date_trunc('minute', now() - interval '1 hour') WHERE job_id = %s",
            (job_id,),
        )
    before = _now(pool)
    resumed = service.resume_job(store, OWNER, job_id)
    assert resumed.scheduled_at < before <= resumed.next_run_at  # the latest missed one, due now
    _run(store, Outcome("succeeded"))
    catch_up, skipped = store.list_executions(OWNER, job_id)
    # The 60 missed occurrences before the one caught up are on record as one skipped row (issue 33).
    assert (skipped.status, skipped.skip_reason, skipped.skipped_count) == ("skipped", "paused", 60)
    assert catch_up.scheduled_at == resumed.scheduled_at  # the missed occurrence (run_once) ...
    assert catch_up.due_at == resumed.next_run_at  # ... due at the resume
    assert catch_up.started_at - catch_up.due_at < timedelta(seconds=5)


def test_a_one_off_created_after_its_time_is_due_at_its_creation_not_at_its_past_time(store, pool):
    """Lateness measures the scheduler alone: a one-off whose time had passed when it was created
    (``run_at`` or ``at()``) fires at once, due from its creation; its occurrence stays its time."""
    from datetime import datetime

    past = datetime(2020, 1, 1, tzinfo=UTC)
    for name, spec in [
        ("run-at", http_spec("run-at", None, run_at=past)),
        ("at", http_spec("at", "at(2020-01-01T00:00:00)")),
    ]:
        before = _now(pool)
        job = service.create_job(store, OWNER, spec)
        assert job.next_run_at is not None and job.next_run_at >= before, name
        claim = _run(store, Outcome("succeeded"))
        assert claim.job_id == str(job.id)
        [execution] = store.list_executions(OWNER, str(job.id))
        assert execution.scheduled_at == past, name
        assert before <= execution.due_at <= execution.started_at, name
        assert execution.started_at - execution.due_at < timedelta(seconds=5), name


def test_a_one_off_created_after_its_time_counts_max_age_from_its_creation(store, pool):
    """Its retries are not cut short by the years before it existed: ``max_age_seconds`` counts
    from its creation, from which it was due, and the retry, once due, is delivered."""
    from datetime import datetime

    retry = {"max_attempts": 3, "min_backoff_seconds": 5, "max_backoff_seconds": 5, "max_age_seconds": 60}
    past = datetime(2020, 1, 1, tzinfo=UTC)
    job = service.create_job(store, OWNER, http_spec("late", None, run_at=past, retry=retry))
    _run(store, Outcome("failed", retryable=True))
    planned = store.get_job(OWNER, str(job.id))
    assert planned.state == "active" and planned.next_run_at is not None and planned.next_run_at > job.created_at
    with pool.connection() as conn:  # the retry's time has come
        conn.execute("UPDATE job_runs SET next_run_at = now() WHERE job_id = %s", (str(job.id),))
    [claim] = store.claim_and_start(10)
    assert claim.started.attempt == 2
    from scheduler.planning.attempts import given_up

    assert given_up(claim.started) is None  # delivered, not given up
    with pool.connection() as conn:  # a retry past the minute after its creation is given up
        conn.execute("UPDATE job_specs SET created_at = now() - interval '61 seconds' WHERE id = %s", (str(job.id),))
    late = store.get_job(OWNER, str(job.id))
    refused = given_up(type(claim.started)(**{**_fields(claim.started), "job": late}))
    assert refused is not None and "after the job's creation" in (refused.error or "")


def _fields(started) -> dict:
    from msgspec.structs import asdict

    return asdict(started)
