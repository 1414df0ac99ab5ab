"""Migration 0010: a job's run state in job_runs, its specification in job_specs, the view jobs
joining them column for column as the table they replace."""

from __future__ import annotations

import functools
import threading

import psycopg
import pytest

from scheduler import service
from scheduler.core.domain import Outcome
from scheduler.sql import QUERIES
from scheduler.store.migrations import migrate
from scheduler.store.postgres import Store
from tests.support import http_spec, make_due, poll, run_once

OWNER = "arn:aws:iam::111111111111:user/runs"


def versions(conn: psycopg.Connection, job_id: str) -> tuple:
    """The transaction that wrote each of the job's rows last: (job_specs', job_runs')."""
    return conn.execute(
        "SELECT s.xmin::text, r.xmin::text FROM job_specs s JOIN job_runs r ON r.job_id = s.id WHERE s.id = %s",
        (job_id,),
    ).fetchone()


def specs_state(conn: psycopg.Connection, job_id: str) -> str:
    return conn.execute("SELECT state FROM job_specs WHERE id = %s", (job_id,)).fetchone()[0]


def test_every_job_and_its_run_state_are_carried_into_the_view(empty_db_url):
    migrate(empty_db_url, target=9)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO jobs (id, owner, name, tags, schedule, run_at, target, retry, state, version,
                              scheduled_at, attempt, next_run_at, manual_run_at, locked_until, lock_token,
                              lease_kind, running_execution_id, last_run_at, run_count, failure_count,
                              last_status, last_error, after_completion)
            SELECT gen_random_uuid(), 'o', 'job-' || g, CASE WHEN g % 2 = 0 THEN ARRAY['t'] ELSE '{}' END,
                   CASE WHEN g % 3 = 0 THEN NULL ELSE '* * * * *' END,
                   CASE WHEN g % 3 = 0 THEN now() END, jsonb_build_object('type', 'http', 'n', g), '{}',
                   (ARRAY['active', 'paused', 'completed'])[g % 3 + 1], g, now() - g * interval '1 minute', g % 4,
                   now() + g * interval '1 minute', CASE WHEN g % 5 = 0 THEN now() END,
                   CASE WHEN g % 7 = 0 THEN now() + interval '1 minute' END,
                   CASE WHEN g % 7 = 0 THEN gen_random_uuid() END, CASE WHEN g % 7 = 0 THEN 'schedule' END,
                   CASE WHEN g % 7 = 0 THEN gen_random_uuid() END, now() - interval '1 hour', g * 10, g,
                   'failed', 'error ' || g, CASE WHEN g % 2 = 0 THEN 'delete' ELSE 'keep' END
            FROM generate_series(1, 60) AS g""")
        before = conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        columns = [c.name for c in conn.execute("SELECT * FROM jobs LIMIT 0").description]
    assert migrate(empty_db_url, target=10) == [10]
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM jobs ORDER BY id").fetchall() == before
        assert [c.name for c in conn.execute("SELECT * FROM jobs LIMIT 0").description] == columns
        assert (
            conn.execute(
                "SELECT count(*) FROM job_specs s JOIN job_runs r ON r.job_id = s.id WHERE s.state <> r.state"
            ).fetchone()[0]
            == 0
        )
        # The claim's index moved with due_at; the specifications keep the list's.
        indexes = {
            r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename IN ('job_specs', 'job_runs')")
        }
        assert indexes == {
            "jobs_pkey",
            "jobs_owner_name_key",
            "jobs_owner_state_idx",
            "jobs_tags_idx",
            "job_runs_pkey",
            "job_runs_due_idx",
        }


def test_what_a_write_returns_is_the_views_row(store, db_url):
    """The job_row fragment (what an insert, an update or a locking read returns) lists the view's
    columns in its order, as a read of the view answers."""
    job_id = str(service.create_job(store, OWNER, http_spec("same-row")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        held = conn.execute(QUERIES["get_job_for_update"], {"id": job_id, "owner": OWNER})
        columns = [c.name for c in held.description]
        row = dict(zip(columns, held.fetchone()))
        read = conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,))
        assert columns[:-1] == [c.name for c in read.description] and columns[-1] == "db_now"
        assert {k: v for k, v in row.items() if k != "db_now"} == dict(zip(columns, read.fetchone()))


def test_a_recurring_jobs_runs_leave_its_specification_alone(store, db_url):
    job_id = str(service.create_job(store, OWNER, http_spec("every-minute")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        spec_before, run_before = versions(conn, job_id)
        for _ in range(3):
            make_due(store.pool, job_id)
            assert run_once(store, Outcome("succeeded"), planned=True)
        make_due(store.pool, job_id)
        assert run_once(store, Outcome("failed", error="boom"), planned=True)
        spec_after, run_after = versions(conn, job_id)
    assert spec_after == spec_before and run_after != run_before
    job = store.get_job(OWNER, job_id)
    assert (job.run_count, job.failure_count, job.last_status, job.state) == (4, 1, "failed", "active")


@pytest.mark.parametrize("planned", [True, False], ids=["planned", "locking"])
def test_the_job_lists_copy_of_the_state_follows_a_completion_that_ends_the_job(store, db_url, planned):
    job_id = str(service.create_job(store, OWNER, http_spec("once", None, run_at=store.now())).id)
    assert run_once(store, Outcome("succeeded"), planned=planned) is True
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert specs_state(conn, job_id) == "completed"
    assert [job.name for job in store.list_jobs(OWNER, state="completed")] == ["once"]
    assert store.list_jobs(OWNER, state="active") == []


def test_the_job_lists_copy_of_the_state_follows_a_pause_and_a_resume(store, db_url):
    job_id = str(service.create_job(store, OWNER, http_spec("paused-later")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert service.pause_job(store, OWNER, job_id).state == "paused"
        assert specs_state(conn, job_id) == "paused"
        assert [str(job.id) for job in store.list_jobs(OWNER, state="paused")] == [job_id]
        assert service.resume_job(store, OWNER, job_id).state == "active"
        assert specs_state(conn, job_id) == "active"
        assert store.list_jobs(OWNER, state="paused") == []


def test_deleting_a_job_deletes_its_run_state(store, db_url):
    job_id = str(service.create_job(store, OWNER, http_spec("gone")).id)
    store.delete_job(OWNER, job_id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM job_runs WHERE job_id = %s", (job_id,)).fetchone()[0] == 0


def test_an_edit_waiting_on_a_run_holds_nothing_the_run_needs_next(store, db_url, monkeypatch):
    """The lock order (get_job_for_update in queries.sql): a completion that ends a job holds its
    run state's row when its trigger writes the specification's. An edit waiting for the run holds
    no lock yet, so that write goes through: locked the other way round, the two would deadlock
    (the store's retry on a failed connection would hide it: the edit runs here without it)."""
    job_id = str(service.create_job(store, OWNER, http_spec("contended")).id)
    monkeypatch.setattr(store, "update_job", functools.partial(Store.update_job.__wrapped__, store))
    outcome: list = []

    def edit() -> None:
        try:
            outcome.append(service.pause_job(store, OWNER, job_id).state)
        except psycopg.Error as exc:
            outcome.append(exc)

    with psycopg.connect(db_url) as run, psycopg.connect(db_url, autocommit=True) as observer:
        run.execute("UPDATE job_runs SET run_count = run_count + 1 WHERE job_id = %s", (job_id,))
        editor = threading.Thread(target=edit)
        editor.start()
        poll(
            lambda: observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0],
            what="the edit waiting for the run's row",
        )
        run.execute("UPDATE job_specs SET updated_at = now() WHERE id = %s", (job_id,))  # as the trigger does
        run.commit()
        editor.join(timeout=30)
    assert outcome == ["paused"]
    assert store.get_job(OWNER, job_id).run_count == 1
