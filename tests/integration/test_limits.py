"""Per-target limits on real Postgres: the API's validation and answers, the default key (the
target's origin), and the slots: max_in_flight and per_second held under concurrent takers, a
released or expired slot free again, the wait recorded on the execution."""

from __future__ import annotations

import threading
import uuid

import pytest

from scheduler.core import constants as c
from scheduler.core.limits import TargetLimit, origin
from scheduler.runner.telemetry import MemoryMetrics
from tests.integration.test_api import ALICE, api, box, job_body  # noqa: F401  # noqa: F401 (pytest fixtures)
from tests.support import run_at_once


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({}, "limits.max_in_flight"),
        ({"key": "k"}, "limits.max_in_flight"),
        ({"max_in_flight": 0}, "limits.max_in_flight"),
        ({"max_in_flight": "5"}, "limits.max_in_flight"),
        ({"max_in_flight": 2.5}, "limits.max_in_flight"),
        ({"per_second": 0}, "limits.per_second"),
        ({"per_second": True}, "limits.per_second"),
        ({"key": "", "max_in_flight": 1}, "limits.key"),
        ({"key": "a\nb", "max_in_flight": 1}, "limits.key"),
        ({"max_in_flight": 1, "burst": 3}, "limits.burst"),
    ],
)
def test_bad_limits_are_a_400_naming_the_field(api, limits, field):
    answer = api("POST", "/v1/jobs", job_body("limited", limits=limits))
    assert answer.status == 400, answer.body
    assert field in answer.fields, answer.body


def test_limits_are_answered_and_removed(api):
    job = api(
        "POST", "/v1/jobs", job_body("limited", limits={"key": "billing-api", "max_in_flight": 5, "per_second": 20})
    )
    assert job.status == 201, job.body
    assert job.body["limits"] == {"key": "billing-api", "max_in_flight": 5, "per_second": 20}
    plain = api("POST", "/v1/jobs", job_body("plain"))
    assert plain.body["limits"] is None
    patched = api("PATCH", f"/v1/jobs/{job.body['id']}", {"limits": {"per_second": None}})
    assert patched.body["limits"] == {"key": "billing-api", "max_in_flight": 5}
    cleared = api("PATCH", f"/v1/jobs/{job.body['id']}", {"limits": None})
    assert cleared.status == 200 and cleared.body["limits"] is None


def test_the_default_key_is_the_targets_origin():
    assert origin({"type": "http", "url": "https://u:p@API.example.com/v1/bill?x=1"}) == "https://api.example.com"
    assert origin({"type": "http", "url": "http://10.0.0.1:8080/a"}) == "http://10.0.0.1:8080"
    assert origin({"type": "amqp", "url": "amqps://u:p@mq.example.com:5671/vh"}) == "amqps://mq.example.com:5671"
    assert origin({"type": "amqp"}) == "amqp:default"
    arn = "arn:aws:sns:eu-west-1:123456789012:t"
    assert origin({"type": "sns", "topic_arn": arn}) == arn
    limit = TargetLimit.of({"max_in_flight": 2}, {"type": "http", "url": "https://a.example.com/x"})
    assert limit == TargetLimit("https://a.example.com", 2, None)
    assert limit.describe() == "limits of https://a.example.com (max_in_flight 2)"
    assert TargetLimit.of(None, {}) is None


def test_max_in_flight_holds_under_concurrent_takers(store, pool):
    limit = TargetLimit("k", 3, None)
    taken, errors = run_at_once(lambda: store.take_target_slot(limit, "00000000-0000-0000-0000-000000000001", 30), 12)
    assert not errors
    held = [t for t in taken if t]
    assert len(held) == 3
    assert store.take_target_slot(limit, "00000000-0000-0000-0000-000000000001", 30) is None
    store.release_target_slot(held[0])
    assert store.take_target_slot(limit, "00000000-0000-0000-0000-000000000001", 30) is not None
    # Another key is counted apart.
    assert store.take_target_slot(TargetLimit("other", 1, None), "00000000-0000-0000-0000-000000000001", 30)
    # An expired slot (its runner died) frees its place.
    with pool.connection() as conn:
        conn.execute("UPDATE target_slots SET until = clock_timestamp() - interval '1 ms' WHERE key = 'k'")
    assert store.take_target_slot(limit, "00000000-0000-0000-0000-000000000001", 30) is not None


def test_per_second_counts_the_slots_taken_in_the_last_second(store, pool):
    limit = TargetLimit("rate", None, 4.0)
    job = "00000000-0000-0000-0000-000000000002"
    tokens = [store.take_target_slot(limit, job, 30) for _ in range(6)]
    assert [t is not None for t in tokens] == [True] * 4 + [False] * 2
    for token in tokens[:4]:
        store.release_target_slot(str(token))
    assert store.take_target_slot(limit, job, 30) is None  # released, but taken within the second
    with pool.connection() as conn:
        conn.execute("UPDATE target_slots SET acquired_at = acquired_at - interval '1 second' WHERE key = 'rate'")
    assert store.take_target_slot(limit, job, 30) is not None


def test_a_per_second_below_one_is_one_start_in_each_longer_window(store, pool):
    # 0.1 a second: one start in any 10 s (it was read as one a second)
    limit = TargetLimit("slow", None, 0.1)
    job = "00000000-0000-0000-0000-000000000003"
    first = store.take_target_slot(limit, job, 30)
    assert first is not None
    store.release_target_slot(str(first))
    with pool.connection() as conn:
        conn.execute("UPDATE target_slots SET acquired_at = acquired_at - interval '5 seconds' WHERE key = 'slow'")
    assert store.take_target_slot(limit, job, 30) is None  # 5 s later: still within its 10 s
    with pool.connection() as conn:
        conn.execute(
            "UPDATE target_slots SET acquired_at = acquired_at - interval '6 seconds',"
            " released_at = released_at - interval '6 seconds' WHERE key = 'slow'"
        )
    assert store.take_target_slot(limit, job, 30) is not None  # 11 s later


def test_a_limited_delivery_waits_for_a_slot_and_says_why(store, pool, target_server):
    from datetime import timedelta

    from scheduler import service
    from scheduler.runner.executor import Executor
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec

    spec = http_spec("waits", None, run_at=store.now() - timedelta(seconds=1), url=target_server.url + "/w")
    job = service.create_job(store, ALICE, {**spec, "limits": {"key": "busy", "max_in_flight": 1}})
    blocker = store.take_target_slot(TargetLimit("busy", 1, None, ALICE), str(job.id), 30)
    metrics = MemoryMetrics()
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics)
    [claim] = store.claim_and_start(1)
    done = threading.Event()
    result: list = []
    thread = threading.Thread(
        target=lambda: (result.append(executor.deliver(claim.started, claim.lock_token)), done.set())
    )
    thread.start()
    assert not done.wait(0.3)  # held while the key is full
    store.release_target_slot(str(blocker))
    assert done.wait(10)
    assert result[0].result.succeeded
    executor.record(result)
    [execution] = store.list_executions(ALICE, str(job.id))
    assert execution.waited_ms >= 300 and execution.waited_for == "limits of busy (max_in_flight 1)"
    _waited_as_lateness(store, execution, job)
    # Its lateness metric is the scheduler's own, the wait left out (its limits held it); the wait
    # is SlotWaitMs.
    assert metrics.values[(c.METRIC_SLOT_WAIT_MS, ())] == [float(execution.waited_ms)]
    own = (execution.started_at - execution.due_at).total_seconds() * 1000 - execution.waited_ms
    assert metrics.values[(c.METRIC_LATENESS_MS, (("trigger", "schedule"),))] == [pytest.approx(own)]


def _waited_as_lateness(store, execution, job) -> None:
    """A delivery that waited for its slot starts when it took it: its lateness counts the wait,
    its duration the target's call alone (the target answers at once), and the job's
    last_run_at is that start."""
    from datetime import timedelta

    assert execution.started_at - execution.due_at >= timedelta(milliseconds=execution.waited_ms - 5), execution
    assert execution.duration_ms is not None and execution.duration_ms < execution.waited_ms, execution
    assert store.get_job(ALICE, str(job.id)).last_run_at == execution.started_at


def test_local_mode_waits_for_slots_without_holding_its_delivery_threads(store, pool, target_server):
    """Two delivery threads, four jobs on a key held full and one job without limits: the free
    job is delivered at once while the four wait in the waiting room (not in the threads); once
    the key frees, each gets its slot, in turn, and its execution says it waited."""
    from datetime import timedelta

    from scheduler import service
    from scheduler.runner.executor import Executor
    from scheduler.runner.in_process import InProcessDispatch
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec, poll

    due = store.now() - timedelta(seconds=1)
    limits = {"key": "held", "max_in_flight": 1}
    limited = [
        service.create_job(
            store,
            ALICE,
            {**http_spec(f"held-{i}", None, run_at=due, url=target_server.url + "/held"), "limits": limits},
        )
        for i in range(4)
    ]
    free = service.create_job(store, ALICE, http_spec("free", None, run_at=due, url=target_server.url + "/free"))
    blocker = store.take_target_slot(TargetLimit("held", 1, None, ALICE), str(uuid.uuid4()), 60)
    assert blocker is not None
    metrics = MemoryMetrics()
    dispatch = InProcessDispatch(
        Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics),
        max_workers=2,
        flush_seconds=0.01,
    )
    claims = store.claim_and_start(10)
    assert len(claims) == 5
    assert dispatch.dispatch(claims) == []

    def status(job) -> str:
        return store.list_executions(ALICE, str(job.id))[0].status

    poll(lambda: status(free) == "succeeded", what="the job without limits delivered and recorded")
    assert [status(job) for job in limited] == ["running"] * 4  # waiting, their leases kept
    assert len(dispatch.waits) == 4
    assert dispatch.capacity() == 2  # both threads idle: the waits hold places of the room, not threads
    assert [r["path"] for r in target_server.requests] == ["/free"]
    store.release_target_slot(str(blocker))
    dispatch.close()  # returns once every wait had its slot and its delivery was recorded
    assert [status(job) for job in limited] == ["succeeded"] * 4
    for job in limited:
        [execution] = store.list_executions(ALICE, str(job.id))
        assert execution.waited_ms > 0 and execution.waited_for == "limits of held (max_in_flight 1)"
        _waited_as_lateness(store, execution, job)
    # Each wait is SlotWaitMs (counted once the slot is taken, not at the claim), left out of the
    # lateness metric: the scheduler's own lateness, as the job without limits has it.
    executions = [store.list_executions(ALICE, str(job.id))[0] for job in limited]
    assert sorted(metrics.values[(c.METRIC_SLOT_WAIT_MS, ())]) == sorted(float(e.waited_ms) for e in executions)
    own = [(e.started_at - e.due_at).total_seconds() * 1000 - e.waited_ms for e in executions]
    free_late, *late = metrics.values[(c.METRIC_LATENESS_MS, (("trigger", "schedule"),))]  # the free job's first
    assert sorted(late) == pytest.approx(sorted(own))
    assert [r["path"] for r in target_server.requests] == ["/free"] + ["/held"] * 4
    assert (
        store.take_target_slot(TargetLimit("held", 1, None, ALICE), str(uuid.uuid4()), 60) is not None
    )  # every slot given back


def test_a_full_waiting_room_hands_back_the_limited_claims_beyond_it(store, pool, monkeypatch):
    """The room holds ``max_waiting`` claims; a limited claim that finds it full is handed back
    (claimed again after a pause), and the claims go on: one owner's waits never stop the
    runner from claiming the other jobs due."""
    from datetime import timedelta

    from scheduler.runner import in_process as module

    for share in ("KEY_WAITING_SHARE", "OWNER_WAITING_SHARE"):  # the room alone here (below: the shares)
        monkeypatch.setattr(module, share, 1.0)

    from scheduler import service
    from scheduler.runner.executor import Executor
    from scheduler.runner.in_process import InProcessDispatch
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec

    due = store.now() - timedelta(seconds=1)
    ids = []
    for i in range(4):
        spec = http_spec(f"w-{i}", None, run_at=due, url="http://127.0.0.1:9/w")
        ids.append(str(service.create_job(store, ALICE, {**spec, "limits": {"key": "full", "max_in_flight": 1}}).id))
    blocker = store.take_target_slot(TargetLimit("full", 1, None, ALICE), str(uuid.uuid4()), 60)
    dispatch = InProcessDispatch(
        Executor(store, lambda target: target, TargetPolicy(allow_private=True)), max_workers=4, max_waiting=3
    )
    dispatch.dispatch(store.claim_and_start(dispatch.capacity()))
    assert len(dispatch.waits) == 3 and dispatch.capacity() == 4  # the threads are still free
    store.release_target_slot(str(blocker))
    dispatch.close()
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT job_id::text, count(e.id) AS runs, bool_or(r.slot_wait_since IS NOT NULL) AS handed_back"
            " FROM job_runs r LEFT JOIN executions e USING (job_id) WHERE job_id = ANY(%s::uuid[]) GROUP BY job_id",
            (ids,),
        ).fetchall()
    assert sorted((row["runs"], row["handed_back"]) for row in rows) == [(0, True), (1, False), (1, False), (1, False)]


def test_one_key_or_one_owner_takes_no_more_than_its_share_of_the_waiting_room(store, pool):
    """A key's waits take at most a quarter of the room, an owner's at most half: the claims
    beyond are handed back, so that one owner's full key (1,100 jobs on it starved another
    owner's limited job for minutes) leaves room to the other keys and owners."""
    from datetime import timedelta

    from scheduler import service
    from scheduler.runner.executor import Executor
    from scheduler.runner.in_process import InProcessDispatch
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec

    bob = "arn:aws:iam::222222222222:user/bob"
    due = store.now() - timedelta(seconds=1)
    jobs = {}
    for owner, key, n in [(ALICE, "k1", 3), (ALICE, "k2", 1), (ALICE, "k3", 1), (bob, "k1", 1)]:
        for i in range(n):
            spec = http_spec(f"{key}-{i}", None, run_at=due, url="http://127.0.0.1:9/w")
            job = service.create_job(store, owner, {**spec, "limits": {"key": key, "max_in_flight": 1}})
            jobs[str(job.id)] = (owner, key)
    blockers = [
        store.take_target_slot(TargetLimit(key, 1, None, owner), str(uuid.uuid4()), 60)
        for owner, key in [(ALICE, "k1"), (ALICE, "k2"), (ALICE, "k3"), (bob, "k1")]
    ]
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    dispatch = InProcessDispatch(executor, max_workers=8, max_waiting=4)  # a key: 1 wait, an owner: 2
    dispatch.dispatch(store.claim_and_start(dispatch.capacity()))
    assert len(dispatch.waits) == 3
    for token in blockers:
        store.release_target_slot(str(token))
    dispatch.close()
    with pool.connection() as conn:
        handed = conn.execute(
            "SELECT job_id::text, slot_wait_for FROM job_runs WHERE job_id = ANY(%s::uuid[]) AND slot_wait_since IS NOT NULL",
            (list(jobs),),
        ).fetchall()
    # Whichever order the claim took them in: bob's wait on his key "k1" is not held back by
    # alice's, alice keeps two waits (at most one on her "k1"), and her others are handed back.
    back = [jobs[row["job_id"]] for row in handed]
    assert len(back) == 3 and all(owner == ALICE for owner, _ in back)
    assert sorted(key for _, key in back).count("k1") >= 2
    assert all(
        row["slot_wait_for"].split("; ", 1)[1]
        in ("the key's share of the waiting room is full", "its owner's share of the waiting room is full")
        for row in handed
    )


def test_a_wait_whose_job_changed_or_went_is_not_delivered_as_it_was(store, pool):
    """A delivery that waited for its slot reads its job first: edited or paused meanwhile (the
    version moved on), it is handed back, to be claimed again as it is now; its lease lost (or
    the job deleted), it is not delivered. The slot is given back either way."""
    from datetime import timedelta

    from scheduler import service
    from scheduler.core.limits import SlotHandBack
    from scheduler.runner.executor import Executor
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec

    due = store.now() - timedelta(seconds=1)
    for name in ("edited", "lost"):
        spec = http_spec(name, None, run_at=due, url="http://127.0.0.1:9/never")
        service.create_job(store, ALICE, {**spec, "limits": {"key": "stale", "max_in_flight": 1}})
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    waits = {c.started.job.name: executor.slot_wait(c.started, c.lock_token) for c in store.claim_and_start(2)}
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET version = version + 1 WHERE job_id = %s", (waits["edited"].job_id,))
        conn.execute("UPDATE job_runs SET lock_token = gen_random_uuid() WHERE job_id = %s", (waits["lost"].job_id,))
    limit = TargetLimit("stale", 1, None, ALICE)
    for wait in waits.values():
        wait.refused = 1  # it waited
        token = store.take_target_slot(limit, wait.job_id, 30)
        assert token is not None  # the slot the last one gave back
        ended = executor.deliver_in_slot(wait, token)
        if wait is waits["edited"]:
            assert isinstance(ended, SlotHandBack) and "changed while it waited" in ended.waited_for
            [report] = executor.record([ended])
            assert report.outcome == "handed_back"
        else:
            assert ended.result.error.startswith("the lease was lost while waiting")
    assert store.take_target_slot(limit, str(uuid.uuid4()), 30) is not None
    with pool.connection() as conn:  # no execution kept for the edited one, the lost one not delivered
        ran = conn.execute("SELECT count(*) AS n FROM executions WHERE status <> 'running'").fetchone()["n"]
    assert ran == 0


def test_one_owner_s_key_is_not_another_s(store):
    """Keys are per owner: the same key (or origin) of two owners counts apart."""
    job = "00000000-0000-0000-0000-000000000004"
    assert store.take_target_slot(TargetLimit("shared", 1, None, "alice"), job, 30) is not None
    assert store.take_target_slot(TargetLimit("shared", 1, None, "bob"), job, 30) is not None
    assert store.take_target_slot(TargetLimit("shared", 1, None, "alice"), job, 30) is None
    assert TargetLimit.of({"max_in_flight": 1}, {"type": "http", "url": "https://a.example.com/"}, "bob") == (
        TargetLimit("https://a.example.com", 1, None, "bob")
    )


def test_waiting_deliveries_keep_their_leases_in_one_statement(store, pool):
    """The leases of the waits past half of theirs are kept together; one taken over meanwhile
    ends its wait as a retryable failure saying so, and the others go on."""
    import time
    from datetime import timedelta

    from scheduler import service
    from scheduler.runner.executor import SLOT_LEASE_SECONDS, Executor
    from scheduler.targets.results import TargetPolicy
    from tests.support import http_spec

    due = store.now() - timedelta(seconds=1)
    for i in range(3):
        spec = http_spec(f"k-{i}", None, run_at=due, url="http://127.0.0.1:9/k")
        service.create_job(store, ALICE, {**spec, "limits": {"key": "kept", "max_in_flight": 1}})
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    waits = [executor.slot_wait(claim.started, claim.lock_token) for claim in store.claim_and_start(3)]
    fresh, stale, lost = waits
    stale.kept_until = lost.kept_until = 0.0  # past half their lease
    with pool.connection() as conn:  # another runner took the last one over
        conn.execute("UPDATE job_runs SET lock_token = gen_random_uuid() WHERE job_id = %s", (lost.job_id,))
        before = conn.execute("SELECT locked_until FROM job_runs WHERE job_id = %s", (stale.job_id,)).fetchone()
    now = time.monotonic()
    ended = executor.keep_waiting(waits, now)
    assert [(wait, outcome.error) for wait, outcome in ended] == [
        (lost, "the lease was taken over while waiting: limits of kept (max_in_flight 1)")
    ]
    assert ended[0][1].retryable
    assert stale.kept_until == now + SLOT_LEASE_SECONDS / 2 and fresh.kept_until > now  # fresh was not due
    with pool.connection() as conn:
        after = conn.execute("SELECT locked_until FROM job_runs WHERE job_id = %s", (stale.job_id,)).fetchone()
    assert after["locked_until"] >= before["locked_until"]
