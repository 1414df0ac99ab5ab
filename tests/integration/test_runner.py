"""Executor and fan-out on real Postgres and a real HTTP server on loopback."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import timedelta

import boto3
from botocore.stub import ANY, Stubber

from scheduler import service
from scheduler.runner.dispatch import CLAIM_DUE, ClaimMode, LambdaDispatch
from scheduler.runner.executor import Executor, execute_invoke
from scheduler.runner.fanout import fanout_deadline, run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.integration.test_deploy_runner import RecordingLambda
from tests.support import http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/alice"
LOCAL = TargetPolicy(allow_private=True)


def local_invoker(store, metrics=None):
    return InProcessDispatch(Executor(store, lambda t: t, LOCAL, metrics), max_workers=8)


def drain(store, metrics=None):
    """One minute-precision fan-out; returns once every dispatched execution has finished."""
    invoker = local_invoker(store, metrics)
    report = run_fanout(store, invoker, budget_seconds=0, metrics=metrics)
    invoker.close()
    return report


def test_one_off_http_job_is_delivered_with_its_identity(store, target_server, caplog):
    spec = http_spec(
        "once",
        None,
        url=target_server.url + "/hook",
        run_at=store.now() - timedelta(seconds=1),
        target={
            **http_spec("x")["target"],
            "url": target_server.url + "/hook",
            "headers": {"Content-Type": "application/json"},
            "body": '{"job": "{{job_id}}", "at": "{{scheduled_at}}", "try": {{attempt}}}',
        },
    )
    job = service.create_job(store, OWNER, spec)
    metrics = MemoryMetrics()
    caplog.set_level(logging.INFO)
    report = drain(store, metrics)
    assert report.claimed == report.dispatched == 1
    [request] = target_server.wait_for(1)
    job_id = str(job.id)
    [execution] = store.list_executions(OWNER, job_id)
    headers = request["headers"]
    assert headers["X-Scheduler-Job-Id"] == job_id
    assert headers["X-Scheduler-Execution-Id"] == str(execution.id)
    assert headers["X-Scheduler-Attempt"] == "1"
    assert headers["Idempotency-Key"] == f"{job_id}:{headers['X-Scheduler-Scheduled-At']}"
    assert json.loads(request["body"]) == {"job": job_id, "at": headers["X-Scheduler-Scheduled-At"], "try": 1}
    assert execution.status == "succeeded" and execution.http_status == 200
    assert execution.response_excerpt == "ok" and execution.trigger == "schedule"
    assert store.get_job(OWNER, job_id).state == "completed"
    assert metrics.total("Executions", status="succeeded") == 1 and metrics.total("Claimed") == 1
    # Its log line (the Lambda's JSON keys): the job, the execution, whose job it is.
    [finished] = [r for r in caplog.records if r.getMessage() == "execution finished"]
    assert (finished.job_id, finished.execution_id, finished.owner) == (job_id, str(execution.id), OWNER)
    assert (finished.job_name, finished.status) == ("once", "succeeded")


def test_failure_then_durable_retry_then_success(store, pool, target_server):
    target_server.responses["/flaky"] = [(500, {}, b"boom"), (200, {}, b"fine")]
    spec = http_spec("flaky", "0 0 1 1 *", target={**http_spec("x")["target"], "url": target_server.url + "/flaky"})
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    drain(store)
    row = store.get_job(OWNER, job_id)
    assert row.attempt == 1 and row.lock_token is None and row.next_run_at > store.now()
    assert store.claim_due(10, 60) == []  # the retry waits for its backoff, in the row
    make_due(pool, job_id)
    drain(store)
    first, second = target_server.wait_for(2)
    assert first["headers"]["Idempotency-Key"] == second["headers"]["Idempotency-Key"]
    assert (first["headers"]["X-Scheduler-Attempt"], second["headers"]["X-Scheduler-Attempt"]) == ("1", "2")
    newest, oldest = store.list_executions(OWNER, job_id)
    assert (oldest.status, oldest.http_status, oldest.response_excerpt) == ("failed", 500, "boom")
    assert (newest.status, newest.trigger) == ("succeeded", "retry")
    assert store.get_job(OWNER, job_id).attempt == 0


def test_retry_after_sets_the_next_attempt(store, pool, target_server):
    target_server.responses["/busy"] = [(429, {"Retry-After": "120"}, b"slow down")]
    spec = http_spec("busy", "0 0 1 1 *", target={**http_spec("x")["target"], "url": target_server.url + "/busy"})
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    drain(store)
    row = store.get_job(OWNER, job_id)
    assert row.next_run_at >= store.now() + timedelta(seconds=115)


def test_stale_claim_does_nothing(store, pool, target_server):
    spec = http_spec("stale", "0 0 1 1 *", target={**http_spec("x")["target"], "url": target_server.url})
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET locked_until = now() - interval '1 second' WHERE job_id = %s", (job_id,))
    [newer] = store.claim_due(1, 60)
    report = execute_invoke(claim.to_event(), store=store, decrypt_target=lambda t: t, policy=LOCAL)
    assert report["outcome"] == "lease_lost" and target_server.requests == []
    assert (
        execute_invoke(newer.to_event(), store=store, decrypt_target=lambda t: t, policy=LOCAL)["status"] == "succeeded"
    )


def test_private_target_refused_outside_local_mode(store, target_server):
    spec = http_spec("ssrf", None, run_at=store.now(), target={**http_spec("x")["target"], "url": target_server.url})
    job_id = str(service.create_job(store, OWNER, spec).id)
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy()))
    run_fanout(store, invoker, budget_seconds=0)
    invoker.close()
    [execution] = store.list_executions(OWNER, job_id)
    assert execution.status == "failed" and "not allowed" in execution.error
    assert target_server.requests == []


def test_lambda_invoker_retries_throttles_and_releases_what_it_cannot_dispatch(store, pool):
    jobs = [str(service.create_job(store, OWNER, http_spec(f"l{i}")).id) for i in range(2)]
    for job_id in jobs:
        make_due(pool, job_id)
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    # Job 1: throttled once, then accepted. Job 2: refused for good (the function is gone).
    stubber.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
    stubber.add_response(
        "invoke",
        {"StatusCode": 202, "Payload": io.BytesIO(b"")},
        {"FunctionName": "executor", "InvocationType": "Event", "Payload": ANY},
    )
    stubber.add_client_error("invoke", "ResourceNotFoundException", http_status_code=404)
    with stubber:
        invoker = LambdaDispatch(client, "executor", max_workers=1, sleep=lambda s: None)
        report = run_fanout(store, invoker, budget_seconds=0, batch_size=1)
        invoker.close()
    assert report.claimed == 2 and report.dispatched == 1 and report.released == 1
    stubber.assert_no_pending_responses()
    # The released job is claimable again at once; the dispatched one stays leased.
    [again] = store.claim_due(10, 60)
    assert again.job_id in jobs


def test_overlapping_fanouts_deliver_each_job_once(db_url, store, target_server):
    from scheduler.store.db import make_pool
    from scheduler.store.postgres import Store

    count = 200
    base = store.now()
    for i in range(count):  # due over the next ~2 seconds, and a few already due
        service.create_job(
            store,
            OWNER,
            http_spec(
                f"o{i:03d}",
                None,
                run_at=base + timedelta(milliseconds=10 * i - 200),
                target={**http_spec("x")["target"], "url": target_server.url + "/o"},
            ),
        )
    reports, errors = [], []

    def fanout(budget: float) -> None:
        pool = make_pool(db_url, min_size=1, max_size=4)
        local_store = Store(pool)
        invoker = local_invoker(local_store)
        try:
            reports.append(run_fanout(local_store, invoker, budget_seconds=budget, batch_size=20))
        except Exception as exc:
            errors.append(exc)
        finally:
            invoker.close()
            pool.close()

    threads = [threading.Thread(target=fanout, args=(b,)) for b in (3.0, 3.5, 4.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    requests = target_server.wait_for(count)
    keys = [r["headers"]["Idempotency-Key"] for r in requests]
    assert len(keys) == count and len(set(keys)) == count
    # A claim refused by a saturated invoker is released and claimed again: count it once.
    assert sum(r.claimed - r.released for r in reports) == count
    for request in requests:  # never before its time (second precision: it waited)
        [execution] = store.list_executions(OWNER, request["headers"]["X-Scheduler-Job-Id"])
        assert execution.started_at >= execution.scheduled_at


def test_fanout_deadline():
    assert fanout_deadline("second", None) == 65.0
    assert fanout_deadline("second", 40.0) == 30.0
    assert fanout_deadline("minute", 80.0) == 0.0


def test_amqp_job_is_published_with_confirms(store, amqp_url, amqp_admin, amqp_queue):
    exchange, queue, routing_key = amqp_queue
    spec = http_spec(
        "amqp",
        None,
        run_at=store.now() - timedelta(seconds=1),
        target={
            "type": "amqp",
            "url": amqp_url,
            "exchange": exchange,
            "routing_key": routing_key,
            "body": '{"job": "{{job_id}}"}',
            "body_encoding": "utf-8",
            "headers": {"tenant": "acme"},
            "content_type": "application/json",
            "timeout_seconds": 10,
        },
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    assert execution.status == "succeeded", execution.error
    method, properties, body = amqp_admin.basic_get(queue, auto_ack=True)
    assert json.loads(body) == {"job": job_id}
    assert properties.message_id == properties.headers["Idempotency-Key"]
    assert properties.headers["X-Scheduler-Execution-Id"] == str(execution.id)
    assert properties.headers["tenant"] == "acme" and properties.delivery_mode == 2
    assert properties.content_type == "application/json"


def test_unroutable_amqp_message_is_a_retryable_failure(store, amqp_url, amqp_queue):
    exchange, _, _ = amqp_queue
    spec = http_spec(
        "lost",
        "0 0 1 1 *",
        target={"type": "amqp", "url": amqp_url, "exchange": exchange, "routing_key": "nobody-listens", "body": "x"},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    store.request_run(OWNER, job_id)
    drain(store)
    [execution] = store.list_executions(OWNER, job_id)
    assert execution.status == "failed" and execution.trigger == "manual"


def test_fanout_keeps_the_day_partitions_once_per_run(store, pool):
    """The fan-out drops the expired day (not row by row), creates the days ahead, purges the
    DEFAULT partition's expired rows, once per run however many rounds it makes."""
    job_id = str(service.create_job(store, OWNER, http_spec("old", "0 0 1 1 *")).id)
    with pool.connection() as conn:
        conn.execute(
            "CREATE TABLE executions_p20000101 PARTITION OF executions "
            "FOR VALUES FROM ('2000-01-01 00:00+00') TO ('2000-01-02 00:00+00')"
        )
        conn.execute(
            """
            INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
            SELECT gen_random_uuid(), %s::uuid, now(), timestamptz '2000-01-01 12:00+00', 1, 'schedule', 'succeeded'
            FROM generate_series(1, 1700)
            UNION ALL
            SELECT gen_random_uuid(), %s::uuid, now(), now() - interval '40 days', 1, 'schedule', 'succeeded'""",
            (job_id, job_id),
        )
    calls = []
    original = store.maintain_partitions
    store.maintain_partitions = lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs)
    invoker = local_invoker(store)
    report = run_fanout(store, invoker, budget_seconds=1.5, retention_days=30)
    invoker.close()
    assert report.rounds > 1 and calls == [(30,)]
    assert (report.partitions_dropped, report.partitions_created, report.purged) == (1, 3, 1)
    assert store.list_executions(OWNER, job_id) == []


def test_partition_steps_left_to_the_next_run_are_reported_and_counted(store, db_url):
    """A reader holding the executions' partitions: the upkeep's steps are left to the next run,
    and the fan-out says how many, in its report (its log line) and as PartitionsSkipped (0 once
    every step was done: the alarm watches for a count that never falls to 0)."""
    import psycopg

    metrics = MemoryMetrics()
    with psycopg.connect(db_url) as reader:
        reader.execute("SELECT count(*) FROM executions")  # holds every partition, DEFAULT included
        invoker = local_invoker(store)
        report = run_fanout(store, invoker, budget_seconds=0, retention_days=30, metrics=metrics)
        invoker.close()
    assert report.partitions_skipped == 3 and report.partitions_created == 0
    assert report.as_dict()["partitions_skipped"] == 3
    invoker = local_invoker(store)
    again = run_fanout(store, invoker, budget_seconds=0, retention_days=30, metrics=metrics)
    invoker.close()
    assert (again.partitions_skipped, again.partitions_created) == (0, 3)
    assert metrics.values[("PartitionsSkipped", ())] == [3.0, 0.0]


def test_fanout_stops_draining_at_its_limit_while_claims_come_back_full(store, pool):
    from tests.support import insert_due_jobs

    insert_due_jobs(pool, 300)
    ticks = iter(range(10**6))

    class Accepting:
        claim_mode = CLAIM_DUE

        def capacity(self) -> int:
            return 10

        def dispatch(self, claims):
            return []

        def close(self) -> None:
            pass

    # A clock that moves one second per reading: the drain limit of 3 s lasts a few rounds only.
    report = run_fanout(
        store, Accepting(), budget_seconds=0, drain_limit_seconds=3, batch_size=10, clock=lambda: float(next(ticks))
    )
    assert 0 < report.claimed < 300


def test_a_retry_due_past_its_max_age_is_given_up_not_delivered(store, pool, target_server):
    """The runners were down while a retry waited: when they come back, the retry would start a
    minute after its occurrence, past the policy's max_age_seconds (6 s), so it is not made."""
    spec = http_spec(
        "stale-retry",
        "0 0 1 1 *",
        target={**http_spec("x")["target"], "url": target_server.url},
        retry={"max_attempts": 5, "min_backoff_seconds": 3, "max_backoff_seconds": 3, "max_age_seconds": 6},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    with pool.connection() as conn:  # attempt 1 failed a minute ago; its retry is due since
        conn.execute(
            """UPDATE job_runs SET attempt = 1, scheduled_at = date_trunc('second', now()) - interval '60 seconds',
                                   next_run_at = date_trunc('second', now()) - interval '57 seconds'
               WHERE job_id = %s""",
            (job_id,),
        )
        # created before that occurrence (max_age_seconds counts from the later of the two)
        conn.execute("UPDATE job_specs SET created_at = now() - interval '1 hour' WHERE id = %s", (job_id,))
    [claim] = store.claim_due(1, 60)
    report = execute_invoke(claim.to_event(), store=store, decrypt_target=lambda t: t, policy=LOCAL)
    assert report["status"] == "failed" and target_server.requests == []
    [given_up] = store.list_executions(OWNER, job_id)
    assert given_up.attempt == 2 and "max_age_seconds (6)" in given_up.error
    row = store.get_job(OWNER, job_id)
    assert row.attempt == 0 and row.scheduled_at > claim.scheduled_at  # on to the next occurrence


def test_attempts_lost_with_their_runners_count_toward_max_attempts(store, pool, target_server):
    spec = http_spec(
        "poison",
        "0 0 1 1 *",
        target={**http_spec("x")["target"], "url": target_server.url},
        retry={"max_attempts": 1, "min_backoff_seconds": 1, "max_backoff_seconds": 1},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    make_due(pool, job_id)
    [claim] = store.claim_due(1, 60)
    store.start_execution(job_id, claim.lock_token)  # ...and the runner dies mid-delivery
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET locked_until = now() - interval '1 second' WHERE job_id = %s", (job_id,))
    [again] = store.claim_due(1, 60)
    report = execute_invoke(again.to_event(), store=store, decrypt_target=lambda t: t, policy=LOCAL)
    assert report["status"] == "failed" and target_server.requests == []  # given up, not redelivered
    newest, lost = store.list_executions(OWNER, job_id)
    assert lost.status == "lost" and "gave up" in newest.error
    row = store.get_job(OWNER, job_id)
    assert row.attempt == 0 and row.scheduled_at > again.scheduled_at  # the next occurrence


def _lost_lines(caplog) -> list[tuple[str, str]]:
    return [
        (record.job_id, record.execution_id)
        for record in caplog.records
        if record.levelname == "WARNING" and record.getMessage().startswith("execution lost with its runner")
    ]


def test_an_outcome_recorded_after_its_lease_was_taken_over_is_not_counted(store, pool, target_server, caplog):
    """A delivery that outlived its lease: the claim that took the job over marked its execution
    lost (counted lost), and its own outcome, refused, is counted as nothing else (it was counted
    twice: its status and lost)."""
    job_id = str(service.create_job(store, OWNER, http_spec("overrun", "0 0 1 1 *", url=target_server.url)).id)
    make_due(pool, job_id)
    metrics = MemoryMetrics()
    executor = Executor(store, lambda t: t, LOCAL, metrics)
    [claim] = store.claim_due(1, 60)
    started = executor.start(claim)
    finished = executor.deliver(started, claim.lock_token)  # succeeded, but past its lease:
    _expire_lease(pool, job_id)
    reclaiming = LambdaDispatch(RecordingLambda(), "executor")
    try:
        run_fanout(store, reclaiming, budget_seconds=0, metrics=metrics)  # the next claim takes it over
    finally:
        reclaiming.close()
    with caplog.at_level(logging.INFO, logger="scheduler.runner.executor"):
        [report] = executor.record([finished])
    assert report.outcome == "fenced" and report.status == "succeeded"
    assert [r.levelname for r in caplog.records if "outcome not recorded" in r.getMessage()] == ["WARNING"]
    assert store.get_execution(started.execution_id).status == "lost"
    assert metrics.total("Executions", status="lost") == 1
    assert metrics.total("Executions", status="succeeded") == 0


def test_the_fanout_names_each_execution_it_marks_lost_in_its_log(store, pool, caplog):
    """A lease that expired while its execution ran: the claim marks the execution lost, and the
    fan-out logs the job and the execution (the count alone named neither), whichever statement
    claimed it (the deployment's claim_due, local mode's claim_and_start)."""
    dead = [str(service.create_job(store, OWNER, http_spec(f"dies-{n}", "0 0 1 1 *")).id) for n in range(2)]
    make_due(pool, dead[0])
    [local] = store.claim_and_start(1)  # a local runner died delivering it
    _expire_lease(pool, local.job_id)
    metrics = MemoryMetrics()
    deployed = LambdaDispatch(RecordingLambda(), "executor")
    try:
        run_fanout(store, deployed, budget_seconds=0, metrics=metrics)  # claim_due takes it back
    finally:
        deployed.close()
    assert _lost_lines(caplog) == [(local.job_id, local.started.execution_id)]
    make_due(pool, dead[1])
    [leased] = store.claim_due(1, 60)
    started = store.start_execution(leased.job_id, leased.lock_token)  # a deployed executor died
    _expire_lease(pool, leased.job_id)
    drain(store, metrics)  # claim_and_start takes it back
    assert _lost_lines(caplog)[1:] == [(leased.job_id, started.execution_id)]
    assert metrics.total("Executions", status="lost") == 2


def _expire_lease(pool, job_id: str) -> None:
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET locked_until = now() - interval '1 second' WHERE job_id = %s", (job_id,))


def test_a_manual_run_lost_with_its_runners_max_attempts_times_is_given_up(store, pool, target_server):
    """A manual run is one attempt, delivered again when its runner dies (at-least-once): a
    target that kills its runner every time is tried ``max_attempts`` times in all, then given
    up (not delivered) and the manual request cleared, on the deployed path and local mode's."""
    spec = http_spec(
        "poison-run",
        "0 0 1 1 *",
        target={**http_spec("x")["target"], "url": target_server.url},
        retry={"max_attempts": 2, "min_backoff_seconds": 1, "max_backoff_seconds": 1},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)
    store.request_run(OWNER, job_id)
    [claim] = store.claim_due(1, 60)
    assert store.start_execution(job_id, claim.lock_token).trigger == "manual"  # ...and its runner dies
    _expire_lease(pool, job_id)
    [claim] = store.claim_and_start(1)  # local mode: lost once, delivered again (2 allowed)
    again_started = Executor(store, lambda t: t, LOCAL).with_losses(claim.started)
    assert claim.reclaimed and again_started.lost_before == 1
    # Delivered again as attempt 2, as a scheduled occurrence's would be: its header and its row.
    assert again_started.attempt == 2 and store.get_execution(again_started.execution_id).attempt == 2
    _expire_lease(pool, job_id)  # ...and this runner dies too
    [again] = store.claim_due(1, 60)
    report = execute_invoke(again.to_event(), store=store, decrypt_target=lambda t: t, policy=LOCAL)
    assert report["status"] == "failed" and target_server.requests == []  # given up, not delivered
    newest, *lost = store.list_executions(OWNER, job_id)
    assert [e.status for e in lost] == ["lost", "lost"] and {e.trigger for e in (newest, *lost)} == {"manual"}
    assert "lost with its runner 2 time(s)" in newest.error and "max_attempts (2)" in newest.error
    assert store.get_job(OWNER, job_id).manual_run_at is None  # the request is done with
    assert store.claim_due(1, 60) == []  # and nothing is due again


def test_a_reclaimed_manual_run_within_max_attempts_is_delivered_by_local_mode(store, pool, target_server):
    spec = http_spec("lost-once", "0 0 1 1 *", target={**http_spec("x")["target"], "url": target_server.url})
    job_id = str(service.create_job(store, OWNER, spec).id)
    store.request_run(OWNER, job_id)
    [claim] = store.claim_and_start(1)  # ...and its runner dies
    _expire_lease(pool, job_id)
    invoker = InProcessDispatch(Executor(store, lambda t: t, LOCAL), max_workers=2, flush_seconds=0.05)
    delivered = threading.Event()
    threading.Thread(target=lambda: (target_server.wait_for(1), delivered.set()), daemon=True).start()
    try:
        run_fanout(store, invoker, budget_seconds=30, batch_size=10, stop=delivered)
    finally:
        invoker.close()
    assert len(target_server.requests) == 1
    delivered, lost = store.list_executions(OWNER, job_id)
    assert (delivered.status, delivered.trigger, lost.status) == ("succeeded", "manual", "lost")


class CallCountingStore:
    """A store that records the size of each batched start and completion."""

    def __init__(self, store):
        self._store = store
        self.starts: list[int] = []
        self.completions: list[int] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def claim_and_start(self, limit, *args, **kwargs):
        claims = self._store.claim_and_start(limit, *args, **kwargs)
        if claims:
            self.starts.append(len(claims))
        return claims

    def write_completions(self, planned):
        self.completions.append(len(planned))
        return self._store.write_completions(planned)


def test_local_invoker_claims_starts_and_records_in_batches_within_its_idle_workers(store, pool, target_server):
    ids = [
        str(
            service.create_job(
                store,
                OWNER,
                http_spec(
                    f"batch{i:02d}",
                    "0 0 1 1 *",
                    target={**http_spec("x")["target"], "url": target_server.url + "/batch"},
                ),
            ).id
        )
        for i in range(30)
    ]
    for job_id in ids:
        make_due(pool, job_id)
    counting = CallCountingStore(store)
    # Outcomes finished within a second of each other are recorded together (a wide window, so
    # that the batching shows on a loaded machine too).
    invoker = InProcessDispatch(Executor(counting, lambda t: t, LOCAL), max_workers=8, flush_seconds=1.0)
    try:
        # Claiming goes on while workers are busy (a loaded machine may keep all 8 busy when a
        # zero budget would already stop), until every delivery arrived.
        delivered = threading.Event()
        threading.Thread(target=lambda: (target_server.wait_for(30), delivered.set()), daemon=True).start()
        report = run_fanout(counting, invoker, budget_seconds=60, batch_size=100, stop=delivered)
        assert report.claimed == report.dispatched == 30 and report.released == 0
    finally:
        invoker.close()  # waits for the deliveries under way and records them
    assert len(target_server.wait_for(30)) == 30
    # Claimed and started together, never more than idle workers: delivered at once.
    assert max(counting.starts) <= 8 and sum(counting.starts) == 30
    assert sum(counting.completions) == 30 and len(counting.completions) < 30
    for job_id in ids:
        [execution] = store.list_executions(OWNER, job_id)
        assert execution.status == "succeeded" and execution.http_status == 200
        assert store.get_job(OWNER, job_id).lock_token is None
    assert invoker.capacity() == 8


def test_a_runner_with_39_idle_executors_claims_32(store, pool):
    """claim_and_start's claims come in few sizes (ClaimMode.sized): 39 idle executors claim 32,
    and the next round the rest."""
    from tests.support import insert_due_jobs

    insert_due_jobs(pool, 50)
    claimed: list[int] = []

    class ThirtyNineIdle:
        claim_mode = ClaimMode("claim_and_start")

        def capacity(self) -> int:
            return 39

        def dispatch(self, claims):
            claimed.append(len(claims))
            return []

        def close(self) -> None:
            pass

    run_fanout(store, ThirtyNineIdle(), budget_seconds=0, batch_size=100)
    assert claimed == [32, 18]


def test_a_job_deleted_during_its_delivery_is_said_so_not_as_a_lease_lost(store, pool, target_server, caplog):
    """Its outcome is refused (the job and its executions are gone), and the log says why: no
    lease was taken over, which the warning "lease lost" would have an operator look for."""
    job = service.create_job(store, OWNER, http_spec("short-lived", "0 0 1 1 *", url=target_server.url))
    make_due(pool, str(job.id))
    executor = Executor(store, lambda t: t, LOCAL, MemoryMetrics())
    [claim] = store.claim_due(1, 60)
    started = executor.start(claim)
    finished = executor.deliver(started, claim.lock_token)
    service.delete_job(store, OWNER, str(job.id))
    with caplog.at_level(logging.INFO, logger="scheduler.runner.executor"):
        [report] = executor.record([finished])
    assert report.outcome == "fenced"
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "outcome not recorded" in r.getMessage()]
    assert said == [("INFO", "job deleted during its delivery; outcome not recorded")]
