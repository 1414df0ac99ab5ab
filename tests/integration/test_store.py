"""The store on real Postgres: CRUD, claims, fencing, reclaim, retries, pagination."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, timedelta

import psycopg
import pytest

from scheduler import service
from scheduler.core.domain import DueBacklog
from scheduler.planning.lifecycle import Outcome
from scheduler.store.db import make_pool
from scheduler.store.postgres import Completion, NameTaken, NotFound, Store, VersionMismatch
from scheduler.store.rows import started_rows_cursor
from tests.support import expire_lease, http_spec, insert_due_jobs, make_due

OWNER = "arn:aws:iam::111111111111:user/alice"
OTHER = "arn:aws:iam::222222222222:user/bob"


def complete(store, job_id, *args, **kwargs):
    """Complete an execution (it must be recorded) and read the job back."""
    assert service.complete_execution(store, job_id, *args, **kwargs) is True
    return store.get_job(OWNER, str(job_id))


def test_create_get_and_owner_scoping(store):
    job = service.create_job(store, OWNER, http_spec("nightly", "0 3 * * *"))
    assert job.state == "active" and job.version == 1 and job.attempt == 0
    assert job.next_run_at == job.scheduled_at and job.next_run_at > job.created_at
    assert job.next_run_at.hour == 3 and job.next_run_at.minute == 0
    assert store.get_job(OWNER, str(job.id)).name == "nightly"
    with pytest.raises(NotFound):
        store.get_job(OTHER, str(job.id))
    with pytest.raises(NotFound):
        store.get_job(OWNER, "not-a-uuid")
    with pytest.raises(NameTaken):
        service.create_job(store, OWNER, http_spec("nightly"))
    service.create_job(store, OTHER, http_spec("nightly"))  # names are unique per owner only


def test_update_with_version_and_recompute(store):
    job = service.create_job(store, OWNER, http_spec("j", "0 3 * * *"))
    job_id = str(job.id)
    renamed = service.update_job(
        store, OWNER, job_id, lambda job: {**job.spec(), "description": "d"}, expected_version=1
    )
    assert renamed.version == 2 and renamed.next_run_at == job.next_run_at
    with pytest.raises(VersionMismatch) as err:
        service.update_job(store, OWNER, job_id, lambda job: job.spec(), expected_version=1)
    assert err.value.current == 2
    moved = service.update_job(store, OWNER, job_id, lambda job: {**job.spec(), "schedule": "30 4 * * *"})
    assert moved.next_run_at.hour == 4 and moved.next_run_at.minute == 30
    service.create_job(store, OWNER, http_spec("other"))
    with pytest.raises(NameTaken):
        service.update_job(store, OWNER, job_id, lambda job: {**job.spec(), "name": "other"})
    with pytest.raises(NotFound):
        service.update_job(store, OTHER, job_id, lambda job: job.spec())


def test_pause_resume_delete(store):
    job_id = str(service.create_job(store, OWNER, http_spec("p", "@every 1h")).id)
    paused = service.pause_job(store, OWNER, job_id)
    assert paused.state == "paused" and paused.due_at is None and paused.next_run_at is not None
    resumed = service.resume_job(store, OWNER, job_id)
    assert resumed.state == "active" and resumed.due_at == resumed.next_run_at
    store.delete_job(OWNER, job_id)
    with pytest.raises(NotFound):
        store.get_job(OWNER, job_id)
    with pytest.raises(NotFound):
        store.delete_job(OWNER, job_id)


def test_claim_start_complete_advances_the_schedule(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("c", "* * * * *")).id)
    assert store.claim_due(10, 60) == []
    make_due(pool, job_id)
    [claim] = store.claim_due(10, 60)
    assert claim.job_id == job_id and claim.lease_kind == "schedule"
    assert store.claim_due(10, 60) == []  # leased
    started = store.start_execution(claim.job_id, claim.lock_token, 60)
    assert started.attempt == 1 and started.trigger == "schedule"
    assert store.start_execution(claim.job_id, claim.lock_token, 60) is None  # duplicate invoke
    done = complete(
        store,
        job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("succeeded", http_status=200, response_excerpt="ok"),
    )
    assert done.lock_token is None and done.attempt == 0 and done.run_count == 1
    assert done.next_run_at > claim.scheduled_at and done.last_status == "succeeded"
    [execution] = store.list_executions(OWNER, job_id)
    assert execution.status == "succeeded" and execution.http_status == 200
    assert execution.duration_ms >= 0


def test_stale_token_cannot_complete_and_lost_execution_is_marked(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("f", "* * * * *")).id)
    make_due(pool, job_id)
    [first] = store.claim_due(10, 60)
    slow = store.start_execution(job_id, first.lock_token, 60)
    expire_lease(pool, job_id)
    [second] = store.claim_due(10, 60)
    assert second.reclaimed and second.lock_token != first.lock_token
    assert second.lost_execution_id == slow.execution_id  # named: the fan-out logs it
    assert second.scheduled_at == first.scheduled_at  # the same occurrence, delivered again
    lost = store.get_execution(slow.execution_id)
    assert lost.status == "lost" and "lease expired" in lost.error
    # The slow runner wakes up: its start and its completion are both refused.
    assert store.start_execution(job_id, first.lock_token, 60) is None
    assert service.complete_execution(store, job_id, first.lock_token, slow.execution_id, Outcome("succeeded")) is False
    fresh = store.start_execution(job_id, second.lock_token, 60)
    assert fresh.attempt == 2 and fresh.trigger == "retry"
    done = complete(store, job_id, second.lock_token, fresh.execution_id, Outcome("succeeded"))
    assert done is not None and done.last_status == "succeeded"
    assert store.get_execution(slow.execution_id).status == "lost"


def test_expired_claim_before_start_is_ignored(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("e", "* * * * *")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(10, 60)
    expire_lease(pool, job_id)
    assert store.start_execution(job_id, claim.lock_token, 60) is None


def test_retry_timing_and_exhaustion(store, pool):
    spec = http_spec(
        "r",
        "0 0 1 1 *",
        retry={"max_attempts": 3, "min_backoff_seconds": 10, "max_backoff_seconds": 25, "max_age_seconds": None},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    occurrence = None
    for attempt, ceiling in ((1, 10), (2, 20)):
        [claim] = store.claim_due(1, 60)
        occurrence = occurrence or claim.scheduled_at
        assert claim.scheduled_at == occurrence
        started = store.start_execution(job_id, claim.lock_token, 60)
        assert started.attempt == attempt
        now = store.now()
        row = complete(
            store,
            job_id,
            claim.lock_token,
            started.execution_id,
            Outcome("failed", retryable=True, error="HTTP 503", http_status=503),
        )
        delay = (row.next_run_at - now).total_seconds()
        assert 10 - 1 <= delay <= ceiling + 1, delay
        assert row.attempt == attempt and row.scheduled_at == occurrence and row.state == "active"
        make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token, 60)
    assert started.attempt == 3 and started.trigger == "retry"
    row = complete(
        store, job_id, claim.lock_token, started.execution_id, Outcome("failed", retryable=True, error="HTTP 503")
    )
    # max_attempts reached: the occurrence is given up and the next one (next 1 January) is planned.
    assert row.attempt == 0 and row.next_run_at.month == 1 and row.next_run_at > occurrence
    assert row.failure_count == 3 and row.run_count == 3
    statuses = [e.trigger for e in store.list_executions(OWNER, job_id)]
    assert statuses == ["retry", "retry", "schedule"]


def test_retry_after_is_a_floor_and_permanent_failure_does_not_retry(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("ra", "0 0 1 1 *")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token, 60)
    now = store.now()
    row = complete(
        store,
        job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("failed", retryable=True, retry_after_seconds=120),
    )
    assert (row.next_run_at - now).total_seconds() >= 120
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token, 60)
    row = complete(
        store, job_id, claim.lock_token, started.execution_id, Outcome("failed", retryable=False, error="HTTP 404")
    )
    assert row.attempt == 0 and row.next_run_at > now + timedelta(days=1)


def test_max_age_stops_retries(store, pool):
    spec = http_spec(
        "age",
        "0 0 1 1 *",
        retry={"max_attempts": 10, "min_backoff_seconds": 30, "max_backoff_seconds": 30, "max_age_seconds": 10},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token, 60)
    row = complete(store, job_id, claim.lock_token, started.execution_id, Outcome("timed_out", retryable=True))
    assert row.attempt == 0 and row.scheduled_at > claim.scheduled_at


def test_one_off_completes(store, pool):
    # A one-off whose time has already passed at creation fires at once: due from its creation
    # (its lateness counts from then), its occurrence its own time.
    job = service.create_job(store, OWNER, http_spec("once", None, run_at=store.now() - timedelta(seconds=5)))
    assert job.scheduled_at == job.run_at and job.next_run_at is not None and job.next_run_at > job.run_at
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(claim.job_id, claim.lock_token, 60)
    row = complete(store, claim.job_id, claim.lock_token, started.execution_id, Outcome("succeeded"))
    assert row.state == "completed" and row.next_run_at is None and row.due_at is None


def test_manual_run_is_served_first_and_leaves_the_occurrence(store):
    job = service.create_job(store, OWNER, http_spec("m", "0 0 1 1 *"))
    job_id = str(job.id)
    service.pause_job(store, OWNER, job_id)
    store.request_run(OWNER, job_id)
    [claim] = store.claim_due(1, 60)
    assert claim.lease_kind == "manual"
    started = store.start_execution(job_id, claim.lock_token, 60)
    assert started.trigger == "manual" and started.attempt == 1
    row = complete(store, job_id, claim.lock_token, started.execution_id, Outcome("succeeded"))
    assert row.manual_run_at is None and row.state == "paused" and row.attempt == 0
    assert row.next_run_at == job.next_run_at and row.due_at is None


def test_an_occurrence_due_before_a_run_request_runs_first(store, pool):
    """Whichever is due first runs first: run-now requests made one after the other cannot hold
    back an occurrence that was due before them (they starved an ``@every 1s`` schedule), and
    a request made before the occurrence came due still goes first."""
    job_id = str(service.create_job(store, OWNER, http_spec("fair", "0 0 1 1 *")).id)
    make_due(pool, job_id)  # the occurrence is due since a second ago
    store.request_run(OWNER, job_id)
    [claim] = store.claim_and_start(1)
    assert claim.lease_kind == "schedule" and claim.started.trigger == "schedule"
    row = complete(
        store,
        job_id,
        claim.lock_token,
        claim.started.execution_id,
        Outcome("succeeded"),
        started=claim.started,
        elapsed_seconds=0.1,
    )
    assert row.manual_run_at is not None  # the request waits its turn, kept
    [then] = store.claim_due(1, 60)
    assert then.lease_kind == "manual" and then.scheduled_at == row.manual_run_at
    started = store.start_execution(job_id, then.lock_token, 60)
    complete(store, job_id, then.lock_token, started.execution_id, Outcome("succeeded"))
    # A request older than the occurrence's time: the request goes first (claim_due too).
    store.request_run(OWNER, job_id)
    make_due(pool, job_id)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET manual_run_at = next_run_at - interval '1 second' WHERE job_id = %s", (job_id,)
        )
    [first] = store.claim_due(1, 60)
    assert first.lease_kind == "manual"


@pytest.mark.parametrize("planned", [True, False], ids=["batched", "per-job"])
def test_an_occurrence_due_before_a_manual_run_began_runs_before_a_request_made_during_it(store, pool, planned):
    """A run-now storm (a request made while each manual run goes on) never held back by the
    occurrence due before the run began: it was moved to the run's end, after the next request."""
    job_id = str(service.create_job(store, OWNER, http_spec("storm", "0 0 1 1 *")).id)
    store.request_run(OWNER, job_id)  # the request, then the occurrence comes due
    make_due(pool, job_id)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET manual_run_at = next_run_at - interval '1 second' WHERE job_id = %s", (job_id,)
        )
    [manual] = store.claim_and_start(1)
    assert manual.started.trigger == "manual"
    store.request_run(OWNER, job_id)  # asked for while the manual run goes on
    extra = {"started": manual.started, "elapsed_seconds": 1.0} if planned else {}
    row = complete(store, job_id, manual.lock_token, manual.started.execution_id, Outcome("succeeded"), **extra)
    assert row.next_run_at == manual.started.started_at  # due from the run's start, not its end
    assert row.manual_run_at > row.next_run_at
    [then] = store.claim_and_start(1)
    assert then.started.trigger == "schedule"  # the occurrence, then the request
    complete(store, job_id, then.lock_token, then.started.execution_id, Outcome("succeeded"), started=then.started)
    [last] = store.claim_and_start(1)
    assert last.started.trigger == "manual"


def test_release_makes_the_job_due_again(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("rel")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    assert store.release(job_id, claim.lock_token)
    [again] = store.claim_due(1, 60)
    assert again.job_id == job_id


def test_concurrent_claimers_take_each_job_exactly_once(db_url, pool):
    total, claimers = 20_000, 8
    insert_due_jobs(pool, total)
    claimed: list[list[str]] = [[] for _ in range(claimers)]
    barrier = threading.Barrier(claimers)
    errors = []

    def claimer(index: int) -> None:
        local_pool = make_pool(db_url, min_size=1, max_size=1)
        try:
            local_store = Store(local_pool)
            barrier.wait()
            while batch := local_store.claim_due(100, 300):
                claimed[index].extend(c.job_id for c in batch)
        except Exception as exc:
            errors.append(exc)
        finally:
            local_pool.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    everything = [job for part in claimed for job in part]
    assert len(everything) == total and len(set(everything)) == total
    assert sum(1 for part in claimed if part) > 1  # the work really was shared


def test_pagination_sees_each_row_once_under_concurrent_inserts(store, pool):
    insert_due_jobs(pool, 500, owner=OWNER, prefix="page", due_offset_seconds=3600)
    original = {r.name for r in store.list_jobs(OWNER, limit=1000)}
    stop = threading.Event()

    def inserter() -> None:
        n = 0
        while not stop.is_set() and n < 2000:
            service.create_job(store, OWNER, http_spec(f"page-{n:05d}-new"))
            n += 1

    thread = threading.Thread(target=inserter)
    thread.start()
    seen: list[str] = []
    after = None
    try:
        while page := store.list_jobs(OWNER, limit=37, after_name=after):
            seen.extend(job.name for job in page)
            after = page[-1].name
    finally:
        stop.set()
        thread.join()
    assert len(seen) == len(set(seen))
    assert original <= set(seen)


def test_list_filters(store):
    service.create_job(store, OWNER, http_spec("alpha-1", tags=["billing"]))
    service.create_job(store, OWNER, http_spec("alpha-2", tags=["ops"]))
    beta = service.create_job(store, OWNER, http_spec("beta-1", tags=["billing"]))
    service.pause_job(store, OWNER, str(beta.id))
    names = lambda jobs: [job.name for job in jobs]  # noqa: E731
    assert names(store.list_jobs(OWNER, tag="billing")) == ["alpha-1", "beta-1"]
    assert names(store.list_jobs(OWNER, name_prefix="alpha")) == ["alpha-1", "alpha-2"]
    assert names(store.list_jobs(OWNER, state="paused")) == ["beta-1"]
    assert names(store.list_jobs(OWNER, name_prefix="al%")) == []
    assert store.list_jobs(OTHER) == []


def test_expired_executions_without_their_day_partition_are_purged_from_default(store, pool):
    """Rows older than any day partition land in DEFAULT; the maintenance deletes them there."""
    job_id = str(service.create_job(store, OWNER, http_spec("purge")).id)
    with pool.connection() as conn:
        conn.execute(
            """
            INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
            SELECT gen_random_uuid(), %s, now(), now() - interval '40 days', 1, 'schedule', 'succeeded'
            FROM generate_series(1, 1200)""",
            (job_id,),
        )
    service.create_job(store, OWNER, http_spec("keep"))
    assert store.maintain_partitions(30).default_purged == 1200
    assert store.list_executions(OWNER, job_id) == []


def test_backlog_and_next_due(store, pool):
    assert store.due_backlog() == DueBacklog(0, 0.0, 0)
    assert store.next_due_in() is None
    insert_due_jobs(pool, 5, due_offset_seconds=-30)
    backlog = store.due_backlog()
    assert backlog.due == backlog.claimable == 5 and 29 <= backlog.oldest_age_seconds <= 60
    assert store.next_due_in() < 0


def test_fast_completion_from_the_started_row(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("fast", "*/5 * * * *")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token)
    store.request_run(OWNER, job_id)  # asked for while the execution runs: must survive
    row = complete(
        store,
        job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("succeeded", http_status=200),
        started=started,
        elapsed_seconds=0.5,
    )
    assert row.lock_token is None and row.attempt == 0 and row.next_run_at > claim.scheduled_at
    assert row.manual_run_at is not None and row.version == started.job.version
    assert store.get_execution(started.execution_id).status == "succeeded"
    # A stale token is fenced on the fast path as on the locking one.
    assert (
        service.complete_execution(
            store,
            job_id,
            claim.lock_token,
            started.execution_id,
            Outcome("succeeded"),
            started=started,
            elapsed_seconds=1,
        )
        is False
    )


def test_edit_during_execution_takes_the_locking_path(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("edited", "*/5 * * * *")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token)
    edited = service.update_job(store, OWNER, job_id, lambda job: {**job.spec(), "schedule": "0 4 * * *"})
    row = complete(
        store,
        job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("succeeded"),
        started=started,
        elapsed_seconds=0.1,
    )
    assert row is not None and row.lock_token is None
    # The new schedule's first occurrence is kept, not skipped, and a failure does not retry it early.
    assert row.next_run_at == row.scheduled_at == edited.next_run_at
    assert (row.next_run_at.hour, row.next_run_at.minute) == (4, 0)
    assert store.get_execution(started.execution_id).status == "succeeded"


def test_an_edit_or_pause_between_claim_and_start_cancels_the_start(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("moved", "@every 1s")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    service.update_job(store, OWNER, job_id, lambda job: {**job.spec(), "schedule": "0 0 1 1 *"})
    assert store.start_execution(job_id, claim.lock_token) is None  # not delivered a month early
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)  # claimable at its new time: the edit voided the old claim
    service.pause_job(store, OWNER, job_id)
    assert store.start_execution(job_id, claim.lock_token) is None
    assert store.list_executions(OWNER, job_id) == []


def test_an_edit_whose_new_occurrence_is_due_by_completion_is_not_lost(store, pool):
    job = service.create_job(store, OWNER, http_spec("once-edited", None, run_at=store.now() - timedelta(seconds=1)))
    job_id = str(job.id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token)
    # Moved to a time that has come by the time the first run ends.
    service.update_job(store, OWNER, job_id, lambda job: {**job.spec(), "run_at": store.now()})
    row = complete(
        store, job_id, claim.lock_token, started.execution_id, Outcome("succeeded"), started=started, elapsed_seconds=2
    )
    assert row.state == "active" and row.next_run_at is not None and row.due_at is not None
    [again] = store.claim_due(1, 60)
    assert again.job_id == job_id and again.scheduled_at == row.scheduled_at


def test_a_run_requested_during_a_manual_run_is_not_dropped(store):
    job_id = str(service.create_job(store, OWNER, http_spec("twice", "0 0 1 1 *")).id)
    store.request_run(OWNER, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token)
    second = store.request_run(OWNER, job_id)
    assert second.manual_run_at > started.scheduled_at
    row = complete(
        store,
        job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("succeeded"),
        started=started,
        elapsed_seconds=0.1,
    )
    assert row.manual_run_at == second.manual_run_at
    [again] = store.claim_due(1, 60)
    assert again.lease_kind == "manual" and again.scheduled_at == second.manual_run_at


def test_an_expired_lease_on_a_paused_job_does_not_count_as_due(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("stuck", "0 0 1 1 *")).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    started = store.start_execution(job_id, claim.lock_token)
    service.pause_job(store, OWNER, job_id)
    expire_lease(pool, job_id)
    assert store.claim_due(1, 60) == []
    assert store.next_due_in() is None  # nothing will become claimable: the fan-out may idle
    # The next edit (here: resume) closes the orphan as the claim would have.
    row = service.resume_job(store, OWNER, job_id)
    assert row.lock_token is None and row.running_execution_id is None and row.last_status == "lost"
    assert store.get_execution(started.execution_id).status == "lost"
    assert (
        service.complete_execution(store, job_id, claim.lock_token, started.execution_id, Outcome("succeeded")) is False
    )


def test_a_batch_of_outcomes_is_recorded_fenced_and_planned_per_job(store, pool):
    ids = [str(service.create_job(store, OWNER, http_spec(f"o{i}", "0 0 1 1 *")).id) for i in range(4)]
    for job_id in ids:
        make_due(pool, job_id)
    claims = {c.job_id: c for c in store.claim_and_start(10, 60)}
    started = {job_id: claim.started for job_id, claim in claims.items()}
    service.update_job(store, OWNER, ids[1], lambda job: {**job.spec(), "description": "edited during the delivery"})
    expire_lease(pool, ids[2])
    [again] = store.claim_due(10, 60)  # the lease of the third was taken over: fenced
    assert again.job_id == ids[2]
    outcomes = [
        Outcome("succeeded", http_status=200),
        Outcome("succeeded", http_status=200),
        Outcome("succeeded", http_status=200),
        Outcome("failed", retryable=True, error="HTTP 503", http_status=503),
    ]
    completions = [
        Completion(
            job_id,
            claims[job_id].lock_token,
            started[job_id].execution_id,
            outcome,
            started=started[job_id],
            elapsed_seconds=0.01,
        )
        for job_id, outcome in zip(ids, outcomes)
    ]
    assert service.complete_executions(store, completions) == [True, True, False, True]  # the third fenced
    ok, edited, _, retried = (store.get_job(OWNER, job_id) for job_id in ids)
    assert ok.last_status == "succeeded" and ok.next_run_at.year == ok.scheduled_at.year
    assert ok.attempt == 0 and ok.lock_token is None and ok.run_count == 1
    # The edit moved the version on: recorded through the locking path, the edit kept.
    assert edited.description == "edited during the delivery" and edited.last_status == "succeeded"
    assert retried.last_status == "failed" and retried.attempt == 1 and retried.failure_count == 1
    assert retried.next_run_at < retried.scheduled_at + timedelta(minutes=2)  # a retry, not next year
    statuses = {job_id: store.list_executions(OWNER, job_id)[0].status for job_id in ids}
    assert statuses == {ids[0]: "succeeded", ids[1]: "succeeded", ids[2]: "lost", ids[3]: "failed"}
    assert store.get_job(OWNER, ids[2]).lock_token == uuid.UUID(again.lock_token)


def test_claim_and_start_leases_and_starts_in_one_statement(store, pool):
    scheduled = str(service.create_job(store, OWNER, http_spec("cs-sched", "0 0 1 1 *")).id)
    manual = str(service.create_job(store, OWNER, http_spec("cs-manual", "0 0 1 1 *")).id)
    orphaned = str(service.create_job(store, OWNER, http_spec("cs-orphan", "0 0 1 1 *")).id)
    make_due(pool, orphaned)
    [first] = store.claim_and_start(10, 30)
    assert first.job_id == orphaned and first.started.attempt == 1
    expire_lease(pool, orphaned)  # its runner died mid-delivery
    make_due(pool, scheduled)
    store.request_run(OWNER, manual)
    claims = {c.job_id: c for c in store.claim_and_start(10, 30)}
    assert set(claims) == {scheduled, manual, orphaned}
    assert store.claim_and_start(10, 30) == []  # all leased now
    now = store.now()
    for job_id, claim in claims.items():
        job = store.get_job(OWNER, job_id)
        assert job.lock_token == uuid.UUID(claim.lock_token)
        assert job.running_execution_id == uuid.UUID(claim.started.execution_id)
        # The lease covers the target's timeout (5 s) and the margin (30 s), not a claim's lease.
        assert now + timedelta(seconds=30) < job.locked_until <= now + timedelta(seconds=36)
        [running, *_] = store.list_executions(OWNER, job_id)
        assert running.status == "running" and str(running.id) == claim.started.execution_id
    assert claims[manual].started.trigger == "manual" and claims[manual].lease_kind == "manual"
    assert claims[scheduled].started.trigger == "schedule" and claims[scheduled].started.attempt == 1
    assert claims[orphaned].reclaimed and claims[orphaned].started.trigger == "retry"
    assert claims[orphaned].lost_execution_id == first.started.execution_id
    assert claims[scheduled].lost_execution_id is None and not claims[scheduled].reclaimed
    assert claims[orphaned].started.attempt == 2
    assert store.get_execution(first.started.execution_id).status == "lost"
    # The started row is enough to record the outcome on the fast path.
    done = claims[scheduled]
    assert service.complete_executions(
        store,
        [
            Completion(
                scheduled,
                done.lock_token,
                done.started.execution_id,
                Outcome("succeeded"),
                started=done.started,
                elapsed_seconds=0.1,
            )
        ],
    ) == [True]
    assert store.get_job(OWNER, scheduled).lock_token is None


def test_a_started_rows_target_reads_as_json_loads_would(store, pool):
    """The runner reads a started row's target with a faster JSON loader where it gives the same
    values: integers beyond 64 bits stay integers, long digit strings stay strings."""
    body = {
        "big": 123456789012345678901234567890,
        "neg": -9223372036854775809,
        "id": "12345678901234567890123",
        "small": 7,
        "ratio": 0.1,
        "text": "h\u00e9llo \u2603",
        "nested": [{"a": None, "b": True}],
    }
    spec = http_spec("json-exact", "0 0 1 1 *")
    spec["target"] = {**spec["target"], "body": body}
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    [claim] = store.claim_and_start(10, 30)
    read = claim.started.job.target["body"]
    assert read == body and type(read["big"]) is int and type(read["neg"]) is int


def test_the_started_rows_cursor_is_made_once_a_connection_and_outlives_a_failed_statement(pool):
    """The runner's cursor for started rows is kept on its connection (its column loaders are
    built once), reads uuids as text, keeps working after a statement fails on it, and is
    made again once closed."""
    with pool.connection() as conn:
        cursor = started_rows_cursor(conn)
        assert started_rows_cursor(conn) is cursor
        with pytest.raises(psycopg.errors.DivisionByZero):
            cursor.execute("SELECT 1 / 0")
        [(text_id, n)] = started_rows_cursor(conn).execute("SELECT gen_random_uuid(), 2").fetchall()
        assert isinstance(text_id, str) and uuid.UUID(text_id) and n == 2
        cursor.close()
        again = started_rows_cursor(conn)
        assert again is not cursor and again.execute("SELECT 3").fetchone() == (3,)
    with psycopg.connect(pool.conninfo, autocommit=True) as other:
        assert started_rows_cursor(other) is not again  # a cursor per connection


def test_started_rows_are_read_by_position_as_the_store_names_their_columns(store, pool):
    """claim_and_start and start_execution answer the columns STARTED_COLUMNS names, in its
    order (the store reads them by position), and each lands in the field of that name."""
    from scheduler.sql import QUERIES
    from scheduler.store.postgres import STARTED_COLUMNS

    job_id = str(service.create_job(store, OWNER, http_spec("positional", "0 0 1 1 *")).id)
    make_due(pool, job_id)
    with pool.connection() as conn, conn.transaction():
        cursor = conn.execute(
            QUERIES["claim_and_start"], {"limit": 1, "lease_margin_seconds": 30, "lock_token": str(uuid.uuid4())}
        )
        assert tuple(c.name for c in cursor.description) == (*STARTED_COLUMNS, "lock_token", "lost")
        raise psycopg.Rollback()
    [claim] = store.claim_and_start(10, 30)
    job = store.get_job(OWNER, job_id)
    started = claim.started
    for field in STARTED_COLUMNS[:21]:
        assert getattr(started.job, field) == getattr(job, field), field
    execution = store.get_execution(started.execution_id)
    assert (started.scheduled_at, started.attempt, started.trigger, started.started_at) == (
        execution.scheduled_at,
        execution.attempt,
        execution.trigger,
        execution.started_at,
    )
    assert claim.job_id == job_id and claim.lock_token == str(job.lock_token) and claim.reclaimed is False
    assert claim.lease_kind == "schedule" and claim.claimed_at == started.started_at == job.last_run_at

    other = str(service.create_job(store, OWNER, http_spec("positional-2", "0 0 1 1 *")).id)
    make_due(pool, other)
    [leased] = store.claim_due(10, 60)
    with pool.connection() as conn, conn.transaction():
        cursor = conn.execute(
            QUERIES["start_execution"],
            {
                "job_id": other,
                "lock_token": leased.lock_token,
                "lease_margin_seconds": 30,
                "execution_id": str(uuid.uuid4()),
            },
        )
        assert tuple(c.name for c in cursor.description) == STARTED_COLUMNS
        raise psycopg.Rollback()
    started = store.start_execution(other, leased.lock_token, 30)
    assert started.job.id == other and started.job.target == job.target and started.attempt == 1


@pytest.mark.parametrize("batch", [True, False], ids=["complete_jobs", "complete_job"])
def test_an_outcomes_texts_are_recorded_as_they_were_and_a_nul_does_not_fail_it(store, pool, batch):
    """What a batch's outcomes carry (encoded as JSON for complete_jobs) comes back unchanged:
    quotes, backslashes, non-ASCII, a JSON-looking body; a NUL or a lone surrogate, which
    Postgres cannot store, becomes U+FFFD instead of failing the completion (and its batch)."""
    ids = [str(service.create_job(store, OWNER, http_spec(f"texts-{batch}-{i}", "0 0 1 1 *")).id) for i in range(2)]
    for job_id in ids:
        make_due(pool, job_id)
    claims = store.claim_and_start(10, 60)
    excerpt = 'say "h\u00e9llo" \\ \u2603 {"a": [1, null]}\n\u0000end'
    completions = [
        Completion(
            claim.job_id,
            claim.lock_token,
            claim.started.execution_id,
            Outcome(
                "failed",
                retryable=False,
                error="HTTP 418 I'm a \u0000teapot \ud800",
                http_status=418,
                response_excerpt=excerpt,
            ),
            started=claim.started,
            elapsed_seconds=0.25,
        )
        for claim in claims
    ]
    if batch:
        assert service.complete_executions(store, completions) == [True, True]
    else:
        assert [service.complete_executions(store, [done]) for done in completions] == [[True], [True]]
    for claim in claims:
        [execution] = store.list_executions(OWNER, claim.job_id)
        assert execution.status == "failed" and execution.http_status == 418
        assert execution.response_excerpt == excerpt.replace("\u0000", "\ufffd")
        assert execution.error == "HTTP 418 I'm a \ufffdteapot \ufffd"
        assert execution.started_at == claim.started.started_at and execution.scheduled_at == claim.started.scheduled_at
        job = store.get_job(OWNER, claim.job_id)
        assert job.last_status == "failed" and job.lock_token is None


def test_the_runners_sessions_read_instants_in_utc_whatever_the_servers_zone(db_url):
    """A pool's connections are set to UTC once each, so a started row's instants are in
    datetime.UTC (cheap to compare) even where the database's own zone is another; through RDS
    Proxy the session is left alone (a SET would pin the proxy's connection)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        dbname = conn.info.dbname
        conn.execute(f"ALTER DATABASE \"{dbname}\" SET TimeZone = 'Asia/Kolkata'")
        instant = conn.execute("SELECT now()").fetchone()[0]
    direct = make_pool(db_url, min_size=1, max_size=1)
    proxied = make_pool(db_url, min_size=1, max_size=1, through_proxy=True)
    try:
        insert_due_jobs(direct, 3)
        claims = Store(direct).claim_and_start(10)
        assert len(claims) == 3
        for claim in claims:
            assert claim.started.started_at.tzinfo is UTC
            assert claim.started.scheduled_at.tzinfo is UTC
            assert claim.started.job.created_at.tzinfo is UTC
        with proxied.connection() as conn:
            assert conn.execute("SHOW TimeZone").fetchone()["TimeZone"] == "Asia/Kolkata"
        # The same instant whichever zone it is read in.
        with direct.connection() as conn:
            assert conn.execute("SELECT %s::timestamptz AS t", [instant]).fetchone()["t"] == instant
    finally:
        direct.close()
        proxied.close()


def test_the_pool_hands_out_the_connection_returned_last_so_a_busy_statement_gets_prepared(db_url):
    """psycopg prepares a statement at its fifth use on a connection: a pool taken in turn spread
    a runner's claims over every connection it had opened, and they stayed unprepared (planned at
    each call). Taken most recent first, eight claims run on one connection, which prepares it."""
    pool = make_pool(db_url, min_size=1, max_size=4)
    try:
        held = [pool.getconn() for _ in range(3)]
        for conn in held:
            pool.putconn(conn)
        store = Store(pool)
        for _ in range(8):
            assert store.claim_and_start(32) == []
        with pool.connection() as conn:
            assert conn.info.backend_pid == held[-1].info.backend_pid
            prepared = [row["statement"] for row in conn.execute("SELECT statement FROM pg_prepared_statements")]
        assert any("FOR UPDATE SKIP LOCKED" in statement for statement in prepared)
    finally:
        pool.close()
