"""Local mode on a laptop that sleeps in the middle of a delivery.

While the machine sleeps, the wall clock (and Postgres's ``now()``) runs on and the monotonic
clock stops: on waking, the leases of the deliveries that were under way have expired though
the deliveries go on. The sleep is staged here: the lease made to look expired in the database
(``expire_lease``) and the guard's wall clock moved ahead, the monotonic clock left as it is.
The claim after the wake must not take the job as lost: the delivery under way ends and is
recorded, and the target receives the occurrence once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest

from scheduler import service
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.runner.wakes import WakeGuard
from scheduler.targets.results import TargetPolicy
from tests.faults.faultkit import TargetServer, poll
from tests.support import expire_lease, http_spec

OWNER = "arn:aws:iam::111111111111:user/alice"


class Clock:
    """A wall clock that a test moves ahead: the sleep, as the guard sees it."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


@pytest.fixture
def target():
    server = TargetServer()
    yield server
    server.close()


def _dispatch(store, wall: Clock, grace: float = 0.05, check_every: float = 0.05) -> InProcessDispatch:
    return InProcessDispatch(
        Executor(store, lambda t: t, TargetPolicy(allow_private=True)),
        max_workers=4,
        wakes=lambda keep: WakeGuard(keep, grace_seconds=grace, wall_clock=wall),
        wake_check_seconds=check_every,
    )


def _held_job(store, target, name: str, **extra) -> str:
    spec = http_spec(name, None, url=target.url + "/held", run_at=store.now() - timedelta(seconds=1), **extra)
    return str(service.create_job(store, OWNER, spec).id)


def test_a_delivery_under_way_when_the_laptop_slept_is_not_taken_as_lost(store, pool, target, caplog):
    caplog.set_level(logging.INFO, logger="scheduler.runner")
    target.behaviour["/held"] = [("hold", 20.0)]
    job_id = _held_job(store, target, "asleep-mid-delivery")
    wall = Clock()
    dispatch = _dispatch(store, wall)
    try:
        assert run_fanout(store, dispatch, budget_seconds=0).claimed == 1
        target.wait_for(lambda s: len(s.requests) == 1, timeout=10, what="the delivery")

        # The laptop sleeps for ten minutes: the lease has run out when it wakes.
        expire_lease(pool, job_id)
        wall.ahead = 600.0
        assert run_fanout(store, dispatch, budget_seconds=0).claimed == 0
        assert store.get_job(OWNER, job_id).locked_until > store.now() + timedelta(seconds=20)  # timeout 5 s + 30 s

        target.release()  # the delivery under way ends after the wake
        executions = poll(
            lambda: (lambda es: es if es[0].status != "running" else None)(store.list_executions(OWNER, job_id)),
            timeout=10,
            what="the delivery recorded",
        )
    finally:
        dispatch.close()
    [execution] = executions
    assert execution.status == "succeeded" and execution.attempt == 1
    assert store.get_job(OWNER, job_id).state == "completed"
    assert len(target.requests) == 1 and target.max_inflight[job_id] == 1
    assert "the machine slept for about 600 s" in caplog.text
    assert "kept 1 of 1 leases held" in caplog.text


def test_a_paused_jobs_delivery_under_way_when_the_laptop_slept_is_not_marked_lost(store, pool, target):
    """A job paused while its delivery goes on, then the laptop sleeps: the fan-out's check of
    the paused jobs (every second) marks lost an execution whose lease ran out while its job had
    nothing due (its runner died), and in the fan-out's loop it came before the guard's check,
    so the delivery still under way was marked lost and delivered again at the resume. The
    fan-out now lets the guard notice the wake (the leases kept) before it. The process's own
    watcher is left out (it checks every 30 s here): only the fan-out's loop can notice the wake."""
    target.behaviour["/held"] = [("hold", 20.0), ("answer", 200, {}, b"")]
    job_id = _held_job(store, target, "paused-mid-delivery")
    wall = Clock()
    dispatch = _dispatch(store, wall, check_every=30.0)
    stop = threading.Event()
    loop = threading.Thread(
        target=lambda: run_fanout(store, dispatch, budget_seconds=60, pauses=store, stop=stop), daemon=True
    )
    try:
        loop.start()
        target.wait_for(lambda s: len(s.requests) == 1, timeout=10, what="the delivery")
        service.pause_job(store, OWNER, job_id)
        with dispatch._wakes._lock:  # the lease's expiry and the clock's jump as one, as a sleep makes them
            expire_lease(pool, job_id)
            wall.ahead = 600.0
        # The loop's next check of the pauses (within its second) keeps the lease first.
        poll(lambda: _lease_left(store, job_id) > 20 or None, timeout=10, what="the lease kept")
        time.sleep(1.5)  # a check of the pauses after the wake's grace: nothing to mark lost
        [execution] = store.list_executions(OWNER, job_id)
        assert execution.status == "running"
        target.release()
        poll(lambda: store.list_executions(OWNER, job_id)[0].status != "running" or None, timeout=10, what="the record")
        service.resume_job(store, OWNER, job_id)
        time.sleep(1.5)  # a round of the loop after the resume: nothing to run again
    finally:
        stop.set()
        loop.join(10)
        dispatch.close()
    assert [(e.status, e.attempt) for e in store.list_executions(OWNER, job_id)] == [("succeeded", 1)]
    assert len(target.requests) == 1


def _lease_left(store, job_id: str) -> float:
    locked_until = store.get_job(OWNER, job_id).locked_until
    return (locked_until - store.now()).total_seconds() if locked_until else 0.0


def test_a_kept_lease_covers_a_whole_delivery_after_a_long_wait_for_its_slot(store, target):
    """A limited delivery that waited for its slot longer than its claim's lease: the end of its
    delivery as known at the claim had passed, and after a sleep its lease was kept for the
    margin alone (30 s), less than its delivery could still take; reclaimed, it was delivered a
    second time. A kept lease now covers at least the target's whole timeout."""
    spec = http_spec("waited-long", None, url=target.url + "/held", run_at=store.now() - timedelta(seconds=1))
    spec["target"]["timeout_seconds"] = 45
    job_id = str(service.create_job(store, OWNER, spec).id)
    dispatch = _dispatch(store, Clock(), check_every=30.0)
    try:
        [claim] = store.claim_and_start(10, dispatch.executor.lease_margin_seconds)
        with dispatch._lock:  # held as dispatch() holds it, the end known at its claim long past
            dispatch._held[claim.lock_token] = (job_id, time.monotonic() - 60.0, 45.0)
        dispatch.keep_held_leases()
    finally:
        dispatch.close()
    left = (store.get_job(OWNER, job_id).locked_until - store.now()).total_seconds()
    assert 45 + 30 - 5 < left <= 45 + 30  # the target's timeout and the margin


def test_a_limited_delivery_keeps_its_target_slot_through_the_sleep(store, pool, target):
    target.behaviour["/held"] = [("hold", 20.0), ("answer", 200, {}, b"")]
    limits = {"key": "one-at-a-time", "max_in_flight": 1}
    first = _held_job(store, target, "holds-the-slot", limits=limits)
    wall = Clock()
    dispatch = _dispatch(store, wall)
    try:
        assert run_fanout(store, dispatch, budget_seconds=0).claimed == 1
        target.wait_for(lambda s: len(s.requests) == 1, timeout=10, what="the limited delivery")
        with pool.connection() as conn:  # the sleep outlasts the slot's lease and the job's
            conn.execute("UPDATE target_slots SET until = now() - interval '1 second' WHERE released_at IS NULL")
        expire_lease(pool, first)
        wall.ahead = 600.0
        second = _held_job(store, target, "waits-for-the-slot", limits=limits)

        # The second job is claimed and waits: the slot held through the sleep is still held.
        assert run_fanout(store, dispatch, budget_seconds=0).claimed == 1
        with pool.connection() as conn:
            [held] = conn.execute(
                "SELECT count(*) AS held FROM target_slots WHERE key LIKE '%one-at-a-time' AND released_at IS NULL "
                "AND until > now() + interval '20 seconds'"
            ).fetchall()
        assert held == {"held": 1}
        assert len(target.requests) == 1

        target.release()
        done = _both_recorded(store, first, second, timeout=15)
    finally:
        dispatch.close()
    assert [execution.status for execution in done] == ["succeeded", "succeeded"]
    assert len(target.requests) == 2
    assert target.requests[1]["arrived"] > target.requests[0]["ended"]  # one at a time


def test_another_process_waiting_for_the_slot_does_not_take_it_in_the_instant_after_the_wake(store, pool, target):
    """Two runner processes of one database (``--runners 2``), a limit of one on their key: the
    first delivers, the second's claim waits in its waiting room, asking for the slot every tenth
    of a second. On waking, the first's slot has expired, and the second's next ask deleted it and
    took the key while the first still delivered: two at once. Now a process takes no slot in a
    wake's grace, and each keeps its own within its check's interval (a watcher beside the
    claims), so the second waits for the first's delivery to end."""
    target.behaviour["/held"] = [("hold", 20.0), ("answer", 200, {}, b"")]
    limits = {"key": "one-across-processes", "max_in_flight": 1}
    walls = Clock(), Clock()
    first, second = (_dispatch(store, wall, grace=1.0) for wall in walls)
    try:
        one = _held_job(store, target, "first-process", limits=limits)
        assert run_fanout(store, first, budget_seconds=0).claimed == 1
        target.wait_for(lambda s: len(s.requests) == 1, timeout=10, what="the first process's delivery")
        two = _held_job(store, target, "second-process", limits=limits)
        assert run_fanout(store, second, budget_seconds=0).claimed == 1
        assert poll(lambda: len(second.waits) == 1 or None, timeout=10, what="the second's wait") is True

        # The laptop sleeps: the first's slot and both leases have run out when it wakes. Staged
        # with both guards held, so that no check (nor the second's ask for the slot, which checks
        # first) falls between the expiry and the clocks' jump, which a real sleep makes one; an
        # ask that had passed its check just before is given a moment to end first (nothing
        # tells when it has: no poll can stand in for this pause).
        with first._wakes._lock, second._wakes._lock:
            time.sleep(0.1)
            with pool.connection() as conn:
                conn.execute("UPDATE target_slots SET until = now() - interval '1 second' WHERE released_at IS NULL")
            expire_lease(pool, one)
            expire_lease(pool, two)
            for wall in walls:
                wall.ahead = 600.0
        poll(
            lambda: _slot_held_past(pool, "one-across-processes", 20) or None,
            timeout=10,
            what="the first process's slot kept",
        )
        target.release()
        done = _both_recorded(store, one, two, timeout=20)
    finally:
        first.close()
        second.close()
    assert [(e.status, e.attempt) for e in done] == [("succeeded", 1), ("succeeded", 1)]
    assert len(target.requests) == 2
    assert target.requests[1]["arrived"] > target.requests[0]["ended"]  # one at a time


def _slot_held_past(pool, key: str, seconds: float) -> bool:
    """Whether a slot of ``key`` is held (not released) until more than ``seconds`` from now."""
    with pool.connection() as conn:
        return bool(
            conn.execute(
                "SELECT count(*) AS n FROM target_slots WHERE key LIKE %s AND released_at IS NULL "
                "AND until > now() + make_interval(secs => %s)",
                (f"%{key}", seconds),
            ).fetchone()["n"]
        )


def _both_recorded(store, first: str, second: str, timeout: float) -> tuple:
    """The two jobs' latest executions, once neither is running."""
    return poll(
        lambda: (lambda a, b: (a, b) if "running" not in (a.status, b.status) else None)(
            *[store.list_executions(OWNER, job)[0] for job in (first, second)]
        ),
        timeout=timeout,
        what="both deliveries recorded",
    )
