"""Executions partitioned by day (migration 0005): the schema, the rows carried across, the
DEFAULT partition, retention by dropping whole days, the maintenance function's rights, and the
writes that look an execution up probing one partition."""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row, tuple_row

from scheduler import service
from scheduler.core.errors import NotFound
from scheduler.sql import QUERIES
from scheduler.store.completions import COMPLETION_COLUMNS, encode_outcomes
from scheduler.store.migrations import ensure_login, migrate
from scheduler.store.postgres import Store, _claim_and_start_sql
from tests.support import http_spec, poll, succeeded

OWNER = "arn:aws:iam::111111111111:user/partitions"
COLUMNS = (
    "id, seq, job_id, owner, scheduled_at, started_at, finished_at, attempt, trigger, status, "
    "http_status, response_excerpt, error, duration_ms"
)

# claim_and_start's parameters, sent as the store sends them (the batch's lease token its own)
CLAIM_PARAMS = {"lease_margin_seconds": 30, "lock_token": str(uuid.uuid4())}


def partitions(conn: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute("""
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'executions'::regclass ORDER BY c.relname""").fetchall()
    ]


def storage_options(conn: psycopg.Connection) -> dict[str, list[str] | None]:
    """Each partition of executions with its storage parameters (pg_class.reloptions)."""
    return dict(
        conn.execute("""
        SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'executions'::regclass""").fetchall()
    )


def day_name(day: datetime) -> str:
    return "executions_p" + day.astimezone(UTC).strftime("%Y%m%d")


def add_past_days(conn: psycopg.Connection, days: int) -> None:
    """Day partitions of executions for the ``days`` days before today (the migration creates
    today's and the days ahead)."""
    for back in range(1, days + 1):
        day = (
            conn.cursor(row_factory=tuple_row)
            .execute("SELECT now() - make_interval(days => %s)", (back,))
            .fetchone()[0]
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {day_name(day)} PARTITION OF executions FOR VALUES FROM "
            f"('{day.date()} 00:00+00') TO ('{(day + timedelta(days=1)).date()} 00:00+00')"
        )


def partition_of(conn: psycopg.Connection, execution_id) -> str:
    return conn.execute("SELECT tableoid::regclass::text FROM executions WHERE id = %s", (execution_id,)).fetchone()[0]


def insert_execution(conn: psycopg.Connection, job_id, started_at: str) -> uuid.UUID:
    execution_id = uuid.uuid4()
    conn.execute(
        f"""
        INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
        VALUES (%s, %s, now(), {started_at}, 1, 'schedule', 'succeeded')""",
        (execution_id, job_id),
    )
    return execution_id


def test_the_migrated_schema_is_partitioned_by_day(store, db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert (
            conn.execute("""
            SELECT pg_get_partkeydef('executions'::regclass)""").fetchone()[0]
            == "RANGE (started_at)"
        )
        key = conn.execute("""
            SELECT pg_get_constraintdef(oid) FROM pg_constraint
            WHERE conrelid = 'executions'::regclass AND contype = 'p'""").fetchone()[0]
        assert key == "PRIMARY KEY (job_id, started_at, seq)"
        parts = partitions(conn)
        assert "executions_default" in parts and day_name(conn.execute("SELECT now()").fetchone()[0]) in parts
        # Each index of the history pages is a partitioned index, so every day has its own.
        indexes = dict(
            conn.execute("""
            SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions'""").fetchall()
        )
        assert set(indexes) == {"executions_pkey", "executions_owner_started_idx"}
        for part in parts:
            assert conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s", (part,)).fetchone()[0] == 2
        # The owner trigger of 0003 holds on the partitioned table; no foreign key since 0006.
        job_id = service.create_job(store, OWNER, http_spec("p")).id
        execution_id = insert_execution(conn, job_id, "now()")
        assert conn.execute("SELECT owner FROM executions WHERE id = %s", (execution_id,)).fetchone()[0] == OWNER
        assert (
            conn.execute(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = 'executions'::regclass AND contype = 'f'"
            ).fetchone()[0]
            == 0
        )


def test_existing_rows_are_carried_across(empty_db_url):
    migrate(empty_db_url, target=4)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO jobs (id, owner, name, schedule, target, retry)
            VALUES (gen_random_uuid(), 'o', 'j', '* * * * *', '{}', '{}')""")
        conn.execute("""
            INSERT INTO executions (id, job_id, scheduled_at, started_at, finished_at, attempt, trigger, status,
                                    http_status, response_excerpt, error, duration_ms)
            SELECT gen_random_uuid(), (SELECT id FROM jobs), now() - g * interval '7 hours',
                   now() - g * interval '7 hours', now() - g * interval '7 hours' + interval '1 s', g % 3 + 1,
                   'schedule', CASE WHEN g % 5 = 0 THEN 'failed' ELSE 'succeeded' END, 200, 'ok ' || g, NULL, 1000
            FROM generate_series(0, 400) AS g""")
        before = conn.execute(f"SELECT {COLUMNS} FROM executions ORDER BY id").fetchall()
        days = {row[5].astimezone(UTC).date() for row in before}
    assert migrate(empty_db_url, target=5) == [5]
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute(f"SELECT {COLUMNS} FROM executions ORDER BY id").fetchall() == before
        parts = partitions(conn)
        assert {day_name(datetime.combine(d, datetime.min.time(), UTC)) for d in days} <= set(parts)
        assert conn.execute("SELECT count(*) FROM executions_default").fetchone()[0] == 0
        # The sequence went with the column: new rows continue after the old ones.
        new = insert_execution(conn, conn.execute("SELECT id FROM jobs").fetchone()[0], "now()")
        seq = conn.execute("SELECT seq FROM executions WHERE id = %s", (new,)).fetchone()[0]
        assert seq > max(r[1] for r in before)


def test_the_rows_kept_under_the_old_key_stay_under_the_new_one(empty_db_url):
    """Migration 0009 replaces the primary key and the job's history index by one key on (job_id,
    started_at, seq): every row stays, and every kept day's new pages are made at fillfactor 50."""
    migrate(empty_db_url, target=8)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        add_past_days(conn, 2)
        conn.execute("""
            INSERT INTO jobs (id, owner, name, schedule, target, retry)
            VALUES (gen_random_uuid(), 'o', 'j', '* * * * *', '{}', '{}')""")
        for hours in range(0, 48, 2):
            insert_execution(
                conn, conn.execute("SELECT id FROM jobs").fetchone()[0], f"now() - interval '{hours} hours'"
            )
        before = conn.execute(f"SELECT {COLUMNS} FROM executions ORDER BY id").fetchall()
    assert migrate(empty_db_url, target=9) == [9]
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute(f"SELECT {COLUMNS} FROM executions ORDER BY id").fetchall() == before
        options = storage_options(conn)
        assert len(options) >= 4 and all(opts == ["fillfactor=50"] for opts in options.values()), options


def test_a_row_far_outside_the_created_days_lands_in_default_and_moves_when_its_day_comes(store, db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        job_id = service.create_job(store, OWNER, http_spec("far")).id
        far = insert_execution(conn, job_id, "now() + interval '400 days'")
        soon = insert_execution(conn, job_id, "now() + interval '2 days'")
        assert partition_of(conn, far) == partition_of(conn, soon) == "executions_default"
        done = conn.execute("SELECT * FROM scheduler_maintain_partitions(30)").fetchone()
        assert done[:4] == (3, 0, 1, 0)  # created, dropped, moved from default, purged
        soon_day = conn.execute("SELECT now() + interval '2 days'").fetchone()[0]
        assert partition_of(conn, soon) == day_name(soon_day)
        assert partition_of(conn, far) == "executions_default"


def test_retention_drops_whole_old_days_and_nothing_newer(store, db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        job_id = service.create_job(store, OWNER, http_spec("old")).id
        now = conn.execute("SELECT now()").fetchone()[0]
        today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        for back in range(0, 35):
            day = today - timedelta(days=back)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {day_name(day)} PARTITION OF executions "
                f"FOR VALUES FROM ('{day}') TO ('{day + timedelta(days=1)}')"
            )
            for hour in (0, 12, 23):
                insert_execution(conn, job_id, f"timestamptz '{day + timedelta(hours=hour, minutes=59)}'")
        cutoff = now - timedelta(days=30)
        # The day that holds the cutoff keeps its rows, older ones too: a day goes only whole.
        expected = {
            day_name(today - timedelta(days=back))
            for back in range(0, 35)
            if today - timedelta(days=back) + timedelta(days=1) > cutoff
        }
        dropped = conn.execute("SELECT dropped FROM scheduler_maintain_partitions(30)").fetchone()[0]
        assert dropped == 35 - len(expected)
        left = set(partitions(conn)) - {"executions_default"}
        assert {p for p in left if p <= day_name(today)} == expected
        assert conn.execute("SELECT count(*) FROM executions").fetchone()[0] == 3 * len(expected)
        # Nothing more to do on the next call.
        assert conn.execute("SELECT created, dropped FROM scheduler_maintain_partitions(30)").fetchone() == (0, 0)


def test_the_app_role_runs_the_maintenance_but_no_ddl_of_its_own(db_url):
    username = f"app_{uuid.uuid4().hex[:8]}"
    try:
        assert ensure_login(db_url, username, "pw-not-checked-on-trust") == "created"
        app_url = make_conninfo(db_url, user=username, password="")
        with psycopg.connect(app_url, autocommit=True) as conn:
            assert conn.execute("SELECT created FROM scheduler_maintain_partitions(30)").fetchone()[0] == 3
            today = partitions(conn)[0]
            for ddl in (
                "CREATE TABLE executions_p29990101 PARTITION OF executions "
                "FOR VALUES FROM ('2999-01-01') TO ('2999-01-02')",
                f"DROP TABLE {today}",
                "DROP TABLE executions_default",
                f"ALTER TABLE executions DETACH PARTITION {today}",
                "CREATE TABLE intruder (id int)",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(ddl)
        # Not granted to PUBLIC: a login outside the role cannot call it.
        stranger = f"x_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {stranger} LOGIN")
        try:
            with psycopg.connect(make_conninfo(db_url, user=stranger, password=""), autocommit=True) as conn:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT * FROM scheduler_maintain_partitions(30)")
        finally:
            with psycopg.connect(db_url, autocommit=True) as conn:
                conn.execute(f"DROP ROLE {stranger}")
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(username)))


def test_a_step_that_would_wait_on_a_lock_is_left_to_the_next_call(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn, psycopg.connect(db_url) as reader:
        reader.execute("SELECT count(*) FROM executions")  # holds every partition, DEFAULT included
        assert conn.execute("SELECT created, skipped FROM scheduler_maintain_partitions(30)").fetchone() == (0, 3)
        reader.rollback()
        assert conn.execute("SELECT created, skipped FROM scheduler_maintain_partitions(30)").fetchone() == (3, 0)


def test_the_writes_by_execution_id_probe_one_partition(store, db_url):
    """A completion and a lost-marking name the execution with its started_at: run-time pruning
    leaves every other day's partition unexecuted, and a completion, of one execution or of a
    group (bounded by the earliest and latest started_at), plans its executions' day alone (the
    executors' statements are planned at every call)."""
    job_id = str(service.create_job(store, OWNER, http_spec("probe", "0 0 1 1 *")).id)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        add_past_days(conn, 5)
        store.request_run(OWNER, job_id)
        [claim] = store.claim_due(1, 60)
        started = store.start_execution(claim.job_id, claim.lock_token)
        params = {
            "job_id": job_id,
            "lock_token": claim.lock_token,
            "execution_id": started.execution_id,
            "version": started.job.version,
            "state": "active",
            "scheduled_at": None,
            "attempt": 0,
            "next_run_at": None,
            "ran_scheduled_at": started.scheduled_at,
            "status": "succeeded",
            "error": None,
            "http_status": 200,
            "response_excerpt": None,
            "started_at": started.started_at,
        }
        bounds = {"earliest_started_at": started.started_at, "latest_started_at": started.started_at}
        for name, values in (
            ("complete_job", params | bounds),
            ("complete_jobs", {"outcomes": encode_outcomes([[params[k] for k in COMPLETION_COLUMNS]])} | bounds),
            ("leased_job", {k: params[k] for k in ("job_id", "lock_token", "execution_id")}),
        ):
            conn.execute("BEGIN")
            plan = [
                r["QUERY PLAN"]
                for r in conn.execute(
                    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + QUERIES[name], values
                ).fetchall()
            ]
            conn.execute("ROLLBACK")
            scans = [line for line in plan if " on executions_" in line and "Update on" not in line]
            ran = [line for line in scans if "never executed" not in line]
            assert len(ran) == 1 and day_name(started.started_at) in ran[0], (name, plan)
            assert f"{day_name(started.started_at)}_pkey" in ran[0], plan  # keyed by job and instant (0009)
            if name.startswith("complete_"):  # its executions' day is the only one even planned
                assert len(scans) == 1, plan
            else:  # pruned when run: the other days are planned but never executed
                assert len(scans) >= 7, (name, plan)
        assert store.get_execution(started.execution_id, started.started_at).status == "running"


def test_pages_across_jobs_cross_from_the_recent_days_to_older_ones_in_order(store, db_url):
    """The store's first try reads the recent days only; a page it leaves short goes on below,
    so pages of any size walk every execution newest first, none twice, none skipped."""
    job_ids = [str(service.create_job(store, OWNER, http_spec(f"walk-{i}")).id) for i in range(3)]
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT scheduler_maintain_partitions(30)")
        add_past_days(conn, 5)
        for i in range(60):  # one every 2 hours over 5 days, the jobs in turn; a few in DEFAULT
            insert_execution(conn, job_ids[i % 3], f"now() - interval '{2 * i} hours'")
        insert_execution(conn, job_ids[0], "now() - interval '20 days'")
        expected = [str(r[0]) for r in conn.execute("SELECT id FROM executions ORDER BY started_at DESC, id DESC")]
    for limit in (1, 7, 25, 61, 100):
        seen, before = [], None
        while page := store.list_owner_executions(OWNER, limit=limit, before=before):
            seen += [str(e.id) for e in page]
            before = (page[-1].started_at, page[-1].id)
        assert seen == expected, limit
    since = datetime.now(UTC) - timedelta(days=3)
    assert [str(e.id) for e in store.list_owner_executions(OWNER, limit=100, since=since)] == expected[:36]


def test_a_jobs_pages_cross_from_the_recent_days_to_older_ones_in_order(store, db_url):
    """The same for one job's executions, in seq order (which their starts, one at a time, share
    with started_at): inserted oldest first, as the runner writes them."""
    job_id = str(service.create_job(store, OWNER, http_spec("walk")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        add_past_days(conn, 5)
        insert_execution(conn, job_id, "now() - interval '20 days'")  # in DEFAULT
        for i in reversed(range(40)):
            insert_execution(conn, job_id, f"now() - interval '{3 * i} hours'")
        expected = [r[0] for r in conn.execute("SELECT seq FROM executions ORDER BY seq DESC")]
        # Its rate (8 a day) has small pages read the recent days first, large ones every day.
        conn.execute("UPDATE job_runs SET run_count = 40")
        conn.execute("UPDATE job_specs SET created_at = now() - interval '5 days'")
    # A cursor with its row's instant (as the API issues them), and one without (issued before
    # cursors carried it), page alike.
    for limit, with_instant in itertools.product((1, 6, 41, 50), (True, False)):
        seen, before = [], None
        while page := store.list_executions(
            OWNER, job_id, limit=limit, before_seq=before and before.seq, before_started_at=before and before.started_at
        ):
            seen += [e.seq for e in page]
            before = page[-1] if with_instant else replace(page[-1], started_at=None)
        assert seen == expected, (limit, with_instant)


class RecordingPool:
    """A pool whose connections record each statement run with its parameters."""

    def __init__(self, pool):
        self.pool, self.statements = pool, []

    @contextlib.contextmanager
    def connection(self):
        with self.pool.connection() as conn:
            yield self._recording(conn)

    def _recording(self, conn):
        pool = self

        class Recording:
            def execute(self, query, params=None, **kwargs):
                pool.statements.append((query, params))
                return conn.execute(query, params, **kwargs)

        return Recording()


def planned_partitions(conn: psycopg.Connection, query: str, params: dict) -> list[str]:
    """The partitions of executions the planner keeps for a statement (plan-time pruning)."""
    plan = [r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + query, params).fetchall()]
    return sorted({name for line in plan for name in re.findall(r" on (executions_(?:p\d{8}|default))\b(?!_)", line)})


def test_a_jobs_page_after_a_cursor_plans_only_the_days_up_to_its_rows(pool, db_url):
    """A cursor with its row's started_at has the page read the days the job's rate says hold a
    page, up to the cursor's day: the planner prunes the rest. One without an instant (issued
    before cursors carried it) still pages, planning every day."""
    recording = RecordingPool(pool)
    store = Store(recording)
    job_id = str(service.create_job(store, OWNER, http_spec("pruned")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        add_past_days(conn, 9)
        for i in reversed(range(72)):  # 8 a day for 9 days, oldest first
            insert_execution(conn, job_id, f"now() - interval '{3 * i} hours'")
        conn.execute("UPDATE job_runs SET run_count = 72")
        conn.execute("UPDATE job_specs SET created_at = now() - interval '9 days'")
        every_day = len(partitions(conn))
    # A page of 6 at 8 a day: its first try reads 2 days before the cursor's day, and that day.
    first = store.list_executions(OWNER, job_id, limit=6)
    before = first[-1]
    for _ in range(6):
        del recording.statements[:]
        page = store.list_executions(OWNER, job_id, limit=6, before_seq=before.seq, before_started_at=before.started_at)
        [(query, params), *_] = [(q, p) for q, p in recording.statements if q == QUERIES["list_executions"]]
        with psycopg.connect(db_url) as conn:
            planned = planned_partitions(conn, query, params)
        cursor_day = before.started_at.astimezone(UTC)
        assert planned == sorted(day_name(cursor_day - timedelta(days=d)) for d in range(3)), planned
        assert [e.seq for e in page] == list(range(before.seq - 1, before.seq - 7, -1))
        before = page[-1]
    del recording.statements[:]
    legacy = store.list_executions(OWNER, job_id, limit=6, before_seq=first[-1].seq)
    [(query, params)] = [(q, p) for q, p in recording.statements if q == QUERIES["list_executions"]]
    with psycopg.connect(db_url) as conn:
        assert len(planned_partitions(conn, query, params)) == every_day
    assert [e.seq for e in legacy] == list(range(first[-1].seq - 1, first[-1].seq - 7, -1))


def test_every_partition_keeps_room_for_the_completions_update(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT scheduler_maintain_partitions(30)")
        options = storage_options(conn)
    assert len(options) >= 5 and all(opts == ["fillfactor=50"] for opts in options.values()), options


def test_the_fan_outs_claim_plans_no_day_of_executions(store, db_url):
    """claim_due is planned at every call (RDS Proxy): it reads and writes jobs only; the rare
    orphans it finds are marked lost by a statement of their own (mark_executions_lost)."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        add_past_days(conn, 5)
        plan = [
            r["QUERY PLAN"]
            for r in conn.execute(
                "EXPLAIN (COSTS OFF) " + QUERIES["claim_due"], {"limit": 100, "lease_seconds": 60}
            ).fetchall()
        ]
    assert not [line for line in plan if "executions" in line], plan


def test_deleting_a_job_deletes_its_executions_of_every_day_and_nothing_else(store, db_url):
    """Executions reference their job by id only (0006): the delete removes them itself, across
    every day kept, and leaves the other jobs' and other owners' alone."""
    job_id = str(service.create_job(store, OWNER, http_spec("gone")).id)
    kept_id = str(service.create_job(store, OWNER, http_spec("kept")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        add_past_days(conn, 3)
        for started_at in ("now()", "now() - interval '1 day'", "now() - interval '3 days'"):
            insert_execution(conn, job_id, started_at)
            insert_execution(conn, kept_id, started_at)
        with pytest.raises(NotFound):
            store.delete_job("arn:aws:iam::111111111111:user/other", job_id)
        store.delete_job(OWNER, job_id)
        counts = dict(conn.execute("SELECT job_id::text, count(*) FROM executions GROUP BY job_id").fetchall())
    assert counts == {kept_id: 3}


def test_a_delete_waiting_on_a_claim_deletes_the_execution_the_claim_started(store, db_url):
    """The delete takes the job's row first and deletes in a statement begun after it got it: an
    execution a claim started, committed while the delete waited, is deleted with the job."""
    job_id = str(service.create_job(store, OWNER, http_spec("raced", "0 0 1 1 *")).id)
    store.request_run(OWNER, job_id)
    with psycopg.connect(db_url) as claimer:
        [row] = claimer.execute(_claim_and_start_sql(1), CLAIM_PARAMS).fetchall()
        deleting = threading.Thread(target=store.delete_job, args=(OWNER, job_id))
        deleting.start()
        with psycopg.connect(db_url, autocommit=True) as watcher:
            poll(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    ).fetchone()[0]
                    == 1
                )
            )
        claimer.commit()  # the claim's execution is committed while the delete waits for the row
    deleting.join(timeout=10)
    assert not deleting.is_alive()
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job_id,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == 0
    assert row is not None


@pytest.mark.parametrize(
    "planner",
    ["", "SET LOCAL enable_hashjoin = off", "SET LOCAL enable_nestloop = off", "SET LOCAL enable_indexscan = off"],
)
def test_a_claim_without_orphans_reads_no_execution(store, db_url, planner):
    """claim_and_start marks orphans lost in the same statement; with none (nearly every claim)
    it reads nothing of executions, whatever the plan: the orphans' bounds on started_at are NULL
    and run-time pruning leaves every day's partition unexecuted. (A generic plan made while the
    day's partition was small scanned it on every claim for a running row.)"""
    job_id = str(service.create_job(store, OWNER, http_spec("lean", "0 0 1 1 *")).id)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        add_past_days(conn, 2)
        for _ in range(50):
            insert_execution(conn, job_id, "now()")
        store.request_run(OWNER, job_id)
        conn.execute("BEGIN")
        if planner:
            conn.execute(planner)
        plan = [
            r["QUERY PLAN"]
            for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + _claim_and_start_sql(10),
                CLAIM_PARAMS,
            ).fetchall()
        ]
        conn.execute("ROLLBACK")
    scans = [line for line in plan if "Scan" in line and " on executions_" in line]
    assert scans and all("never executed" in line for line in scans), plan


def test_a_batchs_completions_rewrite_each_execution_on_its_own_page(store, db_url):
    """Migration 0009: the day partitions keep half of each page free, so a claim's batch, whose
    executions share pages, has each one's completion written beside it (heap-only, no index
    insertion). At fillfactor 80, 32 of a batch of 50 went to another page."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE executions")  # today's pages hold this batch alone
    ids = [str(service.create_job(store, OWNER, http_spec(f"page-{i}", "0 0 1 1 *")).id) for i in range(50)]
    for job_id in ids:
        store.request_run(OWNER, job_id)
    claims = store.claim_and_start(50, 30)
    assert len(claims) == 50

    def pages() -> dict[str, int]:
        with psycopg.connect(db_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT id::text, (ctid::text::point)[0]::int FROM executions WHERE id = ANY(%s)",
                ([c.started.execution_id for c in claims],),
            ).fetchall()
        return dict(rows)

    before = pages()
    assert all(service.complete_executions(store, [succeeded(c, elapsed_seconds=0.01) for c in claims]))
    after = pages()
    moved = [i for i in before if after[i] != before[i]]
    assert len(moved) <= 5, moved  # nearly all in place (a completed row is a little longer)
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM executions WHERE id = ANY(%s) AND status = 'succeeded'", (list(before),)
            ).fetchone()[0]
            == 50
        )


def test_a_jobs_page_after_a_cursor_reads_about_a_page(pool, db_url):
    """The cursor (its row's started_at and seq) is the primary key's own condition: a page deep
    in a busy day reads the page's entries, not the newer ones before it."""
    recording = RecordingPool(pool)
    store = Store(recording)
    job_id = str(service.create_job(store, OWNER, http_spec("deep")).id)
    with psycopg.connect(db_url, autocommit=True) as conn:
        add_past_days(conn, 1)  # in the first 50 minutes of a day, the older rows are yesterday's
        conn.execute(
            """
            INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
            SELECT gen_random_uuid(), %s, now(), now() - g * interval '1 second', 1, 'schedule', 'succeeded'
            FROM generate_series(0, 2999) AS g ORDER BY g DESC""",
            (job_id,),
        )
        conn.execute("ANALYZE executions")
        middle = conn.execute(
            "SELECT seq, started_at FROM executions WHERE job_id = %s ORDER BY seq DESC OFFSET 1500 LIMIT 1", (job_id,)
        ).fetchone()
    del recording.statements[:]
    page = store.list_executions(OWNER, job_id, limit=20, before_seq=middle[0], before_started_at=middle[1])
    assert [e.seq for e in page] == list(range(middle[0] - 1, middle[0] - 21, -1))
    with psycopg.connect(db_url) as conn:
        for query, params in [(q, p) for q, p in recording.statements if q == QUERIES["list_executions"]]:
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + query, params
                ).fetchall()
            )
            scans = re.findall(r"Index Scan Backward using executions_p\d{8}_pkey .*rows=(\d+)", plan)
            assert scans and all(int(rows) <= 21 for rows in scans), plan
            assert "Rows Removed by Filter" not in plan, plan
