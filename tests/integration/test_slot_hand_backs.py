"""A deployed executor never sleeps through a wait for its target's slot (per-target limits), on
real Postgres: past a short wait it hands the job back (its start undone: no execution kept, no
attempt counted, the lease shortened to a pause), a fan-out claims it again after the pause, and
the start that finally delivers says how long the occurrence waited, from its first hand-back."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from scheduler import service
from scheduler.core import constants as c
from scheduler.core.limits import TargetLimit
from scheduler.runner import executor as executor_module
from scheduler.runner.executor import Executor
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import ALICE, BOB
from tests.support import http_spec, poll

HELD = "limits of held (max_in_flight 1)"


@pytest.fixture
def short_waits(monkeypatch):
    """Waits and pauses of tenths of a second, so that a test sees several hand-backs."""
    monkeypatch.setattr(executor_module, "SLOT_WAIT_IN_EXECUTOR_SECONDS", 0.3)
    monkeypatch.setattr(executor_module, "HAND_BACK_MIN_PAUSE_SECONDS", 0.2)
    monkeypatch.setattr(executor_module, "HAND_BACK_MAX_PAUSE_SECONDS", 0.4)


def deployed_executor(store, remaining: float = 600.0, metrics=None) -> Executor:
    """An executor as the Lambda makes it: with the time its invocation has left."""
    return Executor(
        store, lambda target: target, TargetPolicy(allow_private=True), metrics, remaining_seconds=lambda: remaining
    )


def limited_job(store, name: str, url: str, **extra):
    spec = http_spec(name, None, run_at=store.now() - timedelta(seconds=1), url=url, **extra)
    return service.create_job(store, ALICE, {**spec, "limits": {"key": "held", "max_in_flight": 1}})


def hold_the_key(store) -> str:
    token = store.take_target_slot(TargetLimit("held", 1, None, ALICE), str(uuid.uuid4()), 120)
    assert token is not None
    return token


def run_state(pool, job_id) -> dict:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT attempt, running_execution_id, last_run_at, locked_until > now() AS leased,"
            " slot_wait_since, slot_wait_for FROM job_runs WHERE job_id = %s",
            (str(job_id),),
        ).fetchone()


def claim_when_free(store):
    """The fan-out's claim, once the hand-back's pause is over."""
    return poll(lambda: store.claim_due(10, 60), timeout=10, what="the job claimed again after its pause")


def test_a_full_key_hands_the_job_back_and_the_delivery_says_how_long_it_waited(
    store, pool, target_server, short_waits
):
    job = limited_job(store, "held", target_server.url + "/held")
    blocker = hold_the_key(store)
    metrics = MemoryMetrics()
    executor = deployed_executor(store, metrics=metrics)

    [claim] = store.claim_due(10, 60)
    report = executor.run(claim)
    assert report.outcome == "handed_back"
    assert store.list_executions(ALICE, str(job.id)) == []  # its start undone: nothing ran
    first = run_state(pool, job.id)
    assert first["attempt"] == 0 and first["running_execution_id"] is None and first["last_run_at"] is None
    assert first["leased"] and first["slot_wait_for"] == HELD and first["slot_wait_since"] is not None
    assert store.claim_due(10, 60) == []  # not claimed again during its pause
    assert store.due_backlog().due == 0  # waiting for its own limits (SlotWaitMs), not for the scheduler

    # Still full at the next claim: handed back again, the wait counted from the first time.
    assert executor.run(claim_when_free(store)[0]).outcome == "handed_back"
    since = run_state(pool, job.id)["slot_wait_since"]  # kept to the millisecond (waited_ms)
    assert abs((since - first["slot_wait_since"]).total_seconds()) < 0.002

    store.release_target_slot(blocker)
    assert executor.run(claim_when_free(store)[0]).outcome == "completed"
    [execution] = store.list_executions(ALICE, str(job.id))
    assert execution.status == "succeeded" and execution.attempt == 1 and execution.trigger == "schedule"
    waited = (execution.started_at - first["slot_wait_since"]).total_seconds()
    assert execution.waited_for == HELD and execution.waited_ms >= 0.6 * 1000  # two waits of 0.3 s at least
    assert abs(execution.waited_ms / 1000 - waited) < 0.5  # from the first hand-back
    after = run_state(pool, job.id)
    assert after["slot_wait_since"] is None and after["slot_wait_for"] is None
    assert [r["path"] for r in target_server.requests] == ["/held"]
    # The metrics: the wait as SlotWaitMs, the scheduler's own lateness without it (the job's
    # limits held it back, not the scheduler), each counted once, by the delivery that had its slot.
    assert metrics.values[(c.METRIC_SLOT_WAIT_MS, ())] == [float(execution.waited_ms)]
    own = (execution.started_at - execution.due_at).total_seconds() * 1000 - execution.waited_ms
    assert metrics.values[(c.METRIC_LATENESS_MS, (("trigger", "schedule"),))] == [pytest.approx(own)]
    assert 0 <= own < execution.waited_ms  # due a second before the first claim: the wait is most of it
    assert metrics.total(c.METRIC_HANDED_BACK) == 2


def test_an_executor_short_of_time_hands_back_at_once(store, pool, target_server):
    """Less time left than the target's timeout: no wait at all, the job goes back."""
    job = limited_job(store, "late", target_server.url + "/late")
    hold_the_key(store)
    [claim] = store.claim_due(10, 60)
    report = deployed_executor(store, remaining=3.0).run(claim)  # less than the target's timeout
    assert report.outcome == "handed_back"
    state = run_state(pool, job.id)
    assert state["leased"] and state["running_execution_id"] is None
    with pool.connection() as conn:
        waited = conn.execute(
            "SELECT extract(epoch FROM now() - slot_wait_since) AS s FROM job_runs WHERE job_id = %s", (str(job.id),)
        ).fetchone()["s"]
    assert waited < 1  # handed back at its first refusal (an in-Lambda wait is 2 s)


def test_a_hand_back_after_the_lease_was_taken_over_writes_nothing(store, pool, target_server, short_waits):
    job = limited_job(store, "taken", target_server.url + "/taken")
    hold_the_key(store)
    executor = deployed_executor(store)
    [claim] = store.claim_due(10, 60)
    started = executor.start(claim)
    hand_back = executor.deliver(started, claim.lock_token)
    with pool.connection() as conn:  # another runner took it over meanwhile
        conn.execute("UPDATE job_runs SET lock_token = gen_random_uuid() WHERE job_id = %s", (str(job.id),))
    [report] = executor.record([hand_back])
    assert report.outcome == "fenced"
    [execution] = store.list_executions(ALICE, str(job.id))  # the new holder's business now
    assert execution.status == "running"
    assert run_state(pool, job.id)["slot_wait_since"] is None


def test_a_group_delivers_its_free_jobs_and_hands_back_the_held_one(store, pool, target_server, short_waits):
    held = limited_job(store, "in-group-held", target_server.url + "/held")
    free = service.create_job(
        store,
        ALICE,
        http_spec("in-group-free", None, run_at=store.now() - timedelta(seconds=1), url=target_server.url + "/free"),
    )
    hold_the_key(store)
    claims = store.claim_due(10, 60)
    reports = {r.job_id: r.outcome for r in deployed_executor(store).run_group(claims)}
    assert reports == {str(held.id): "handed_back", str(free.id): "completed"}
    assert [r["path"] for r in target_server.requests] == ["/free"]


def test_a_handed_back_run_now_stays_a_run_now_and_last_run_at_goes_back(store, pool, target_server, short_waits):
    """A yearly job run now twice, the second time while its key is full: handed back, its
    last_run_at is that of the first run again, and the run now is delivered once the key frees."""
    spec = http_spec("manual", "0 0 1 1 *", url=target_server.url + "/manual")
    job = service.create_job(store, ALICE, {**spec, "limits": {"key": "held", "max_in_flight": 1}})
    executor = deployed_executor(store)
    service.request_run(store, ALICE, str(job.id))
    assert executor.run(claim_when_free(store)[0]).outcome == "completed"
    [before] = store.list_executions(ALICE, str(job.id))
    blocker = hold_the_key(store)
    service.request_run(store, ALICE, str(job.id))
    assert executor.run(claim_when_free(store)[0]).outcome == "handed_back"
    state = run_state(pool, job.id)
    assert state["last_run_at"] == before.started_at and state["attempt"] == 0
    store.release_target_slot(blocker)
    assert executor.run(claim_when_free(store)[0]).outcome == "completed"
    newest = store.list_executions(ALICE, str(job.id))[0]
    assert newest.trigger == "manual" and newest.waited_for == HELD and newest.waited_ms > 0
    assert len(store.list_executions(ALICE, str(job.id))) == 2


def test_local_mode_claims_a_handed_back_job_with_its_wait_behind_it(store, pool, target_server, short_waits):
    """Local mode claims and starts in one statement (claim_and_start) and hands a limited job back
    when there is no room for it to wait: the next claim's execution says how long the occurrence
    has waited since its first hand-back, and the wait is cleared from the job's run state."""
    job = limited_job(store, "local-held", target_server.url + "/held")
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    why = f"{HELD}; no room to wait"

    def claim_and_hand_back() -> None:
        [claim] = poll(lambda: store.claim_and_start(10, 30), timeout=10, what="the job claimed again")
        assert executor.hand_back(executor.hand_back_unwaited(claim.started, claim.lock_token, why)).outcome == (
            "handed_back"
        )

    claim_and_hand_back()
    first = run_state(pool, job.id)["slot_wait_since"]
    assert first is not None and store.list_executions(ALICE, str(job.id)) == []
    claim_and_hand_back()  # again: the wait still counts from the first hand-back
    assert abs((run_state(pool, job.id)["slot_wait_since"] - first).total_seconds()) < 0.002

    [claim] = poll(lambda: store.claim_and_start(10, 30), timeout=10, what="the job claimed a third time")
    [execution] = store.list_executions(ALICE, str(job.id))
    assert execution.status == "running" and execution.waited_for == why
    assert abs(execution.waited_ms / 1000 - (execution.started_at - first).total_seconds()) < 0.01
    state = run_state(pool, job.id)
    assert state["slot_wait_since"] is None and state["slot_wait_for"] is None
    assert claim.started.execution_id == str(execution.id)


def test_a_handed_back_job_holds_no_executor_and_its_old_claim_cannot_start(store, pool, target_server, short_waits):
    """During its pause a handed-back job is not a live lease: no executor is at work on it, so
    the fan-out's bound (``live_leases``, the reserved concurrency) and each owner's share of it
    leave it out, and one key's waits never hold back the other jobs' deliveries. Its old claim
    is spent: a duplicate invoke of it starts nothing. It is still not due backlog (it waits for
    its own limits), and the fan-out claims it again once the pause is over."""
    job = limited_job(store, "paused-back", target_server.url + "/held")
    service.create_job(store, BOB, http_spec("not-due", "0 0 1 1 *", url=target_server.url + "/bob"))  # shares apply
    blocker = hold_the_key(store)
    executor = deployed_executor(store)
    [claim] = store.claim_due(10, 60)
    assert store.live_leases() == 1 and store.owners_over_lease_share(0) == {ALICE: 1}  # an executor on its way
    assert executor.run(claim).outcome == "handed_back"
    assert run_state(pool, job.id)["leased"]  # the pause
    assert store.live_leases() == 0 and store.owners_over_lease_share(0) == {}
    assert store.due_backlog().due == 0
    assert executor.start(claim).outcome == "lease_lost"  # a duplicate invoke of the spent claim
    assert store.list_executions(ALICE, str(job.id)) == []

    again = claim_when_free(store)
    assert store.live_leases() == 1  # claimed again after its pause: counted as any claim
    store.release_target_slot(blocker)
    assert executor.run(again[0]).outcome == "completed"
    assert store.live_leases() == 0
