"""Issue 31, item 5: the application's role grows the catalog through
``scheduler_maintain_partitions`` (its DDL rights, SECURITY DEFINER) only by a bounded number of
day partitions. Before migration 0011 one call with ``days_ahead`` = 400 created 397 partitions
(and past 1,600 a page of executions took 929 ms instead of 6 ms)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from scheduler.store.migrations import ensure_login, migrate
from tests.support import temporary_database

MAX_DAYS_AHEAD = 7  # migration 0011; the runner asks for 3


def partition_count(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'executions'::regclass").fetchone()[0]


def last_day_ahead(conn: psycopg.Connection) -> int:
    """How many days after today (UTC) the last day partition is."""
    return conn.execute("""
        SELECT max(to_date(substr(c.relname, 13), 'YYYYMMDD')) - (now() AT TIME ZONE 'UTC')::date
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'executions'::regclass AND c.relname ~ '^executions_p[0-9]{8}$'""").fetchone()[0]


@pytest.fixture
def app_url(db_url) -> Iterator[str]:
    """The conninfo of an application login of ``db_url`` (as the migrate function makes it)."""
    username = f"app_{uuid.uuid4().hex[:8]}"
    try:
        assert ensure_login(db_url, username, "pw-not-checked-on-trust") == "created"
        yield make_conninfo(db_url, user=username, password="")
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(username)))


def test_5_the_app_login_cannot_create_partitions_past_a_week_ahead(app_url):
    with psycopg.connect(app_url, autocommit=True) as conn:
        before = partition_count(conn)
        for days_ahead in (400, MAX_DAYS_AHEAD + 1, -1, None):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="days_ahead"):
                conn.execute("SELECT * FROM scheduler_maintain_partitions(30, %s)", (days_ahead,))
        assert partition_count(conn) == before  # nothing made by the refused calls
        # The runner's call (the migrations made today's partition), then the most a call may
        # make: today's and the next 7 days'.
        assert conn.execute("SELECT created FROM scheduler_maintain_partitions(30, 3)").fetchone()[0] == 3
        assert conn.execute("SELECT created FROM scheduler_maintain_partitions(30, 7)").fetchone()[0] == 4
        assert last_day_ahead(conn) == MAX_DAYS_AHEAD
        assert partition_count(conn) == before + 7


def test_5_retention_keeps_at_least_a_day(app_url):
    """The retention's floor stays one day: a call with less is refused. A higher floor would
    protect nothing, since the same role deletes executions row by row (``DELETE`` is granted:
    deleting a job deletes its history), so README states the rule rather than the function."""
    with psycopg.connect(app_url, autocommit=True) as conn:
        for retention in (0, -5, None):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="retention_days"):
                conn.execute("SELECT * FROM scheduler_maintain_partitions(%s)", (retention,))


def test_5_the_upgrade_drops_the_empty_partitions_made_past_the_cap(pg_server_url):
    """A database whose role made partitions far ahead before the cap (0010's function made as
    many as asked) loses those that hold no row when it is migrated; one holding a row stays."""
    with temporary_database(pg_server_url, label="far") as url:
        migrate(url, target=10)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT * FROM scheduler_maintain_partitions(30, 40)")
            assert last_day_ahead(conn) == 40
            kept = conn.execute("""
                INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status, owner)
                VALUES (gen_random_uuid(), gen_random_uuid(), now(), now() + interval '20 days', 1, 'manual',
                        'running', 'o')
                RETURNING tableoid::regclass::text""").fetchone()[0]
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            far = [
                r[0]
                for r in conn.execute("""
                SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'executions'::regclass AND c.relname ~ '^executions_p[0-9]{8}$'
                  AND to_date(substr(c.relname, 13), 'YYYYMMDD') > (now() AT TIME ZONE 'UTC')::date + 7""")
            ]
            assert far == [kept]
            assert conn.execute("SELECT count(*) FROM executions").fetchone()[0] == 1
