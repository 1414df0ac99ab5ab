"""Connection-pool exhaustion in the runner.

- A store on a pool of two connections under twenty concurrent executors: the executors hold no
  connection during the delivery (the target keeps all twenty requests open at once), and the
  bookkeeping around them waits for a connection instead of failing: all twenty complete.
- With a tiny pool timeout, a connection that cannot be had is an infrastructure fault:
  ``execute_invoke`` raises ``StoreUnavailable`` (so Lambda's async retry, then the dead-letter queue, take over).
  Before the delivery, the retry of the same event delivers it; after the delivery, the retry
  does nothing (the execution already started on that lease), and the job comes back when the
  lease expires: the killed execution is ``lost`` and the job delivered again. Nothing lost.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from scheduler import service
from scheduler.core.errors import StoreUnavailable
from scheduler.runner.executor import execute_invoke
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TargetServer
from tests.support import expire_lease, http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/pool-faults"
LOCAL = TargetPolicy(allow_private=True)
WORKERS = 20


@pytest.fixture
def target():
    server = TargetServer()
    yield server
    server.close()


def test_twenty_executors_on_two_connections_all_complete(db_url, target):
    pool = make_pool(db_url, min_size=1, max_size=2)
    store = Store(pool)
    try:
        ids = [
            str(
                service.create_job(
                    store,
                    OWNER,
                    http_spec(
                        f"p{i:02d}",
                        "0 0 1 1 *",
                        target={**http_spec("x")["target"], "url": target.url + "/all-at-once"},
                    ),
                ).id
            )
            for i in range(WORKERS)
        ]
        for job_id in ids:
            make_due(pool, job_id)
        target.behaviour["/all-at-once"] = [("hold", 15.0)]
        errors: Counter[str] = Counter()

        def execute(event):
            try:
                return execute_invoke(event, store=store, decrypt_target=lambda t: t, policy=LOCAL)
            except Exception as exc:
                errors[type(exc).__name__] += 1
                raise

        # Twenty executors at once in one process (as twenty Lambda invokes would be, sharing
        # one pool here), each starting, delivering and completing its own claim.
        claims = store.claim_due(WORKERS, 120)
        assert len(claims) == WORKERS
        with ThreadPoolExecutor(max_workers=WORKERS) as executors:
            reports = [executors.submit(execute, claim.to_event()) for claim in claims]
            # All twenty deliveries in flight at once, on a pool of two connections.
            target.wait_for(lambda s: sum(s.inflight.values()) == WORKERS, timeout=20, what="20 in flight")
            target.release()  # ... and twenty completions competing for two connections
        assert [r.result()["status"] for r in reports] == ["succeeded"] * WORKERS
        assert not errors, errors
        stats = pool.get_stats()
        assert stats.get("requests_errors", 0) == 0 and stats.get("requests_queued", 0) > 0, stats
        assert stats["pool_size"] <= 2
        for job_id in ids:
            [execution] = store.list_executions(OWNER, job_id)
            assert execution.status == "succeeded"
            job = store.get_job(OWNER, job_id)
            assert job.lock_token is None and job.last_status == "succeeded"
        assert max(target.max_inflight.values()) == 1 and len(target.requests) == WORKERS
    finally:
        pool.close()


def test_pool_timeout_raises_from_execute_invoke_and_the_lease_brings_the_job_back(db_url, target):
    # One connection, given up on after 0.2 s.
    pool = ConnectionPool(
        db_url, min_size=1, max_size=1, timeout=0.2, open=False, kwargs={"row_factory": dict_row, "autocommit": True}
    )
    pool.open(wait=True, timeout=10)
    store = Store(pool)
    run = partial(execute_invoke, store=store, decrypt_target=lambda t: t, policy=LOCAL)
    try:
        job_id = str(
            service.create_job(
                store,
                OWNER,
                http_spec(
                    "starved",
                    "0 0 1 1 *",
                    target={**http_spec("x")["target"], "url": target.url + "/hook", "timeout_seconds": 5},
                ),
            ).id
        )

        # 1. No connection for the start: the executor raises before delivering anything.
        make_due(pool, job_id)
        [claim] = store.claim_due(1, 60)
        with pool.connection():
            with pytest.raises(StoreUnavailable):
                run(claim.to_event())
        assert target.requests == [] and store.list_executions(OWNER, job_id) == []
        # Lambda's retry of the same event: the claim still holds the job, so it is delivered.
        assert run(claim.to_event())["status"] == "succeeded"
        assert len(target.requests) == 1

        # 2. No connection for the completion: raised after the delivery.
        make_due(pool, job_id)
        [claim] = store.claim_due(1, 60)
        target.behaviour["/hook"] = [("hold", 10.0), ("answer", 200, {}, b"again")]
        outcome: list = []

        def execute() -> None:
            try:
                outcome.append(run(claim.to_event()))
            except Exception as exc:
                outcome.append(exc)

        thread = threading.Thread(target=execute, daemon=True)
        thread.start()
        target.wait_for(lambda s: len(s.requests) == 2, timeout=10, what="the second delivery")
        held = pool.getconn()  # the delivery is under way: take the only connection
        try:
            target.release()
            thread.join(timeout=10)
            assert not thread.is_alive()
        finally:
            pool.putconn(held)
        [error] = outcome
        assert isinstance(error, StoreUnavailable) and isinstance(error.__cause__, PoolTimeout)
        [running, _] = store.list_executions(OWNER, job_id)
        job = store.get_job(OWNER, job_id)
        assert running.status == "running" and str(job.running_execution_id) == running.id
        # Lambda's retry of that event does nothing: the lease already started an execution.
        assert run(claim.to_event())["outcome"] == "lease_lost"
        assert len(target.requests) == 2
        # Not claimable while the lease (timeout + margin) holds; reclaimed once it expired.
        assert store.claim_due(1, 60) == []
        expire_lease(pool, job_id)
        [again] = store.claim_due(1, 60)
        assert again.reclaimed and again.scheduled_at == claim.scheduled_at
        report = run(again.to_event())
        assert report["status"] == "succeeded"
        executions = store.list_executions(OWNER, job_id)
        assert [e.status for e in executions] == ["succeeded", "lost", "succeeded"]
        requests = target.snapshot()
        assert requests[1]["headers"]["Idempotency-Key"] == requests[2]["headers"]["Idempotency-Key"]
        assert requests[2]["arrived"] > requests[1]["ended"]
        job = store.get_job(OWNER, job_id)
        assert job.lock_token is None and job.attempt == 0 and job.last_status == "succeeded"
    finally:
        pool.close()
