"""Chained runs in the store and the service, on real Postgres, through both pipelines: the
deployed one (claim_due, start_execution, one completion: complete_job) and local mode's
(claim_and_start, a batch: complete_jobs), and the locking path (a job edited while it ran).
A final outcome asks for the chained jobs' runs in the completion's transaction; a retry to come
does not; a chained run records its cause."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from scheduler import service
from scheduler.core.domain import Completion, Outcome, RunOverrides, Trigger
from scheduler.core.errors import ChainError
from tests.support import http_spec, make_due

OWNER = "arn:aws:iam::111111111111:user/alice"
OTHER = "arn:aws:iam::222222222222:user/bob"
YEARLY = "0 0 1 1 *"


def pending(pool, job_id: str):
    with pool.connection() as conn:
        return conn.execute("SELECT manual_run_at, pending_cause FROM job_runs WHERE job_id = %s", (job_id,)).fetchone()


def make_jobs(store, **chains):
    """b and c (never due), and a chaining to them as ``chains`` says."""
    b = service.create_job(store, OWNER, http_spec("b", YEARLY))
    c = service.create_job(store, OWNER, http_spec("c", YEARLY))
    a = service.create_job(store, OWNER, http_spec("a", YEARLY, **chains))
    return a, b, c


def test_the_deployed_path_asks_for_the_chained_run_and_it_names_its_cause(store, pool):
    a, b, c = make_jobs(store, on_success=["b"], on_failure=["c"])
    make_due(pool, a.id)
    [claim] = store.claim_due(10, 30)
    started = store.start_execution(claim.job_id, claim.lock_token)
    outcome = Outcome("succeeded", http_status=202, response_excerpt='{"ok": true}')
    assert service.complete_execution(
        store, a.id, claim.lock_token, started.execution_id, outcome, started=started, elapsed_seconds=0.01
    )
    assert pending(pool, c.id) == {"manual_run_at": None, "pending_cause": None}
    requested = pending(pool, b.id)
    assert requested["manual_run_at"] is not None
    assert requested["pending_cause"] == {
        "execution_id": started.execution_id,
        "job_id": a.id,
        "job_name": "a",
        "status": "succeeded",
        "http_status": 202,
        "response_excerpt": '{"ok": true}',
        "error": None,
    }
    [chained] = store.claim_due(10, 30)
    run = store.start_execution(chained.job_id, chained.lock_token)
    assert (run.job.id, run.trigger, run.cause["execution_id"]) == (b.id, Trigger.CHAIN, started.execution_id)
    [execution] = store.list_executions(OWNER, b.id)
    assert execution.caused_by == started.execution_id and execution.trigger == Trigger.CHAIN
    assert execution.caused_by_job_id == a.id
    # Its completion clears the request and its cause: the next manual run is the owner's own.
    assert service.complete_execution(
        store, b.id, chained.lock_token, run.execution_id, Outcome("succeeded"), started=run, elapsed_seconds=0.01
    )
    assert pending(pool, b.id) == {"manual_run_at": None, "pending_cause": None}
    store.request_run(OWNER, b.id)
    [manual] = store.claim_and_start(10)
    assert manual.started.trigger == Trigger.MANUAL and manual.started.cause is None


def test_a_batch_asks_for_each_final_outcomes_chain_and_not_for_a_retry(store, pool):
    a, b, c = make_jobs(store, on_complete=["b", "c"])
    d = service.create_job(store, OWNER, http_spec("d", YEARLY, on_failure=["c"]))
    make_due(pool, a.id)
    make_due(pool, d.id)
    claims = {claim.job_id: claim for claim in store.claim_and_start(10)}
    retryable = Outcome("failed", retryable=True, error="503")
    completions = [
        Completion(job_id, claim.lock_token, claim.started.execution_id, outcome, claim.started, 0.01)
        for job_id, claim, outcome in (
            (a.id, claims[a.id], Outcome("failed", error="boom")),  # not retryable: final
            (d.id, claims[d.id], retryable),  # attempt 1 of 3: a retry comes, no chain yet
        )
    ]
    assert service.complete_executions(store, completions) == [True, True]
    assert pending(pool, b.id)["pending_cause"]["execution_id"] == claims[a.id].started.execution_id
    assert pending(pool, c.id)["pending_cause"]["job_name"] == "a"
    assert pending(pool, c.id)["pending_cause"]["error"] == "boom"
    assert store.get_job(OWNER, d.id).next_run_at is not None
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM job_runs WHERE manual_run_at IS NOT NULL").fetchone()["n"] == 2


def test_the_locking_path_asks_for_the_chain_too(store, pool):
    a, b, _ = make_jobs(store, on_success=["b"])
    make_due(pool, a.id)
    [claim] = store.claim_and_start(10)
    service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "description": "edited while running"})
    done = Completion(a.id, claim.lock_token, claim.started.execution_id, Outcome("succeeded"), claim.started, 0.01)
    assert service.complete_executions(store, [done]) == [True]
    assert pending(pool, b.id)["pending_cause"]["job_id"] == a.id


def test_a_chain_names_jobs_of_its_owner_only_and_no_cycle(store):
    service.create_job(store, OTHER, http_spec("bobs", YEARLY))
    with pytest.raises(ChainError) as refused:
        service.create_job(store, OWNER, http_spec("a", YEARLY, on_success=["bobs"]))
    assert refused.value.field == "on_success.0"
    a, b, c = make_jobs(store, on_success=["b"])
    service.update_job(store, OWNER, b.id, lambda job: {**job.spec(), "on_complete": [c.id]})
    with pytest.raises(ChainError, match=r"would make a cycle: c -> a -> b -> c"):
        service.update_job(store, OWNER, c.id, lambda job: {**job.spec(), "on_failure": ["a"]})
    # Renamed, a job is still the same node: referenced by id, the cycle is found.
    with pytest.raises(ChainError, match="cycle"):
        service.update_job(store, OWNER, c.id, lambda job: {**job.spec(), "name": "z", "on_failure": [a.id]})
    assert store.get_job(OWNER, c.id).on_failure == ()


def test_the_deployed_executor_delivers_a_chain_with_its_cause_in_the_body(store, target_server):
    """The fan-out's claims as invoke payloads, run by the executor function's code (one claim an
    invoke, then a group): A's end asks for B, B's delivery renders A's outcome, B's for C."""
    from scheduler.runner.executor import execute_invoke
    from scheduler.targets.results import TargetPolicy

    def invoke(event):
        return execute_invoke(event, store=store, decrypt_target=lambda t: t, policy=TargetPolicy(allow_private=True))

    def target(path: str, body: str) -> dict:
        return {**http_spec("x")["target"], "url": target_server.url + path, "body": body}

    c = service.create_job(store, OWNER, http_spec("c", YEARLY, target=target("/c", "{{cause.job_name}}")))
    b_body = '{"after": "{{cause.job_name}}", "status": "{{cause.status}}", "http": "{{cause.http_status}}"}'
    b = service.create_job(store, OWNER, http_spec("b", YEARLY, target=target("/b", b_body), on_complete=["c"]))
    run_at = store.now()
    a = service.create_job(
        store, OWNER, http_spec("a", None, run_at=run_at, target=target("/a", "a"), on_success=[b.id])
    )
    [claim] = store.claim_due(10, 60)
    assert claim.job_id == a.id
    assert invoke(claim.to_event())["status"] == "succeeded"
    [claim_b] = store.claim_due(10, 60)
    group = {"claims": [claim_b.to_event()]}  # run_group's path: started and recorded as a group
    assert invoke(group)["executions"][0]["status"] == "succeeded"
    [claim_c] = store.claim_due(10, 60)
    assert invoke(claim_c.to_event())["status"] == "succeeded"
    requests = target_server.wait_for(3)
    assert [r["path"] for r in requests] == ["/a", "/b", "/c"]
    assert requests[1]["body"] == b'{"after": "a", "status": "succeeded", "http": "200"}'
    assert requests[2]["body"] == b"b"
    [a_run] = store.list_executions(OWNER, a.id)
    [b_run] = store.list_executions(OWNER, b.id)
    [c_run] = store.list_executions(OWNER, c.id)
    assert (b_run.trigger, b_run.caused_by, c_run.caused_by) == (Trigger.CHAIN, a_run.id, b_run.id)
    assert store.claim_due(10, 60) == []  # C chains to nothing


def _both_ways(store, a, b):
    """The two writes that close a cycle together: a.on_success = [b], b.on_success = [a]."""
    return [
        lambda: service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "on_success": ["b"]}),
        lambda: service.update_job(store, OWNER, b.id, lambda job: {**job.spec(), "on_success": ["a"]}),
    ]


def _outcomes(writes):
    results: list = [None, None]

    def run(i: int) -> None:
        try:
            results[i] = writes[i]()
        except Exception as exc:  # the cycle's refusal, kept for the assertion
            results[i] = exc

    return results, run


def test_two_writes_closing_a_cycle_at_once_one_is_refused(store, pool, monkeypatch):
    """The first write, its chains read and checked, waits before it commits until the second is
    under way: waiting for the owner's chains (held by the first), or done. Without the hold both
    would pass (each read the other's job without chains); with it, the second reads the first's
    link and is refused."""
    from scheduler import chain_service
    from tests.support import poll

    a = service.create_job(store, OWNER, http_spec("a", YEARLY))
    b = service.create_job(store, OWNER, http_spec("b", YEARLY))
    checked, original = threading.Event(), chain_service.check_chains
    results, run = _outcomes(_both_ways(store, a, b))
    second = threading.Thread(target=run, args=(1,))

    def waiting_for_a_lock() -> bool:
        with pool.connection() as conn:
            sql = "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            return conn.execute(sql).fetchone()["n"] > 0

    def check_then_wait(lookup, owner, job_id, spec):
        original(lookup, owner, job_id, spec)
        if not checked.is_set():  # the first write only
            checked.set()
            second.start()
            poll(lambda: not second.is_alive() or waiting_for_a_lock(), timeout=30, what="the second write")

    monkeypatch.setattr(chain_service, "check_chains", check_then_wait)
    run(0)
    second.join(30)
    assert results[0].on_success == ("b",)
    assert isinstance(results[1], ChainError) and "would make a cycle: b -> a -> b" in str(results[1]), results
    assert store.get_job(OWNER, b.id).on_success == ()


def test_two_writes_released_together_exactly_one_closes_the_link(store):
    """The same race with no help: two threads released by a barrier, each on its own connection."""
    from tests.support import run_at_once

    a = service.create_job(store, OWNER, http_spec("a", YEARLY))
    b = service.create_job(store, OWNER, http_spec("b", YEARLY))
    writes = iter(_both_ways(store, a, b))
    lock = threading.Lock()

    def one() -> object:
        with lock:
            write = next(writes)
        return write()

    results, errors = run_at_once(one, 2)
    assert len(results) == 1 and len(errors) == 1, (results, errors)
    assert isinstance(errors[0], ChainError) and "would make a cycle" in str(errors[0])
    linked = [job.on_success for job in (store.get_job(OWNER, a.id), store.get_job(OWNER, b.id))]
    assert sorted(linked) in ([(), ("a",)], [(), ("b",)])


def test_a_reference_that_is_a_jobs_id_names_that_job_only(store, pool):
    """A job whose name is another job's id (such names are refused since, but may be stored):
    the cycle check and the chained run both read the reference as the id. Before, the check
    followed the name and let a cycle through, and the run asked for both jobs, for ever."""
    a = service.create_job(store, OWNER, http_spec("a1", YEARLY))
    y = service.create_job(store, OWNER, http_spec("y1", YEARLY, on_success=["a1"]))
    x = service.create_job(store, OWNER, http_spec("x1", YEARLY))
    with pool.connection() as conn:
        conn.execute("UPDATE job_specs SET name = %s WHERE id = %s", (y.id, x.id))
    with pytest.raises(ChainError, match=r"would make a cycle: a1 -> y1 -> a1"):
        service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "on_success": [y.id]})
    # Without the cycle, the run asks for the job of that id, not the one of that name.
    with pool.connection() as conn:
        conn.execute("UPDATE job_specs SET on_success = '{}' WHERE id = %s", (y.id,))
    service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "on_success": [y.id]})
    make_due(pool, a.id)
    [claim] = store.claim_and_start(10)
    done = Completion(a.id, claim.lock_token, claim.started.execution_id, Outcome("succeeded"), claim.started, 0.01)
    assert service.complete_executions(store, [done]) == [True]
    assert pending(pool, y.id)["manual_run_at"] is not None
    assert pending(pool, x.id)["manual_run_at"] is None


def test_a_chain_to_a_deleted_job_does_not_block_other_edits(store):
    """A run passes over a reference whose job is gone; an edit of anything else keeps it and is
    not refused for it (every edit of the job was). A new reference must still name a job."""
    a, b, c = make_jobs(store, on_success=["b"], on_failure=["c"])
    service.delete_job(store, OWNER, c.id)
    edited = service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "description": "just a note"})
    assert edited.description == "just a note" and edited.on_failure == ("c",)
    with pytest.raises(ChainError, match="names no job of yours: 'gone'") as refused:
        service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "on_complete": ["gone"]})
    assert refused.value.field == "on_complete.0"


def _finish(store, claim) -> None:
    """Complete a claim_and_start claim as succeeded (its chains asked for)."""
    started = claim.started
    assert service.complete_execution(
        store,
        claim.job_id,
        claim.lock_token,
        started.execution_id,
        Outcome("succeeded"),
        started=started,
        elapsed_seconds=0.01,
    )


def _claim(store, job_id: str):
    [claim] = [c for c in store.claim_and_start(10) if c.job_id == job_id]
    return claim


def test_a_chained_run_asked_for_during_a_run_now_carries_none_of_its_overrides(store):
    """A run now's overrides are for that run only: a chained run asked for while it runs
    delivered its one-off body and headers (credentials among them) a second time."""
    a, b, _ = make_jobs(store, on_success=["b"])
    one_off = {"body": "ONE-OFF", "headers": {"Authorization": "sealed"}}
    store.request_run(OWNER, b.id, RunOverrides(deliver=one_off, shown={"body": "ONE-OFF"}))
    running = _claim(store, b.id)
    assert running.started.overrides == one_off
    store.request_run(OWNER, a.id)
    _finish(store, _claim(store, a.id))  # a's success asks for b while b's run now runs
    _finish(store, running)
    chained = _claim(store, b.id)
    assert chained.started.trigger == Trigger.CHAIN and chained.started.overrides is None
    [execution, _] = store.list_executions(OWNER, b.id)
    assert execution.trigger == Trigger.CHAIN and execution.overrides is None


def test_a_chained_run_asked_for_during_a_backfill_delivery_is_not_lost(store, pool):
    a, b, _ = make_jobs(store, on_success=["b"])
    occurrence = store.now().replace(microsecond=0) - timedelta(days=400)
    assert store.insert_backfill(OWNER, b.id, [occurrence], 1.0)
    assert store.pump_backfills() == 1
    delivering = _claim(store, b.id)
    assert delivering.started.trigger == Trigger.BACKFILL
    store.request_run(OWNER, a.id)
    _finish(store, _claim(store, a.id))
    _finish(store, delivering)
    chained = _claim(store, b.id)
    assert chained.started.trigger == Trigger.CHAIN and chained.started.scheduled_at > occurrence


def test_run_requests_made_during_a_run_now_are_one_run_that_keeps_the_first_of_them(store):
    """Requests coalesce until a run starts: the first made during a run now takes the slot for
    the next run, the others join it (requested_at and overrides stay the first's)."""
    _, b, _ = make_jobs(store)
    store.request_run(OWNER, b.id)
    running = _claim(store, b.id)
    vars_one = {"vars": {"a": "ONE"}}
    second = store.request_run(OWNER, b.id, RunOverrides(deliver=vars_one, shown=vars_one))
    third = store.request_run(OWNER, b.id)
    assert third.manual_run_at == second.manual_run_at > running.started.started_at
    _finish(store, running)
    next_run = _claim(store, b.id)
    assert next_run.started.scheduled_at == second.manual_run_at and next_run.started.overrides == vars_one
    _finish(store, next_run)
    assert store.claim_and_start(10) == []  # one run for the two requests


def test_the_cycle_error_names_the_field_that_closes_it(store):
    a, b, _ = make_jobs(store, on_success=["b"], on_failure=["b"])
    with pytest.raises(ChainError, match="would make a cycle: a -> a") as refused:
        service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "on_complete": [a.id]})
    assert refused.value.field == "on_complete"


def test_a_chained_run_asked_for_while_a_backfill_delivery_waits_runs_as_itself_before_it(store, pool):
    """A backfill delivery handed over to the idle job but not claimed yet: a chained run asked
    for then ran as the backfill's occurrence, with the chain's cause, and never as itself."""
    a, b, _ = make_jobs(store, on_success=["b"])
    occurrence = store.now().replace(microsecond=0) - timedelta(days=400)
    store.request_run(OWNER, a.id)
    ran = _claim(store, a.id)
    assert store.insert_backfill(OWNER, b.id, [occurrence], 1.0)
    assert store.pump_backfills() == 1  # handed over: b's request slot holds it
    _finish(store, ran)  # a's success asks for b
    chained = _claim(store, b.id)
    assert chained.started.trigger == Trigger.CHAIN and chained.started.overrides is None
    assert chained.started.cause["execution_id"] == ran.started.execution_id
    assert store.pump_backfills() == 0  # not while the chained run holds the job
    _finish(store, chained)
    assert store.pump_backfills() == 1  # the occurrence handed over again
    backfill = _claim(store, b.id)
    assert backfill.started.trigger == Trigger.BACKFILL and backfill.started.cause is None
    assert backfill.started.scheduled_at == occurrence
    _finish(store, backfill)
    assert store.pump_backfills() == 0 and store.claim_and_start(10) == []
    rows = sorted(store.list_executions(OWNER, b.id), key=lambda e: e.started_at)
    assert [(e.trigger, e.caused_by) for e in rows] == [
        (Trigger.CHAIN, ran.started.execution_id),
        (Trigger.BACKFILL, None),
    ]


def test_a_failed_backfill_delivery_asks_for_its_chain_after_its_last_attempt_only(store, pool):
    retry = {"max_attempts": 2, "min_backoff_seconds": 0, "max_backoff_seconds": 0, "max_age_seconds": None}
    b = service.create_job(store, OWNER, http_spec("b", YEARLY))
    a = service.create_job(store, OWNER, http_spec("a", YEARLY, on_failure=["b"], retry=retry))
    occurrence = store.now().replace(microsecond=0) - timedelta(days=400)
    assert store.insert_backfill(OWNER, a.id, [occurrence], 1.0)
    failed = Outcome("failed", retryable=True, error="503")
    for attempt in (1, 2):
        with pool.connection() as conn:
            conn.execute("UPDATE backfills SET retry_at = now() WHERE retry_at IS NOT NULL")
        assert store.pump_backfills() == 1
        delivery = _claim(store, a.id)
        assert (delivery.started.trigger, delivery.started.attempt) == (Trigger.BACKFILL, attempt)
        done = Completion(a.id, delivery.lock_token, delivery.started.execution_id, failed, delivery.started, 0.01)
        assert service.complete_executions(store, [done]) == [True]
        asked = pending(pool, b.id)["pending_cause"]
        assert (asked is None) == (attempt == 1), attempt  # a retry to come asks for nothing
    assert pending(pool, b.id)["pending_cause"]["execution_id"] == delivery.started.execution_id


def test_an_edit_that_drops_a_pending_retry_runs_the_occurrences_failure_chains(store, pool):
    """An outside audit's case: a's attempt failed with a retry to come; an edit of its schedule
    started its occurrences afresh and dropped the retry, so the failed attempt was the last and
    ``on_failure`` never ran. It runs now, in the edit's transaction, naming that attempt; an
    edit that keeps the retry (no schedule field changed) asks for nothing, and a job with no
    retry pending (none made, or one under way) neither."""
    a, b, c = make_jobs(store, on_failure=["b"], on_complete=["c"], on_success=[])
    make_due(pool, a.id)
    [claim] = store.claim_and_start(10)
    failed = Outcome("failed", retryable=True, error="503 from the target", http_status=503)
    done = Completion(a.id, claim.lock_token, claim.started.execution_id, failed, claim.started, 0.01)
    assert service.complete_executions(store, [done]) == [True]
    assert store.get_job(OWNER, a.id).attempt == 1  # a retry pending
    service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "description": "not a schedule field"})
    assert pending(pool, b.id)["manual_run_at"] is None  # the retry is kept: nothing final yet

    service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "schedule": "0 0 2 1 *"})
    edited = store.get_job(OWNER, a.id)
    assert edited.attempt == 0 and edited.scheduled_at != claim.started.scheduled_at  # the retry dropped
    for chained in (b, c):
        cause = pending(pool, chained.id)["pending_cause"]
        assert cause["execution_id"] == claim.started.execution_id and cause["status"] == "failed", cause
        assert (cause["http_status"], cause["error"], cause["job_name"]) == (503, "503 from the target", "a")

    # Edited again: no retry pending any more, so no chained run asked for again.
    with pool.connection() as conn:
        conn.execute(
            "UPDATE job_runs SET manual_run_at = NULL, pending_cause = NULL WHERE job_id = ANY(%s)", ([b.id, c.id],)
        )
    service.update_job(store, OWNER, a.id, lambda job: {**job.spec(), "schedule": "0 0 3 1 *"})
    assert pending(pool, b.id)["manual_run_at"] is None and pending(pool, c.id)["manual_run_at"] is None
