"""The answer to a start lost with its connection after the database committed it (a proxy that
cuts the link on that answer): the executions it started are read back by their lease tokens and
delivered at once, attempt 1, nothing lost. Before, the start ran again and found nothing to
do: the jobs waited out their leases (timeout + 30 s), their executions were marked lost and an
attempt counted that was never made (a job allowed one attempt was given up undelivered)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from psycopg.conninfo import make_conninfo

from scheduler import service
from scheduler.runner.executor import Executor
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TcpProxy, postgres_upstream
from tests.integration.test_api import ALICE
from tests.support import http_spec


@pytest.fixture
def proxied(db_url):
    """A store whose connections go through a proxy that can lose an answer, and the proxy."""
    proxy = TcpProxy(postgres_upstream(db_url))
    pool = make_pool(make_conninfo(db_url, host="127.0.0.1", port=str(proxy.port)), min_size=1, max_size=3)
    yield Store(pool), proxy
    pool.close()
    proxy.close()


def one_off(store, url: str):
    spec = http_spec("lost-answer", None, run_at=store.now() - timedelta(seconds=1), url=url)
    spec["retry"]["max_attempts"] = 1  # a wasted attempt would give it up undelivered
    return service.create_job(store, ALICE, spec)


def delivered_once(store, job, target_server, path: str) -> None:
    assert [r["path"] for r in target_server.requests] == [path]
    [execution] = store.list_executions(ALICE, str(job.id))
    assert execution.status == "succeeded" and execution.attempt == 1
    assert store.get_job(ALICE, str(job.id)).state == "completed"


@pytest.mark.parametrize("cut_all", [False, True], ids=["its-connection", "every-connection"])
def test_a_claim_whose_answer_was_lost_is_read_back_and_delivered(store, proxied, target_server, cut_all):
    """With every connection cut (the network dropped), the pool's idle connections died with the
    claim's: the read-back meets dead ones first (each dropped as it fails), then a new one."""
    runner_store, proxy = proxied
    with runner_store.pool.connection(), runner_store.pool.connection(), runner_store.pool.connection():
        pass  # three connections open in the pool, idle
    path = f"/claim-{uuid.uuid4().hex}"
    job = one_off(store, target_server.url + path)
    proxy.lose_answer_holding(path.encode(), cut_all=cut_all)

    [claim] = runner_store.claim_and_start(10, 30)
    assert proxy.answers_lost == 1 and claim.started.attempt == 1
    executor = Executor(runner_store, lambda t: t, TargetPolicy(allow_private=True))
    [report] = executor.record([executor.deliver(claim.started, claim.lock_token)])
    assert report.outcome == "completed"
    delivered_once(store, job, target_server, path)


def test_a_deployed_start_whose_answer_was_lost_is_read_back_and_delivered(store, proxied, target_server):
    runner_store, proxy = proxied
    path = f"/start-{uuid.uuid4().hex}"
    job = one_off(store, target_server.url + path)
    [claim] = store.claim_due(10, 60)  # the fan-out's claim; the executor's start goes through the proxy
    proxy.lose_answer_holding(path.encode())

    report = Executor(runner_store, lambda t: t, TargetPolicy(allow_private=True)).run(claim)
    assert proxy.answers_lost == 1 and report.outcome == "completed"
    delivered_once(store, job, target_server, path)
