"""Migrations: applied one by one they give the schema the code expects, idempotently and safely
when several processes migrate at once."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import psycopg
import pytest
from psycopg.rows import dict_row

from scheduler import service
from scheduler.sql import QUERIES, migration_files
from scheduler.store.migrations import MigrationError, applied_versions, migrate, migrations_digest
from tests.support import http_spec, insert_jobs_sql, privileges_snapshot, run_at_once, temporary_database


def schema_snapshot(url: str) -> dict:
    """Columns, indexes, constraints, functions and privileges of the public schema, comparable
    across databases."""
    with psycopg.connect(url) as conn:
        columns = conn.execute("""
            SELECT table_name, column_name, data_type, is_nullable, column_default, generation_expression,
                   collation_name
            FROM information_schema.columns WHERE table_schema = 'public'
            ORDER BY table_name, column_name""").fetchall()
        indexes = conn.execute("""
            SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
            ORDER BY indexname""").fetchall()
        constraints = conn.execute("""
            SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
            WHERE connamespace = 'public'::regnamespace ORDER BY conname, 1, 3""").fetchall()
        options = conn.execute("""
            SELECT relname, reloptions FROM pg_class
            WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' ORDER BY relname""").fetchall()
        # Each database's application role has its own name (0011): written <app>.
        functions = conn.execute("""
            SELECT p.oid::regprocedure::text, replace(pg_get_functiondef(p.oid), scheduler_data_role(), '<app>')
            FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1""").fetchall()
    return {
        "columns": columns,
        "indexes": indexes,
        "constraints": constraints,
        "options": options,
        "functions": functions,
        # A copy made with TEMPLATE (db_url) has the template's grants on every object, not
        # those on the database itself (pg_database's row is not copied): these are left out.
        "privileges": [grant for grant in privileges_snapshot(url) if grant[0] != "database"],
    }


def test_one_by_one_equals_all_at_once(empty_db_url, db_url):
    for version, _, _ in migration_files():
        assert migrate(empty_db_url, target=version) == [version]
    assert schema_snapshot(empty_db_url) == schema_snapshot(db_url)
    assert applied_versions(empty_db_url) == [v for v, _, _ in migration_files()]


def test_a_database_upgraded_with_its_rows_equals_a_fresh_one(pg_server_url, db_url):
    """Migrated up to 0010 and used, then to the end: the same schema and privileges as a
    database migrated at once (0011 replaced the server-wide role's grants with the database's
    own role's)."""
    with temporary_database(pg_server_url, label="up") as url:
        migrate(url, target=10)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                insert_jobs_sql(
                    "id, owner, name, schedule, target, retry",
                    "SELECT gen_random_uuid(), 'o', 'job-' || g, '* * * * *', '{}'::jsonb, '{}'::jsonb "
                    "FROM generate_series(1, 10) AS g",
                )
            )
        migrate(url)
        assert schema_snapshot(url) == schema_snapshot(db_url)


def test_migrate_is_idempotent(db_url):
    assert migrate(db_url) == []


def test_a_database_migrated_by_a_newer_version_is_said_to_be(db_url, caplog):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'from_the_future', 'x')")
    with caplog.at_level("WARNING", logger="scheduler.store.migrations"):
        assert migrate(db_url) == []
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "does not know (9999): a newer version migrated it" in warning, warning


def test_concurrent_migrations_apply_each_once(empty_db_url):
    results, errors = run_at_once(lambda: migrate(empty_db_url), 4)
    assert not errors
    applied = sorted(v for r in results for v in r)
    assert applied == [v for v, _, _ in migration_files()]


def _holding_job_runs(url: str) -> psycopg.Connection:
    """A session with a transaction open that has read job_runs (a report's, a dump's): it
    holds the table's lock that an ALTER TABLE waits for."""
    holder = psycopg.connect(url)
    holder.execute("SELECT count(*) FROM job_runs")
    return holder


def test_a_migration_waiting_for_a_lock_does_not_stop_the_live_traffic(empty_db_url):
    """Rolling upgrade: while a long transaction holds job_runs, migration 0022's ALTER TABLE
    gives way every 100 ms rather than queue every claim behind it; applied once it is free."""
    import threading
    import time

    migrate(empty_db_url, target=21)
    holder = _holding_job_runs(empty_db_url)
    done: list[list[int]] = []
    upgrade = threading.Thread(target=lambda: done.append(migrate(empty_db_url, target=22)))
    try:
        upgrade.start()
        with psycopg.connect(empty_db_url, autocommit=True) as live:
            live.execute("SET statement_timeout = '2s'")
            for _ in range(10):  # the running code's writes to the table go through meanwhile
                began = time.monotonic()
                live.execute("UPDATE job_runs SET locked_until = NULL WHERE job_id = gen_random_uuid()")
                assert time.monotonic() - began < 1.0
                time.sleep(0.05)
        assert not done and upgrade.is_alive()  # still waiting for the lock
    finally:
        holder.close()
    upgrade.join(30)
    assert done == [[22]] and applied_versions(empty_db_url)[-1] == 22


def test_a_migration_that_never_gets_its_lock_fails_cleanly(empty_db_url, monkeypatch):
    from scheduler.store import migrations

    migrate(empty_db_url, target=21)
    monkeypatch.setattr(migrations, "MIGRATION_LOCK_PATIENCE_SECONDS", 0.5)
    holder = _holding_job_runs(empty_db_url)
    try:
        with pytest.raises(MigrationError, match="0022_.* could not take its locks in 0.5 s"):
            migrate(empty_db_url, target=22)
    finally:
        holder.close()
    assert applied_versions(empty_db_url)[-1] == 21  # nothing half-applied
    assert migrate(empty_db_url, target=22) == [22]


def test_changed_migration_is_refused(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        migrate(db_url)


def test_every_named_query_fits_the_schema(db_url):
    """PREPARE each query against the migrated schema: a column the code expects but no migration
    creates fails here."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        for name, sql in QUERIES.items():
            names: list[str] = []

            def placeholder(match: re.Match, names: list[str] = names) -> str:
                if match.group(1) not in names:
                    names.append(match.group(1))
                return f"${names.index(match.group(1)) + 1}"

            text = re.sub(r"%\((\w+)\)[sb]", placeholder, sql)
            conn.execute(f"PREPARE q_{name} AS {text}")
            conn.execute(f"DEALLOCATE q_{name}")


def test_digest_is_stable():
    assert migrations_digest() == migrations_digest()
    assert re.fullmatch(r"[0-9a-f]{64}", migrations_digest())


def _in_one_transaction(db_url: str, work: Callable[[psycopg.Connection], list]) -> tuple[list, dict]:
    """``work`` in one transaction of a new connection: its rows, and the job_runs rows it updated
    and updated in place (HOT), read before the commit (a new backend has no other counts pending)."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        rows = work(conn)
        counts = conn.execute("""
            SELECT pg_stat_get_xact_tuples_updated('job_runs'::regclass) AS updated,
                   pg_stat_get_xact_tuples_hot_updated('job_runs'::regclass) AS hot,
                   pg_stat_get_xact_tuples_updated('job_specs'::regclass) AS specs_updated""").fetchone()
        conn.commit()
    return rows, counts


def test_claims_and_starts_are_heap_only_updates(db_url):
    """Migrations 0002 and 0010: a claim and a start write no indexed column of the job's run
    state, and its pages keep room, so both update it in place without an index insertion (HOT)
    and leave the job's specification alone.

    The start finds room once the claim's old row versions are gone. A runner's next visit to the
    page prunes them, but only when no snapshot anywhere on the server may still see them, which
    a busy shared server does not promise; a VACUUM between the two, bounded by this database's
    own snapshots, makes the room without depending on the rest of the server."""
    with psycopg.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        assert conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'job_runs'").fetchone()["reloptions"] == [
            "fillfactor=30"
        ]
        conn.execute("ALTER TABLE job_runs SET (autovacuum_enabled = false)")  # no ANALYZE snapshot in between
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, schedule, target, retry, scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), 'hot', 'job-' || g, '0 0 1 1 *',
                       '{"type": "http", "url": "https://x.example"}'::jsonb, '{}'::jsonb,
                       now() - interval '1 second', now() - interval '1 second'
                FROM generate_series(1, 50) AS g""",
            )
        )
    claims, claimed = _in_one_transaction(
        db_url, lambda conn: conn.execute(QUERIES["claim_due"], {"limit": 50, "lease_seconds": 60}).fetchall()
    )
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("VACUUM job_runs")
    started, starts = _in_one_transaction(
        db_url,
        lambda conn: [
            row
            for claim in claims
            for row in conn.execute(
                QUERIES["start_execution"],
                {
                    "job_id": claim["job_id"],
                    "lock_token": claim["lock_token"],
                    "execution_id": uuid.uuid4(),
                    "lease_margin_seconds": 30,
                },
            ).fetchall()
        ],
    )
    assert len(claims) == len(started) == 50
    assert claimed["updated"] == starts["updated"] == 50, (claimed, starts)
    assert claimed["hot"] + starts["hot"] >= 80, (claimed, starts)  # nearly all in place (a page may be full)
    assert claimed["specs_updated"] == starts["specs_updated"] == 0


def test_owners_and_names_compare_in_code_point_order(db_url, store):
    """Migration 0007: the indexed text columns compare with memcmp, whatever the database's
    locale, so the job list is in code point order in local mode and on RDS alike."""
    with psycopg.connect(db_url) as conn:
        collations = dict(
            conn.execute("""
            SELECT table_name || '.' || column_name, collation_name FROM information_schema.columns
            WHERE table_schema = 'public' AND (table_name, column_name) IN
                  (('job_specs', 'owner'), ('job_specs', 'name'), ('executions', 'owner'))""").fetchall()
        )
    assert collations == {"job_specs.owner": "C", "job_specs.name": "C", "executions.owner": "C"}
    owner = "arn:aws:iam::111111111111:user/order"
    for name in ("b", "é", "B", "a", "a-2", "Z"):
        service.create_job(store, owner, http_spec(name))
    assert [job.name for job in store.list_jobs(owner, limit=10)] == ["B", "Z", "a", "a-2", "b", "é"]


@pytest.mark.parametrize(
    ("params", "index"),
    [({"state": "paused"}, "jobs_owner_state_idx"), ({"tag": "blue"}, "jobs_tags_idx")],
)
def test_the_job_lists_filters_read_their_partial_indexes(db_url, params, index):
    """Migration 0008: the state filter's index holds the jobs not active, the tag filter's the
    jobs with tags (so an active job's completion, without tags, inserts into neither); the
    list's filters can still read them."""
    query = {"owner": "o", "state": None, "tag": None, "name_prefix": None, "after_name": None, "limit": 50}
    with psycopg.connect(db_url, autocommit=True) as conn:
        predicates = dict(
            conn.execute("""
            SELECT indexrelid::regclass::text, pg_get_expr(indpred, indrelid) FROM pg_index
            WHERE indexrelid::regclass::text IN ('jobs_owner_state_idx', 'jobs_tags_idx')""").fetchall()
        )
        assert predicates == {
            "jobs_owner_state_idx": "(state <> 'active'::text)",
            "jobs_tags_idx": "(tags <> '{}'::text[])",
        }
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, schedule, target, retry, state, tags",
                """
                SELECT gen_random_uuid(), 'o', 'job-' || g, '* * * * *', '{}'::jsonb, '{}'::jsonb,
                       CASE WHEN g % 100 = 0 THEN 'paused' ELSE 'active' END,
                       CASE WHEN g % 100 = 1 THEN ARRAY['blue'] ELSE '{}' END
                FROM generate_series(1, 5000) AS g""",
            )
        )
        conn.execute("ANALYZE job_specs")
        conn.execute("ANALYZE job_runs")
        plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + QUERIES["list_jobs"], query | params).fetchall()
        )
    assert index in plan, plan
