"""after_completion: a job that completes with 'delete' is deleted with its executions, in the
transaction of its completion, on both completion paths; 'keep' (the default) keeps it; a stale
runner's completion deletes nothing."""

from __future__ import annotations

import pytest

from scheduler import service
from scheduler.core.domain import Outcome
from scheduler.core.errors import NotFound
from tests.integration.test_api import api, box, create, job_body  # noqa: F401 - fixtures
from tests.support import expire_lease, http_spec, make_due, run_once

OWNER = "arn:aws:iam::111111111111:user/alice"


def one_off(store, name: str, after_completion: str | None = "delete") -> str:
    extra = {} if after_completion is None else {"after_completion": after_completion}
    spec = http_spec(name, None, run_at=store.now(), **extra)
    return str(service.create_job(store, OWNER, spec).id)


def executions_of(pool, job_id: str) -> int:
    with pool.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM executions WHERE job_id = %s", (job_id,)).fetchone()["n"]


@pytest.mark.parametrize("planned", [True, False], ids=["planned", "locking"])
def test_a_completed_one_off_with_delete_is_deleted_with_its_history(store, pool, planned):
    doomed = one_off(store, "doomed")
    assert run_once(store, Outcome("succeeded"), planned=planned) is True
    with pytest.raises(NotFound):
        store.get_job(OWNER, doomed)
    assert executions_of(pool, doomed) == 0


@pytest.mark.parametrize("after_completion", [None, "keep"])
def test_keep_is_the_default_and_keeps_the_job(store, pool, after_completion):
    kept = one_off(store, "kept", after_completion)
    assert run_once(store, Outcome("succeeded"), planned=True) is True
    job = store.get_job(OWNER, kept)
    assert job.state == "completed" and job.after_completion == "keep"
    assert executions_of(pool, kept) == 1


def test_a_pending_retry_is_not_completion_and_a_final_failure_is(store, pool):
    job_id = one_off(store, "flaky")
    assert run_once(store, Outcome("failed", retryable=True, error="HTTP 503"), planned=True)
    assert store.get_job(OWNER, job_id).state == "active"  # a retry is due later
    make_due(pool, job_id)
    assert run_once(store, Outcome("failed", retryable=False, error="HTTP 404"), planned=True)
    with pytest.raises(NotFound):
        store.get_job(OWNER, job_id)


def test_a_recurring_job_past_its_end_is_deleted(store, pool):
    job_id = str(service.create_job(store, OWNER, http_spec("ending", "* * * * *", after_completion="delete")).id)
    make_due(pool, job_id)
    with pool.connection() as conn:  # the occurrence in hand is the window's last
        conn.execute(
            "UPDATE job_specs s SET end_at = r.scheduled_at FROM job_runs r WHERE r.job_id = s.id AND s.id = %s",
            (job_id,),
        )
    assert run_once(store, Outcome("succeeded"), planned=False)
    with pytest.raises(NotFound):
        store.get_job(OWNER, job_id)


def test_a_stale_runner_deletes_nothing_and_the_runner_that_took_over_does(store, pool):
    job_id = one_off(store, "contested")
    [first] = store.claim_due(10, 60)
    slow = store.start_execution(job_id, first.lock_token, 60)
    expire_lease(pool, job_id)
    [second] = store.claim_due(10, 60)
    assert service.complete_execution(store, job_id, first.lock_token, slow.execution_id, Outcome("succeeded")) is False
    assert store.get_job(OWNER, job_id).state == "active" and executions_of(pool, job_id) == 1
    fresh = store.start_execution(job_id, second.lock_token, 60)
    assert (
        service.complete_execution(
            store,
            job_id,
            second.lock_token,
            fresh.execution_id,
            Outcome("succeeded"),
            started=fresh,
            elapsed_seconds=0.01,
        )
        is True
    )
    with pytest.raises(NotFound):
        store.get_job(OWNER, job_id)


def test_a_manual_run_requested_on_a_completed_job_runs_before_the_delete(store, pool):
    job_id = one_off(store, "again", "keep")
    assert run_once(store, Outcome("succeeded"), planned=True)
    with pool.connection() as conn:
        conn.execute("UPDATE job_specs SET after_completion = 'delete' WHERE id = %s", (job_id,))
    store.request_run(OWNER, job_id)
    assert run_once(store, Outcome("succeeded"), planned=True)
    with pytest.raises(NotFound):
        store.get_job(OWNER, job_id)


def test_after_completion_through_the_api(api):
    job = create(api, job_body("tidy", after_completion="delete"))
    assert job["after_completion"] == "delete"
    patched = api("PATCH", f"/v1/jobs/{job['id']}", {"after_completion": "keep"})
    assert patched.status == 200 and patched.body["after_completion"] == "keep"
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"description": "x"}).body["after_completion"] == "keep"
    for bad in ("sometimes", None, 1):
        body = {**job_body("bad"), "after_completion": bad}
        answer = api("POST", "/v1/jobs", body)
        assert answer.status == 400 and answer.fields == ["after_completion"], (bad, answer.body)


def test_a_job_deleted_after_its_completion_ends_its_change_log_which_the_retention_purges(api, store, pool):
    """The delete is the log's last entry, by the scheduler, so the log is purged with the
    executions' retention as after a delete through the API (it was kept for good)."""
    body = {k: v for k, v in job_body("tidy-log", after_completion="delete").items() if k != "schedule"}
    job = create(api, {**body, "run_at": "2026-01-01T00:00:00Z"})  # a one-off, due at once
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"description": "x"}).status == 200
    assert run_once(store, Outcome("succeeded"), planned=True)
    assert api("GET", f"/v1/jobs/{job['id']}").status == 404
    log = api("GET", f"/v1/jobs/{job['id']}/changes").body["changes"]
    assert [(c["action"], c["by"], c["version"]) for c in log][0] == ("delete", "scheduler", 2)
    assert [c["action"] for c in log] == ["delete", "update", "create"]
    with pool.connection() as conn:
        conn.execute("UPDATE job_changes SET at = at - interval '31 days'")
    assert store.maintain_partitions(retention_days=30).changes_purged == 3
    assert api("GET", f"/v1/jobs/{job['id']}/changes").status == 404
