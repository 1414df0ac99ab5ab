"""A claim whose answer reaches its runner late (a stalled connection, a paused process) is not
delivered once its lease no longer leaves room for the delivery: the lease was set by the
database when the claim committed, and another runner may have taken the job over since. Found
by an attack: a claim's reply held 40 s by a proxy was delivered beside the runner that had
taken the job over (two open requests with one Idempotency-Key). On real Postgres; the late
answer is the claim's result handed to the executor after the other runner's claim."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler import service
from scheduler.runner import executor as executor_module
from scheduler.runner.executor import Executor
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import ALICE
from tests.support import http_spec, poll

MARGIN = 1.0  # the lease: the target's timeout (1 s) and this


@pytest.fixture
def short_leases(monkeypatch):
    monkeypatch.setattr(Executor, "lease_margin_seconds", MARGIN)


def one_off(store, url: str):
    spec = http_spec("late", None, run_at=store.now() - timedelta(seconds=1), url=url)
    spec["target"]["timeout_seconds"] = 1
    return service.create_job(store, ALICE, spec)


def test_a_claim_answered_after_its_lease_was_taken_over_is_not_delivered(store, target_server, short_leases):
    job = one_off(store, target_server.url + "/late")
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    [late] = store.claim_and_start(10, MARGIN)  # its answer "arrives" only below
    [taken_over] = poll(lambda: store.claim_and_start(10, MARGIN), timeout=10, what="the lease taken over")
    assert taken_over.reclaimed

    ended = executor.deliver(late.started, late.lock_token)  # the late answer reaches its runner
    assert ended.result.error.startswith("the lease was taken over before the delivery began")
    assert target_server.requests == []  # not sent beside the other runner's delivery
    [report] = executor.record([ended])
    assert report.outcome == "fenced"  # the job is the other runner's: nothing written

    [report] = executor.record([executor.deliver(taken_over.started, taken_over.lock_token)])
    assert report.outcome == "completed"
    assert [r["path"] for r in target_server.requests] == ["/late"]
    statuses = sorted(e.status for e in store.list_executions(ALICE, str(job.id)))
    assert statuses == ["lost", "succeeded"]


def test_a_late_answer_whose_lease_no_other_runner_took_is_renewed_and_delivered(
    store, pool, target_server, short_leases
):
    """Late, past its lease, but no runner took the job meanwhile (its token still holds): the
    lease is renewed under that token, and the delivery made at once."""
    job = one_off(store, target_server.url + "/renewed")
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    [late] = store.claim_and_start(10, MARGIN)
    deliver_by = late.started.deliver_by  # this process's clock: the answer comes after it
    poll(lambda: executor_module.time.monotonic() > deliver_by + 1, timeout=10, what="the lease's end")

    [report] = executor.record([executor.deliver(late.started, late.lock_token)])
    assert report.outcome == "completed" and [r["path"] for r in target_server.requests] == ["/renewed"]
    [execution] = store.list_executions(ALICE, str(job.id))
    assert execution.status == "succeeded" and execution.attempt == 1 and execution.waited_ms is None
