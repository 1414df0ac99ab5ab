"""The executions listings filtered on a rare status, running or lost (GET /v1/executions and GET
/v1/jobs/{id}/executions with status=...): read where such executions are named (a running one is
its job's live run, job_runs; a lost one has its entry in lost_executions, migration 0028), not by
a walk of every day kept. Their pages must be the walk's own: here the walk is the listings' query
run over every day at once, on executions the runner's own statements made (starts of each kind,
leases expired, marked lost by each path, handed back, moved by a wait, completed, deleted) among
rows of past days, of the DEFAULT partition and of another owner."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from scheduler import service
from scheduler.api.serialize import execution_json
from scheduler.core.domain import Execution
from scheduler.core.limits import SlotHandBack
from scheduler.planning.lifecycle import Outcome
from scheduler.sql import QUERIES
from scheduler.store import history
from scheduler.store.postgres import Store
from tests.integration.test_api import api, box  # noqa: F401 - fixtures
from tests.integration.test_lost_executions import ALICE, claimed, insert_history, job, started
from tests.integration.test_partitions import RecordingPool, add_past_days
from tests.support import expire_lease

BOB = "arn:aws:iam::222222222222:user/rare-bob"
STATUSES = ("running", "lost")


@pytest.fixture
def mixed(store, pool, db_url):
    """Two owners' executions of every kind; answers {owner: [their job ids]}."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        add_past_days(conn, 4)
    jobs = {ALICE: [], BOB: []}

    def new(owner: str, name: str) -> str:
        jobs[owner].append(job(store, owner, name))
        return jobs[owner][-1]

    for owner in (ALICE, BOB):
        prefix = "a" if owner == ALICE else "b"
        # History over the past days, the DEFAULT partition (a day without a partition) among them;
        # rows lost then (an execution inserted lost, one updated to lost afterwards).
        old = new(owner, f"{prefix}-history")
        hours = {24 * 20 + 1: "succeeded", 24 * 20: "lost", 50: "failed", 26: "lost"}
        hours |= {h: "succeeded" for h in range(2, 90, 7)}
        insert_history(
            pool, old, [(status, f"now() - interval '{h} hours'") for h, status in sorted(hours.items(), reverse=True)]
        )
        with pool.connection() as conn:
            conn.execute(
                "UPDATE executions SET status = 'lost' WHERE job_id = %s AND started_at < now() - interval '40 hours'"
                " AND started_at > now() - interval '60 hours' AND status = 'succeeded'",
                (old,),
            )
        # A live run started by local mode, and one by a deployed executor.
        started(store, pool, new(owner, f"{prefix}-local"))
        [claim] = claimed(store, pool, new(owner, f"{prefix}-deployed"))
        assert store.start_execution(claim.job_id, claim.lock_token, 60) is not None
        # A group's starts, in one statement.
        group = claimed(store, pool, new(owner, f"{prefix}-group-1"), new(owner, f"{prefix}-group-2"))
        assert len(store.start_executions([(c.job_id, c.lock_token) for c in group], 60)) == 2
        # Completed runs: the execution is no longer running, the job runs nothing.
        for status in ("succeeded", "failed"):
            done = started(store, pool, new(owner, f"{prefix}-{status}"))
            outcome = Outcome(status, retryable=False, error=None if status == "succeeded" else "HTTP 500")
            assert service.complete_execution(store, done.job_id, done.lock_token, done.started.execution_id, outcome)
    # Each path that marks an expired lease's execution lost: a fan-out's claim (claim_due and
    # mark_executions_lost), local mode's claim (claim_and_start, which starts the next one), the
    # check of jobs with nothing due (a paused job's), and an edit (update_job).
    reclaimed = started(store, pool, new(ALICE, "a-reclaimed"))
    expire_lease(pool, reclaimed.job_id)
    [again] = claimed(store, pool, reclaimed.job_id)
    assert again.lost_execution_id == reclaimed.started.execution_id
    restarted = started(store, pool, new(ALICE, "a-restarted"))
    expire_lease(pool, restarted.job_id)
    assert started(store, pool, restarted.job_id).started.execution_id != restarted.started.execution_id
    paused = started(store, pool, new(ALICE, "a-paused"))
    service.pause_job(store, ALICE, paused.job_id)
    expire_lease(pool, paused.job_id)
    assert [x for _, x in store.mark_lost_while_not_due()] == [paused.started.execution_id]
    edited = started(store, pool, new(BOB, "b-edited"))
    expire_lease(pool, edited.job_id)
    service.update_job(store, BOB, edited.job_id, lambda j: {**j.spec(), "schedule": "0 0 2 1 *"})
    # A job paused while it runs, its lease live: still running.
    running_paused = started(store, pool, new(BOB, "b-running-paused"))
    service.pause_job(store, BOB, running_paused.job_id)
    # A start undone for its target's slot (the execution removed), and one whose start a wait moved.
    [back] = claimed(store, pool, new(ALICE, "a-handed-back"))
    undone = store.start_execution(back.job_id, back.lock_token, 60)
    hand_back = SlotHandBack(back.job_id, back.lock_token, undone.execution_id, undone.started_at, 0.5, "a key")
    assert store.hand_back_for_slot(hand_back, 3600, 3600)
    [waited] = claimed(store, pool, new(BOB, "b-waited"))
    moved = store.start_execution(waited.job_id, waited.lock_token, 60)
    assert store.record_wait(waited.job_id, waited.lock_token, moved.started_at, moved.execution_id, 5, "a key")
    # A deleted job's executions, running and lost, go with it.
    gone = started(store, pool, new(ALICE, "a-deleted"))
    expire_lease(pool, gone.job_id)
    [taken] = claimed(store, pool, gone.job_id)
    assert store.start_execution(gone.job_id, taken.lock_token, 60) is not None
    service.delete_job(store, ALICE, gone.job_id)
    jobs[ALICE].remove(gone.job_id)
    # Last (their jobs stay due, and would be claimed first): leases expired while their
    # executions ran, not marked lost yet: still running, in both ways of reading.
    stalled = [started(store, pool, new(owner, ("a" if owner == ALICE else "b") + "-stalled")) for owner in jobs]
    for claim in stalled:
        expire_lease(pool, claim.job_id)
    return jobs


def walked(pool, owner: str, status: str, job_id: str | None = None) -> list[Execution]:
    """The owner's executions of a status as the walk finds them: the listing's query (its status
    filter, newest first) over every day at once."""
    params = {
        "owner": owner,
        "status": status,
        "job_id": job_id,
        "since": None,
        "until": None,
        "limit": 10_000,
        "before_started_at": None,
        "before_id": None,
    }
    with pool.connection() as conn:
        rows = conn.execute(QUERIES["list_owner_executions"], params, prepare=False).fetchall()
    return [Execution.from_row(row) for row in rows]


def walked_job(pool, job_id: str, status: str) -> list[Execution]:
    """One job's executions of a status as its listing's query finds them over every day."""
    params = {"job_id": job_id, "status": status, "before_seq": None, "before_started_at": None}
    with pool.connection() as conn:
        rows = conn.execute(
            QUERIES["list_executions"], {**params, "since": None, "until": None, "limit": 10_000}, prepare=False
        ).fetchall()
    return [Execution.from_row(row) for row in rows]


# More pages than any walk here takes: a cursor that does not move on fails the test, not hangs it.
MAX_PAGES = 100


def owner_pages(store: Store, owner: str, limit: int, **filters) -> list[Execution]:
    """Every page of the owner's executions, each after the previous one's cursor."""
    seen, before = [], None
    for _ in range(MAX_PAGES):
        page = store.list_owner_executions(owner, limit=limit, before=before, **filters)
        if not page:
            return seen
        seen += page
        before = (page[-1].started_at, page[-1].id)
    raise AssertionError("the pages never end")


def job_pages(store: Store, owner: str, job_id: str, limit: int, with_instant: bool, status: str):
    """Every page of one job's executions of a status, with the API's cursors or a seq alone."""
    seen, before = [], None
    for _ in range(MAX_PAGES):
        page = store.list_executions(
            owner,
            job_id,
            status=status,
            limit=limit,
            before_seq=before and before.seq,
            before_started_at=before and before.started_at,
        )
        if not page:
            return seen
        seen += page
        before = page[-1] if with_instant else replace(page[-1], started_at=None)
    raise AssertionError("the pages never end")


def test_every_running_execution_is_its_jobs_live_run(mixed, pool):
    """What the running pages rest on: after every kind of start, end, hand-back and loss above,
    each running execution is named by its job's run state, started at its last_run_at."""
    with pool.connection() as conn:
        strays = conn.execute("""
            SELECT e.id FROM executions e
            WHERE e.status = 'running' AND NOT EXISTS (
                SELECT FROM job_runs r
                WHERE r.job_id = e.job_id AND r.running_execution_id = e.id AND r.last_run_at = e.started_at)
        """).fetchall()
        running = conn.execute("SELECT count(*) AS n FROM executions WHERE status = 'running'").fetchone()["n"]
    assert strays == [] and running == 13


@pytest.mark.parametrize("walk_above", [history.RUNNING_JOBS_CAP, 1])
def test_pages_across_jobs_are_the_walks_own(mixed, store, pool, monkeypatch, walk_above):
    """Every page size, cursors across pages, the job and since filters: the same executions in
    the same order as the walk, each owner's only. walk_above=1: an owner of that many jobs or
    more pages status=running by the walk itself (RUNNING_JOBS_CAP), here every owner."""
    monkeypatch.setattr(history, "RUNNING_JOBS_CAP", walk_above)
    counts = {}
    for owner, status in itertools.product((ALICE, BOB), STATUSES):
        expected = walked(pool, owner, status)
        counts[owner, status] = len(expected)
        assert all(e.status == status and e.job_id in mixed[owner] for e in expected)
        for limit in (1, 2, 3, 50):
            assert owner_pages(store, owner, limit, status=status) == expected, (owner, status, limit)
        since = expected[len(expected) // 2].started_at
        assert owner_pages(store, owner, 2, status=status, since=since) == [
            e for e in expected if e.started_at >= since
        ]
        for job_id in mixed[ALICE] + mixed[BOB]:
            mine = [e for e in expected if e.job_id == job_id]
            assert owner_pages(store, owner, 1, status=status, job_id=job_id) == mine
            assert walked(pool, owner, status, job_id) == mine
    assert counts == {(ALICE, "running"): 6, (ALICE, "lost"): 8, (BOB, "running"): 7, (BOB, "lost"): 6}


def test_the_rare_pages_read_where_they_are_named(mixed, pool, monkeypatch):
    """Which statements a page runs: never the walk for a lost page, nor for a running one of a
    job or of an owner of fewer than RUNNING_JOBS_CAP jobs; the walk for an owner of more."""
    recording = RecordingPool(pool)
    store = Store(recording)

    def ran(call) -> set[str]:
        del recording.statements[:]
        call()
        return {name for query, _ in recording.statements for name, text in QUERIES.items() if text == query}

    job_id = mixed[ALICE][1]
    assert ran(lambda: store.list_owner_executions(ALICE, status="running")) == {
        "owner_jobs_up_to",
        "list_owner_running",
    }
    assert ran(lambda: store.list_owner_executions(ALICE, status="running", job_id=job_id)) == {"list_owner_running"}
    assert ran(lambda: store.list_owner_executions(ALICE, status="lost")) == {"list_owner_lost"}
    assert ran(lambda: store.list_executions(ALICE, job_id, status="running")) == {"get_job", "list_job_running"}
    assert ran(lambda: store.list_executions(ALICE, job_id, status="lost")) == {"get_job", "list_job_lost"}
    monkeypatch.setattr(history, "RUNNING_JOBS_CAP", len(mixed[ALICE]))
    walk = ran(lambda: store.list_owner_executions(ALICE, status="running"))
    assert walk == {"owner_jobs_up_to", "list_owner_executions"}


def test_a_jobs_pages_are_its_walks_own(mixed, store, pool):
    """One job's pages (GET /v1/jobs/{id}/executions?status=...), with the API's cursors (seq and
    started_at) and with a seq alone (issued before cursors carried the instant)."""
    for owner, status in itertools.product((ALICE, BOB), STATUSES):
        for job_id in mixed[owner]:
            expected = walked_job(pool, job_id, status)
            for limit, with_instant in itertools.product((1, 2, 50), (True, False)):
                assert job_pages(store, owner, job_id, limit, with_instant, status) == expected, (job_id, status)


def test_another_owners_rows_are_never_listed(mixed, store):
    for owner, other in ((ALICE, BOB), (BOB, ALICE)):
        for status in STATUSES:
            assert all(e.job_id in mixed[owner] for e in store.list_owner_executions(owner, status=status))
            for job_id in mixed[other]:
                assert store.list_owner_executions(owner, status=status, job_id=job_id) == []
                with pytest.raises(service.NotFound):
                    store.list_executions(owner, job_id, status=status)


def api_pages(api, path: str, query: dict[str, Any], principal: str) -> list[dict[str, Any]]:
    """Every page of a listing route, following next_cursor (at most MAX_PAGES)."""
    seen, cursor = [], None
    for _ in range(MAX_PAGES):
        answer = api("GET", path, query={**query, **({"cursor": cursor} if cursor else {})}, principal=principal)
        assert answer.status == 200, answer.body
        seen += answer.body["executions"]
        cursor = answer.body["next_cursor"]
        if not cursor:
            return seen
    raise AssertionError("the pages never end")


def test_the_api_answers_the_walks_pages(mixed, api, pool):
    """GET /v1/executions and GET /v1/jobs/{id}/executions with status=running or lost: the walk's
    executions, as the routes serialize them, page after page; another owner's job is none of
    the caller's (an empty page across jobs, 404 for its own listing)."""
    for owner, other in ((ALICE, BOB), (BOB, ALICE)):
        for status, limit in itertools.product(STATUSES, (1, 3)):
            expected = walked(pool, owner, status)
            got = api_pages(api, "/v1/executions", {"status": status, "limit": limit}, owner)
            assert got == [{**execution_json(e), "job_name": e.job_name} for e in expected]
            for job_id in mixed[owner]:
                mine = [execution_json(e) for e in walked_job(pool, job_id, status)]
                path = f"/v1/jobs/{job_id}/executions"
                assert api_pages(api, path, {"status": status, "limit": limit}, owner) == mine
            for job_id in mixed[other]:
                query = {"status": status, "job_id": job_id}
                assert api_pages(api, "/v1/executions", query, owner) == []
                answer = api("GET", f"/v1/jobs/{job_id}/executions", query={"status": status}, principal=owner)
                assert answer.status == 404
