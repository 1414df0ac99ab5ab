"""Occurrences found long past their fire time when a runner starts them (the runners were down):
the job's ``missed_runs`` policy decides whether they are delivered, as at a resume. Real
Postgres and a real HTTP target; the downtime is the occurrence in hand moved into the past."""

from __future__ import annotations

from datetime import timedelta

from scheduler import service
from scheduler.core.domain import Completion, Outcome
from scheduler.planning.attempts import MISSED_AFTER_SECONDS
from scheduler.runner.executor import Executor
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.support import http_spec

OWNER = "arn:aws:iam::111111111111:user/alice"


def _down_since(pool, job_id: str, occurrence_sql: str) -> None:
    """Move the occurrence in hand (and its fire time) to ``occurrence_sql``, as if no runner had
    run since it was due."""
    with pool.connection() as conn:
        conn.execute(
            f"UPDATE job_runs SET scheduled_at = {occurrence_sql}, next_run_at = {occurrence_sql} WHERE job_id = %s",
            (job_id,),
        )


def _run_due(store, metrics: MemoryMetrics):
    """Claim what is due and run it through the executor, as a runner does: its reports."""
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics)
    claims = store.claim_and_start(10)
    return executor.record([executor.deliver(claim.started, claim.lock_token) for claim in claims])


def _create(store, target_server, name: str, schedule: str | None, **extra) -> str:
    spec = http_spec(name, schedule, url=f"{target_server.url}/{name}", **extra)
    return str(service.create_job(store, OWNER, spec).id)


def _executions(store, job_id: str):
    return sorted(store.list_executions(OWNER, job_id), key=lambda e: (e.scheduled_at, e.started_at))


def test_under_skip_an_occurrence_missed_while_the_runners_were_down_is_not_delivered(store, pool, target_server):
    job_id = _create(store, target_server, "minutely", "* * * * *", missed_runs="skip")
    _down_since(pool, job_id, "date_trunc('minute', now()) - interval '10 minutes'")
    metrics = MemoryMetrics()
    [report] = _run_due(store, metrics)
    assert (report.outcome, report.status) == ("completed", "skipped")
    assert target_server.requests == []
    claimed, rest = _executions(store, job_id)
    assert (claimed.status, claimed.skip_reason, claimed.skipped_count, claimed.attempt) == ("skipped", "missed", 1, 1)
    assert claimed.error.startswith("missed: a runner could start it only") and "skip drops it" in claimed.error
    assert (rest.skip_reason, rest.attempt) == ("missed", 0) and rest.skipped_count in (10, 11)
    job = store.get_job(OWNER, job_id)
    assert job.next_run_at > store.now() and job.state == "active"
    assert (job.run_count, job.failure_count, job.last_status) == (0, 0, None)  # no run, no failure
    assert metrics.total("SkippedOccurrences", reason="missed") == 1 + rest.skipped_count


def test_under_run_once_the_latest_missed_occurrence_runs_instead_of_the_oldest(store, pool, target_server):
    job_id = _create(store, target_server, "catchup", "* * * * *", missed_runs="run_once")
    _down_since(pool, job_id, "date_trunc('minute', now()) - interval '10 minutes'")
    [first] = _run_due(store, MemoryMetrics())
    assert first.status == "skipped" and target_server.requests == []
    latest = store.get_job(OWNER, job_id).scheduled_at
    [second] = _run_due(store, MemoryMetrics())  # the latest is due at once
    assert second.status == "succeeded"
    [request] = target_server.requests
    assert request["headers"]["X-Scheduler-Scheduled-At"].startswith(latest.strftime("%Y-%m-%dT%H:%M"))
    statuses = [(e.status, e.skip_reason, e.skipped_count) for e in _executions(store, job_id)]
    assert statuses == [("skipped", "missed", 1), ("skipped", "missed", 9), ("succeeded", None, None)]


def test_under_run_once_the_latest_occurrence_runs_however_late(store, pool, target_server):
    job_id = _create(store, target_server, "yearly", "0 0 1 1 *", missed_runs="run_once")
    _down_since(pool, job_id, "date_trunc('year', now())")  # months ago, and no later one came
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "succeeded" and len(target_server.requests) == 1
    assert [e.status for e in _executions(store, job_id)] == ["succeeded"]


def test_under_skip_the_only_missed_occurrence_is_dropped_too(store, pool, target_server):
    job_id = _create(store, target_server, "yearly-skip", "0 0 1 1 *", missed_runs="skip")
    _down_since(pool, job_id, "date_trunc('year', now())")
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "skipped" and target_server.requests == []
    job = store.get_job(OWNER, job_id)
    assert job.scheduled_at.year == store.now().year + 1  # next year's first of January


def test_under_run_all_only_the_last_ten_missed_occurrences_run(store, pool, target_server):
    job_id = _create(store, target_server, "all", "* * * * *", missed_runs="run_all")
    _down_since(pool, job_id, "date_trunc('minute', now()) - interval '15 minutes'")
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "skipped" and target_server.requests == []
    job = store.get_job(OWNER, job_id)
    now = store.now()
    # The first of the last ten missed is in hand, due at once: the ten run one after the other.
    assert now - timedelta(minutes=10) <= job.scheduled_at <= now - timedelta(minutes=9)
    assert job.next_run_at <= now
    [caught_up] = _run_due(store, MemoryMetrics())
    assert caught_up.status == "succeeded" and len(target_server.requests) == 1


def test_a_start_late_within_the_grace_is_delivered_late_not_missed(store, pool, target_server):
    since = store.now() - timedelta(hours=1)
    job_id = _create(store, target_server, "late", "@every 1s", missed_runs="skip", start_at=since)
    late = int(MISSED_AFTER_SECONDS) // 2
    _down_since(pool, job_id, f"date_trunc('second', now()) - interval '{late} seconds'")
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "succeeded" and len(target_server.requests) == 1


def test_a_one_off_and_a_limited_job_are_delivered_however_late(store, pool, target_server):
    one_off = _create(store, target_server, "once", None, run_at=store.now() + timedelta(hours=1), missed_runs="skip")
    limits = {"max_concurrent": 2}
    limited = _create(store, target_server, "limited", "* * * * *", missed_runs="skip", limits=limits)
    for job_id in (one_off, limited):
        _down_since(pool, job_id, "date_trunc('minute', now()) - interval '10 minutes'")
    reports = _run_due(store, MemoryMetrics())
    assert sorted(r.status for r in reports) == ["succeeded", "succeeded"]
    assert len(target_server.requests) == 2


def test_a_missed_occurrence_asks_for_no_chained_run(store, pool, target_server):
    _create(store, target_server, "next", "0 0 1 1 *")
    job_id = _create(store, target_server, "first", "* * * * *", missed_runs="skip", on_complete=["next"])
    _down_since(pool, job_id, "date_trunc('minute', now()) - interval '10 minutes'")
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "skipped"
    with pool.connection() as conn:
        pending = conn.execute("SELECT count(*) FROM job_runs WHERE manual_run_at IS NOT NULL").fetchone()["count"]
    assert pending == 0


def test_an_at_one_off_is_delivered_however_late(store, pool, target_server):
    past = (store.now() - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
    job_id = _create(store, target_server, "at-once", f"at({past})", missed_runs="skip")
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "succeeded" and len(target_server.requests) == 1
    assert store.get_job(OWNER, job_id).state == "completed"


def test_an_occurrence_held_back_by_the_jobs_own_manual_run_is_due_when_it_ends(store, pool, target_server):
    job_id = _create(store, target_server, "held", "* * * * *", missed_runs="skip")
    store.request_run(OWNER, job_id)
    [manual] = store.claim_and_start(10)
    assert manual.started.trigger == "manual"
    # The manual run took ten minutes: the occurrence in hand came due meanwhile, held back by it.
    _down_since(pool, job_id, "date_trunc('minute', now()) - interval '10 minutes'")
    ended = Completion(job_id, manual.lock_token, manual.started.execution_id, Outcome("succeeded"))
    assert service.complete_executions(store, [ended]) == [True]  # planned from the job as it is
    assert store.get_job(OWNER, job_id).next_run_at >= store.now() - timedelta(seconds=5)
    [report] = _run_due(store, MemoryMetrics())
    assert report.status == "succeeded" and len(target_server.requests) == 1
