"""The listings are planned with their values, never prepared: psycopg prepares a statement
after five runs on a connection, and Postgres then plans it once for any values (a generic
plan), which keeps none of a page's ``(value IS NULL OR ...)`` conditions in the index's: a
page of a job with a million executions read all of them (0.4 s against 0.1 ms), a name prefix
filtered every one of the owner's jobs. Here a pool of one connection serves each listing ten
times, and the connection holds no prepared statement of them."""

from __future__ import annotations

from scheduler import service
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from tests.support import http_spec

OWNER = "arn:aws:iam::111111111111:user/plans"


def test_the_listings_are_never_prepared(db_url):
    pool = make_pool(db_url, max_size=1)
    try:
        store = Store(pool)
        job_id = str(service.create_job(store, OWNER, http_spec("listed", "0 0 1 1 *")).id)
        for _ in range(10):
            store.list_jobs(OWNER, name_prefix="lis")
            store.list_executions(OWNER, job_id)
            store.list_owner_executions(OWNER, status="failed")
            for rare in ("running", "lost"):  # read where they are named (store.history)
                store.list_owner_executions(OWNER, status=rare)
                store.list_executions(OWNER, job_id, status=rare)
        with pool.connection() as conn:
            prepared = [row["statement"] for row in conn.execute("SELECT statement FROM pg_prepared_statements")]
        assert not [s for s in prepared if "FROM executions e" in s or "ORDER BY name" in s or "lost_executions" in s]
        assert [job.name for job in store.list_jobs(OWNER, name_prefix="lis")] == ["listed"]
        assert store.list_jobs(OWNER, name_prefix="list") and not store.list_jobs(OWNER, name_prefix="listee")
    finally:
        pool.close()
