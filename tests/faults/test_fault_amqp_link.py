"""The link to the AMQP broker cut under the runner.

AMQP jobs are delivered through a loopback TCP forwarder to the real broker, which the test
controls: ``down()`` drops every forwarded connection (the runner's pooled one included) and
refuses new ones; ``up()`` accepts again. While the link is down a delivery fails retryably and
is recorded as ``failed`` with a retry planned in the row (durable retry, lease released); once
the link is back the job is delivered, and each occurrence is in the queue exactly once
(``message_id`` = Idempotency-Key, unique).
"""

from __future__ import annotations

import pytest

from scheduler import service
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.targets import amqp as amqp_target
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TcpProxy
from tests.support import http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/amqp-faults"

pytestmark = pytest.mark.amqp
SLACK = 0.25  # seconds


@pytest.fixture
def proxy(amqp_url):
    from urllib.parse import urlsplit

    parts = urlsplit(amqp_url)
    forwarder = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5672))
    yield forwarder
    forwarder.close()
    amqp_target.close_all()


def drain(store) -> None:
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(allow_private=True)), max_workers=2)
    try:
        run_fanout(store, invoker, budget_seconds=0)
    finally:
        invoker.close()


def queued(channel, queue: str) -> list:
    """Every message in the queue (consumed)."""
    messages = []
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return messages
        messages.append((properties, body))


def test_deliveries_fail_retryably_while_the_link_is_down_and_once_when_it_is_back(
    store, pool, proxy, amqp_admin, amqp_queue
):
    exchange, queue, routing_key = amqp_queue
    url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/%2F"
    spec = http_spec(
        "through-proxy",
        "0 0 1 1 *",
        target={
            "type": "amqp",
            "url": url,
            "exchange": exchange,
            "routing_key": routing_key,
            "body": "{{job_id}} {{attempt}}",
            "timeout_seconds": 3,
        },
        retry={"max_attempts": 5, "min_backoff_seconds": 1, "max_backoff_seconds": 60, "max_age_seconds": None},
    )
    job_id = str(service.create_job(store, OWNER, spec).id)

    # 1. The link is up: delivered, and the runner keeps a pooled connection through the proxy.
    # (An occurrence an hour ago, so that the next one, made due now, has another key.)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('second', now()) - interval '1 hour', "
            "next_run_at = date_trunc('second', now()) - interval '1 hour' WHERE job_id = %s",
            (job_id,),
        )
    drain(store)
    [first] = store.list_executions(OWNER, job_id)
    assert first.status == "succeeded", first.error
    assert len(amqp_target.idle_connections(url)) == 1 and proxy.accepted == 1

    # 2. The link goes down: the pooled connection is cut, new ones are refused.
    proxy.down()
    assert proxy.refuses()
    failed_attempts = []
    for attempt in (1, 2):
        make_due(pool, job_id)
        drain(store)
        execution = store.list_executions(OWNER, job_id)[0]
        job = store.get_job(OWNER, job_id)
        assert (execution.status, execution.attempt) == ("failed", attempt), execution
        assert "connection refused" in execution.error and "guest" not in execution.error
        # Retry planned in the row, lease released; the backoff starts at min_backoff_seconds
        # (the completion plans from the start time plus the time elapsed: a few ms of slack).
        assert job.attempt == attempt and job.lock_token is None and job.state == "active"
        delay = (job.next_run_at - execution.finished_at).total_seconds()
        assert 1 - SLACK <= delay <= 2 ** (attempt - 1) + SLACK, delay
        assert job.last_status == "failed"
        failed_attempts.append(execution)
    assert store.claim_due(10, 60) == []  # the retry waits for its time

    # 3. The link is back: the retry is delivered once.
    proxy.up()
    make_due(pool, job_id)
    drain(store)
    last = store.list_executions(OWNER, job_id)[0]
    assert (last.status, last.attempt, last.trigger) == ("succeeded", 3, "retry"), last.error
    job = store.get_job(OWNER, job_id)
    assert job.attempt == 0 and job.last_status == "succeeded" and job.lock_token is None

    messages = queued(amqp_admin, queue)
    ids = [properties.message_id for properties, _ in messages]
    assert len(ids) == len(set(ids)) == 2  # the first occurrence and the retried one, once each
    retried = messages[1][0]
    assert retried.headers["X-Scheduler-Execution-Id"] == str(last.id)
    assert retried.headers["X-Scheduler-Attempt"] == "3" and messages[1][1] == f"{job_id} 3".encode()
    assert {e.id for e in failed_attempts}.isdisjoint({p.headers["X-Scheduler-Execution-Id"] for p, _ in messages})
