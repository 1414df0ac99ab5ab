"""Postgres restarted under load.

A private Postgres (pgserver in a temp dir, so the test may stop and start it) holds a few
hundred one-off jobs due over three seconds. A runner loop like local mode's (``run_fanout`` in
a thread, retried after any exception, a ``InProcessDispatch``: batched starts, a pool of deliveries,
batched outcomes) delivers them to a
loopback target. Once about a third are delivered the server is stopped (``pg_ctl stop -m
fast``: every connection is cut), kept down until the runner felt it, and started again.

What must hold: the runner recovers by itself; every job ends completed with exactly one
succeeded execution and nothing left running; every delivery the target saw is a recorded
execution; a job delivered twice (same Idempotency-Key) has a ``lost`` execution to explain it
(at-least-once when an outcome could not be recorded); no job was ever in flight twice at once.
Leases are short here (claim 3 s, delivery timeout 2 s + margin 3 s) so stranded jobs come back
within the test's time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from collections import Counter, defaultdict

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from scheduler.runner import executor as executor_module
from scheduler.runner.executor import Executor, execute_invoke
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.store.db import make_pool
from scheduler.store.migrations import migrate
from scheduler.store.postgres import Store
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TargetServer, poll
from tests.support import insert_jobs_sql

COUNT = 300
CLAIM_LEASE_SECONDS = 3
TARGET_TIMEOUT_SECONDS = 2
LEASE_MARGIN_SECONDS = 3.0


class PrivatePostgres:
    """A pgserver Postgres of this test only, which it may stop and start."""

    def __init__(self) -> None:
        import pgserver

        self.root = tempfile.mkdtemp(prefix="sched-restart-")
        self.server = pgserver.get_server(os.path.join(self.root, "pg"), cleanup_mode="delete")
        self.socket_dir = str(self.server.get_postmaster_info().socket_dir)
        self.url = self.server.get_uri()

    def _ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=30)

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-w", "-m", mode, "stop")

    def start(self) -> None:
        # The options pgserver starts it with: no TCP, a Unix socket in its own folder.
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start")

    def close(self) -> None:
        try:
            self.stop("immediate")
        except Exception:
            pass
        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


def postmaster_start(url: str):
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]


@pytest.fixture
def private_pg():
    pg = PrivatePostgres()
    name = f"sched_restart_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(pg.url, dbname=name)
    migrate(url)
    yield pg, url
    pg.close()


class CountingStore(Store):
    """The store, counting the exceptions of the executor's two writes (per execution)."""

    def __init__(self, pool, faults: Counter) -> None:
        super().__init__(pool)
        self.faults = faults

    def claim_and_start(self, *args, **kwargs):
        try:
            return super().claim_and_start(*args, **kwargs)
        except Exception as exc:
            self.faults[f"claim_and_start: {type(exc).__name__}"] += 1
            raise

    def write_completions(self, planned):
        try:
            return super().write_completions(planned)
        except Exception as exc:
            self.faults[f"complete_execution: {type(exc).__name__}"] += len(planned)
            raise

    def complete_locked(self, done, plan):
        try:
            return super().complete_locked(done, plan)
        except Exception as exc:
            self.faults[f"complete_execution: {type(exc).__name__}"] += 1
            raise


@pytest.fixture
def target():
    server = TargetServer()
    yield server
    server.close()


def insert_jobs(store: Store, url: str) -> None:
    """COUNT one-off jobs due over the next three seconds (a tenth of them each 100 ms)."""
    with store.pool.connection() as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, run_at, target, retry, state, scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), 'restart', 'job-' || g, t, %(target)s, %(retry)s, 'active', t, t
                FROM generate_series(1, %(count)s) AS g,
                     LATERAL (SELECT date_trunc('milliseconds', now()) + make_interval(secs => (g %% 30) * 0.1) AS t) AS due
                """,
            ),
            {
                "count": COUNT,
                "target": psycopg.types.json.Jsonb(
                    {"type": "http", "url": url, "method": "POST", "timeout_seconds": TARGET_TIMEOUT_SECONDS}
                ),
                "retry": psycopg.types.json.Jsonb(
                    {"max_attempts": 5, "min_backoff_seconds": 0.2, "max_backoff_seconds": 1}
                ),
            },
        )


@pytest.mark.slow
def test_runner_recovers_from_a_postgres_restart_and_nothing_is_lost_or_doubled(private_pg, target, monkeypatch):
    pg, url = private_pg
    monkeypatch.setattr(executor_module, "LEASE_MARGIN_SECONDS", LEASE_MARGIN_SECONDS)
    pool = make_pool(url, min_size=2, max_size=8)
    faults: Counter[str] = Counter()
    store = CountingStore(pool, faults)
    insert_jobs(store, target.url + "/load")

    felt = threading.Event()
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(allow_private=True)), max_workers=16)
    stop = threading.Event()

    def runner() -> None:  # local mode's loop
        while not stop.is_set():
            try:
                run_fanout(
                    store, invoker, budget_seconds=60, batch_size=50, lease_seconds=CLAIM_LEASE_SECONDS, stop=stop
                )
            except Exception as exc:
                faults[f"fanout: {type(exc).__name__}"] += 1
                felt.set()
                stop.wait(0.5)

    thread = threading.Thread(target=runner, name="fanout", daemon=True)
    thread.start()
    try:
        target.wait_for(lambda s: len(s.requests) >= COUNT // 3, timeout=20, what="a third of the deliveries")
        started_before = postmaster_start(url)
        pg.stop("fast")

        def felt_it() -> bool:  # an exception in the runner, or the pool failing to reconnect
            stats = pool.get_stats()
            return (
                felt.is_set()
                or sum(faults.values()) > 0
                or stats.get("connections_errors", 0) > 0
                or stats.get("returns_bad", 0) > 0
            )

        try:
            poll(felt_it, timeout=5, interval=0.02, what="the runner feeling the outage")
        except AssertionError:
            pass  # an idle runner may not notice: the restart is still checked below
        pg.start()
        assert postmaster_start(url) > started_before
        delivered_at_restart = len(target.requests)

        def all_completed():
            try:
                with pool.connection() as conn:
                    row = conn.execute(
                        "SELECT count(*) FILTER (WHERE state = 'completed') AS done FROM jobs"
                    ).fetchone()
                return row["done"] == COUNT
            except psycopg.Error:
                return False

        poll(all_completed, timeout=30, interval=0.2, what="every job completed")
    finally:
        stop.set()
        thread.join(timeout=15)
        invoker.close()
    assert not thread.is_alive()
    stats = pool.get_stats()

    with pool.connection() as conn:
        jobs = {str(r["id"]): r for r in conn.execute("SELECT * FROM jobs").fetchall()}
        executions = conn.execute("SELECT id, job_id, status, attempt FROM executions").fetchall()
    pool.close()

    by_job: dict[str, list[dict]] = defaultdict(list)
    for e in executions:
        by_job[str(e["job_id"])].append(e)
    # Nothing lost: every job completed, one succeeded execution each, nothing left running.
    assert all(
        j["state"] == "completed" and j["lock_token"] is None and j["last_status"] == "succeeded" for j in jobs.values()
    )
    assert all(sum(e["status"] == "succeeded" for e in by_job[job_id]) == 1 for job_id in jobs)
    statuses = Counter(e["status"] for e in executions)
    assert set(statuses) <= {"succeeded", "lost"}, statuses

    requests = target.snapshot()
    recorded = {str(e["id"]): e for e in executions}
    keys = Counter(r["headers"]["Idempotency-Key"] for r in requests)
    assert len(keys) == COUNT  # every job delivered
    for request in requests:  # every delivery is a recorded execution of its job
        execution = recorded[request["headers"]["X-Scheduler-Execution-Id"]]
        assert str(execution["job_id"]) == request["headers"]["X-Scheduler-Job-Id"]
    deliveries_per_job = Counter(r["headers"]["X-Scheduler-Job-Id"] for r in requests)
    doubled = {job_id for job_id, n in deliveries_per_job.items() if n > 1}
    # A second delivery of one occurrence only where an outcome was lost with the connection.
    assert all(any(e["status"] == "lost" for e in by_job[job_id]) for job_id in doubled)
    assert all(n <= len(by_job[job_id]) for job_id, n in deliveries_per_job.items())
    # ... and only as many as completions that failed after their delivery.
    completions_failed = sum(n for what, n in faults.items() if what.startswith("complete_execution"))
    assert len(doubled) <= completions_failed
    assert max(target.max_inflight.values()) == 1
    print(
        f"\npostgres restart: {COUNT} jobs, {delivered_at_restart} delivered before the restart, "
        f"faults felt {dict(faults)}, pool { ({k: v for k, v in stats.items() if 'error' in k or 'bad' in k}) }, "
        f"executions {dict(statuses)}, jobs delivered twice {len(doubled)}"
    )


def test_restart_during_a_delivery_does_not_lose_its_outcome(private_pg, target):
    pg, url = private_pg
    pool = make_pool(url, min_size=1, max_size=2)
    store = Store(pool)
    try:
        with pool.connection() as conn:
            conn.execute(
                insert_jobs_sql(
                    "id, owner, name, run_at, target, retry, state, scheduled_at, next_run_at",
                    "VALUES (gen_random_uuid(), 'restart', 'one', now(), %(target)s, '{}'::jsonb, 'active', now(), now())",
                ),
                {
                    "target": psycopg.types.json.Jsonb(
                        {"type": "http", "url": target.url + "/slow", "timeout_seconds": 10}
                    )
                },
            )
        target.behaviour["/slow"] = [("hold", 10.0)]
        [claim] = store.claim_due(1, 60)
        outcome: list = []

        def run() -> None:
            try:
                outcome.append(
                    execute_invoke(
                        claim.to_event(),
                        store=store,
                        decrypt_target=lambda t: t,
                        policy=TargetPolicy(allow_private=True),
                    )
                )
            except Exception as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        target.wait_for(lambda s: len(s.requests) == 1, timeout=10, what="the delivery")
        # Restarted while the target holds the request: the database is up again long before the
        # delivery ends.
        pg.stop("fast")
        pg.start()
        with psycopg.connect(url) as probe:
            probe.execute("SELECT 1")
        target.release()
        thread.join(timeout=15)
        assert not thread.is_alive()
        [result] = outcome
        assert not isinstance(result, Exception), f"execute_invoke raised {type(result).__name__}: {result}"
        assert result["outcome"] == "completed" and result["status"] == "succeeded"
    finally:
        pool.close()
