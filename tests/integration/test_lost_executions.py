"""The lost executions' list (lost_executions, migration 0028): an entry for each execution
that is lost, whichever statement (or hand) wrote it, kept by triggers on executions and by the
partitions' upkeep (a day dropped, rows moved out of DEFAULT), copied for the rows lost before the
migration (0029), written and read by the application's login. The listings read it for
status=lost (tests/integration/test_rare_status_listings.py)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import psycopg
from psycopg.conninfo import make_conninfo

from scheduler import service
from scheduler.store.db import make_pool
from scheduler.store.migrations import ensure_login, migrate
from scheduler.store.postgres import Store
from tests.integration.test_partitions import add_past_days, day_name
from tests.support import expire_lease, http_spec, insert_jobs_sql, make_due

ALICE = "arn:aws:iam::111111111111:user/rare-alice"


def job(store: Store, owner: str, name: str) -> str:
    return str(service.create_job(store, owner, http_spec(name, "0 0 1 1 *")).id)  # due only when made so


def started(store: Store, pool, job_id: str):
    """The job's execution started as local mode starts it (claim_and_start), the job alone due."""
    make_due(pool, job_id)
    [claim] = store.claim_and_start(1)
    assert claim.job_id == job_id
    return claim


def claimed(store: Store, pool, *job_ids: str):
    """The jobs claimed as the fan-out claims them (claim_due), these alone due: their claims."""
    for job_id in job_ids:
        make_due(pool, job_id)
    claims = store.claim_due(len(job_ids), 60)
    assert sorted(c.job_id for c in claims) == sorted(job_ids)
    return claims


def insert_history(pool, job_id: str, rows: list[tuple[str, str]]) -> None:
    """Executions of past instants (SQL expressions) with their statuses, as history; inserted in
    the order given (the runner's is their starts' order: a job's seq follows its started_at)."""
    with pool.connection() as conn:
        for status, started_at in rows:
            conn.execute(
                f"""INSERT INTO executions (id, job_id, scheduled_at, started_at, finished_at, attempt, trigger,
                                            status)
                    VALUES (gen_random_uuid(), %s, {started_at}, {started_at}, {started_at}, 1, 'schedule', %s)""",
                (job_id, status),
            )


def test_a_lost_executions_entry_follows_its_row(store, pool, db_url):
    """lost_executions (0028) holds exactly the lost rows: kept by triggers on the rows' writes,
    and by the partition maintenance where it drops a day (no trigger fires) or moves rows out
    of DEFAULT into a new day's partition."""
    job_id = job(store, ALICE, "entries")

    def entries() -> set[str]:
        with psycopg.connect(db_url) as conn:
            return {str(r[0]) for r in conn.execute("SELECT id FROM lost_executions")}

    def lost() -> set[str]:
        return {e.id for e in store.list_owner_executions(ALICE, status="lost")}

    with psycopg.connect(db_url, autocommit=True) as conn:
        now = conn.execute("SELECT now()").fetchone()[0]
        add_past_days(conn, 40)
        # The day after tomorrow without its partition yet: its rows wait in DEFAULT.
        conn.execute(f"DROP TABLE IF EXISTS {day_name(now + timedelta(days=2))}")
        insert_history(
            pool,
            job_id,
            [
                ("lost", f"timestamptz '{now - timedelta(days=35)}'"),  # a day retention drops
                ("lost", "now() - interval '3 days'"),
                ("running", "now() - interval '1 day'"),
                ("lost", "now() + interval '2 days'"),  # in DEFAULT, moved when its day's partition is made
                ("lost", "now() - interval '60 days'"),  # in DEFAULT, purged there
            ],
        )
        rows = {str(r[0]): r[1] for r in conn.execute("SELECT id, status FROM executions")}
        assert entries() == lost() == {i for i, s in rows.items() if s == "lost"} and len(rows) == 5
        conn.execute("UPDATE executions SET status = 'lost' WHERE status = 'running'")  # updated to lost
        conn.execute(  # and back (no statement of ours does; a hand's edit): its entry goes
            "UPDATE executions SET status = 'failed' WHERE started_at > now() - interval '4 days'"
            " AND started_at < now() - interval '2 days'"
        )
        expected = {str(r[0]) for r in conn.execute("SELECT id FROM executions WHERE status = 'lost'")}
        assert entries() == lost() == expected and len(expected) == 4
        done = conn.execute("SELECT * FROM scheduler_maintain_partitions(30)").fetchone()
        assert done[1] > 0 and done[2:4] == (1, 1)  # days dropped; moved from DEFAULT, purged there
        expected = {str(r[0]) for r in conn.execute("SELECT id FROM executions WHERE status = 'lost'")}
        assert entries() == lost() == expected and len(expected) == 2
    service.delete_job(store, ALICE, job_id)
    assert entries() == lost() == set()


def test_lost_executions_of_before_the_migration_are_listed(empty_db_url):
    """0029 enters the rows lost before 0028 (the triggers enter those marked since)."""
    migrate(empty_db_url, target=27)
    store_url = empty_db_url
    with psycopg.connect(store_url, autocommit=True) as conn:
        rows = "SELECT gen_random_uuid(), %s, 'old', '* * * * *', '{}'::jsonb, '{}'::jsonb"
        job_id = conn.execute(insert_jobs_sql("id, owner, name, schedule, target, retry", rows), (ALICE,)).fetchone()[0]
        lost = []
        for minutes in (5, 10, 15):
            execution_id = uuid.uuid4()
            conn.execute(
                """INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
                   VALUES (%s, %s, now(), now() - make_interval(mins => %s), 1, 'schedule',
                           CASE WHEN %s = 10 THEN 'succeeded' ELSE 'lost' END)""",
                (execution_id, job_id, minutes, minutes),
            )
            lost += [execution_id] if minutes != 10 else []
    assert migrate(store_url) == [28, 29]
    pool = make_pool(store_url, min_size=1, max_size=1)
    try:
        listed = Store(pool).list_owner_executions(ALICE, status="lost")
        assert sorted(e.id for e in listed) == sorted(str(i) for i in lost)
        with pool.connection() as conn:
            assert sorted(str(r["id"]) for r in conn.execute("SELECT id FROM lost_executions")) == sorted(
                str(i) for i in lost
            )
    finally:
        pool.close()


def test_the_app_role_keeps_and_reads_the_lost_entries(db_url):
    """The application's login (a member of migration 0011's role, whose rights on lost_executions
    come from the default privileges, as on every table made since) marks an execution lost (the
    trigger writes the entry with its rights), lists it, and deletes it with its job."""
    username = f"app_{uuid.uuid4().hex[:8]}"
    try:
        assert ensure_login(db_url, username, "pw-not-checked-on-trust") == "created"
        pool = make_pool(make_conninfo(db_url, user=username, password=""), min_size=1, max_size=2)
        try:
            store = Store(pool)
            job_id = job(store, ALICE, "app-role")
            first = started(store, pool, job_id)
            expire_lease(pool, job_id)
            started(store, pool, job_id)
            [lost] = store.list_owner_executions(ALICE, status="lost")
            assert lost.id == first.started.execution_id
            assert store.list_executions(ALICE, job_id, status="lost") == [replace(lost, job_name=None)]
            service.delete_job(store, ALICE, job_id)
            with pool.connection() as conn:
                assert conn.execute("SELECT count(*) AS n FROM lost_executions").fetchone()["n"] == 0
        finally:
            pool.close()
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(username)))
